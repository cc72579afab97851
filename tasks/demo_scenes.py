"""Procedurally generated demo data for every rating task, with known ground truth.

Scenes are simple shapes ("two red circles to the left of a blue square") on a soft textured
background. Five fake models render each instance and fail on purpose at different rates:
semantic failures (wrong count, colour, shape, relation, missing object, lost subject, edit
not applied...) change what is drawn, perceptual failures (blur, noise, JPEG blocking, smudges,
seams, colour banding) degrade the pixels. Every output carries the failures applied and the
scores a careful rater should give:

- ImagenHub SC and PQ in {0, 0.5, 1}. SC is the minimum over conditions: a "total" failure
  (the output ignores a condition: edit not applied, background replaced, subject lost, control
  layout ignored) gives 0, a "partial" one 0.5; two partial failures that leave at most half of
  the atomic checks below standing ("three blue squares" drawn as three green stars) also give 0.
  PQ is 0 with any severe artifact, 0.5 with moderate ones, 1 when clean.
- EvalMi perception 1–5 (5 minus 1 per moderate and 3 per severe artifact) and correspondence
  1–5 (1 + 4 × share of atomic checks passed: presence, count, colour, shape or subject
  identity per object group, the relation, and the background or layout where they are a
  condition), capped so it never contradicts SC.
- yes/no answers to the instance's question and sub-questions, read off what was drawn.

Pure Python, Pillow and numpy; no Django. Everything is deterministic in (task, seed, index):
no global random state is touched.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
from PIL import Image

from tasks.demo_render import ARTIFACT_FUNCTIONS, ARTIFACTS, COLOURS, PALETTES, SHAPES, TEXTURES, Renderer

TASKS = (
    "text_to_image",
    "mask_guided_editing",
    "text_guided_editing",
    "subject_driven_generation",
    "multi_concept_composition",
    "subject_driven_editing",
    "control_guided_generation",
    "evalmi",
)

RELATIONS = ("to the left of", "to the right of", "above", "below", "next to")
_OPPOSITE = {
    "to the left of": "to the right of",
    "to the right of": "to the left of",
    "above": "below",
    "below": "above",
    "next to": "above",
}
_NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four"}

# Severity of each semantic failure under ImagenHub's SC rubric: 0 = the condition is not
# followed at all, 0.5 = followed in part.
SEMANTIC_SEVERITY: dict[str, float] = {
    "wrong_count": 0.5,
    "wrong_colour": 0.5,
    "wrong_shape": 0.5,
    "wrong_relation": 0.5,
    "missing_object": 0.5,
    "unrequested_change": 0.5,
    "subject_details_wrong": 0.5,
    "edit_not_applied": 0.0,
    "background_changed": 0.0,
    "subject_identity_lost": 0.0,
    "layout_ignored": 0.0,
}
_EXCLUSIVE = {"edit_not_applied"}  # nothing else can go wrong with an edit that never happened
# Failures that cannot both show: a dropped group has no count, colour or shape to get wrong,
# a lost subject has no details to get wrong.
_CONFLICTS = {
    "missing_object": {"wrong_count", "wrong_colour", "wrong_shape"},
    **{name: {"missing_object"} for name in ("wrong_count", "wrong_colour", "wrong_shape")},
    "subject_identity_lost": {"subject_details_wrong"},
    "subject_details_wrong": {"subject_identity_lost"},
}


@dataclass(frozen=True)
class ModelProfile:
    """A fake generator: how often it breaks conditions and degrades pixels (rates are 0–1)."""

    name: str
    semantic_rate: float  # chance an output has at least one semantic failure
    perceptual_rate: float  # chance an output has at least one artifact
    severe_share: float  # share of artifacts rendered severe rather than moderate
    second_failure_rate: float  # chance of a second failure of the same kind, given one
    artifact_weights: tuple[tuple[str, float], ...] = ()  # unlisted artifacts weigh 1
    semantic_weights: tuple[tuple[str, float], ...] = ()  # unlisted failures weigh 1


MODELS = (
    ModelProfile("PixelForge", 0.10, 0.10, 0.10, 0.15, (("jpeg", 2.0),)),
    ModelProfile("Prism", 0.20, 0.35, 0.15, 0.20, (("seam", 3.0), ("banding", 3.0))),
    ModelProfile(
        "ShapeDiffusion-XL", 0.45, 0.15, 0.10, 0.30, (("blur", 2.0),),
        (("wrong_count", 3.0), ("wrong_relation", 3.0), ("unrequested_change", 2.0)),
    ),
    ModelProfile("Sketchy-1.5", 0.35, 0.60, 0.30, 0.30, (("blur", 3.0), ("smudge", 3.0))),
    ModelProfile(
        "NoiseGAN", 0.60, 0.85, 0.50, 0.50, (("noise", 3.0), ("jpeg", 2.0), ("banding", 2.0)),
        (("subject_identity_lost", 2.0), ("background_changed", 2.0), ("layout_ignored", 2.0)),
    ),
)


@dataclass(frozen=True)
class Subject:
    """A distinctive composite object ("[V] badge") that subject-driven tasks must reproduce."""

    kind: str  # "badge" or "critter"
    base_shape: str
    primary: str
    secondary: str
    accent: str
    emblem: str

    def parts(self) -> list[tuple[str, str, float, float, float, float, float, float]]:
        """(shape, ink, dx, dy, scale, sx, sy, rotation) in units of the object radius."""
        if self.kind == "badge":
            dots = [
                ("circle", self.secondary, 0.56 * math.cos(a), 0.56 * math.sin(a), 0.075, 1, 1, 0)
                for a in (k * math.pi / 3 + math.pi / 6 for k in range(6))
            ]
            return [
                (self.base_shape, self.secondary, 0, 0, 1.0, 1, 1, 0),
                (self.base_shape, self.primary, 0, 0, 0.8, 1, 1, 0),
                (self.emblem, self.accent, 0, 0, 0.36, 1, 1, 0),
                *dots,
            ]
        stalks = [("square", "black", side * 0.3, -0.62, 0.3, 0.09, 0.75, side * 0.35) for side in (-1, 1)]
        tips = [(self.emblem, self.accent, side * 0.42, -0.86, 0.17, 1, 1, 0) for side in (-1, 1)]
        eyes = [("circle", "white", side * 0.26, -0.12, 0.2, 1, 1, 0) for side in (-1, 1)]
        pupils = [("circle", "black", side * 0.24, -0.08, 0.1, 1, 1, 0) for side in (-1, 1)]
        feet = [("circle", self.secondary, side * 0.4, 0.74, 0.2, 1, 0.55, 0) for side in (-1, 1)]
        return [
            *stalks, *tips, *feet,
            ("circle", self.primary, 0, 0.1, 0.78, 1.0, 0.82, 0),
            ("circle", self.secondary, 0, 0.3, 0.42, 1.0, 0.7, 0),
            *eyes, *pupils,
        ]

    def as_fact(self) -> dict:
        return {"kind": self.kind, "base_shape": self.base_shape, "primary": self.primary,
                "secondary": self.secondary, "accent": self.accent, "emblem": self.emblem}


@dataclass(frozen=True)
class ObjectGroup:
    """One noun phrase of a prompt: `count` objects sharing colour and shape, or one subject."""

    count: int  # 0 when a model dropped the group
    colour: str  # "" for a subject
    shape: str  # the subject's kind ("badge") for a subject
    subject: Subject | None = None
    token: str = ""  # "[V]" for a subject

    def phrase(self) -> str:
        if self.subject is not None:
            return f"a {self.token} {self.shape}"
        if self.count == 1:
            return f"{_article(self.colour)} {self.colour} {self.shape}"
        return f"{_NUMBER_WORDS[self.count]} {self.colour} {self.shape}s"

    def noun(self) -> str:
        if self.subject is not None:
            return f"the {self.token} {self.shape}"
        return f"the {self.colour} {self.shape}" + ("s" if self.count > 1 else "")

    def as_fact(self) -> dict:
        fact = {"count": self.count, "colour": self.colour, "shape": self.shape, "token": self.token}
        if self.subject is not None:
            fact["subject"] = self.subject.as_fact()
        return fact


@dataclass(frozen=True)
class Background:
    palette: str
    texture: str
    seed: int  # seeds the texture so the same background renders identically

    @property
    def name(self) -> str:
        return f"{self.palette} {self.texture}"


@dataclass(frozen=True)
class Placement:
    """Where one object is drawn: centre and radius are fractions of the image side."""

    group: int
    x: float
    y: float
    r: float
    angle: float  # radians


@dataclass(frozen=True)
class Scene:
    """Ground truth of an image: what is in it, how the first two groups relate, where things are."""

    groups: tuple[ObjectGroup, ...]
    relation: str | None  # relation of groups[0] to groups[1]; None means "A and B"
    background: Background
    placements: tuple[Placement, ...] = ()

    def description(self) -> str:
        phrases = [g.phrase() for g in self.groups if g.count > 0]
        if self.relation and len(phrases) == 2:
            return f"{phrases[0]} {self.relation} {phrases[1]}"
        return phrases[0] if len(phrases) == 1 else ", ".join(phrases[:-1]) + " and " + phrases[-1]

    def facts(self) -> dict:
        return {
            "objects": [g.as_fact() for g in self.groups],
            "relation": self.relation,
            "background": self.background.name,
        }


@dataclass
class DemoOutput:
    model: str
    image: Image.Image
    failures: list[str]  # semantic failures first, then artifacts, in the order applied
    truth: dict  # sc, pq, overall, perception, correspondence, answers, severity (JSON-safe)


@dataclass
class DemoInstance:
    key: str  # unique per (task, seed, index), e.g. "text_to_image-7-03"
    task: str
    prompt: str  # the text prompt, or the edit instruction for editing tasks
    alt_prompt: str  # description of the wanted result for editing tasks, else ""
    condition_images: dict[str, list[Image.Image]]  # "source", "mask", "control", "subject_1"...
    tokens: dict[str, str]  # condition role -> token, e.g. {"subject_1": "[V]"}
    question: str  # yes/no question on the prompt's key fact (EvalMi task-specific question)
    sub_questions: list[str]  # one per fact when the wanted image has two or more facts
    facts: dict  # JSON-safe ground truth of the wanted image; "tag" names the challenge
    outputs: list[DemoOutput] = field(default_factory=list)


def generate_task_set(task: str, n_instances: int, seed: int, size: int = 384) -> list[DemoInstance]:
    """`n_instances` instances of `task`, each with one output per model in MODELS.

    Deterministic: the same (task, n_instances, seed, size) gives byte-identical images.
    Raises ValueError for a task not in TASKS.
    """
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; expected one of {', '.join(TASKS)}")
    renderer = Renderer(size)
    instances = []
    for index in range(n_instances):
        rng = random.Random(f"{task}|{seed}|{index}")
        plan = _PLANNERS[task](renderer, rng)
        instances.append(_run_models(renderer, plan, task, f"{task}-{seed}-{index:02d}"))
    return instances


# --- what each task asks for --------------------------------------------------------------------


@dataclass
class _Plan:
    prompt: str
    alt_prompt: str
    target: Scene  # the image a perfect model would make
    condition_images: dict[str, list[Image.Image]]
    tokens: dict[str, str]
    failure_choices: tuple[str, ...]
    realise: Callable[[list[str], random.Random], tuple[Scene, Image.Image]]
    extra_checks: tuple[str, ...] = ()  # "background", "layout": conditions besides the text
    facts: dict = field(default_factory=dict)
    edit_box: tuple[int, int, int, int] | None = None  # where editing seams show


def _plan_text_to_image(r: Renderer, rng: random.Random, max_groups: int = 2) -> _Plan:
    spec = _random_scene(rng, n_groups=rng.randint(1, max_groups))
    target = _place(spec, rng)

    def realise(failures: list[str], mrng: random.Random) -> tuple[Scene, Image.Image]:
        out = _place(_mutate(spec, failures, mrng), mrng)
        return out, r.render(out)

    return _Plan(spec.description(), "", target, {}, {}, _scene_failures(spec), realise)


def _plan_evalmi(r: Renderer, rng: random.Random) -> _Plan:
    return _plan_text_to_image(r, rng, max_groups=3)


def _plan_control(r: Renderer, rng: random.Random) -> _Plan:
    spec = _random_scene(rng, n_groups=rng.randint(1, 2))
    target = _place(spec, rng)

    def realise(failures: list[str], mrng: random.Random) -> tuple[Scene, Image.Image]:
        out = target
        if "layout_ignored" in failures:
            out = _fresh_layout(target, mrng)
        out = _mutate(out, [f for f in failures if f != "layout_ignored"], mrng)
        return out, r.render(out)

    choices = ("layout_ignored", "wrong_count", "wrong_colour", "wrong_shape")
    return _Plan(spec.description(), "", target, {"control": [r.render_control(target)]}, {},
                 choices, realise, extra_checks=("layout",))


def _plan_subject_generation(r: Renderer, rng: random.Random, n_subjects: int = 1) -> _Plan:
    subjects = _random_subjects(rng, n_subjects)
    groups = [ObjectGroup(1, "", s.kind, s, token) for s, token in zip(subjects, ("[V]", "[M]"))]
    if n_subjects == 1:
        subject_colours = {subjects[0].primary, subjects[0].secondary, subjects[0].accent}
        groups.append(_random_group(rng, subject_colours, used_shapes=set(), max_count=3))
    spec = Scene(tuple(groups), rng.choice(RELATIONS), _random_background(rng))
    target = _place(spec, rng)

    def realise(failures: list[str], mrng: random.Random) -> tuple[Scene, Image.Image]:
        out = _place(_mutate(spec, failures, mrng), mrng)
        return out, r.render(out)

    roles = [f"subject_{i + 1}" for i in range(n_subjects)]
    conditions = {role: _subject_references(r, s, rng) for role, s in zip(roles, subjects)}
    tokens = {role: g.token for role, g in zip(roles, groups)}
    return _Plan(spec.description(), "", target, conditions, tokens, _scene_failures(spec), realise,
                 facts={"subjects": {g.token: s.as_fact() for g, s in zip(groups, subjects)}})


def _plan_multi_concept(r: Renderer, rng: random.Random) -> _Plan:
    return _plan_subject_generation(r, rng, n_subjects=2)


def _plan_mask_editing(r: Renderer, rng: random.Random) -> _Plan:
    source = _place(_random_scene(rng, n_groups=2, single_first=True), rng)
    old = source.groups[0]
    new = replace(old, colour=_other(COLOURS, _colours(source), rng), shape=_other(SHAPES, _shapes(source), rng))
    instruction = f"replace {old.noun()} with {new.phrase()}"
    plan = _edit_plan(r, source, 0, new, instruction, mask_given=True)
    plan.failure_choices = ("edit_not_applied", "background_changed", "wrong_colour", "wrong_shape",
                            "unrequested_change")
    return plan


def _plan_text_editing(r: Renderer, rng: random.Random) -> _Plan:
    source = _place(_random_scene(rng, n_groups=2), rng)
    gi = rng.randrange(2)
    old = source.groups[gi]
    if rng.random() < 0.5:
        new = replace(old, colour=_other(COLOURS, _colours(source), rng))
        instruction = f"make {old.noun()} {new.colour}"
    else:
        new = replace(old, shape=_other(SHAPES, _shapes(source), rng))
        instruction = f"turn {old.noun()} into {new.shape}s" if old.count > 1 else (
            f"turn {old.noun()} into {_article(new.shape)} {new.shape}")
    plan = _edit_plan(r, source, gi, new, instruction, mask_given=False)
    plan.failure_choices = ("edit_not_applied", "background_changed", "wrong_colour", "wrong_shape",
                            "unrequested_change")
    return plan


def _plan_subject_editing(r: Renderer, rng: random.Random) -> _Plan:
    source = _place(_random_scene(rng, n_groups=2, single_first=True), rng)
    subject = _random_subjects(rng, 1)[0]
    new = ObjectGroup(1, "", subject.kind, subject, "[V]")
    plan = _edit_plan(r, source, 0, new, f"replace {source.groups[0].noun()} with the [V] {subject.kind}",
                      mask_given=False)
    plan.condition_images["subject_1"] = _subject_references(r, subject, rng)
    plan.tokens = {"subject_1": "[V]"}
    plan.facts["subjects"] = {"[V]": subject.as_fact()}
    plan.failure_choices = ("edit_not_applied", "background_changed", "subject_identity_lost",
                            "subject_details_wrong", "unrequested_change")
    return plan


def _edit_plan(r: Renderer, source: Scene, gi: int, new: ObjectGroup, instruction: str, *,
               mask_given: bool) -> _Plan:
    """An edit of group `gi` into `new`; good outputs change only that group's region."""
    target = replace(source, groups=_with(source.groups, gi, new))
    source_image = r.render(source)
    mask = r.region_mask(source, [gi])

    def realise(failures: list[str], mrng: random.Random) -> tuple[Scene, Image.Image]:
        if "edit_not_applied" in failures:
            out = source
        else:
            groups = list(target.groups)
            if "subject_identity_lost" in failures:
                groups[gi] = _plain_version(groups[gi])
            if "subject_details_wrong" in failures:
                groups[gi] = replace(groups[gi], subject=_altered_subject(groups[gi].subject, mrng))
            avoid = _colours(target) | _colours(source)
            if "wrong_colour" in failures:
                groups[gi] = replace(groups[gi], colour=_other(COLOURS, avoid, mrng))
            if "wrong_shape" in failures:
                groups[gi] = replace(groups[gi], shape=_other(SHAPES, _shapes(target) | _shapes(source), mrng))
            if "unrequested_change" in failures:
                other = 1 - gi
                groups[other] = replace(groups[other], colour=_other(COLOURS, avoid, mrng))
            out = replace(target, groups=tuple(groups))
        if "background_changed" in failures:
            out = replace(out, background=_other_background(out.background, mrng))
            return out, r.render(out)
        changed = [i for i, g in enumerate(out.groups) if g != source.groups[i]]
        if not changed:
            return out, source_image.copy()
        return out, Image.composite(r.render(out), source_image, r.region_mask(out, changed))

    conditions = {"source": [source_image]}
    if mask_given:
        conditions["mask"] = [mask]
    return _Plan(instruction, target.description(), target, conditions, {}, (), realise,
                 extra_checks=("background",), facts={"source": source.facts(), "edited_group": gi},
                 edit_box=mask.getbbox())


_PLANNERS: dict[str, Callable[[Renderer, random.Random], _Plan]] = {
    "text_to_image": _plan_text_to_image,
    "mask_guided_editing": _plan_mask_editing,
    "text_guided_editing": _plan_text_editing,
    "subject_driven_generation": _plan_subject_generation,
    "multi_concept_composition": _plan_multi_concept,
    "subject_driven_editing": _plan_subject_editing,
    "control_guided_generation": _plan_control,
    "evalmi": _plan_evalmi,
}


def _run_models(r: Renderer, plan: _Plan, task: str, key: str) -> DemoInstance:
    target = plan.target
    questions = _fact_questions(target)
    tag, main = _main_question(target)
    facts = {**target.facts(), **plan.facts, "tag": tag}
    instance = DemoInstance(
        key=key, task=task, prompt=plan.prompt, alt_prompt=plan.alt_prompt,
        condition_images=plan.condition_images, tokens=plan.tokens,
        # Complex prompts (2+ facts) ask one question about the whole prompt and one per fact, as
        # EvalMi does: the overall answer is "yes" only when every sub-answer is.
        question=COMPLEX_QUESTION if len(questions) >= 2 else questions[main],
        sub_questions=questions if len(questions) >= 2 else [], facts=facts,
    )
    for model in MODELS:
        mrng = random.Random(f"{key}|{model.name}")
        semantic = _sample(mrng, model.semantic_rate, model.second_failure_rate,
                           plan.failure_choices, dict(model.semantic_weights))
        artifacts = _sample(mrng, model.perceptual_rate, model.second_failure_rate,
                            ARTIFACTS, dict(model.artifact_weights))
        out, image = plan.realise(semantic, mrng)
        severity: dict[str, str] = {f: "total" if SEMANTIC_SEVERITY[f] == 0 else "partial" for f in semantic}
        nrng = np.random.default_rng(mrng.getrandbits(64))
        for artifact in artifacts:
            severe = mrng.random() < model.severe_share
            severity[artifact] = "severe" if severe else "moderate"
            image = ARTIFACT_FUNCTIONS[artifact](image, severe, nrng, out, plan.edit_box)
        truth = _truth(target, out, severity, plan.extra_checks, main)
        instance.outputs.append(DemoOutput(model.name, image, [*semantic, *artifacts], truth))
    return instance


def _sample(rng: random.Random, rate: float, second_rate: float, choices: tuple[str, ...],
            weights: dict[str, float]) -> list[str]:
    """Zero, one or two distinct failures from `choices`; an exclusive failure comes alone."""
    picked: list[str] = []
    if not choices or rng.random() >= rate:
        return picked
    pool = list(choices)
    while pool and len(picked) < 2:
        name = rng.choices(pool, [weights.get(c, 1.0) for c in pool])[0]
        picked.append(name)
        if name in _EXCLUSIVE or rng.random() >= second_rate:
            break
        pool = [c for c in pool if c != name and c not in _EXCLUSIVE and c not in _CONFLICTS.get(name, ())]
    return picked


# --- ground truth -------------------------------------------------------------------------------


def _truth(target: Scene, out: Scene, severity: dict[str, str], extra_checks: tuple[str, ...],
           main_question: int) -> dict:
    checks: list[bool] = []
    fact_answers: list[bool] = []
    for wanted, drawn in zip(target.groups, out.groups):
        group_checks = _group_checks(wanted, drawn)
        checks += group_checks
        fact_answers.append(all(group_checks))
    if target.relation:
        holds = _relation_holds(out, target.relation)
        checks.append(holds)
        fact_answers.append(holds)
    if "background" in extra_checks:
        checks.append(out.background == target.background)
    if "layout" in extra_checks:
        checks.append(_same_layout(out, target))

    semantic = [SEMANTIC_SEVERITY[f] for f in severity if f in SEMANTIC_SEVERITY]
    mostly_broken = len(semantic) >= 2 and sum(checks) <= len(checks) / 2
    sc = 1.0 if not semantic else 0.0 if min(semantic) == 0 or mostly_broken else 0.5
    artifacts = [v for k, v in severity.items() if k not in SEMANTIC_SEVERITY]
    pq = 0.0 if "severe" in artifacts else 0.5 if artifacts else 1.0
    correspondence = 1 + round(4 * sum(checks) / len(checks))
    correspondence = min(correspondence, {1.0: 5, 0.5: 4, 0.0: 2}[sc])
    perception = max(1, 5 - artifacts.count("moderate") - 3 * artifacts.count("severe"))
    return {
        "sc": sc,
        "pq": pq,
        "overall": round(math.sqrt(sc * pq), 4),  # ImagenHub's O = sqrt(SC x PQ)
        "perception": perception,
        "correspondence": correspondence,
        "answers": {
            "question": all(fact_answers) if len(fact_answers) >= 2 else fact_answers[main_question],
            "sub_questions": fact_answers if len(fact_answers) >= 2 else [],
        },
        "severity": severity,
    }


def _group_checks(wanted: ObjectGroup, drawn: ObjectGroup) -> list[bool]:
    present = drawn.count > 0
    if wanted.subject is not None:
        return [present, present and drawn.subject is not None and drawn.subject.kind == wanted.subject.kind,
                present and drawn.subject == wanted.subject]
    return [present, drawn.count == wanted.count, present and drawn.colour == wanted.colour,
            present and drawn.shape == wanted.shape and drawn.subject is None]


def _relation_holds(scene: Scene, relation: str) -> bool:
    """Whether every object of group 0 stands `relation` every object of group 1."""
    a = [p for p in scene.placements if p.group == 0]
    b = [p for p in scene.placements if p.group == 1]
    if not a or not b:
        return False
    if relation == "to the left of":
        return max(p.x for p in a) < min(p.x for p in b)
    if relation == "to the right of":
        return min(p.x for p in a) > max(p.x for p in b)
    if relation == "above":
        return max(p.y for p in a) < min(p.y for p in b)
    if relation == "below":
        return min(p.y for p in a) > max(p.y for p in b)
    # "next to": one group wholly beside the other, their vertical extents overlapping.
    beside = max(p.x for p in a) < min(p.x for p in b) or min(p.x for p in a) > max(p.x for p in b)
    overlap = max(p.y + p.r for p in a) > min(p.y - p.r for p in b) and max(p.y + p.r for p in b) > min(
        p.y - p.r for p in a)
    return beside and overlap


def _same_layout(out: Scene, target: Scene) -> bool:
    """Every wanted object has a drawn object within half its radius (control-guided)."""
    return all(
        any(math.hypot(p.x - q.x, p.y - q.y) < q.r / 2 for p in out.placements) for q in target.placements
    )


COMPLEX_QUESTION = "Does the image show everything the prompt asks for (every object, count, colour and position)?"


def _fact_questions(scene: Scene) -> list[str]:
    questions = []
    for g in scene.groups:
        if g.subject is not None:
            questions.append(f"Is there a {g.token} {g.shape}?")
        elif g.count == 1:
            questions.append(f"Is there exactly one {g.colour} {g.shape}?")
        else:
            questions.append(f"Are there exactly {_NUMBER_WORDS[g.count]} {g.colour} {g.shape}s?")
    if scene.relation:
        a, b = scene.groups[0], scene.groups[1]
        verb = "Are" if a.count > 1 else "Is"
        questions.append(f"{verb} {a.noun()} {scene.relation} {b.noun()}?")
    return questions


def _main_question(scene: Scene) -> tuple[str, int]:
    """EvalMi's challenge tag for the prompt and the index of its task-specific question."""
    if scene.relation:
        return "position", len(scene.groups)
    if any(g.subject is not None for g in scene.groups):
        return "subject", 0
    counts = [g.count for g in scene.groups]
    if max(counts) > 1:
        return "counting", counts.index(max(counts))
    return ("composition" if len(counts) > 1 else "attribute"), 0


# --- scene sampling and semantic failures -------------------------------------------------------


def _random_scene(rng: random.Random, n_groups: int, single_first: bool = False) -> Scene:
    groups: list[ObjectGroup] = []
    for i in range(n_groups):
        max_count = 1 if (single_first and i == 0) else (4 if n_groups == 1 else 3)
        groups.append(_random_group(rng, {g.colour for g in groups}, {g.shape for g in groups}, max_count))
    relation = rng.choice(RELATIONS) if n_groups == 2 and rng.random() < 0.8 else None
    return Scene(tuple(groups), relation, _random_background(rng))


def _random_group(rng: random.Random, used_colours: set[str], used_shapes: set[str], max_count: int) -> ObjectGroup:
    colour = _other(COLOURS, used_colours, rng)
    shape = _other(SHAPES, used_shapes, rng)
    return ObjectGroup(rng.randint(1, max_count), colour, shape)


def _random_background(rng: random.Random) -> Background:
    return Background(rng.choice(list(PALETTES)), rng.choice(TEXTURES), rng.getrandbits(32))


def _random_subjects(rng: random.Random, n: int) -> list[Subject]:
    kinds = rng.sample(["badge", "critter"], 2)[:n] if n <= 2 else ["badge"] * n
    subjects = []
    for kind in kinds:
        primary, secondary, accent = rng.sample(list(COLOURS), 3)
        base = rng.choice(["circle", "hexagon"]) if kind == "badge" else "circle"
        subjects.append(Subject(kind, base, primary, secondary, accent, rng.choice(["star", "heart", "diamond"])))
    return subjects


def _scene_failures(spec: Scene) -> tuple[str, ...]:
    plain = [g for g in spec.groups if g.subject is None]
    choices = []
    if plain:
        choices += ["wrong_count", "wrong_colour", "wrong_shape"]
    if spec.relation:
        choices.append("wrong_relation")
    if plain and len(spec.groups) >= 2:
        choices.append("missing_object")
    if len(plain) < len(spec.groups):
        choices += ["subject_identity_lost", "subject_details_wrong"]
    return tuple(choices)


def _mutate(scene: Scene, failures: list[str], rng: random.Random) -> Scene:
    """Apply semantic failures to a scene; placed scenes keep their layout where they can."""
    for failure in failures:
        plain = [i for i, g in enumerate(scene.groups) if g.subject is None and g.count > 0]
        subjects = [i for i, g in enumerate(scene.groups) if g.subject is not None]
        groups = scene.groups
        if failure == "wrong_count":
            i = rng.choice(plain)
            old = groups[i].count
            new = rng.choice([c for c in (old - 1, old + 1) if 1 <= c <= 4])
            scene = _set_count(scene, i, new, rng)
        elif failure == "wrong_colour":
            i = rng.choice(plain)
            scene = replace(scene, groups=_with(groups, i, replace(groups[i], colour=_other(COLOURS, _colours(scene), rng))))
        elif failure == "wrong_shape":
            i = rng.choice(plain)
            scene = replace(scene, groups=_with(groups, i, replace(groups[i], shape=_other(SHAPES, _shapes(scene), rng))))
        elif failure == "wrong_relation":
            scene = replace(scene, relation=_OPPOSITE[scene.relation])
        elif failure == "missing_object":
            scene = _set_count(scene, rng.choice(plain), 0, rng)
        elif failure == "subject_identity_lost":
            i = rng.choice(subjects)
            scene = replace(scene, groups=_with(groups, i, _plain_version(groups[i])))
        elif failure == "subject_details_wrong":
            i = rng.choice(subjects)
            scene = replace(scene, groups=_with(groups, i, replace(groups[i], subject=_altered_subject(groups[i].subject, rng))))
    return scene


def _set_count(scene: Scene, gi: int, count: int, rng: random.Random) -> Scene:
    scene = replace(scene, groups=_with(scene.groups, gi, replace(scene.groups[gi], count=count)))
    if not scene.placements:
        return scene
    mine = [p for p in scene.placements if p.group == gi]
    others = [p for p in scene.placements if p.group != gi]
    if count <= len(mine):
        return replace(scene, placements=tuple(others + mine[:count]))
    region = _regions(scene, side_from=scene.placements)[gi]
    extra = _scatter(rng, gi, count - len(mine), region, mine[0].r, scene.placements, scene.groups[gi].shape)
    return replace(scene, placements=scene.placements + tuple(extra))


def _plain_version(group: ObjectGroup) -> ObjectGroup:
    """What a model that lost the subject draws instead: a generic shape in its main colour."""
    assert group.subject is not None
    shape = group.subject.base_shape if group.subject.kind == "badge" else "circle"
    return ObjectGroup(group.count, group.subject.primary, shape)


def _altered_subject(subject: Subject | None, rng: random.Random) -> Subject:
    assert subject is not None
    used = {subject.primary, subject.secondary, subject.accent}
    return replace(subject, accent=_other(COLOURS, used, rng),
                   emblem=_other(["star", "heart", "diamond", "triangle"], {subject.emblem}, rng),
                   secondary=subject.accent)


def _other_background(background: Background, rng: random.Random) -> Background:
    return Background(_other(PALETTES, {background.palette}, rng),
                      _other(TEXTURES, {background.texture}, rng), rng.getrandbits(32))


def _fresh_layout(target: Scene, rng: random.Random) -> Scene:
    """A layout that clearly ignores the control image: the farthest of a few fresh ones."""
    def mean_miss(out: Scene) -> float:
        return float(np.mean([min(math.hypot(p.x - q.x, p.y - q.y) / q.r for p in out.placements)
                              for q in target.placements]))

    tries = [_place(replace(target, placements=()), rng) for _ in range(6)]
    return max(tries, key=mean_miss)


# --- layout -------------------------------------------------------------------------------------


def _regions(scene: Scene, side_from: tuple[Placement, ...] = ()) -> list[tuple[float, float, float, float]]:
    """Per-group box (x0, y0, x1, y1) honouring the relation; "next to" picks the side found."""
    full = (0.05, 0.06, 0.95, 0.94)
    if not scene.relation or len(scene.groups) != 2:
        return [full] * len(scene.groups)
    relation = scene.relation
    if relation == "next to":
        a = [p.x for p in side_from if p.group == 0]
        b = [p.x for p in side_from if p.group == 1]
        relation = "to the left of" if not (a and b) or np.mean(a) < np.mean(b) else "to the right of"
    left, right = (0.04, 0.12, 0.47, 0.88), (0.53, 0.12, 0.96, 0.88)
    top, bottom = (0.1, 0.04, 0.9, 0.47), (0.1, 0.53, 0.9, 0.96)
    return {"to the left of": [left, right], "to the right of": [right, left],
            "above": [top, bottom], "below": [bottom, top]}[relation]


def _place(scene: Scene, rng: random.Random) -> Scene:
    if scene.relation != "next to" or scene.groups[1].count == 0 or scene.groups[0].count == 0:
        return _place_in(scene, _regions(scene), rng)
    # "next to" has no region of its own: pick a side, and retry until the groups share a band.
    for _ in range(30):
        side = rng.choice(["to the left of", "to the right of"])
        placed = _place_in(scene, _regions(replace(scene, relation=side)), rng)
        if _relation_holds(placed, "next to"):
            break
    return placed


def _place_in(scene: Scene, regions: list[tuple[float, float, float, float]], rng: random.Random) -> Scene:
    placements: list[Placement] = []
    for gi, (g, region) in enumerate(zip(scene.groups, regions)):
        if g.count == 0:
            continue
        area = (region[2] - region[0]) * (region[3] - region[1])
        radius = min(0.17, max(0.06, 0.3 * math.sqrt(area / g.count)))
        if g.subject is not None:
            radius = min(0.2, radius * 1.15)
        placements += _scatter(rng, gi, g.count, region, radius, tuple(placements), g.shape)
    return replace(scene, placements=tuple(placements))


def _scatter(rng: random.Random, gi: int, n: int, region: tuple[float, float, float, float], radius: float,
             existing: tuple[Placement, ...], shape: str) -> list[Placement]:
    """Rejection-sample n non-overlapping objects in region, shrinking them until they fit."""
    x0, y0, x1, y1 = region
    while True:
        placed: list[Placement] = []
        for _ in range(n):
            for _attempt in range(200):
                r = radius * rng.uniform(0.92, 1.08)
                x, y = rng.uniform(x0 + r, x1 - r), rng.uniform(y0 + r, y1 - r)
                if all(math.hypot(x - p.x, y - p.y) > 1.3 * (r + p.r) for p in (*existing, *placed)):
                    placed.append(Placement(gi, x, y, r, _jitter_angle(shape, rng)))
                    break
            else:
                break
        if len(placed) == n:
            return placed
        radius *= 0.9


def _jitter_angle(shape: str, rng: random.Random) -> float:
    spread = {"circle": 0.0, "star": 0.5, "hexagon": 0.5, "diamond": 0.12}.get(shape, 0.25)
    return rng.uniform(-spread, spread)


# --- subject references -------------------------------------------------------------------------


def _subject_references(r: Renderer, subject: Subject, rng: random.Random) -> list[Image.Image]:
    """Three photos of the subject alone: the same object at varied scale, angle and place."""
    group = ObjectGroup(1, "", subject.kind, subject, "[V]")
    palette = rng.choice(list(PALETTES))
    images = []
    for _ in range(3):
        radius = rng.uniform(0.26, 0.34)
        placement = Placement(0, rng.uniform(0.4, 0.6), rng.uniform(0.42, 0.58), radius, rng.uniform(-0.35, 0.35))
        bg = Background(palette, rng.choice(TEXTURES), rng.getrandbits(32))
        images.append(r.render(Scene((group,), None, bg, (placement,))))
    return images


# --- small helpers ------------------------------------------------------------------------------


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def _other(options, avoid: set[str], rng: random.Random) -> str:
    """A random option not in `avoid` (any option if all are avoided)."""
    pool = [o for o in options if o not in avoid] or list(options)
    return rng.choice(pool)


def _colours(scene: Scene) -> set[str]:
    colours = {g.colour for g in scene.groups if g.colour}
    for g in scene.groups:
        if g.subject is not None:
            colours |= {g.subject.primary, g.subject.secondary, g.subject.accent}
    return colours


def _shapes(scene: Scene) -> set[str]:
    return {g.shape for g in scene.groups if g.subject is None}


def _with(groups: tuple[ObjectGroup, ...], i: int, group: ObjectGroup) -> tuple[ObjectGroup, ...]:
    return groups[:i] + (group,) + groups[i + 1:]
