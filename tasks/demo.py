"""Build the demo studies from procedurally generated scenes (see tasks.demo_scenes).

Safe to run twice: a study that already exists is left as it is, and images are deduplicated by
content hash, so a second run creates nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

from django.contrib.auth import get_user_model
from django.db import transaction

from raters.models import Rater
from tasks import demo_scenes
from analysis.science import protocols
from tasks.images import store_pil_image
from tasks.models import Comparison, ConditionImage, GenModel, Instance, Item, Study

DEMO_SEED = 20231127


@dataclass(frozen=True)
class DemoStudySpec:
    slug: str
    title: str
    protocol: str
    scene_task: str
    task_type: str
    instances: int
    settings: dict


DEMO_STUDIES = [
    *(
        DemoStudySpec(
            slug=f"demo-{task.replace('_', '-')}",
            title=f"Demo · {label}",
            protocol=protocols.IMAGENHUB,
            scene_task=task,
            task_type=task,
            instances=6 if task in {"text_to_image", "mask_guided_editing", "subject_driven_generation"} else 3,
            settings={},
        )
        for task, label in protocols.IMAGENHUB_TASKS.items()
    ),
    DemoStudySpec(
        slug="demo-evalmi",
        title="Demo · EvalMi perception, correspondence and task questions",
        protocol=protocols.EVALMI,
        scene_task="evalmi",
        task_type="mixed",
        instances=6,
        settings={},
    ),
    DemoStudySpec(
        slug="demo-pairwise",
        title="Demo · Pairwise preference",
        protocol=protocols.PAIRWISE,
        scene_task="text_to_image",
        task_type="text_to_image",
        instances=3,
        settings={},
    ),
]

INSTRUCTIONS = {
    protocols.IMAGENHUB: (
        "Rate each generated image on two scales. Semantic consistency (SC): does the image follow "
        "every condition it was given (prompt, source image, mask, subject, control)? "
        "Perceptual quality (PQ): does it look natural, free of artifacts, blur and distortions? "
        "Use 0, 0.5 or 1 for each."
    ),
    protocols.EVALMI: (
        "Each trial shows three images made from the same prompt by different models. For each image, "
        "rate its perception (how good it looks) and its correspondence with the prompt from 1 to 5, "
        "then answer the yes/no questions about the image."
    ),
    protocols.PAIRWISE: (
        "Two images were made from the same prompt. Choose the one that follows the prompt better and "
        "looks better overall; choose tie if they are equally good, or both bad if neither is acceptable."
    ),
}


@dataclass
class DemoSummary:
    created_studies: list[str]
    existing_studies: list[str]
    items: int
    users: dict[str, str]


def _populate(study: Study, spec: DemoStudySpec, seed: int) -> int:
    scenes = demo_scenes.generate_task_set(spec.scene_task, spec.instances, seed)
    models_by_name: dict[str, GenModel] = {}
    created = 0
    for position, scene in enumerate(scenes):
        instance = Instance.objects.create(
            study=study,
            key=scene.key,
            prompt=scene.prompt,
            alt_prompt=scene.alt_prompt or "",
            task_tag=(scene.facts or {}).get("tag", ""),
            question=scene.question or "",
            sub_questions=list(scene.sub_questions or []),
            facts=scene.facts or {},
            position=position,
        )
        for role, pictures in scene.condition_images.items():
            for index, picture in enumerate(pictures):
                ConditionImage.objects.create(
                    instance=instance,
                    role=role,
                    position=index,
                    token=scene.tokens.get(role, ""),
                    image=store_pil_image(picture, name=f"{scene.key}/{role}/{index}"),
                )
        outputs = []
        for output in scene.outputs:
            gen_model = models_by_name.get(output.model)
            if gen_model is None:
                gen_model = models_by_name[output.model] = GenModel.objects.create(study=study, name=output.model)
            outputs.append(
                Item.objects.create(
                    study=study,
                    instance=instance,
                    gen_model=gen_model,
                    image=store_pil_image(output.image, name=f"{scene.key}/{output.model}"),
                    ground_truth={**output.truth, "failures": list(output.failures)},
                )
            )
            created += 1
        if study.protocol_def.unit_kind == protocols.COMPARISON:
            for item_a, item_b in combinations(outputs, 2):
                Comparison.objects.create(study=study, item_a=item_a, item_b=item_b)
    return created


def _ensure_user(username: str, password: str, *, staff: bool = False, superuser: bool = False):
    User = get_user_model()
    user, created = User.objects.get_or_create(username=username, defaults={"is_staff": staff, "is_superuser": superuser})
    if created:
        user.set_password(password)
        user.save()
    return user


def build_demo(*, seed: int = DEMO_SEED, only: list[str] | None = None) -> DemoSummary:
    """Create users and demo studies that do not exist yet; leave existing ones alone.

    ``only`` restricts the build to the named study slugs (tests use it to stay fast).
    """
    users = {"admin": "admin", "researcher": "researcher", "rater": "rater"}
    with transaction.atomic():
        _ensure_user("admin", users["admin"], staff=True, superuser=True)
        researcher = _ensure_user("researcher", users["researcher"])
        rater_user = _ensure_user("rater", users["rater"])
        Rater.objects.get_or_create(user=rater_user, defaults={"platform": Rater.Platform.LOCAL})

    summary = DemoSummary(created_studies=[], existing_studies=[], items=0, users=users)
    for offset, spec in enumerate(DEMO_STUDIES):
        if only is not None and spec.slug not in only:
            continue
        if Study.objects.filter(slug=spec.slug).exists():
            summary.existing_studies.append(spec.slug)
            continue
        with transaction.atomic():
            study = Study(
                slug=spec.slug,
                title=spec.title,
                protocol=spec.protocol,
                task_type=spec.task_type,
                instructions=INSTRUCTIONS[spec.protocol],
                settings=spec.settings,
                state=Study.State.OPEN,
                completion_code=f"DEMO-{spec.slug.upper()[5:]}",  # whole: a cut code fails on Prolific
            )
            study.full_clean()
            study.save()
            study.owners.add(researcher)
            summary.items += _populate(study, spec, seed + offset)
        summary.created_studies.append(spec.slug)
    return summary
