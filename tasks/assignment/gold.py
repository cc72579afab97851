"""Hidden gold and attention checks in a rater's queue: which gold unit or check is due next.

The assignment engine (:mod:`tasks.assignment`) asks these after each batch it claims and slots
what they pick into the batch (``quality_slots_insert``): a share ``gold_share`` (study protocol
settings) of a rater's screens are gold, a gold item on one-item screens (:func:`gold_slot_item`),
a whole gold trial on EvalMi trials (:func:`gold_slot_trial`, an instance whose items all have gold
answers), a gold comparison in pairwise studies (:func:`gold_slot_comparison`); an attention check
comes once the rater's queue reaches its ``after_items``. Scoring gold and attention answers is
the raters app's business (:mod:`raters.gold`).
"""

from __future__ import annotations

import random

from django.db.models import Exists, OuterRef, Q

from analysis.science import protocols
from raters.gold import qualification_items, reserved_item_ids
from raters.models import AttentionCheck, QualificationAnswer, QualityPolicy, Rater
from tasks.models import Assignment, Comparison, ComparisonGold, Item, Rating, Study


def hidden_gold_pool(study: Study) -> list[int]:
    """Gold items for hidden gold: all gold items except attention checks and, when other gold
    exists, the qualification items (a rater would recognise those)."""
    gold = list(
        Item.objects.filter(study=study, gold__isnull=False).exclude(pk__in=reserved_item_ids(study)).order_by("pk")
        .values_list("pk", flat=True)
    )
    policy = QualityPolicy.for_study(study)
    if policy.qualification_required:
        test = {item.pk for item in qualification_items(study, policy)}
        rest = [pk for pk in gold if pk not in test]
        if rest:
            return rest
    return gold


def trial_size(study: Study) -> int:
    """Items on one screen: ``images_per_trial`` for EvalMi, else 1."""
    if study.protocol == protocols.EVALMI:
        return int(study.protocol_settings.get("images_per_trial", 1))
    return 1


def gold_slot_due(*, rater: Rater, study: Study) -> bool:
    """Whether the rater's next screen should be a gold screen (a gold item, or a gold trial).

    Keeps gold screens / (gold + other screens) at ``gold_share``: with n other screens the rater
    should have floor(n * share / (1 - share) + phase) gold screens, where the phase in [0, 1) is
    seeded per rater, so the running count is never off by a whole screen and gold does not come
    at fixed positions for everyone. Screens are counted, not items: a trial of three is one.
    """
    share = float(study.protocol_settings.get("gold_share", 0.0))
    if share <= 0:
        return False
    if study.protocol == protocols.PAIRWISE:
        mine = Assignment.objects.filter(rater=rater, study=study, comparison__isnull=False).exclude(
            state=Assignment.State.EXPIRED)
        is_gold = Q(comparison__gold__isnull=False)
    else:
        mine = Assignment.objects.filter(rater=rater, study=study, item__isnull=False).exclude(
            state=Assignment.State.EXPIRED
        ).exclude(item__attention_check__isnull=False)
        is_gold = Q(item__gold__isnull=False)
    screens = set(mine.values_list("position", flat=True))
    gold = set(mine.filter(is_gold).values_list("position", flat=True))
    other = len(screens - gold)
    phase = random.Random(f"gold:{study.pk}:{rater.pk}").random()
    return len(gold) < int(other * share / (1 - share) + phase)


def _seen_item_ids(rater: Rater, study: Study) -> set[int]:
    seen = set(Assignment.objects.filter(rater=rater, study=study).values_list("item_id", flat=True))
    seen |= set(QualificationAnswer.objects.filter(attempt__rater=rater, attempt__study=study).values_list("item_id", flat=True))
    seen.discard(None)
    return seen


def gold_slot_item(*, rater: Rater, study: Study) -> Item | None:
    """The gold item to slot in next on a one-item screen, or None (not due, or the rater has
    seen every gold item). The engine assigns it like any other item (same Assignment, same
    page, same timing)."""
    if not gold_slot_due(rater=rater, study=study):
        return None
    seen = _seen_item_ids(rater, study)
    pool = [pk for pk in hidden_gold_pool(study) if pk not in seen]
    if not pool:
        return None
    pick = random.Random(f"pick:{study.pk}:{rater.pk}:{len(seen)}").choice(pool)
    return Item.objects.get(pk=pick)


def gold_slot_comparison(*, rater: Rater, study: Study) -> Comparison | None:
    """The gold comparison to slot in next in a pairwise study, or None (not due, or the rater has
    had every gold comparison). The engine shows it like any other comparison (same assignment,
    sides drawn at random, same page)."""
    if not gold_slot_due(rater=rater, study=study):
        return None
    seen = set(Assignment.objects.filter(rater=rater, study=study, comparison__isnull=False)
               .values_list("comparison_id", flat=True))
    seen |= set(Rating.objects.filter(rater=rater, study=study, comparison__isnull=False)
                .values_list("comparison_id", flat=True))
    pool = [pk for pk in ComparisonGold.objects.filter(comparison__study=study).order_by("comparison_id")
            .values_list("comparison_id", flat=True) if pk not in seen]
    if not pool:
        return None
    pick = random.Random(f"pick:{study.pk}:{rater.pk}:{len(seen)}").choice(pool)
    return Comparison.objects.get(pk=pick)


def gold_trial_pool(study: Study) -> dict[int, list[int]]:
    """Gold instances of a trial study: instance id -> its gold item ids (hidden-gold pool only).

    A gold trial must look like any trial, so an instance is gold only when it can fill a whole
    screen with gold items: at least ``images_per_trial`` of them, or all of its items when it has
    fewer (a normal trial of such an instance would show as many).
    """
    size = trial_size(study)
    pool = set(hidden_gold_pool(study))
    gold: dict[int, list[int]] = {}
    totals: dict[int, int] = {}
    for pk, instance_id in Item.objects.filter(study=study).order_by("pk").values_list("pk", "instance_id"):
        totals[instance_id] = totals.get(instance_id, 0) + 1
        if pk in pool:
            gold.setdefault(instance_id, []).append(pk)
    return {i: pks for i, pks in gold.items() if len(pks) >= min(size, totals[i])}


def gold_slot_trial(*, rater: Rater, study: Study) -> list[Item]:
    """The items of the gold trial to slot in next (empty when none is due or left).

    The rater never gets a gold trial of an instance they have seen (in work or qualification):
    the repeated prompt would give it away. Items are drawn and ordered at random (seeded), as the
    engine does for a normal trial.
    """
    if not gold_slot_due(rater=rater, study=study):
        return []
    seen = _seen_item_ids(rater, study)
    seen_instances = set(Item.objects.filter(pk__in=seen).values_list("instance_id", flat=True))
    pool = {i: pks for i, pks in gold_trial_pool(study).items() if i not in seen_instances}
    if not pool:
        return []
    rng = random.Random(f"trial:{study.pk}:{rater.pk}:{len(seen)}")
    pks = list(pool[rng.choice(sorted(pool))])
    rng.shuffle(pks)
    chosen = pks[: trial_size(study)]
    items = Item.objects.in_bulk(chosen)
    return [items[pk] for pk in chosen]


def attention_check_due(rater: Rater, study: Study) -> AttentionCheck | None:
    """An attention check whose ``after_items`` is reached by the rater's queue (done or leased)."""
    done_or_leased = Assignment.objects.filter(rater=rater, study=study).exclude(
        state=Assignment.State.EXPIRED
    ).count()
    assigned = Assignment.objects.filter(rater=rater, study=study, item=OuterRef("item"))
    check = (
        AttentionCheck.objects.filter(study=study, after_items__lte=done_or_leased)
        .exclude(Exists(assigned))
        .select_related("item")
        .order_by("after_items", "pk")
        .first()
    )
    return check
