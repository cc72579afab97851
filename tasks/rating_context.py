"""What a rating screen shows: conditions laid out per task, and the questions with their keys.

Builds plain dataclasses for the templates from a ``Screen``; no HTML decisions beyond which
label and which key a choice gets. Form field names are ``u<place on the screen>-<field>``
(``u0-SC``, ``u1-SC`` … on an EvalMi trial) so one POST can carry a whole trial; the server maps
places back to assignments. Nothing on a page names an assignment or an item: gold and attention
checks are inserted into a rater's queue after the claimed batch, so their ids would stand out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone as dt_timezone

from django.core import signing
from django.utils.crypto import constant_time_compare, salted_hmac
from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from raters.gold import attention_instruction
from analysis.science import protocols
from tasks.assignment import Screen
from tasks.derivatives import SIZES
from tasks.models import Assignment, ConditionImage, Item, Rating, StoredImage

LIKERT_WORDS = {1: "Bad", 2: "Poor", 3: "Fair", 4: "Good", 5: "Excellent"}


@dataclass
class Picture:
    src: str
    full: str
    srcset: str
    alt: str
    width: int
    height: int


@dataclass
class Choice:
    value: str
    label: str
    key: str = ""
    hint: str = ""


@dataclass
class Question:
    name: str
    label: str
    choices: list[Choice]
    help: str = ""
    selected: str = ""
    kind: str = "scale"  # scale | yesno | preference | checklist

    @property
    def key_hint(self) -> str:
        """How to type keys longer than one character ('' when every key is one keystroke)."""
        long = [c.key for c in self.choices if len(c.key) > 1]
        if not long:
            return ""
        return f"For {long[0]}{'–' + long[-1] if len(long) > 1 else ''} type both digits quickly"


@dataclass
class ConditionBlock:
    label: str
    pictures: list[Picture]
    token: str = ""
    overlay: Picture | None = None  # mask drawn over the source
    kind: str = "image"  # image | set | mask


@dataclass
class Panel:
    """One rated unit on the screen: its image(s) and its questions."""

    assignment: Assignment
    title: str
    output: Picture | None
    questions: list[Question]
    sides: list[tuple[str, Picture]] = field(default_factory=list)  # pairwise: (label, picture)
    instruction: str = ""  # attention check: what the rater is told to answer (never gold)


@dataclass
class ScreenView:
    screen: Screen
    layout: str
    prompt_label: str
    prompt: SafeString
    second_text: tuple[str, str] | None
    conditions: list[ConditionBlock]
    panels: list[Panel]
    preload: list[str]

    @property
    def flicker(self) -> Picture | None:
        """Editing tasks: the source image, which the flicker toggle (F) swaps with the output."""
        if self.layout not in EDITING_LAYOUTS:
            return None
        return next((b.pictures[0] for b in self.conditions if b.label == "Source image" and b.pictures), None)


# Layouts whose output is an edit of a source image: source and output are shown at one size.
EDITING_LAYOUTS = ("mask_guided_editing", "text_guided_editing", "subject_driven_editing")

def picture(image: StoredImage | None, size: int, alt: str) -> Picture | None:
    if image is None:
        return None
    # One reverse() per picture: the sizes differ only in the last path segment (img/<sha>/<size>).
    full = reverse("rating:image", args=[image.sha256, "full"])
    stem = full.removesuffix("full")
    src = f"{stem}{size}"
    bigger = [s for s in SIZES if s > size][:1]
    srcset = ", ".join([f"{src} 1x"] + [f"{stem}{s} {s / size:g}x" for s in bigger])
    scale = min(1.0, size / max(image.width, image.height))
    return Picture(src=src, full=full, srcset=srcset, alt=alt,
                   width=round(image.width * scale), height=round(image.height * scale))


def highlight_tokens(text: str, tokens: list[str]) -> SafeString:
    """Escape the prompt and mark subject tokens like [V] so raters spot them."""
    html = escape(text)
    for token in sorted({t for t in tokens if t}, key=len, reverse=True):
        html = html.replace(escape(token), f'<mark class="token">{escape(token)}</mark>')
    return mark_safe(html)


def _keys(values: list) -> list[str]:
    """Keys 1, 2, 3… by position; past nine choices some keys have two digits (typed within 600 ms,
    see static/js/rating.js), so every choice has a key."""
    return [str(i) for i in range(1, len(values) + 1)]


def field_prefix(place: int) -> str:
    """The form-field prefix of the unit at ``place`` (0-based) on its screen."""
    return f"u{place}-"


def _imagenhub_questions(assignment: Assignment, study, rating: Rating | None, prefix: str) -> list[Question]:
    settings = study.protocol_settings
    if settings["checklist_mode"]:
        marks = rating.checklist if rating else {}
        following = [("no", "No following at all"), ("some", "Follows some part"), ("most", "Follows most of it")]
        questions = [
            Question(name=f"{prefix}c-{key}", label=label, kind="checklist", selected=marks.get(key, ""),
                     choices=[Choice(v, text, k) for (v, text), k in zip(following, _keys(following))])
            for key, label in protocols.IMAGENHUB_CONDITIONS[study.task_type]
        ]
        extra = [
            ("objects", "Objects in the image", [("recognizable", "Recognisable"), ("unrecognizable", "Unrecognisable")]),
            ("artifacts", "Artifacts", [("none", "None or little"), ("some", "Some"), ("serious", "Serious")]),
            ("unusual", "Unusual sense", [("none", "None or little"), ("some", "Some")]),
        ]
        questions += [
            Question(name=f"{prefix}c-{key}", label=label, kind="checklist", selected=marks.get(key, ""),
                     choices=[Choice(v, text, k) for (v, text), k in zip(options, _keys(options))])
            for key, label, options in extra
        ]
        return questions
    values = rating.values if rating else {}
    sc = [("0", "Not following", "ignores a condition"), ("0.5", "Partly", "some conditions only partly met"),
          ("1", "Following", "the overall idea is right")]
    pq = [("0", "Poor", "distorted, objects unrecognisable"), ("0.5", "Acceptable", "minor artifacts or unnatural"),
          ("1", "Genuine", "looks real and clean")]
    return [
        Question(name=f"{prefix}SC", label="Semantic consistency", help="Does it follow every condition?",
                 selected=_fmt(values.get("SC")),
                 choices=[Choice(v, f"{v} · {label}", k, hint) for (v, label, hint), k in zip(sc, "123")]),
        Question(name=f"{prefix}PQ", label="Perceptual quality", help="Does it look natural and clean?",
                 selected=_fmt(values.get("PQ")),
                 choices=[Choice(v, f"{v} · {label}", k, hint) for (v, label, hint), k in zip(pq, "123")]),
    ]


def _fmt(value) -> str:
    return "" if value is None else f"{float(value):g}"


def _evalmi_questions(assignment: Assignment, study, rating: Rating | None, prefix: str) -> list[Question]:
    settings = study.protocol_settings
    lo, hi = settings["likert_min"], settings["likert_max"]
    scale = list(range(lo, hi + 1))
    words = LIKERT_WORDS if (lo, hi) == (1, 5) else {lo: "worst", hi: "best"}
    # The value itself is the key (type 1 then 0 for 10) unless the scale goes below zero.
    keys = [str(v) for v in scale] if lo >= 0 else _keys(scale)
    values = rating.values if rating else {}
    answers = rating.answers if rating else {}
    questions = [
        Question(name=f"{prefix}{dim}", label=label, help=help_text, selected=_fmt(values.get(dim)),
                 choices=[Choice(str(v), str(v), k, words.get(v, "")) for v, k in zip(scale, keys)])
        for dim, label, help_text in (
            ("perception", "Perception", "clarity, naturalness, colour, detail"),
            ("correspondence", "Correspondence", "how well it matches the prompt"),
        )
    ]
    if settings["qa"]:
        instance = assignment.item.instance
        texts = [instance.question or "Does the image meet the prompt's main requirement?"]
        texts += list(instance.sub_questions)
        for key, text in zip(protocols.get_protocol(protocols.EVALMI).questions(settings, len(instance.sub_questions)), texts):
            questions.append(Question(name=f"{prefix}{key}", label=text, kind="yesno", selected=answers.get(key, ""),
                                      choices=[Choice("yes", "Yes", "y"), Choice("no", "No", "n")]))
    return questions


def _pairwise_question(assignment: Assignment, study, rating: Rating | None, prefix: str) -> Question:
    left = assignment.presentation.get("left", "A")
    right = "B" if left == "A" else "A"
    stored = (rating.values or {}).get("preference") if rating else None
    selected = {left: "left", right: "right", "tie": "tie", "both_bad": "both_bad"}.get(stored, "")
    choices = [Choice("left", "Left is better", "1"), Choice("right", "Right is better", "2"),
               Choice("tie", "About the same", "3")]
    if study.protocol_settings["allow_both_bad"]:
        choices.append(Choice("both_bad", "Both are bad", "4"))
    return Question(name=f"{prefix}preference", label="Which image is better?", kind="preference",
                    help="Follows the prompt better and looks better overall", choices=choices, selected=selected)


def _condition_blocks(study, item: Item) -> tuple[list[ConditionBlock], str, str, tuple[str, str] | None]:
    """Condition images, the prompt label and text, and a second text for the task's layout."""
    instance = item.instance
    task = study.task_type if study.protocol == protocols.IMAGENHUB else "text_to_image"
    by_role: dict[str, list[ConditionImage]] = {}
    # A text-to-image layout shows no condition images: no query for them (one less per screen).
    for condition in instance.condition_images.all() if task != "text_to_image" else ():
        by_role.setdefault(condition.role, []).append(condition)

    def single(role: str, label: str) -> list[ConditionBlock]:
        # the source (and a control layout) is judged against the output: the output's size, 768
        return [ConditionBlock(label=label, pictures=[picture(c.image, 768, label)]) for c in by_role.get(role, [])[:1]]

    def subject_set(role: str, label: str) -> list[ConditionBlock]:
        conditions = by_role.get(role, [])
        if not conditions:
            return []
        token = conditions[0].token
        return [ConditionBlock(label=label, token=token, kind="set",
                               pictures=[picture(c.image, 384, f"{label} {i + 1}") for i, c in enumerate(conditions)])]

    blocks: list[ConditionBlock] = []
    prompt_label, prompt_text, second = "Prompt", instance.prompt, None
    if task == "mask_guided_editing":
        blocks = single("source", "Source image")
        mask = by_role.get("mask", [])
        if blocks and mask:
            blocks.append(ConditionBlock(label="Region to edit (mask)", kind="mask",
                                         pictures=[blocks[0].pictures[0]], overlay=picture(mask[0].image, 768, "mask")))
        prompt_label = "Edit instruction"
    elif task == "text_guided_editing":
        blocks = single("source", "Source image")
        if item.gen_model.name in study.protocol_settings.get("description_models", []) and instance.alt_prompt:
            prompt_label, prompt_text = "Description of the wanted result", instance.alt_prompt
        else:
            prompt_label = "Edit instruction"
    elif task == "subject_driven_generation":
        blocks = subject_set("subject_1", "Subject")
    elif task == "multi_concept_composition":
        blocks = subject_set("subject_1", "Subject 1") + subject_set("subject_2", "Subject 2")
    elif task == "subject_driven_editing":
        blocks = single("source", "Source image") + subject_set("subject_1", "Subject")
        prompt_label = "Edit"
    elif task == "control_guided_generation":
        blocks = single("control", "Control image")
    # Subject tokens of the condition images, and any [V]-style token written in the prompt.
    tokens = [c.token for conditions in by_role.values() for c in conditions] + re.findall(r"\[[A-Z]\]", prompt_text)
    return blocks, prompt_label, highlight_tokens(prompt_text, tokens), second


def screen_view(screen: Screen, ratings: dict[int, Rating], preload: list[str]) -> ScreenView:
    """``ratings``: assignment id → the rater's stored rating (pre-fills a revisited screen)."""
    study = screen.study
    panels: list[Panel] = []
    if study.protocol == protocols.PAIRWISE:
        assignment = screen.assignments[0]
        comparison = assignment.comparison
        first, second = (comparison.item_a, comparison.item_b)
        if assignment.presentation.get("left", "A") == "B":
            first, second = second, first
        sides = [("Left", picture(first.image, 768, "left image")), ("Right", picture(second.image, 768, "right image"))]
        panels.append(Panel(assignment=assignment, title="", output=None, sides=sides,
                            questions=[_pairwise_question(assignment, study, ratings.get(assignment.pk),
                                                               field_prefix(0))]))
        item_for_prompt = first
    else:
        for number, assignment in enumerate(screen.assignments, start=1):
            builder = _evalmi_questions if study.protocol == protocols.EVALMI else _imagenhub_questions
            title = f"Image {number}" if len(screen.assignments) > 1 else "Output"
            panels.append(Panel(assignment=assignment, title=title,
                                output=picture(assignment.item.image, 768, f"generated image {number}"),
                                questions=builder(assignment, study, ratings.get(assignment.pk),
                                                  field_prefix(number - 1)),
                                instruction=attention_instruction(assignment.item)))
        item_for_prompt = screen.assignments[0].item
    conditions, prompt_label, prompt, second = _condition_blocks(study, item_for_prompt)
    layout = study.task_type if study.protocol == protocols.IMAGENHUB else study.protocol
    return ScreenView(screen=screen, layout=layout, prompt_label=prompt_label, prompt=prompt, second_text=second,
                      conditions=conditions, panels=panels, preload=preload)


def screen_images(screen: Screen) -> list[str]:
    """URLs the screen shows, for preloading it from the screen before."""
    urls = []
    for assignment in screen.assignments:
        items = [assignment.item] if assignment.item_id else [assignment.comparison.item_a, assignment.comparison.item_b]
        for item in items:
            if item.image:
                urls.append(reverse("rating:image", args=[item.image.sha256, 768]))
    return urls


_SHOWN = signing.Signer(salt="tasks.rating.shown")


class StaleScreen(ValueError):
    """The form was rendered for other units than the screen now holds (its place in the queue
    was given to another screen meanwhile): nothing is stored, the current screen is shown."""


def _units_digest(units: list[int]) -> str:
    """An opaque tag of the screen's assignments: a keyed hash, so the page carries no id (a plain
    hash of small integers could be reversed by trying them) and gold screens look like others."""
    return salted_hmac("tasks.rating.screen-units", ",".join(map(str, units))).hexdigest()[:16]


def shown_stamp(*, rater_id: int, position: int, at: datetime, units: list[int] = ()) -> str:
    """The render time of a screen for its form (field ``shown``), signed with the rater, the
    screen's place and a tag of its assignments (``units``: their ids in slot order): the submit
    counts time on item from it without the render writing anything, and knows the form was for
    the units it is about to store answers for."""
    return _SHOWN.sign(f"{rater_id}.{position}.{int(at.timestamp() * 1000)}.{_units_digest(list(units))}")


def shown_from(post, *, rater_id: int, position: int, now: datetime, units: list[int] | None = None) -> datetime | None:
    """The render time a submitted form carries, or None when it is missing, forged, another
    rater's or another screen's (time on item is then bounded by the rater's previous submit
    alone, see ``tasks.services.screen_submit``). Raises StaleScreen when the stamp is genuine
    but was rendered for other units than ``units`` (fields are named by place on the screen,
    so a stale form must not be stored against the units now at that place)."""
    try:
        rater, place, millis, digest = _SHOWN.unsign(post.get("shown", "")).split(".")
        if int(rater) != rater_id or int(place) != position:
            return None
        at = min(now, datetime.fromtimestamp(int(millis) / 1000, tz=dt_timezone.utc))
    except (signing.BadSignature, ValueError, OverflowError, OSError):
        return None
    if units is not None and not constant_time_compare(digest, _units_digest(list(units))):
        raise StaleScreen("The page was out of date; please rate the images shown now")
    return at


def parse_entries(screen: Screen, post) -> list[dict]:
    """Turn the POST of a screen into rating_submit arguments, one entry per assignment.

    Blank fields are left out so the protocol reports them as missing by name.
    """
    study = screen.study
    settings = study.protocol_settings
    entries = []
    for place, assignment in enumerate(screen.assignments):
        prefix = field_prefix(place)
        data = {key[len(prefix):]: value for key, value in post.items() if key.startswith(prefix) and value != ""}
        if study.protocol == protocols.PAIRWISE:
            left = assignment.presentation.get("left", "A")
            side = data.get("preference")
            choice = {"left": left, "right": "B" if left == "A" else "A"}.get(side, side)
            entries.append({"values": {"preference": choice} if choice else {},
                            "presentation": {"left": left, "position": screen.position}})
            continue
        entry: dict = {"presentation": {"position": screen.position, "slot": assignment.slot}}
        if study.protocol == protocols.IMAGENHUB and settings["checklist_mode"]:
            entry["checklist"] = {key[2:]: value for key, value in data.items() if key.startswith("c-")}
            entry["values"] = {}
        else:
            dims = [d.key for d in study.protocol_def.dimensions(settings)]
            entry["values"] = {d: data[d] for d in dims if d in data}
            questions = study.protocol_def.questions(settings, len(assignment.item.instance.sub_questions))
            entry["answers"] = {q: data[q] for q in questions if q in data}
        if study.protocol == protocols.EVALMI:
            entry["presentation"]["trial"] = [a.item_id for a in screen.assignments]
        entries.append(entry)
    return entries


def selections_from(screen_view_: ScreenView, post) -> None:
    """Keep what the rater picked when a submit is refused, so nothing has to be re-entered."""
    for panel in screen_view_.panels:
        for question in panel.questions:
            if post.get(question.name):
                question.selected = post[question.name]


def display_screen(*, study, item: Item, number: int, total: int) -> Screen:
    """A one-item screen that is not part of the rater's queue (the qualification test).

    Its assignment is never saved: it only carries what the templates and ``parse_entries``
    read. Its fields are named like any screen's (``u0-SC``); a stale page (another tab answered
    meanwhile) is recognised by the question number the form carries (``tasks.qualification_views``).
    """
    assignment = Assignment(pk=item.pk, study=study, item=item, position=number - 1, slot=0)
    return Screen(study=study, position=number - 1, number=number, total=total, assignments=[assignment])


def rubric_context(study) -> dict:
    """What the rubric template (rating/_rubric.html) is rendered with, for raters and for the
    protocol text kept with each rating (tasks.provenance)."""
    return {
        "protocol": study.protocol,
        "task": study.task_type,
        "settings": study.protocol_settings,
        "conditions": protocols.IMAGENHUB_CONDITIONS.get(study.task_type, ()),
    }
