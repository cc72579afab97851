"""A study's life cycle as researchers drive it: publish, close, clone, delete; and who counts as a researcher.

The builder page, the REST API and the Django admin all call these functions.
"""

from __future__ import annotations

from typing import NamedTuple

from django.db import connection, models, transaction
from django.db.models import Q
from django.utils.text import slugify

from analysis.models import DatasetRelease, JudgeRun, JudgeScore, JudgeVerdict, StudyExport, StudyNotice, export_storage
from raters.models import (
    AttentionCheck,
    AttentionResult,
    QualificationAnswer,
    QualificationAttempt,
    QualityPolicy,
    QualityRulesSchedule,
    RaterAction,
    RaterStanding,
)
from tasks import provenance
from analysis.science import protocols
from tasks.models import (
    AllocationRound,
    Assignment,
    Comparison,
    ComparisonGold,
    ConditionImage,
    GenModel,
    GoldAnswer,
    Instance,
    Item,
    Participation,
    ProtocolVersion,
    Rating,
    RatingRevision,
    ScreenReport,
    Study,
    StudyBuild,
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
    if study.protocol == "pairwise" and not study.comparisons.exists():
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

class _DeleteStep(NamedTuple):
    model: type[models.Model]
    follows: tuple[str, ...]  # its foreign keys to rows being deleted (tests check this against the models)
    parts: list[models.QuerySet]  # one DELETE each; together the rows Django's cascade would delete


def _rows(*querysets: models.QuerySet) -> models.QuerySet:
    """The primary keys of the rows of all ``querysets`` (one model), as one subquery (UNION)."""
    first, *rest = [qs.order_by().values("pk") for qs in querysets]
    return first.union(*rest) if rest else first


def _delete_steps(study_ids: list[int]) -> list[_DeleteStep]:
    """What deleting the studies deletes, model by model, children before parents.

    Each part is one set-based statement (``WHERE fk IN (SELECT …)``), so the number of statements
    and parameters does not grow with a study's size; the subqueries read parents that are still
    there. Parts follow every foreign key Django's cascade would follow, not only ``study``: an
    item built on this study's instance, an assignment of this study's item, a judge score of it
    go with the study whatever their own ``study`` says (nothing here creates such mismatches).

    Never ``a IN (SELECT …) OR b IN (SELECT …)``: PostgreSQL runs that as a filter on every row,
    which for a subquery larger than ``work_mem`` means running the subquery again per row (a
    COUNT of 806K revisions did not finish in 10 minutes); one part per key, and a UNION for a
    parent reached along several keys, leave it free to join.
    """
    in_studies = Q(study_id__in=study_ids)
    by_study = lambda model: model.objects.filter(in_studies)  # noqa: E731
    instances = _rows(by_study(Instance))
    gen_models = _rows(by_study(GenModel))
    items_of_parts = [Item.objects.filter(instance__in=instances), Item.objects.filter(gen_model__in=gen_models)]
    items = _rows(by_study(Item), *items_of_parts)
    comparisons_of_items = [Comparison.objects.filter(item_a__in=items), Comparison.objects.filter(item_b__in=items)]
    comparisons = _rows(by_study(Comparison), *comparisons_of_items)
    # Units of another study that hang on this one's: normally none.
    stray_items = _rows(*(qs.exclude(in_studies) for qs in items_of_parts))
    stray_comparisons = _rows(*(qs.exclude(in_studies) for qs in comparisons_of_items))
    ratings = [
        by_study(Rating),
        # A rating's unit belongs to the rating's own study (Rating's composite keys), so only
        # stray units can have ratings of another study, found through the (study, item) index:
        # no index of Rating starts with item.
        Rating.objects.filter(study_id__in=Item.objects.filter(pk__in=stray_items).values("study_id"),
                              item__in=stray_items),
        Rating.objects.filter(comparison__in=stray_comparisons),
    ]
    runs = _rows(by_study(JudgeRun))
    checks = [by_study(AttentionCheck), AttentionCheck.objects.filter(item__in=items)]
    attempts = _rows(by_study(QualificationAttempt))
    qualification_items = QualityPolicy.qualification_items.through
    owners = Study.owners.through
    collaborators = Study.collaborators.through
    return [
        _DeleteStep(RatingRevision, ("rating",), [RatingRevision.objects.filter(rating__in=_rows(r)) for r in ratings]),
        # a rating's protocol version is one of its own study's (the submit path copies the study's)
        _DeleteStep(Rating, ("study", "item", "comparison", "protocol_version"), ratings),
        _DeleteStep(Assignment, ("study", "item", "comparison"), [
            by_study(Assignment), Assignment.objects.filter(item__in=items),
            Assignment.objects.filter(comparison__in=comparisons),
        ]),
        _DeleteStep(GoldAnswer, ("item",), [GoldAnswer.objects.filter(item__in=items)]),
        _DeleteStep(ComparisonGold, ("comparison",), [ComparisonGold.objects.filter(comparison__in=comparisons)]),
        _DeleteStep(JudgeScore, ("run", "item"), [
            JudgeScore.objects.filter(run__in=runs), JudgeScore.objects.filter(item__in=items),
        ]),
        _DeleteStep(JudgeVerdict, ("run", "comparison"), [
            JudgeVerdict.objects.filter(run__in=runs), JudgeVerdict.objects.filter(comparison__in=comparisons),
        ]),
        _DeleteStep(JudgeRun, ("study",), [by_study(JudgeRun)]),
        _DeleteStep(StudyNotice, ("study",), [by_study(StudyNotice)]),
        _DeleteStep(StudyExport, ("study",), [by_study(StudyExport)]),
        _DeleteStep(DatasetRelease, ("study",), [by_study(DatasetRelease)]),
        _DeleteStep(AttentionResult, ("attention_check",), [
            AttentionResult.objects.filter(attention_check__in=_rows(*checks)),
        ]),
        _DeleteStep(AttentionCheck, ("study", "item"), checks),
        _DeleteStep(QualificationAnswer, ("attempt", "item"), [
            QualificationAnswer.objects.filter(attempt__in=attempts),
            QualificationAnswer.objects.filter(item__in=items),
        ]),
        _DeleteStep(QualificationAttempt, ("study",), [by_study(QualificationAttempt)]),
        _DeleteStep(qualification_items, ("qualitypolicy", "item"), [
            qualification_items.objects.filter(qualitypolicy__in=_rows(by_study(QualityPolicy))),
            qualification_items.objects.filter(item__in=items),
        ]),
        _DeleteStep(QualityPolicy, ("study",), [by_study(QualityPolicy)]),
        _DeleteStep(QualityRulesSchedule, ("study",), [by_study(QualityRulesSchedule)]),
        _DeleteStep(RaterStanding, ("study",), [by_study(RaterStanding)]),
        _DeleteStep(RaterAction, ("study",), [by_study(RaterAction)]),
        _DeleteStep(Participation, ("study",), [by_study(Participation)]),
        _DeleteStep(ScreenReport, ("study",), [by_study(ScreenReport)]),
        _DeleteStep(AllocationRound, ("study",), [by_study(AllocationRound)]),
        _DeleteStep(ProtocolVersion, ("study",), [by_study(ProtocolVersion)]),
        _DeleteStep(owners, ("study",), [by_study(owners)]),
        _DeleteStep(collaborators, ("study",), [by_study(collaborators)]),
        _DeleteStep(WorkedExample, ("study",), [by_study(WorkedExample)]),
        _DeleteStep(ConditionImage, ("instance",), [ConditionImage.objects.filter(instance__in=instances)]),
        _DeleteStep(Comparison, ("study", "item_a", "item_b"), [by_study(Comparison), *comparisons_of_items]),
        _DeleteStep(Item, ("study", "instance", "gen_model"), [by_study(Item), *items_of_parts]),
        _DeleteStep(Instance, ("study",), [by_study(Instance)]),
        _DeleteStep(GenModel, ("study",), [by_study(GenModel)]),
        _DeleteStep(StudyBuild, ("study",), [by_study(StudyBuild)]),
        # a study's current protocol version is its own: deleted with it, no other study points at it
        _DeleteStep(Study, ("current_protocol_version",), [Study.objects.filter(pk__in=study_ids)]),
    ]


def study_delete_counts(*, studies) -> dict[type[models.Model], int]:
    """How many rows of each model deleting ``studies`` would delete (models with none left out).

    One COUNT per model whatever the studies' size: what the admin's confirmation page shows
    instead of listing every rating.
    """
    counts = {}
    for step in _delete_steps([study.pk for study in studies]):
        if n := _rows(*step.parts).count():
            counts[step.model] = n
    return counts


def study_delete_refusal(study: Study) -> str:
    """Why the study may not be deleted now ('' when it may): raters could be rating an open study,
    and a judge run under way would fail on the missing rows. Close it, or wait, first."""
    if study.state == Study.State.OPEN:
        return f"Study {study.slug} is open for rating: close it before deleting it."
    busy = JudgeRun.objects.filter(study=study, state__in=[JudgeRun.State.QUEUED, JudgeRun.State.RUNNING]).count()
    if busy:
        return f"Study {study.slug} has {busy} judge run{'s' if busy > 1 else ''} under way: wait for {'them' if busy > 1 else 'it'} or cancel first."
    return ""


@transaction.atomic
def study_delete(*, study: Study) -> dict[type[models.Model], int]:
    """Delete a study and every row that belongs only to it, in one transaction; returns the rows
    deleted per model.

    Django's ``study.delete()`` collects every related row in Python and deletes ratings' children
    with one ``IN (…)`` list of all rating ids, which PostgreSQL refuses beyond 65,535 parameters
    (an EvalMi-scale study has 806,400 ratings). Here a fixed list of set-based statements does the
    same: see ``_delete_steps``. No signals are sent (nothing listens for these models).

    Raters, users and judges stay, and so do stored images: they are kept once per content hash
    and may be shared with other studies (``study_clone`` shares them); an image no study uses any
    more is left for a clean-up, not deleted here. An open study or one with a judge run under way
    is refused (StudyActionRefused, see ``study_delete_refusal``). A rating stored in the study while this runs
    makes the commit fail on its key (IntegrityError): everything is rolled back, nothing half-deleted.
    """
    study = Study.objects.select_for_update().get(pk=study.pk)  # waits for a publish or close under way
    if reason := study_delete_refusal(study):
        raise StudyActionRefused(reason)
    if connection.vendor == "postgresql":
        # Fresh statistics first. Right after a bulk import (COPY) the planner may still think the
        # rating tables are empty and join ratings to revisions with a nested loop of sequential
        # scans: minutes at 70K ratings instead of a second. ANALYZE samples a fixed number of
        # rows (~0.3 s at 806K ratings).
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE " + ", ".join(connection.ops.quote_name(m._meta.db_table)
                                                  for m in (Rating, RatingRevision, Assignment)))
    # Prepared export files go with their rows, once the delete has committed.
    export_files = [name for model in (StudyExport, DatasetRelease)
                    for name in model.objects.filter(study=study).values_list("file", flat=True) if name]
    transaction.on_commit(lambda: [export_storage().delete(name) for name in export_files])
    deleted = {}
    for step in _delete_steps([study.pk]):
        # _raw_delete: one DELETE for the queryset, no collecting; what Django's own fast deletes run
        n = sum(part._raw_delete(part.db) for part in step.parts)
        if n:
            deleted[step.model] = n
    return deleted
