"""Deleting a study: every row of every app that belongs only to it, in set-based statements.

A study's rows live in all three apps (tasks' items and ratings, raters' standings and checks,
analysis' judge runs, exports and releases), so the delete lives in the top app, the one that
may import them all. The Django admin (:mod:`analysis.admin`) calls it.
"""

from __future__ import annotations

from typing import NamedTuple

from django.db import connection, models, transaction
from django.db.models import Q

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
from tasks.study_services import StudyActionRefused


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
