"""Decisions about raters (approve / pause / reject / block) and the automatic rules that make them.

Every decision writes a ``RaterAction`` with its reason, so the rater page shows who decided what
and why. Automatic rules never overrule a person: a rater a researcher approved stays approved.

What happens above this module is asked for through signals, so nothing here imports it: the
rules' Celery jobs (``raters.jobs``, connected in ``raters.apps``) and the owners' notices when a
session ends (``analysis.notices``, connected in ``analysis.apps``).
"""

from __future__ import annotations

import logging
from datetime import timedelta
from functools import partial

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.dispatch import Signal
from django.utils import timezone

from analysis.science.rater_flags import attention_flag, gold_flag
from raters.gold import attention_failures, attention_failures_by_rater, gold_accuracy, gold_accuracy_by_rater
from raters.models import (
    Decision,
    QualityPolicy,
    QualityRulesSchedule,
    Rater,
    RaterAction,
    RaterStanding,
)
from raters.quality import BEHAVIOUR_CODES, study_quality
from tasks.models import Assignment, Rating, Study

logger = logging.getLogger(__name__)
# A run queued longer ago than this is taken as lost (broker restarted, worker killed before it
# started): the next trigger queues a new one. Well above the job's hard time limit.
STALE_QUEUE = timedelta(minutes=30)

_STATE_FOR = {
    Decision.APPROVE: RaterStanding.State.APPROVED,
    Decision.PAUSE: RaterStanding.State.PAUSED,
    Decision.REJECT: RaterStanding.State.REJECTED,
    Decision.BLOCK: RaterStanding.State.BLOCKED,
    Decision.REACTIVATE: RaterStanding.State.PENDING,
}
# How severe each standing is; a rule only ever makes a standing more severe.
_SEVERITY = {
    RaterStanding.State.PENDING: 0,
    RaterStanding.State.APPROVED: 0,
    RaterStanding.State.PAUSED: 1,
    RaterStanding.State.REJECTED: 2,
    RaterStanding.State.BLOCKED: 3,
}

# A rater's session in a study ended (``study_id``): the study may just have become complete, or
# its agreement fallen.
session_ended = Signal()
# Queue one rater's gold and attention rules (``rater_id``, ``study_id``), or every rule of a study
# (``study_id``, ``countdown`` seconds or 0). Their receivers queue the job; an error one raises
# (broker down) is caught and logged here.
queue_rater_rules = Signal()
queue_study_rules = Signal()


class DecisionRefused(ValueError):
    """A decision was not made; the message says why."""


@transaction.atomic
def rater_decide(*, study, rater: Rater, decision: str, reason: str, actor=None, automatic: bool = False) -> RaterStanding:
    """Approve, pause, reject, block or reactivate ``rater`` in ``study``.

    Block is site-wide (``Rater.state`` becomes blocked, so they cannot rate anywhere); the others
    act in this study only. A site-wide block reaches other researchers' studies, so a person
    ``actor`` must be staff to block and to lift a block (a study owner rejects instead). With
    ``automatic=True`` the decision comes from a rule: it is skipped (and the current standing
    returned) when a person approved the rater or the standing is already as severe.
    """
    if decision not in _STATE_FOR:
        raise DecisionRefused(f"Unknown decision {decision!r}; use one of {', '.join(_STATE_FOR)}")
    reason = (reason or "").strip()
    if not reason:
        raise DecisionRefused("Give a reason: it is kept with the decision and shown in exports")
    if decision == Decision.BLOCK and actor is not None and not actor.is_staff:
        raise DecisionRefused("Only an admin can block a rater site-wide; reject them to leave them out of this study")
    Rater.objects.select_for_update().filter(pk=rater.pk).first()  # one decision at a time per rater
    rater.refresh_from_db(fields=["state", "state_reason"])
    standing, _ = RaterStanding.objects.get_or_create(study=study, rater=rater)
    new_state = _STATE_FOR[decision]

    if automatic:
        approved_by_person = standing.state == RaterStanding.State.APPROVED and not standing.automatic
        if approved_by_person or _SEVERITY[new_state] <= _SEVERITY[standing.state]:
            return standing
    if decision == Decision.REACTIVATE and rater.state == Rater.State.BLOCKED:
        if actor is None or not actor.is_staff:
            raise DecisionRefused("This rater is blocked site-wide; only an admin can lift the block")
        rater.state, rater.state_reason = Rater.State.ACTIVE, f"Block lifted: {reason}"
        rater.save(update_fields=["state", "state_reason"])
    if decision == Decision.BLOCK:
        rater.state, rater.state_reason = Rater.State.BLOCKED, f"Blocked in {study.slug}: {reason}"
        rater.save(update_fields=["state", "state_reason"])

    standing.state = new_state
    standing.reason = reason
    standing.automatic = automatic
    standing.decided_by = None if automatic else actor
    standing.save()
    RaterAction.objects.create(
        study=study, rater=rater, decision=decision, reason=reason, actor=None if automatic else actor, automatic=automatic
    )
    return standing


@transaction.atomic
def rater_block(*, rater: Rater, reason: str, actor=None) -> Rater:
    """Block ``rater`` site-wide (no rating anywhere) with a reason, whether or not they have rated.

    A rater with ratings is blocked through :func:`rater_decide` in the study they rated last,
    so the decision is logged there as a ``RaterAction``. A rater with no ratings has no study to
    log in: the reason and the actor are kept in ``Rater.state_reason`` (the admin also writes
    its own log entry).
    """
    reason = (reason or "").strip()
    if not reason:
        raise DecisionRefused("Give a reason: it is kept with the decision and shown in exports")
    latest = Rating.objects.filter(rater=rater).order_by("-created_at").select_related("study").first()
    if latest is not None:
        rater_decide(study=latest.study, rater=rater, decision=Decision.BLOCK, reason=reason, actor=actor)
        rater.refresh_from_db(fields=["state", "state_reason"])
        return rater
    Rater.objects.select_for_update().filter(pk=rater.pk).first()
    by = f" by {actor.get_username()}" if actor is not None else ""
    rater.state, rater.state_reason = Rater.State.BLOCKED, f"Blocked site-wide{by}: {reason}"
    rater.save(update_fields=["state", "state_reason"])
    return rater


def _apply(study, rater: Rater, action: str, reason: str) -> bool:
    """Apply a rule's action (a ``QualityPolicy.Action``); True when the standing changed."""
    if not action:
        return False
    before = RaterStanding.of(rater=rater, study=study).state
    after = rater_decide(study=study, rater=rater, decision=action, reason=reason, automatic=True).state
    return before != after


@transaction.atomic
def rater_rules_apply(*, rater: Rater, study) -> list[str]:
    """The cheap per-rater rules: gold accuracy and attention checks (new attention answers are
    scored first). Run after each of the rater's sessions, never on the submit itself.

    Returns the reasons of the actions taken (empty when nothing changed).
    """
    policy = QualityPolicy.for_study(study)
    taken = []
    correct, total = gold_accuracy(rater=rater, study=study)
    flag = gold_flag(correct, total, min_accuracy=policy.gold_min_accuracy, min_items=policy.gold_min_items)
    if flag and _apply(study, rater, policy.gold_action, f"Rule: {flag.reason}"):
        taken.append(flag.reason)
    failures, checks = attention_failures(rater=rater, study=study)
    flag = attention_flag(failures, checks, max_failures=policy.attention_max_failures)
    if flag and _apply(study, rater, policy.attention_action, f"Rule: {flag.reason}"):
        taken.append(flag.reason)
    return taken


@transaction.atomic
def study_rules_apply(*, study) -> dict[int, list[str]]:
    """All rules for every rater of the study, including behaviour flags (these need everyone's ratings).

    Returns rater id -> reasons of the actions taken. Safe to run repeatedly.
    """
    policy = QualityPolicy.for_study(study)
    raters = {r.pk: r for r in Rater.objects.filter(ratings__study=study).distinct()}
    taken: dict[int, list[str]] = {}
    # The per-rater rules of rater_rules_apply, from two study-wide tallies instead of three
    # queries per rater (a run over 280 raters: 1,400 queries and 0.7-2 s before).
    gold, attention = gold_accuracy_by_rater(study), attention_failures_by_rater(study)
    for rater in raters.values():
        correct, total = gold.get(rater.pk, (0, 0))
        flag = gold_flag(correct, total, min_accuracy=policy.gold_min_accuracy, min_items=policy.gold_min_items)
        if flag and _apply(study, rater, policy.gold_action, f"Rule: {flag.reason}"):
            taken.setdefault(rater.pk, []).append(flag.reason)
        failures, checks = attention.get(rater.pk, (0, 0))
        flag = attention_flag(failures, checks, max_failures=policy.attention_max_failures)
        if flag and _apply(study, rater, policy.attention_action, f"Rule: {flag.reason}"):
            taken.setdefault(rater.pk, []).append(flag.reason)
    if policy.behaviour_action:
        for rater_id, quality in study_quality(study).items():
            behaviour = [f for f in quality.flags if f.code in BEHAVIOUR_CODES]
            if len(behaviour) >= max(policy.behaviour_min_flags, 1) and rater_id in raters:
                reason = "Rule: " + "; ".join(f"{f.label}: {f.reason}" for f in behaviour)
                if _apply(study, raters[rater_id], policy.behaviour_action, reason):
                    taken.setdefault(rater_id, []).append(reason)
    return taken


# Called inside the rating's own transaction: no savepoint of its own; an error here fails the
# whole submit, which is what should happen anyway.
@transaction.atomic(savepoint=False)
def rating_recorded(*, rating, created: bool | None = None, schedule: bool = True) -> None:
    """Call after a rating is stored (UI or API, not imports): counts it toward the study's
    automatic rule runs (``schedule=False``: the caller counts a whole screen itself, see
    ``study_rules_schedule``).

    It scores nothing. A gold or attention-check answer is stored and counted exactly like any
    other, so neither the response nor the time it takes tells the rater which unit was gold or
    a check (scoring one on submit made those submits twice as slow). They are scored when the
    rules run: after the rater's session (``rater_rules_apply`` or the study-wide job) and every
    N ratings. ``created``: whether this call's rating is new (saves a query); None when unknown.
    """
    if rating.source == "import" or not schedule:
        return
    study = rating.study
    session_finished = (
        not Assignment.objects.filter(rater=rating.rater, study=study, state=Assignment.State.LEASED).exists()
        and not (created is False or (created is None and rating.revisions.exists()))  # an edit is not a second finish
    )
    study_rules_schedule(study=study, session_finished=session_finished, rater=rating.rater)


def study_rules_due(study) -> bool:
    """Whether the study's ratings are counted toward automatic rule runs."""
    policy = QualityPolicy.for_study(study)
    return bool(policy.rules_after_session or policy.rules_every_ratings)


def study_rules_schedule(*, study, session_finished: bool, ratings: int = 1, counted: int | None = None,
                         rater: Rater | None = None) -> None:
    """Count a screen's ``ratings`` toward the study's automatic rule runs, after they commit.

    ``session_finished``: the rater has no screen left leased and this screen was a first answer
    (the caller knows it from the query that finds the next screen). ``counted``: the schedule's
    new count when the caller already added the ratings. ``rater``: whose session it was; when
    the study runs no rules after a session, the rater's own gold and attention rules are queued
    then instead (``apply_rater_rules_job``), so they still act on every rater, session by session,
    and never right after the one screen that was gold."""
    if session_finished:  # the study may just have become complete, or its α fallen: tell the owners once
        session_ended.send(sender=Rater, study_id=study.pk)
    policy = QualityPolicy.for_study(study)
    if session_finished and rater is not None and not policy.rules_after_session:
        transaction.on_commit(partial(_rater_rules_queue, rater_id=rater.pk, study_id=study.pk))
    if not (policy.rules_after_session or policy.rules_every_ratings):
        return
    transaction.on_commit(partial(
        quality_rules_tick, study_id=study.pk, session_finished=bool(policy.rules_after_session and session_finished),
        every=policy.rules_every_ratings, ratings=ratings, counted=counted,
    ))


def _rater_rules_queue(*, rater_id: int, study_id: int) -> None:
    try:
        queue_rater_rules.send(sender=Rater, rater_id=rater_id, study_id=study_id)
    except Exception:  # broker down: ratings must not fail for it; the study-wide runs still score them
        logger.exception("could not queue the rules of rater %s in study %s", rater_id, study_id)


def rater_rules_run(*, rater_id: int, study_id: int) -> dict | None:
    """The rater's gold and attention rules (the job's body); None when the rater or study is gone."""
    rater, study = Rater.objects.filter(pk=rater_id).first(), Study.objects.filter(pk=study_id).first()
    if rater is None or study is None:
        return None
    return {"study": study_id, "rater": rater_id, "taken": rater_rules_apply(rater=rater, study=study)}


def quality_rules_tick(*, study_id: int, session_finished: bool, every: int, now=None, ratings: int = 1,
                       counted: int | None = None) -> bool:
    """``ratings`` more ratings in the study: queue the study's rules when a session just finished
    or ``every`` ratings have come in since the last run. Returns True when a run was queued.

    Runs after the ratings' commit (``transaction.on_commit``), so the job sees them. Only one
    run waits at a time: the ``queued`` flag is claimed with a conditional UPDATE, so a burst of
    finishing raters queues one job. Counting happens outside the rating's transaction, so the
    schedule row is never locked while a rater's request is in flight. ``counted``: the new
    count when the caller already added the ratings (in the statement that stored them).
    """
    if counted is None:
        counted = _schedule_count(study_id, ratings)
    if counted is None:
        QualityRulesSchedule.objects.get_or_create(study_id=study_id, defaults={"ratings_since_run": ratings})
        counted = ratings
    if not session_finished and (not every or counted < every):
        return False  # the common case: nothing more (the queries below are built only when needed)
    now = now or timezone.now()
    rows = QualityRulesSchedule.objects.filter(study_id=study_id)
    claim = rows.filter(Q(queued=False) | Q(queued_at__isnull=True) | Q(queued_at__lt=now - STALE_QUEUE))
    if not session_finished:
        claim = claim.filter(ratings_since_run__gte=every)
    if not claim.update(queued=True, queued_at=now, ratings_since_run=0):
        return False
    # Runs are spaced: with many raters a session ends every second, and a run over a large study
    # takes seconds; the queued run waits out the rest of the interval (it still sees every rating).
    last_run = rows.values_list("last_run_at", flat=True).first()
    wait = 0.0
    if last_run is not None:
        wait = max(0.0, settings.QUALITY_RULES_MIN_INTERVAL_SECONDS - (now - last_run).total_seconds())
    try:
        queue_study_rules.send(sender=Rater, study_id=study_id, countdown=wait)
    except Exception:  # broker down: ratings must not fail for it; the next trigger tries again
        logger.exception("could not queue the quality rules of study %s", study_id)
        rows.update(queued=False)
        return False
    return True


def _schedule_count(study_id: int, ratings: int = 1) -> int | None:
    """Count ``ratings`` on the study's schedule row; the new count, or None when there is no row.

    One ``UPDATE … RETURNING`` (PostgreSQL, SQLite ≥ 3.35): every rating of the study passes
    through this row, so it is written once per rating and in its own short statement.
    """
    table = connection.ops.quote_name(QualityRulesSchedule._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET ratings_since_run = ratings_since_run + %s WHERE study_id = %s RETURNING ratings_since_run",
            [ratings, study_id],
        )
        row = cursor.fetchone()
    return row[0] if row else None


def quality_rules_run(*, study_id: int) -> dict | None:
    """Run every rule of the study (the job's body). Idempotent: rules only ever make a standing
    more severe and skip raters already there. Returns a summary, or None when the study is gone."""
    study = Study.objects.filter(pk=study_id).first()
    if study is None:
        return None
    # Ratings that arrive while this run works may queue the next one.
    if not QualityRulesSchedule.objects.filter(study_id=study_id).update(queued=False):
        QualityRulesSchedule.objects.get_or_create(study_id=study_id)
    taken = study_rules_apply(study=study)
    QualityRulesSchedule.objects.filter(study_id=study_id).update(
        runs=F("runs") + 1, last_run_at=timezone.now(), last_run_actions=len(taken)
    )
    return {"study": study_id, "acted_on": sorted(taken)}
