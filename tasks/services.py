"""Writes that touch several models: submitting ratings, creating study content."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from raters.gold import may_work
from raters.models import Rater, RaterStanding
from raters.services import rating_recorded, study_rules_schedule
from tasks import protocols
from tasks.models import Assignment, Comparison, Item, Rating, RatingRevision, Study


class RatingRejected(ValueError):
    """A rating was not stored; the message is shown to the rater or API client."""


@transaction.atomic
def rating_submit(
    *,
    rater: Rater,
    item: Item | None = None,
    comparison: Comparison | None = None,
    values: dict,
    answers: dict | None = None,
    checklist: dict | None = None,
    presentation: dict | None = None,
    time_on_item_ms: int | None = None,
    source: str = Rating.Source.UI,
    source_detail: str = "",
    require_assignment: bool = True,
) -> Rating:
    """Validate and store a rating; an edit keeps the previous version as a revision.

    Submitting the same values twice is a no-op that returns the stored rating (double clicks and
    retried requests are safe). Nothing is stored when any check fails.

    ``checklist`` (ImagenHub checklist mode): SC and PQ are derived from it by Table 9 and both are
    stored; ``values`` must then be empty. When ``time_on_item_ms`` is not given it is measured
    from the assignment's last server render (``shown_at``) to now.
    """
    return _rating_store(
        rater=rater, item=item, comparison=comparison, values=values, answers=answers, checklist=checklist,
        presentation=presentation, time_on_item_ms=time_on_item_ms, source=source, source_detail=source_detail,
        require_assignment=require_assignment,
    )


def _rating_store(
    *,
    rater: Rater,
    item: Item | None = None,
    comparison: Comparison | None = None,
    values: dict,
    answers: dict | None = None,
    checklist: dict | None = None,
    presentation: dict | None = None,
    time_on_item_ms: int | None = None,
    source: str = Rating.Source.UI,
    source_detail: str = "",
    require_assignment: bool = True,
    assignment: Assignment | None = None,
    schedule: bool = True,
) -> Rating:
    """The body of ``rating_submit``, inside the caller's transaction (``screen_submit`` stores a
    whole screen in one, without a savepoint per rating). ``assignment``: the rater's assignment
    of this unit when the caller has it loaded (a screen); otherwise it is looked up.
    """
    if (item is None) == (comparison is None):
        raise RatingRejected("A rating is for exactly one item or one comparison")
    unit = item or comparison
    study: Study = unit.study
    if source != Rating.Source.IMPORT:
        if not study.is_open:
            raise RatingRejected(f"Study {study.slug} is {study.get_state_display().lower()}; it takes no ratings")
        if not rater.can_rate:
            raise RatingRejected("Your rater account is not active for rating")
    if not require_assignment:
        assignment = None
    elif assignment is None:
        lookup = {"item": item} if item else {"comparison": comparison}
        assignment = Assignment.objects.filter(rater=rater, **lookup).first()
        if assignment is None:
            raise RatingRejected("This item is not assigned to you")

    sub_count = len(item.instance.sub_questions) if item else 0
    settings = study.protocol_settings
    clean_checklist: dict = {}
    try:
        if checklist is not None:
            if study.protocol != protocols.IMAGENHUB:
                raise protocols.ProtocolError("only ImagenHub studies take a checklist")
            if values:
                raise protocols.ProtocolError("give either the checklist or SC/PQ values, not both")
            values, clean_checklist = study.protocol_def.derive_from_checklist(study.task_type, checklist)
        elif settings.get("checklist_mode") and source == Rating.Source.UI:
            raise protocols.ProtocolError("this study rates with the checklist: mark every row")
        clean_values, clean_answers = study.protocol_def.clean_rating(
            settings, values, answers, sub_question_count=sub_count
        )
    except protocols.ProtocolError as exc:
        raise RatingRejected(str(exc)) from None
    if time_on_item_ms is None and assignment is not None and assignment.shown_at is not None:
        elapsed = timezone.now() - assignment.shown_at
        time_on_item_ms = max(0, int(elapsed.total_seconds() * 1000))
    if (study.protocol == protocols.PAIRWISE) != (comparison is not None):
        raise RatingRejected("Pairwise studies rate comparisons; other studies rate single items")

    # A unit leased until now has no rating of this rater yet (claims skip units the rater rated;
    # the rating's unique constraint backs that up): only an edit of a done unit looks one up.
    first_answer = _assignment_finish(assignment) if assignment is not None else False
    lookup = {"rater": rater, "item": item} if item else {"rater": rater, "comparison": comparison}
    rating = None if first_answer else Rating.objects.select_for_update().filter(**lookup).first()
    created = rating is None
    if created:
        rating = Rating(
            study=study,
            rater=rater,
            item=item,
            comparison=comparison,
            values=clean_values,
            answers=clean_answers,
            checklist=clean_checklist,
            presentation=presentation or {},
            time_on_item_ms=time_on_item_ms,
            source=source,
            source_detail=source_detail,
        )
        try:
            # values/answers were cleaned by the protocol above and the unit fits the protocol;
            # the related rows are the caller's own objects: only the plain fields need checking.
            rating.clean_fields(exclude=["values", "answers", "study", "rater", "item", "comparison"])
        except ValidationError as exc:
            raise RatingRejected("; ".join(exc.messages)) from None
        rating.save(force_insert=True)
    elif rating.values != clean_values or rating.answers != clean_answers or rating.checklist != clean_checklist:
        RatingRevision.objects.create(
            rating=rating,
            values=rating.values,
            answers=rating.answers,
            checklist=rating.checklist,
            time_on_item_ms=rating.time_on_item_ms,
        )
        rating.values, rating.answers, rating.checklist = clean_values, clean_answers, clean_checklist
        if time_on_item_ms is not None:
            rating.time_on_item_ms = time_on_item_ms
        rating.save(update_fields=["values", "answers", "checklist", "time_on_item_ms", "updated_at"])

    if source != Rating.Source.IMPORT:
        # attention-check scoring and the per-rater gold/attention rules (a screen schedules the
        # study-wide rules once for all its ratings: ``schedule=False``)
        rating_recorded(rating=rating, created=created, schedule=schedule)
    rating.created_now = created
    return rating


def _assignment_finish(assignment: Assignment) -> bool:
    """Mark the assignment done with one conditional UPDATE (which also locks it until commit, so
    two submits of the same unit take turns). Refused when its lease expired and the unit went
    back to the pool; a second submit of a done unit is an edit. True when this call finished it
    (the unit's first answer), False for an edit."""
    now = timezone.now()
    mine = Assignment.objects.filter(pk=assignment.pk)
    if mine.filter(state=Assignment.State.LEASED).update(state=Assignment.State.DONE, completed_at=now):
        assignment.state, assignment.completed_at = Assignment.State.DONE, now
        return True
    state = mine.values_list("state", flat=True).first()
    if state != Assignment.State.DONE:
        raise RatingRejected("Your time on this item ran out and it went back to the pool")
    assignment.state = state
    return False


@transaction.atomic
def screen_submit(*, rater: Rater, screen, entries: list[dict], standing: RaterStanding | None = None) -> list[Rating]:
    """Store the ratings of one screen (an item, an EvalMi trial, a comparison) all or nothing.

    ``entries``: one dict per assignment of ``screen`` in slot order, with ``values``, ``answers``,
    ``checklist`` (or None) and ``presentation``. A problem with any image of a trial rejects the
    whole screen; the message names the image ("Image 2: …"). ``standing``: the rater's standing
    in the study when the caller read it with the participation (saves a query).

    Afterwards ``screen.next_leased`` is the position of the rater's earliest screen still
    leased (None when the session is finished), read once in the same transaction: it tells the
    study's automatic rules whether a session just ended, and the caller where to go next.
    """
    if len(entries) != len(screen.assignments):
        raise RatingRejected("The page was out of date; please rate the images shown now")
    # paused, rejected or unqualified: no more ratings
    allowed, why = may_work(rater=rater, study=screen.study, standing=standing)
    if not allowed:
        raise RatingRejected(why)
    ratings = []
    for number, (assignment, entry) in enumerate(zip(screen.assignments, entries), start=1):
        try:
            ratings.append(
                _rating_store(
                    assignment=assignment,
                    rater=rater,
                    item=assignment.item if assignment.item_id else None,
                    comparison=assignment.comparison if assignment.comparison_id else None,
                    values=entry.get("values") or {},
                    answers=entry.get("answers") or {},
                    checklist=entry.get("checklist"),
                    presentation=entry.get("presentation") or {},
                    schedule=False,
                )
            )
        except RatingRejected as exc:
            if len(screen.assignments) > 1:
                raise RatingRejected(f"Image {number}: {exc}") from None
            raise
    from tasks.assignment import next_position  # tasks.assignment imports this module's neighbours

    screen.next_leased = next_position(rater=rater, study=screen.study)
    # An edit of a finished session is not a second finish.
    study_rules_schedule(study=screen.study, session_finished=screen.next_leased is None and any(
        rating.created_now for rating in ratings))
    return ratings
