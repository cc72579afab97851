"""Writes that touch several models: submitting ratings, creating study content."""

from __future__ import annotations

import contextlib
import json
from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.models import Max
from django.utils import timezone

from raters.gold import may_work
from raters.models import Rater, RaterStanding
from raters.services import rating_recorded, study_rules_due, study_rules_schedule
from analysis.science import protocols
from tasks import sql
from tasks.assignment import next_position
from tasks.models import Assignment, Comparison, Item, Rating, RatingRevision, ScreenReport, Study


# Fields a new rating does not re-check in clean_fields: values/answers were cleaned by the protocol,
# the related rows are the caller's own objects (a check would cost a query each).
_UNCHECKED_FIELDS = ["values", "answers", "study", "rater", "item", "comparison", "protocol_version"]


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
    from the render of the screen the answer came from (``assignment.shown_at``, not stored) to now.
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
    look_up: bool = False,
    since: datetime | None = None,
) -> Rating:
    """The body of ``rating_submit``, inside the caller's transaction (``screen_submit`` stores a
    whole screen in one, without a savepoint per rating). ``assignment``: the rater's assignment
    of this unit when the caller has it loaded (a screen); otherwise it is looked up. ``since``:
    when time on item starts (a screen's ``time_counted_from``); else the assignment's render time.
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

    clean_values, clean_answers, clean_checklist, time_on_item_ms = _rating_clean(
        study=study, item=item, comparison=comparison, values=values, answers=answers, checklist=checklist,
        source=source, time_on_item_ms=time_on_item_ms,
        since=since if since is not None else getattr(assignment, "shown_at", None),
    )

    # A unit leased until now has no rating of this rater yet (claims skip units the rater rated;
    # the rating's unique constraint backs that up): only an edit of a done unit looks one up.
    first_answer = _assignment_finish(assignment) if assignment is not None else False
    lookup = {"rater": rater, "item": item} if item else {"rater": rater, "comparison": comparison}
    rating = None if first_answer and not look_up else Rating.objects.select_for_update().filter(**lookup).first()
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
            # the protocol the rater saw (imports record none: their protocol was not this site's)
            protocol_version_id=study.current_protocol_version_id if source != Rating.Source.IMPORT else None,
        )
        try:
            # values/answers were cleaned by the protocol above and the unit fits the protocol;
            # the related rows are the caller's own objects: only the plain fields need checking.
            rating.clean_fields(exclude=_UNCHECKED_FIELDS)
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
        if source != Rating.Source.IMPORT:  # an edit is cast under the protocol shown now
            rating.protocol_version_id = study.current_protocol_version_id
        rating.save(update_fields=["values", "answers", "checklist", "time_on_item_ms", "protocol_version",
                                   "updated_at"])

    if source != Rating.Source.IMPORT:
        # counted toward the automatic rule runs (a screen counts all its ratings at once:
        # ``schedule=False``); nothing is scored here, gold or not
        rating_recorded(rating=rating, created=created, schedule=schedule)
    rating.created_now = created
    return rating


def _rating_clean(*, study: Study, item: Item | None, comparison: Comparison | None, values: dict,
                  answers: dict | None, checklist: dict | None, source: str, time_on_item_ms: int | None,
                  since: datetime | None) -> tuple[dict, dict, dict, int | None]:
    """The protocol's checks of one rating: (values, answers, checklist, time on item) to store,
    or RatingRejected with a message for the rater. Time on item, when not given, runs from
    ``since`` to now (None when ``since`` is unknown)."""
    try:
        clean_values, clean_answers, clean_checklist = study.protocol_def.clean_answer(
            study.protocol_settings, study.task_type, values, answers, checklist,
            sub_question_count=len(item.instance.sub_questions) if item else 0,
            checklist_required=source == Rating.Source.UI,
        )
    except protocols.ProtocolError as exc:
        raise RatingRejected(str(exc)) from None
    if time_on_item_ms is None and since is not None:
        elapsed = timezone.now() - since
        time_on_item_ms = max(0, int(elapsed.total_seconds() * 1000))
    if (study.protocol_def.unit_kind == protocols.COMPARISON) != (comparison is not None):
        raise RatingRejected("Pairwise studies rate comparisons; other studies rate single items")

    return clean_values, clean_answers, clean_checklist, time_on_item_ms


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


def screen_submit(*, rater: Rater, screen, entries: list[dict], standing: RaterStanding | None = None) -> list[Rating]:
    """Store the ratings of one screen (an item, an EvalMi trial, a comparison) all or nothing.

    ``entries``: one dict per assignment of ``screen`` in slot order, with ``values``, ``answers``,
    ``checklist`` (or None) and ``presentation``. A problem with any image of a trial rejects the
    whole screen; the message names the image ("Image 2: …"). ``standing``: the rater's standing
    in the study when the caller read it with the participation (saves a query).

    Afterwards ``screen.next_leased`` is the position of the rater's earliest screen still
    leased (None when the session is finished), read with the writes: it tells the study's
    automatic rules whether a session just ended, and the caller where to go next.

    The common case on PostgreSQL (first answers to items) is one statement; edits, comparisons
    and SQLite take the general path. Gold and attention-check units take exactly the path and
    the statements any unit takes: nothing is scored here (see ``raters.gold``), so a rater
    cannot time a submit to tell gold from work.
    """
    if len(entries) != len(screen.assignments):
        raise RatingRejected("The page was out of date; please rate the images shown now")
    # paused, rejected or unqualified: no more ratings
    allowed, why = may_work(rater=rater, study=screen.study, standing=standing)
    if not allowed:
        raise RatingRejected(why)
    since = time_counted_from(rater=rater, screen=screen)
    tried = _first_answers_to_items(screen)
    if tried:
        ratings = _screen_store_at_once(rater=rater, screen=screen, entries=entries, since=since)
        if ratings is not None:
            return ratings
    with transaction.atomic():
        return _screen_store(rater=rater, screen=screen, entries=entries, look_up=tried, since=since)


def time_counted_from(*, rater: Rater, screen) -> datetime | None:
    """When the time on item of a screen's answers starts: the later of the screen's render
    (``assignment.shown_at``, from the signed stamp) and the rater's previous submit in the study.

    A render time alone can be inflated: a speeder who opens every screen of a batch first and
    submits them later would be credited with the whole wait on each screen. Nobody rates two
    screens at once, so the time since the previous submit bounds the time spent on this one.
    With no render time (a missing or doctored stamp) the previous submit alone bounds it; None
    when neither is known (a first submit without a stamp). The previous submit comes with a
    submit's screen (``screen_at(place=False)``); otherwise it costs one query.
    """
    if screen.previous_submit_known:
        previous = screen.previous_submit
    else:
        previous = Rating.objects.filter(rater=rater, study=screen.study).aggregate(last=Max("updated_at"))["last"]
    known = [t for t in [a.shown_at for a in screen.assignments] + [previous] if t is not None]
    return max(known) if known else None


def _screen_store(*, rater: Rater, screen, entries: list[dict], look_up: bool = False,
                  since: datetime | None = None) -> list[Rating]:
    """The general path of ``screen_submit``, inside its transaction: rating by rating.
    ``look_up``: look for an existing rating even of a unit leased until now (the one-statement
    path found one)."""
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
                    look_up=look_up,
                    since=since,
                )
            )
        except RatingRejected as exc:
            if len(screen.assignments) > 1:
                raise RatingRejected(f"Image {number}: {exc}") from None
            raise
    screen.next_leased = next_position(rater=rater, study=screen.study)
    # An edit of a finished session is not a second finish.
    study_rules_schedule(study=screen.study, session_finished=screen.next_leased is None and any(
        rating.created_now for rating in ratings), ratings=len(ratings), rater=rater)
    return ratings


def _first_answers_to_items(screen) -> bool:
    """PostgreSQL, and every unit of the screen a leased item (gold or not: the same path for all)."""
    return connection.vendor == "postgresql" and all(
        a.item_id and a.state == Assignment.State.LEASED for a in screen.assignments
    )


class _NotAllLeased(Exception):
    """Some unit of the screen was no longer leased when the statement ran: roll back."""


def _screen_store_at_once(*, rater: Rater, screen, entries: list[dict],
                          since: datetime | None = None) -> list[Rating] | None:
    """``screen_submit``'s common case in one statement (a trial of several images inside a
    transaction, so it stays all or nothing). None when some unit was no longer leased when the
    statement ran (an expired lease, a second tab): nothing was stored, the general path decides."""
    study: Study = screen.study
    if not study.is_open:
        raise RatingRejected(f"Study {study.slug} is {study.get_state_display().lower()}; it takes no ratings")
    if not rater.can_rate:
        raise RatingRejected("Your rater account is not active for rating")
    now = timezone.now()
    ratings = []
    for number, (assignment, entry) in enumerate(zip(screen.assignments, entries), start=1):
        try:
            values, answers, checklist, time_ms = _rating_clean(
                study=study, item=assignment.item, comparison=None, values=entry.get("values") or {},
                answers=entry.get("answers") or {}, checklist=entry.get("checklist"), source=Rating.Source.UI,
                time_on_item_ms=None, since=since,
            )
            rating = Rating(study=study, rater=rater, item=assignment.item, values=values, answers=answers,
                            checklist=checklist, presentation=entry.get("presentation") or {},
                            time_on_item_ms=time_ms, source=Rating.Source.UI, created_at=now, updated_at=now,
                            protocol_version_id=study.current_protocol_version_id)
            rating.clean_fields(exclude=_UNCHECKED_FIELDS)
        except ValidationError as exc:
            message = "; ".join(exc.messages)
            raise RatingRejected(f"Image {number}: {message}" if len(entries) > 1 else message) from None
        except RatingRejected as exc:
            if len(entries) > 1:
                raise RatingRejected(f"Image {number}: {exc}") from None
            raise
        ratings.append(rating)
    ordered = sorted(zip(screen.assignments, ratings), key=lambda pair: pair[0].pk)
    count = study_rules_due(study)
    params = {
        "now": now, "rater": rater.pk, "study": study.pk, "source": Rating.Source.UI, "n": len(ordered),
        "version": study.current_protocol_version_id,
        "count": count,
        "assignments": [a.pk for a, _ in ordered], "items": [a.item_id for a, _ in ordered],
        "values": [json.dumps(r.values) for _, r in ordered], "answers": [json.dumps(r.answers) for _, r in ordered],
        "checklists": [json.dumps(r.checklist) for _, r in ordered],
        "presentations": [json.dumps(r.presentation) for _, r in ordered],
        "times": [r.time_on_item_ms for _, r in ordered],
    }
    # One unit in autocommit is atomic by itself; several (or a caller's transaction) need a block
    # (a savepoint inside a caller's transaction) so that a refusal leaves nothing behind.
    block = len(ordered) > 1 or connection.in_atomic_block
    try:
        with transaction.atomic() if block else contextlib.nullcontext():
            with connection.cursor() as cursor:
                cursor.execute(sql.submit_at_once(), params)
                done, next_leased, counted, rating_ids, item_ids = cursor.fetchone()
            if done != len(ordered):
                raise _NotAllLeased
    except (_NotAllLeased, IntegrityError):  # IntegrityError: a rating already there; the general path edits it
        return None
    by_item = dict(zip(item_ids, rating_ids))
    for assignment, rating in ordered:
        rating.pk = by_item[assignment.item_id]
        rating.created_now = True
        assignment.state, assignment.completed_at = Assignment.State.DONE, now
    screen.next_leased = next_leased
    # counted is None when the study has no schedule row yet: the tick creates it
    if count or next_leased is None:
        study_rules_schedule(study=study, session_finished=next_leased is None, ratings=len(ordered),
                             counted=counted, rater=rater)
    return ratings



class ReportRefused(ValueError):
    """A screen report that cannot be stored; the message is for the rater."""


def screen_report(*, rater: Rater, screen, broken_image: bool, comment: str) -> ScreenReport:
    """Store (or replace) the rater's report on one of their screens.

    ``comment`` is free text from a rater: stripped, at most ``ScreenReport.COMMENT_MAX``
    characters, no NUL or other control characters but newlines and tabs. A report needs a
    broken image or a comment. The screen must be the rater's own (``screen_at`` found it).
    """
    comment = (comment or "").strip()
    if len(comment) > ScreenReport.COMMENT_MAX:
        raise ReportRefused(f"Please keep the comment under {ScreenReport.COMMENT_MAX} characters.")
    if any(ord(ch) < 32 and ch not in "\n\r\t" for ch in comment) or any(0xD800 <= ord(ch) <= 0xDFFF for ch in comment):
        raise ReportRefused("The comment contains characters that cannot be stored.")
    if not broken_image and not comment:
        raise ReportRefused("Tick “an image is broken” or write a comment.")
    items: list[int] = []
    for assignment in screen.assignments:
        if assignment.item_id:
            items.append(assignment.item_id)
        else:
            items += [assignment.comparison.item_a_id, assignment.comparison.item_b_id]
    report, _ = ScreenReport.objects.update_or_create(
        rater=rater, study=screen.study, position=screen.position,
        defaults={"items": items, "broken_image": broken_image, "comment": comment},
    )
    return report
