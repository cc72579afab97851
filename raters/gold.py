"""Gold: qualification tests, hidden gold in normal work, attention checks, gold from consensus.

Gold items are ordinary study items that have a ``tasks.GoldAnswer``. Nothing here is ever
rendered to a rater: the rating pages show a gold item exactly like any other item, and the
expected answer is only compared on the server.

* Qualification: a study's ``QualityPolicy`` may require a test of N gold items before work.
  Answers are kept in ``QualificationAnswer`` (not ``Rating``), so they never enter analysis.
* Hidden gold: a share ``gold_share`` (study protocol settings) of a rater's screens are gold,
  slotted into the queue by the assignment engine (``tasks.assignment.gold``): gold items, whole
  gold trials on EvalMi, gold comparisons in pairwise studies (a ``tasks.ComparisonGold``; its
  sides are randomised like any comparison's, and the answer is scored here in A/B terms, after
  the screen's left/right was mapped back through the assignment's presentation).
* Attention checks: instructed-response items (``AttentionCheck``) scored on the first answer,
  by the rules and quality code (:func:`attention_results_record`), never by the submit.
* Scoring is off the request path: a submit stores a gold or attention-check answer exactly as
  any answer (same statements, same time); gold accuracy is computed from the stored ratings
  when the rules run (after a session, ``raters.jobs``) or a page asks.
* Gold from consensus: after a pilot, items on which every (non-excluded) rater gave the same
  answer are offered as candidates; a researcher confirms each one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from raters.models import (
    AttentionCheck,
    AttentionResult,
    QualificationAnswer,
    QualificationAttempt,
    QualityPolicy,
    Rater,
    RaterStanding,
)
from analysis.science import protocols
from tasks.models import Comparison, ComparisonGold, GoldAnswer, Item, Rating, RatingRevision, Study


class QualificationRefused(ValueError):
    """A qualification step was not taken; the message is shown to the rater."""


# ------------------------------------------------------------------ running gold accuracy


def _gold_rated(study: Study, **filters):
    """The study's ratings of gold units (gold items, or gold comparisons in pairwise studies),
    each with its gold answer: one query."""
    if study.protocol == protocols.PAIRWISE:
        return Rating.objects.filter(study=study, comparison__gold__isnull=False, **filters).select_related(
            "comparison__gold")
    return Rating.objects.filter(study=study, item__gold__isnull=False, **filters).select_related("item__gold")


def gold_matches(rating: Rating) -> bool:
    """Whether a rating of a gold unit gives the gold answer (pairwise: the preference in A/B terms)."""
    if rating.comparison_id:
        return rating.comparison.gold.matches(rating.values)
    return rating.item.gold.matches(rating.values, rating.answers)


def gold_accuracy(*, rater: Rater, study: Study) -> tuple[int, int]:
    """(correct, total) over the rater's ratings of gold units in the study (hidden gold)."""
    results = [gold_matches(r) for r in _gold_rated(study, rater=rater)]
    return sum(results), len(results)


def gold_accuracy_by_rater(study: Study) -> dict[int, tuple[int, int]]:
    """rater id -> (correct, total) for every rater who rated a gold unit of the study."""
    out: dict[int, list[int]] = {}
    for rating in _gold_rated(study):
        tally = out.setdefault(rating.rater_id, [0, 0])
        tally[0] += int(gold_matches(rating))
        tally[1] += 1
    return {k: (v[0], v[1]) for k, v in out.items()}


def gold_ratings(*, rater: Rater, study: Study) -> list[dict]:
    """The rater's answers on gold units next to the expected ones, for researchers only.

    Pairwise rows also say which side the rater saw each answer on (``as seen``: left / right)."""
    rows = []
    if study.protocol == protocols.PAIRWISE:
        comparisons = _gold_rated(study, rater=rater).select_related(
            "comparison__item_a__gen_model", "comparison__item_a__instance", "comparison__item_b__gen_model"
        ).order_by("created_at")
        for rating in comparisons:
            gold, given = rating.comparison.gold, rating.values.get("preference")
            rows.append({
                "item": rating.comparison,
                "given": {"preference": given, "as seen": protocols.pairwise_side(
                    given, rating.presentation.get("left", "A"))},
                "expected": {"preference": gold.preference, "as seen": gold.expected_side(rating.presentation)},
                "tolerance": 0.0,
                "correct": gold.matches(rating.values),
                "kind": "hidden gold",
            })
        return rows
    ratings = (
        Rating.objects.filter(rater=rater, study=study, item__gold__isnull=False)
        .select_related("item__gold", "item__instance", "item__gen_model")
        .order_by("created_at")
    )
    for rating in ratings:
        gold = rating.item.gold
        rows.append(
            {
                "item": rating.item,
                "given": {**rating.values, **rating.answers},
                "expected": {**gold.values, **gold.answers},
                "tolerance": gold.tolerance,
                "correct": gold.matches(rating.values, rating.answers),
                "kind": "hidden gold",
            }
        )
    answers = QualificationAnswer.objects.filter(attempt__rater=rater, attempt__study=study).select_related(
        "item__gold", "item__instance", "item__gen_model", "attempt"
    )
    for answer in answers:
        gold = getattr(answer.item, "gold", None)
        rows.append(
            {
                "item": answer.item,
                "given": {**answer.values, **answer.answers},
                "expected": {**gold.values, **gold.answers} if gold else {},
                "tolerance": gold.tolerance if gold else 0.0,
                "correct": answer.correct,
                "kind": f"qualification attempt {answer.attempt.number}",
            }
        )
    return rows


# ------------------------------------------------------------------ qualification


@dataclass(frozen=True)
class QualificationStatus:
    required: bool
    passed: bool
    attempts_used: int
    attempts_left: int
    open_attempt: QualificationAttempt | None
    message: str

    @property
    def may_work(self) -> bool:
        return not self.required or self.passed

    @property
    def may_try(self) -> bool:
        return self.required and not self.passed and (self.open_attempt is not None or self.attempts_left > 0)


def qualification_items(study: Study, policy: QualityPolicy | None = None) -> list[Item]:
    """The test's gold items: the policy's chosen ones, else the study's first N gold items by id."""
    policy = policy or QualityPolicy.for_study(study)
    chosen = list(policy.qualification_items.filter(gold__isnull=False).order_by("pk")) if policy.pk else []
    if chosen:
        return chosen
    return list(Item.objects.filter(study=study, gold__isnull=False).order_by("pk")[: policy.qualification_size])


def qualification_status(*, rater: Rater, study: Study) -> QualificationStatus:
    policy = QualityPolicy.for_study(study)
    if not policy.qualification_required:
        return QualificationStatus(False, False, 0, 0, None, "")
    attempts = list(QualificationAttempt.objects.filter(study=study, rater=rater).order_by("number"))
    used = len(attempts)
    left = max(policy.qualification_max_attempts - used, 0)
    open_attempt = next((a for a in attempts if not a.is_finished), None)
    if any(a.passed for a in attempts):
        return QualificationStatus(True, True, used, left, None, "You passed the qualification test.")
    if open_attempt is not None:
        message = "Please finish the short qualification test before you start."
    elif used == 0:
        message = "This study starts with a short qualification test."
    elif left:
        message = (
            f"Thank you for trying. You did not reach the pass mark this time; you may try again "
            f"({left} attempt{'s' if left != 1 else ''} left)."
        )
    else:
        message = (
            "Thank you for your time. Your answers did not reach the pass mark of the qualification "
            "test, so we cannot offer you this study. Please return it on your platform."
        )
    return QualificationStatus(True, False, used, left, open_attempt, message)


@transaction.atomic
def qualification_start(*, rater: Rater, study: Study) -> QualificationAttempt:
    """Open an attempt (or return the unfinished one). Items are shuffled per rater and attempt."""
    Rater.objects.select_for_update().filter(pk=rater.pk).first()
    status = qualification_status(rater=rater, study=study)
    if not status.required:
        raise QualificationRefused("This study has no qualification test")
    if status.passed:
        raise QualificationRefused("You already passed the qualification test")
    if status.open_attempt is not None:
        return status.open_attempt
    if status.attempts_left <= 0:
        raise QualificationRefused(status.message)
    items = [item.pk for item in qualification_items(study)]
    if not items:
        raise QualificationRefused("The qualification test is not ready yet (no gold items); please come back later")
    number = status.attempts_used + 1
    random.Random(f"{study.pk}:{rater.pk}:{number}").shuffle(items)
    return QualificationAttempt.objects.create(study=study, rater=rater, number=number, items=items)


def qualification_next_item(attempt: QualificationAttempt) -> Item | None:
    answered = set(attempt.answers.values_list("item_id", flat=True))
    for item_id in attempt.items:
        if item_id not in answered:
            return Item.objects.select_related("instance", "gen_model", "image").get(pk=item_id)
    return None


@transaction.atomic
def qualification_answer(
    *,
    attempt: QualificationAttempt,
    item: Item,
    values: dict,
    answers: dict | None = None,
    checklist: dict | None = None,
    time_on_item_ms: int | None = None,
) -> QualificationAttempt:
    """Record one answer; after the last one the attempt is scored against the pass share.

    The answer must be for the attempt's next item. ``checklist`` (ImagenHub checklist mode): SC
    and PQ are derived from the marks exactly as for a rating, and ``values`` must be empty.
    Nothing is stored when the answer does not fit the protocol. Returns the (possibly finished)
    attempt.
    """
    attempt = QualificationAttempt.objects.select_for_update().get(pk=attempt.pk)
    if attempt.is_finished:
        raise QualificationRefused("This qualification attempt is already finished")
    expected = qualification_next_item(attempt)
    if expected is None or expected.pk != item.pk:
        raise QualificationRefused("Please answer the item shown on the page")
    study = attempt.study
    try:
        clean_values, clean_answers, clean_checklist = study.protocol_def.clean_answer(
            study.protocol_settings, study.task_type, values, answers, checklist,
            sub_question_count=len(item.instance.sub_questions),
        )
    except protocols.ProtocolError as exc:
        raise QualificationRefused(str(exc)) from None
    gold = GoldAnswer.objects.filter(item=item).first()
    correct = bool(gold and gold.matches(clean_values, clean_answers))
    QualificationAnswer.objects.create(
        attempt=attempt, item=item, values=clean_values, answers=clean_answers, checklist=clean_checklist,
        correct=correct, time_on_item_ms=time_on_item_ms,
    )
    if qualification_next_item(attempt) is None:
        policy = QualityPolicy.for_study(study)
        attempt.correct = attempt.answers.filter(correct=True).count()
        attempt.passed = attempt.correct >= policy.qualification_pass_share * attempt.total - 1e-9
        attempt.finished_at = timezone.now()
        attempt.save(update_fields=["correct", "passed", "finished_at"])
    return attempt


# ------------------------------------------------------------------ attention checks


def reserved_item_ids(study: Study) -> set[int]:
    """Items the assignment engine must not hand out as normal work: attention-check items."""
    return set(AttentionCheck.objects.filter(study=study).values_list("item_id", flat=True))


def attention_instruction(item: Item) -> str:
    """The instruction to show on an item ('' for normal items). Attention checks are meant to be
    seen; only gold must stay hidden. Reads ``item.attention_check`` (no query when the item was
    loaded with it, as the assignment engine's screens are)."""
    try:
        return item.attention_check.instruction
    except AttentionCheck.DoesNotExist:
        return ""


def attention_results_record(*, study: Study, rater: Rater | None = None) -> int:
    """Score the attention checks answered since the last scoring (of ``rater``, or of everyone):
    one ``AttentionResult`` per rater and check, from the rater's first answer (the earliest
    revision when the rating was edited since: an edit does not repair a failure). Returns how
    many were scored.

    The submit stores an attention check's answer like any answer and scores nothing, so neither
    the page nor the time a submit takes tells the rater which screen was a check; the counts
    below (the rules, the quality page) score what came in first. Idempotent and safe to run
    concurrently (a result already there is kept).
    """
    scored = AttentionResult.objects.filter(attention_check__item_id=OuterRef("item_id"), rater_id=OuterRef("rater_id"))
    ratings = (
        Rating.objects.filter(study=study, item__attention_check__isnull=False)
        .exclude(source=Rating.Source.IMPORT)
        .exclude(Exists(scored))
        .select_related("item__attention_check")
    )
    if rater is not None:
        ratings = ratings.filter(rater=rater)
    ratings = list(ratings)
    if not ratings:
        return 0
    first: dict[int, tuple[dict, dict]] = {}
    for rating_id, values, answers in RatingRevision.objects.filter(rating__in=ratings).order_by(
            "-replaced_at", "-pk").values_list("rating_id", "values", "answers"):
        first[rating_id] = (values, answers)  # the earliest revision is read last
    results = []
    for rating in ratings:
        values, answers = first.get(rating.pk, (rating.values, rating.answers))
        check = rating.item.attention_check
        results.append(AttentionResult(attention_check=check, rater_id=rating.rater_id, values=values,
                                       answers=answers, passed=check.is_passed_by(values, answers)))
    AttentionResult.objects.bulk_create(results, ignore_conflicts=True)
    return len(results)


def attention_failures(*, rater: Rater, study: Study) -> tuple[int, int]:
    """(failed, answered) attention checks of the rater in the study (scoring new answers first)."""
    attention_results_record(study=study, rater=rater)
    results = AttentionResult.objects.filter(rater=rater, attention_check__study=study)
    return results.filter(passed=False).count(), results.count()


def attention_failures_by_rater(study: Study) -> dict[int, tuple[int, int]]:
    """rater id -> (failed, answered) attention checks, for every rater who answered one."""
    attention_results_record(study=study)
    out: dict[int, list[int]] = {}
    for rater_id, passed in AttentionResult.objects.filter(attention_check__study=study).values_list("rater_id", "passed"):
        tally = out.setdefault(rater_id, [0, 0])
        tally[0] += int(not passed)
        tally[1] += 1
    return {k: (v[0], v[1]) for k, v in out.items()}


def completion_allowed(*, rater: Rater, study: Study) -> tuple[bool, str]:
    """Whether a crowd rater may be shown the completion code / sent back with it.

    Refused when they failed (or skipped) a required qualification, or are rejected or blocked.
    """
    status = qualification_status(rater=rater, study=study)
    if not status.may_work:
        return False, status.message
    if rater.state == Rater.State.BLOCKED:
        return False, "Your participation in this study has ended."
    standing = RaterStanding.of(rater=rater, study=study)
    if standing.excludes_from_analysis:
        return False, "Your participation in this study has ended."
    return True, ""


def may_work(*, rater: Rater, study: Study, standing: RaterStanding | None = None) -> tuple[bool, str]:
    """Gate before handing out work: active, not paused/rejected/blocked here, qualified if required.

    ``standing``: the rater's standing in the study when the caller has just read it."""
    if not rater.can_rate:
        return False, "Your rater account is not active for rating."
    standing = standing or RaterStanding.of(rater=rater, study=study)
    if not standing.may_continue:
        if standing.state == standing.State.PAUSED:
            return False, "Your work on this study is paused while a researcher reviews it. Thank you for your patience."
        return False, "Your participation in this study has ended. Thank you for your time."
    status = qualification_status(rater=rater, study=study)
    if not status.may_work:
        return False, status.message
    return True, ""


# ------------------------------------------------------------------ gold from consensus


@dataclass(frozen=True)
class GoldCandidate:
    item: Item
    values: dict
    answers: dict
    raters: int


def gold_candidates(study: Study, *, min_raters: int = 3) -> list[GoldCandidate]:
    """Items without gold on which at least ``min_raters`` raters (excluded ones left out) all gave
    the same values and answers: candidates for gold after a pilot. Pairwise studies: comparisons
    with one preference from all (``item`` is then the comparison; values ``{"preference": …}``)."""
    excluded = set(Rater.objects.excluded_from_analysis(study).values_list("pk", flat=True))
    if study.protocol == protocols.PAIRWISE:
        return _comparison_candidates(study, excluded, min_raters)
    reserved = reserved_item_ids(study)
    by_item: dict[int, list[Rating]] = {}
    ratings = Rating.objects.filter(study=study, item__isnull=False, item__gold__isnull=True).exclude(
        rater_id__in=excluded
    ).exclude(item_id__in=reserved)
    for rating in ratings.only("item_id", "values", "answers"):
        by_item.setdefault(rating.item_id, []).append(rating)
    candidates = []
    items = Item.objects.in_bulk([pk for pk, rs in by_item.items() if len(rs) >= min_raters])
    for pk in sorted(items):
        group = by_item[pk]
        first = group[0]
        if all(r.values == first.values and r.answers == first.answers for r in group):
            candidates.append(GoldCandidate(items[pk], first.values, first.answers, len(group)))
    return candidates


def _comparison_candidates(study: Study, excluded: set[int], min_raters: int) -> list[GoldCandidate]:
    by_comparison: dict[int, list[str]] = {}
    ratings = Rating.objects.filter(study=study, comparison__isnull=False, comparison__gold__isnull=True).exclude(
        rater_id__in=excluded)
    for comparison_id, values in ratings.values_list("comparison_id", "values"):
        by_comparison.setdefault(comparison_id, []).append(values.get("preference"))
    unanimous = {pk: prefs[0] for pk, prefs in by_comparison.items() if len(prefs) >= min_raters and len(set(prefs)) == 1}
    comparisons = Comparison.objects.select_related("item_a__instance", "item_a__gen_model", "item_b__gen_model").in_bulk(
        list(unanimous))
    return [GoldCandidate(comparisons[pk], {"preference": unanimous[pk]}, {}, len(by_comparison[pk]))
            for pk in sorted(comparisons)]


@transaction.atomic
def comparison_gold_confirm(*, study: Study, comparison: Comparison, actor, min_raters: int = 3) -> ComparisonGold:
    """Turn a unanimous comparison of a pairwise pilot into gold, re-checking the consensus."""
    if comparison.study_id != study.pk:
        raise QualificationRefused("That comparison belongs to another study")
    candidate = next((c for c in gold_candidates(study, min_raters=min_raters) if c.item.pk == comparison.pk), None)
    if candidate is None:
        raise QualificationRefused("The raters no longer agree unanimously on this comparison (or it is already gold)")
    who = getattr(actor, "username", "a researcher")
    return ComparisonGold.objects.create(
        comparison=comparison, preference=candidate.values["preference"],
        note=f"From the unanimous answers of {candidate.raters} raters; confirmed by {who}",
    )


@transaction.atomic
def gold_confirm(*, study: Study, item: Item, actor, tolerance: float = 0.0, min_raters: int = 3) -> GoldAnswer:
    """Turn a consensus candidate into gold, re-checking that the consensus still holds."""
    if item.study_id != study.pk:
        raise QualificationRefused("That item belongs to another study")
    if tolerance < 0:
        raise QualificationRefused("The tolerance cannot be negative")
    candidate = next((c for c in gold_candidates(study, min_raters=min_raters) if c.item.pk == item.pk), None)
    if candidate is None:
        raise QualificationRefused("The raters no longer agree unanimously on this item (or it is already gold)")
    who = getattr(actor, "username", "a researcher")
    return GoldAnswer.objects.create(
        item=item,
        values=candidate.values,
        answers=candidate.answers,
        tolerance=tolerance,
        note=f"From the unanimous answers of {candidate.raters} raters; confirmed by {who}",
    )
