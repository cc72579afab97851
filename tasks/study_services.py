"""A study's life cycle as researchers drive it: publish, close, clone; and who counts as a researcher.

The builder page, the REST API and the Django admin all call these functions. Deleting a study
reaches every app's rows, so it lives in the top app: :mod:`analysis.study_deletion`.
"""

from __future__ import annotations

from django.db import transaction
from django.utils.text import slugify

from analysis.science import protocols
from tasks import provenance
from tasks.models import (
    Comparison,
    ComparisonGold,
    ConditionImage,
    GenModel,
    GoldAnswer,
    Instance,
    Item,
    Study,
    WorkedExample,
)


class StudyActionRefused(ValueError):
    """The action does not fit the study's state; the message says why."""


def user_is_researcher(user) -> bool:
    """Staff, anyone allowed to add studies, and owners or collaborators of at least one study.

    Everyone else who is logged in (raters) is refused researcher pages and the API with 403.
    """
    if not user.is_authenticated:
        return False
    return (user.is_staff or user.has_perm("tasks.add_study") or user.owned_studies.exists()
            or user.collaborating_studies.exists())


@transaction.atomic
def study_publish(*, study: Study) -> Study:
    """Draft (or closed) → open. A study without items (or comparisons, if pairwise) cannot open."""
    study = Study.objects.select_for_update().get(pk=study.pk)
    if study.state == Study.State.OPEN:
        raise StudyActionRefused(f"{study.slug} is already open")
    if not study.items.exists():
        raise StudyActionRefused(f"{study.slug} has no items; build it from a bundle first")
    if study.protocol_def.unit_kind == protocols.COMPARISON and not study.comparisons.exists():
        raise StudyActionRefused(f"{study.slug} is pairwise but has no comparisons")
    study.state = Study.State.OPEN
    study.save(update_fields=["state"])
    provenance.refresh_protocol_version(study)  # bulk-written gold sends no signal: hash what opens now
    return study


@transaction.atomic
def study_close(*, study: Study) -> Study:
    """Open → closed: no further ratings are accepted; existing ones stay."""
    study = Study.objects.select_for_update().get(pk=study.pk)
    if study.state != Study.State.OPEN:
        raise StudyActionRefused(f"{study.slug} is {study.get_state_display().lower()}, not open")
    study.state = Study.State.CLOSED
    study.save(update_fields=["state"])
    return study


@transaction.atomic
def study_threshold_set(*, study: Study, threshold: float | None) -> Study:
    """Set the study's agreement threshold (α at or above it is shown as acceptable), in any state.

    It only changes how results are coloured, never what raters see, so open studies may change
    it. ``None`` removes it and the study follows the site default (``AGREEMENT_THRESHOLD``).
    The value is checked by the protocol: a number in (0, 1].
    """
    study = Study.objects.select_for_update().get(pk=study.pk)
    settings = dict(study.settings or {})
    if threshold is None:
        settings.pop("agreement_threshold", None)
    else:
        settings["agreement_threshold"] = threshold
        try:
            study.protocol_def.clean_settings(settings)
        except protocols.ProtocolError as exc:
            raise StudyActionRefused(str(exc)) from None
    study.settings = settings
    study.save(update_fields=["settings"])
    return study


@transaction.atomic
def study_rater_sampling_set(*, study: Study, rater_sampling: str) -> Study:
    """Declare the study's raters a sampled crowd (intervals resample items and raters) or a fixed
    panel (items only). Like the threshold it changes only the analysis, so any state may change it."""
    if rater_sampling not in Study.RaterSampling.values:
        raise StudyActionRefused(f"raters must be one of: {', '.join(Study.RaterSampling.values)}")
    Study.objects.filter(pk=study.pk).update(rater_sampling=rater_sampling)
    study.refresh_from_db(fields=["rater_sampling"])
    return study


def _free_slug(base: str) -> str:
    base = slugify(base)[:90] or "study"
    slug, n = base, 2
    while Study.objects.filter(slug=slug).exists():
        slug, n = f"{base}-{n}", n + 1
    return slug


@transaction.atomic
def study_clone(*, study: Study, slug: str | None = None, title: str | None = None, owner=None) -> Study:
    """Copy a study's design (instances, condition images, items, comparisons, gold) as a new draft.

    Ratings, assignments and judge runs are not copied: the clone starts empty. Images are shared
    (they are stored once per content hash). Owners are copied; ``owner`` is added too.
    """
    slug = slug or _free_slug(f"{study.slug}-copy")
    if Study.objects.filter(slug=slug).exists():
        raise StudyActionRefused(f"a study with slug {slug!r} already exists")
    clone = Study.objects.create(
        slug=slug,
        title=title or f"{study.title} (copy)",
        protocol=study.protocol,
        task_type=study.task_type,
        instructions=study.instructions,
        raters_per_item=study.raters_per_item,
        assignment_mode=study.assignment_mode,
        adaptive_target_halfwidth=study.adaptive_target_halfwidth,
        adaptive_alpha=study.adaptive_alpha,
        adaptive_margin=study.adaptive_margin,
        adaptive_min_ratings=study.adaptive_min_ratings,
        rater_sampling=study.rater_sampling,
        settings=dict(study.settings),
        completion_code="",
        completion_url=study.completion_url,
        state=Study.State.DRAFT,
        units_per_session=study.units_per_session,
        # the design travels; the codes do not (a platform study has its own codes)
        consent_text=study.consent_text,
        estimated_minutes=study.estimated_minutes,
        pay_per_hour=study.pay_per_hour,
        pay_currency=study.pay_currency,
        contact=study.contact,
        seconds_per_unit_estimate=study.seconds_per_unit_estimate,
    )
    clone.owners.set(study.owners.all())
    clone.collaborators.set(study.collaborators.all())
    WorkedExample.objects.bulk_create(
        WorkedExample(study=clone, image_id=e.image_id, caption=e.caption, position=e.position)
        for e in study.worked_examples.all()
    )
    if owner is not None:
        clone.owners.add(owner)
    models = {m.pk: GenModel.objects.create(study=clone, name=m.name) for m in study.gen_models.all()}
    instances = {}
    for old in study.instances.prefetch_related("condition_images"):
        new = Instance.objects.create(
            study=clone,
            key=old.key,
            prompt=old.prompt,
            alt_prompt=old.alt_prompt,
            task_tag=old.task_tag,
            question=old.question,
            sub_questions=list(old.sub_questions),
            facts=dict(old.facts),
            position=old.position,
        )
        instances[old.pk] = new
        ConditionImage.objects.bulk_create(
            ConditionImage(instance=new, role=c.role, image_id=c.image_id, token=c.token, position=c.position)
            for c in old.condition_images.all()
        )
    items = {}
    with provenance.deferred(clone):  # one refresh for the copied gold set, not one per gold item
        _clone_items(study, clone, instances, models, items)
    old_comparisons = list(study.comparisons.select_related("gold"))
    Comparison.objects.bulk_create(
        Comparison(study=clone, item_a=items[c.item_a_id], item_b=items[c.item_b_id]) for c in old_comparisons
    )
    new_comparisons = {(c.item_a_id, c.item_b_id): c.pk for c in clone.comparisons.all()}
    ComparisonGold.objects.bulk_create(
        ComparisonGold(comparison_id=new_comparisons[items[c.item_a_id].pk, items[c.item_b_id].pk],
                       preference=c.gold.preference, note=c.gold.note)
        for c in old_comparisons if hasattr(c, "gold")
    )
    return clone


def _clone_items(study: Study, clone: Study, instances: dict, models: dict, items: dict) -> None:
    """The items of ``study`` (with their gold answers) copied into ``clone``; old id → new item in ``items``."""
    for old in study.items.select_related("gold"):
        new = Item.objects.create(
            study=clone,
            instance=instances[old.instance_id],
            gen_model=models[old.gen_model_id],
            image_id=old.image_id,
            ground_truth=dict(old.ground_truth),
        )
        items[old.pk] = new
        gold = getattr(old, "gold", None)
        if gold is not None:
            GoldAnswer.objects.create(
                item=new, values=gold.values, answers=gold.answers, tolerance=gold.tolerance, note=gold.note
            )


# ---------------------------------------------------------------- deletion
