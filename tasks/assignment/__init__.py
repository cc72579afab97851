"""The assignment engine: which screen a rater sees next, claimed safely under concurrency.

A *screen* is what one page shows: one item (ImagenHub), a trial of up to three items of one
instance from different models (EvalMi), or one comparison (pairwise). Its assignments share a
``position`` in the rater's queue; ``slot`` orders them on the screen.

Claims use a conditional UPDATE on the unit's ``claims`` counter (``claims < raters_per_item``)
so the quota holds with any number of web workers, on PostgreSQL and on SQLite alike. A session's
units are claimed in one transaction (``_claim_units``) that locks them in ascending pk order, so
two raters claiming at once never deadlock (random orders would); each claim and its assignment
commit together, so a batch cut short by an error leaves nothing half-way.

Leases: live assignments of a rater are extended when a screen is shown (at most every
``TOUCH_EVERY``); when a rater stays
away longer than ``ASSIGNMENT_LEASE_SECONDS`` their leased (unrated) assignments expire and the
units return to the pool. Expiry is swept when someone claims new work (the only moment a free
unit matters), not on every request: until then a late rater simply keeps their screens. A
returning rater gets back the expired units that still have room.

Gold items (``item.gold`` exists), gold comparisons and attention-check items never enter the
normal pool: after each batch ``quality_slots_insert`` places them into the rater's queue with
``screen_insert`` (``comparison_insert``), outside the quota (a gold EvalMi trial is one screen of
several gold items); what is due when is decided in ``tasks.assignment.gold``.
"""

from __future__ import annotations

import math
import random
import secrets
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone as dt_timezone

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Case, Count, Exists, F, Max, Min, OuterRef, Q, Subquery, Value, When
from django.utils import timezone

from raters.gold import may_work
from raters.models import AttentionCheck, Rater, RaterStanding
from analysis.science import protocols
from tasks import sql
from tasks.assignment import adaptive
from tasks.assignment.gold import attention_check_due, gold_slot_comparison, gold_slot_item, gold_slot_trial, trial_size
from tasks.models import (
    RANK_RANGE,
    Assignment,
    Comparison,
    ComparisonGold,
    GoldAnswer,
    Item,
    Participation,
    Rating,
    Study,
)

LIVE = (Assignment.State.LEASED, Assignment.State.DONE)


class AssignmentUnavailable(Exception):
    """The rater cannot get work in this study; the message says why (shown to the rater)."""


@dataclass
class Screen:
    """One page of work: ``number`` of ``total`` screens in the rater's queue (1-based)."""

    study: Study
    position: int
    number: int
    total: int
    assignments: list[Assignment]
    back: int | None = None  # the live positions just before and after this one (None at the ends)
    following: int | None = None
    following_assignments: list[Assignment] | None = None  # the next screen's, for preloading its images
    next_leased: int | None = None  # after a submit: the rater's earliest screen still leased (None: session over)
    # When the rater last stored or changed a rating in the study (None: never), read with the
    # units of a screen got for a submit (``place=False``): time on item never counts from before it.
    previous_submit: datetime | None = None
    previous_submit_known: bool = False

    @property
    def is_done(self) -> bool:
        return all(a.state == Assignment.State.DONE for a in self.assignments)

    @property
    def items(self) -> list[Item]:
        return [a.item for a in self.assignments if a.item_id]

    @property
    def comparison(self) -> Comparison | None:
        return self.assignments[0].comparison if self.assignments[0].comparison_id else None


def lease_length() -> timedelta:
    return timedelta(seconds=getattr(settings, "ASSIGNMENT_LEASE_SECONDS", 1800))


def first_lease_length() -> timedelta:
    """The lease of a rater who has not submitted anything in the study yet: short, so units held
    by ids that never rate (abandoned or fake) go back to the pool quickly. Never above the lease."""
    return min(timedelta(seconds=getattr(settings, "ASSIGNMENT_FIRST_LEASE_SECONDS", 600)), lease_length())


def _has_submitted(rater: Rater, study: Study):
    """Queryset that exists when the rater has finished at least one unit in the study."""
    return Assignment.objects.filter(rater=rater, study=study, state=Assignment.State.DONE)


def _leases_extend(*, rater: Rater, study: Study, now: datetime) -> datetime:
    """Extend the rater's leased units: by the full lease once they have submitted something, by
    the short first lease before (one UPDATE either way). Returns the shorter bound, a lower
    bound on what was set, for callers that keep leases in memory."""
    full, first = now + lease_length(), now + first_lease_length()
    Assignment.objects.filter(rater=rater, study=study, state=Assignment.State.LEASED).update(
        lease_expires_at=Case(When(Exists(_has_submitted(rater, study)), then=Value(full)), default=Value(first))
    )
    return first


def participation_get_or_create(*, rater: Rater, study: Study, crowd: dict | None = None) -> Participation:
    """The rater's participation in the study, created with a fresh random seed the first time.

    ``crowd`` parameters (e.g. a new Prolific SESSION_ID) replace the stored ones when given.
    """
    participation = Participation.objects.filter(rater=rater, study=study).first()
    if participation is None:
        try:
            with transaction.atomic():
                participation = Participation.objects.create(
                    rater=rater, study=study, seed=secrets.randbits(48), crowd=crowd or {}
                )
        except IntegrityError:  # a second tab created it meanwhile
            participation = Participation.objects.get(rater=rater, study=study)
    elif crowd and crowd != participation.crowd:
        participation.crowd = {**participation.crowd, **crowd}
        participation.save(update_fields=["crowd"])
    return participation




def participation_of(*, slug: str, rater_id: int | None = None, user_id: int | None = None) -> Participation | None:
    """The participation in the study ``slug`` of rater ``rater_id`` (a crowd browser) or of the
    rater of user ``user_id`` (a login; its lowest rater id if several), in one statement, with its
    rater, study, the study's quality policy and ``participation.standing`` (an unsaved pending
    RaterStanding when nobody decided yet); None when that rater has not entered the study."""
    who = "rater" if rater_id is not None else "user"
    with connection.cursor() as cursor:
        cursor.execute(sql.participation(who), {"slug": slug, "who": rater_id if who == "rater" else user_id})
        row = cursor.fetchone()
    if row is None:
        return None
    participation = sql.PARTICIPATION.read(row)["p"]
    participation.standing = RaterStanding(study=participation.study, rater=participation.rater,
                                           state=row[sql.PARTICIPATION.width] or RaterStanding.State.PENDING)
    return participation


def _unit_model(assignment: Assignment):
    return (Item, assignment.item_id) if assignment.item_id else (Comparison, assignment.comparison_id)


def _take(model, pk: int, quota: int) -> bool:
    """Conditional UPDATE: one more claim on the unit unless it already has ``quota``."""
    return model.objects.filter(pk=pk, claims__lt=quota).update(claims=F("claims") + 1) == 1


def _take_many(model, pks: list[int], quota: int) -> set[int]:
    """``_take`` for several units at once; the pks that got their claim.

    PostgreSQL: one statement that locks the candidate rows in ascending pk order (so concurrent
    claimers never deadlock) and adds a claim to those still under ``quota`` (rechecked on the
    locked row, so the quota holds). Elsewhere (SQLite, which serialises writers anyway): one
    conditional UPDATE per unit, in the same order.
    """
    if connection.vendor != "postgresql":
        return {pk for pk in sorted(pks) if _take(model, pk, quota)}
    with connection.cursor() as cursor:
        cursor.execute(sql.take_many(model), [sorted(pks), quota, quota])
        return {row[0] for row in cursor.fetchall()}


def _release(model, pk: int) -> None:
    model.objects.filter(pk=pk, claims__gt=0).update(claims=F("claims") - 1)


def assignments_expire(*, study: Study, now: datetime | None = None) -> int:
    """Expire leased assignments past their lease and give their units back; return how many."""
    now = now or timezone.now()
    stale = Assignment.objects.filter(study=study, state=Assignment.State.LEASED, lease_expires_at__lt=now)
    expired = 0
    for assignment in stale.only("pk", "item_id", "comparison_id"):
        with transaction.atomic():
            # Conditional: a rating submitted meanwhile (state DONE) keeps its claim.
            won = Assignment.objects.filter(
                pk=assignment.pk, state=Assignment.State.LEASED, lease_expires_at__lt=now
            ).update(state=Assignment.State.EXPIRED)
            if won:
                _release(*_unit_model(assignment))
                expired += 1
    return expired


def _revive_own(*, rater: Rater, study: Study, lease_until: datetime) -> int:
    """Give a returning rater back their expired units that still have room."""
    revived = 0
    for assignment in Assignment.objects.filter(rater=rater, study=study, state=Assignment.State.EXPIRED):
        with transaction.atomic():
            won = Assignment.objects.filter(pk=assignment.pk, state=Assignment.State.EXPIRED).update(
                state=Assignment.State.LEASED, lease_expires_at=lease_until
            )
            if not won:
                continue
            if not _take(*_unit_model(assignment), study.raters_per_item):
                transaction.set_rollback(True)
                continue
            revived += 1
    return revived


def _claim_units(*, model, candidates: list[int], need: int, quota: int, build) -> list[int]:
    """Claim up to ``need`` units of ``candidates`` (pks, best first); return the pks won, best first.

    ``build(pk, n)`` makes the unsaved Assignment of the n-th unit won (n from 0). Candidates go in
    chunks of what is still needed; a chunk is one transaction that takes its units in ascending
    pk order (conditional UPDATEs, so the quota holds) and inserts their assignments at once:
    every claimer locks rows in the same order, so concurrent claims never deadlock, and a claim
    never exists without its assignment. On PostgreSQL a chunk's claims are one statement.
    """
    won: list[int] = []
    queue = list(candidates)
    while len(won) < need and queue:
        chunk, queue = queue[: need - len(won)], queue[need - len(won):]
        try:
            with transaction.atomic():
                taken = _take_many(model, chunk, quota)
                ordered = [pk for pk in chunk if pk in taken]
                Assignment.objects.bulk_create([build(pk, len(won) + n) for n, pk in enumerate(ordered)])
        except IntegrityError:  # another tab of this rater holds one of them: take them one by one
            ordered = []
            for pk in chunk:
                try:
                    with transaction.atomic():
                        if _take(model, pk, quota):
                            build(pk, len(won) + len(ordered)).save()
                            ordered.append(pk)
                except IntegrityError:
                    continue
        won += ordered
    return won


def _next_position(rater: Rater, study: Study) -> int:
    top = Assignment.objects.filter(rater=rater, study=study).aggregate(top=Max("position"))["top"]
    return 0 if top is None else top + 1


def _least_claimed_first(rows: list[tuple], rng: random.Random) -> list[tuple]:
    """Random order, then least-claimed first (rows are (pk, claims, ...)): balanced overlap."""
    rows = list(rows)
    rng.shuffle(rows)
    return sorted(rows, key=lambda row: row[1])  # stable: ties keep the random order


def _seen_items(rater: Rater):
    """Items the rater has (had) an assignment for or already rated (e.g. through the API): a
    leased unit then never has a rating yet, which the submit relies on."""
    return Q(pk__in=Assignment.objects.filter(rater=rater, item__isnull=False).values("item_id")) | Q(
        pk__in=Rating.objects.filter(rater=rater, item__isnull=False).values("item_id"))


def _claim_items(*, rater, study, rng, position, lease_until) -> int:
    quota = study.raters_per_item
    seen = _seen_items(rater)
    whole_set = study.assignment_mode == Study.AssignmentMode.WHOLE_SET  # only item screens come here
    if not whole_set:
        # NOT EXISTS, not the LEFT JOINs of gold__isnull: an anti-join keeps the index order.
        free = Item.objects.filter(~Exists(GoldAnswer.objects.filter(item=OuterRef("pk"))),
                                   ~Exists(AttentionCheck.objects.filter(item=OuterRef("pk"))),
                                   study=study, claims__lt=quota).exclude(seen)
        if study.assignment_mode == Study.AssignmentMode.ADAPTIVE:  # the study's priority list
            return adaptive.claim(
                study=study, model=Item, free=free, screens=study.units_per_session,
                build=lambda pk, screen, slot: Assignment(study=study, rater=rater, item_id=pk, position=position + screen,
                                                          slot=slot, lease_expires_at=lease_until))
        return _claim_by_rank(
            model=Item, free=free, need=study.units_per_session, quota=quota, rng=rng,
            build=lambda pk, n: Assignment(study=study, rater=rater, item_id=pk, position=position + n, slot=0,
                                           lease_expires_at=lease_until),
        )
    pool = list(
        Item.objects.filter(study=study, gold__isnull=True, attention_check__isnull=True, claims__lt=quota)
        .exclude(seen)
        .values_list("pk", "claims", "instance_id", "gen_model_id")
    )

    def build(pk: int, n: int) -> Assignment:
        return Assignment(study=study, rater=rater, item_id=pk, position=position + n, slot=0,
                          lease_expires_at=lease_until)

    if whole_set:
        by_model: dict[int, list[tuple]] = defaultdict(list)
        for row in pool:
            by_model[row[3]].append(row)
        models = [(model_id, min(r[1] for r in rows)) for model_id, rows in by_model.items()]
        for model_id, _ in _least_claimed_first(models, rng):
            rows = by_model[model_id]
            rng.shuffle(rows)
            won = _claim_units(model=Item, candidates=[r[0] for r in rows], need=len(rows), quota=quota, build=build)
            if won:
                return len(won)
        return 0
    candidates = [row[0] for row in _least_claimed_first(pool, rng)]
    return len(_claim_units(model=Item, candidates=candidates, need=study.units_per_session, quota=quota, build=build))


def _free_by_rank(*, free, rng: random.Random, quota: int, page: int):
    """Pages of (pk, claims) of ``free`` (units under quota, not seen by the rater): least claimed first,
    and within one claim count in the order of the units' random ``rank`` from a random start,
    wrapping round. Each page is a keyset read of the (study, claims, rank) index, so a claim
    reads about what it takes (O(batch)), not the study's whole free pool, and nothing sorts the
    pool. Units claimed meanwhile (by anyone) are skipped or refused by the claim itself."""
    start = rng.randrange(RANK_RANGE)
    for claims in range(quota):
        level = free.filter(claims=claims)
        for part in (Q(rank__gte=start), Q(rank__lt=start)):
            after = None
            while True:
                # Keyset on rank alone (the index order): units sharing a rank with a page's
                # last one (1 in 2^31 a pair) are skipped by this claim, not lost to the pool.
                rows = level.filter(part) if after is None else level.filter(part, rank__gt=after)
                found = list(rows.order_by("rank").values_list("pk", "rank")[:page])
                if not found:
                    break
                yield [(pk, claims) for pk, _ in found]
                if len(found) < page:
                    break
                after = found[-1][1]


def _claim_by_rank(*, model, free, need: int, quota: int, rng: random.Random, build) -> int:
    """Claim ``need`` units of ``free`` in ``_free_by_rank`` order; how many were won. Pages are
    gathered until they cover what is still needed (a page cut short by the wrap round or by the
    end of a claim level is topped up from the next), so a session is usually one claim. The
    gathered units are shuffled with ``rng`` within each claim count: rank order is the same for
    every rater, the order of a rater's screens must not be."""
    won: list[int] = []
    pages = _free_by_rank(free=free, rng=rng, quota=quota, page=2 * need + 8)
    exhausted = False
    while len(won) < need and not exhausted:
        gathered: list[tuple[int, int]] = []
        while len(gathered) < need - len(won):
            page = next(pages, None)
            if page is None:
                exhausted = True
                break
            gathered += page
        candidates = [pk for pk, _ in _least_claimed_first(gathered, rng)]
        if candidates:
            won += _claim_units(model=model, candidates=candidates, need=need - len(won), quota=quota,
                                build=lambda pk, n, first=len(won): build(pk, first + n))
    return len(won)


def _claim_trials(*, rater, study, rng, position, lease_until) -> int:
    """EvalMi: each screen shows up to ``images_per_trial`` items of one instance, models drawn at random."""
    per_trial = study.protocol_settings["images_per_trial"]
    quota = study.raters_per_item
    seen = _seen_items(rater)
    pool = Item.objects.filter(study=study, gold__isnull=True, attention_check__isnull=True, claims__lt=quota).exclude(seen)
    if study.assignment_mode == Study.AssignmentMode.ADAPTIVE:  # listed units of one instance form a trial
        return adaptive.claim(
            study=study, model=Item, free=pool, screens=study.units_per_session, per_screen=per_trial,
            group="instance_id",
            build=lambda pk, screen, slot: Assignment(study=study, rater=rater, item_id=pk, position=position + screen,
                                                      slot=slot, lease_expires_at=lease_until))
    by_instance: dict[int, list[tuple]] = defaultdict(list)
    for row in pool.values_list("pk", "claims", "instance_id"):
        by_instance[row[2]].append(row)
    instances = [(instance_id, min(r[1] for r in rows)) for instance_id, rows in by_instance.items()]
    screens = 0
    for instance_id, _ in _least_claimed_first(instances, rng):
        if screens >= study.units_per_session:
            break
        at = position + screens
        won = _claim_units(
            model=Item, candidates=[r[0] for r in _least_claimed_first(by_instance[instance_id], rng)],
            need=per_trial, quota=quota,
            build=lambda pk, n, at=at: Assignment(study=study, rater=rater, item_id=pk, position=at, slot=n,
                                                  lease_expires_at=lease_until),
        )
        if won:
            screens += 1
    return screens


def _claim_comparisons(*, rater, study, rng, position, lease_until) -> int:
    seen = Assignment.objects.filter(rater=rater, comparison__isnull=False).values("comparison_id")
    rated = Rating.objects.filter(rater=rater, comparison__isnull=False).values("comparison_id")
    free = (Comparison.objects.filter(~Exists(ComparisonGold.objects.filter(comparison=OuterRef("pk"))),
                                      study=study, claims__lt=study.raters_per_item)
            .exclude(pk__in=seen).exclude(pk__in=rated))

    def build(pk: int, n: int) -> Assignment:
        left = rng.choice("AB")  # sides randomised per rater and recorded
        return Assignment(study=study, rater=rater, comparison_id=pk, position=position + n, slot=0,
                          presentation={"left": left}, lease_expires_at=lease_until)

    if study.assignment_mode == Study.AssignmentMode.ADAPTIVE:  # the study's priority list of comparisons
        return adaptive.claim(study=study, model=Comparison, free=free, screens=study.units_per_session,
                              build=lambda pk, screen, slot: build(pk, screen))
    return _claim_by_rank(model=Comparison, free=free, need=study.units_per_session, quota=study.raters_per_item,
                          rng=rng, build=build)


# How a session claims its units, by what one screen holds (Protocol.screen_kind).
CLAIMS = {protocols.ITEM: _claim_items, protocols.TRIAL: _claim_trials, protocols.COMPARISON: _claim_comparisons}


def _session_need(study: Study) -> int:
    """Units one session claims (balanced mode; a whole-set session is counted as one of these)."""
    return study.units_per_session * study.protocol_def.images_per_screen(study.protocol_settings)


NEWCOMER_SESSIONS_FREE = 5


def _newcomers_may_claim(*, study: Study, now: datetime) -> bool:
    """Whether a rater who has not submitted anything may claim a session now.

    Raters with nothing submitted (new, or ids that never rate) may together lease at most
    ``CROWD_NEWCOMER_SHARE_PERCENT`` of the study's open units: the units still taking claims plus
    the ones they hold, and always ``NEWCOMER_SESSIONS_FREE`` sessions' worth (so a small study,
    or the first raters of any, can start). So a swarm of fresh crowd ids cannot lock a study;
    raters who have rated are never held back by it. Cost: counting those raters' leases, and counting the open units
    only up to the number that would make room (an index range, not the pool).
    """
    share = getattr(settings, "CROWD_NEWCOMER_SHARE_PERCENT", 50) / 100
    if share >= 1 or first_lease_length() >= lease_length():
        return True
    # Their leases are the ones no longer than a first lease: raters who have submitted hold full
    # ones (extended every few minutes while they work), so this counts newcomers' units plus
    # those of raters gone quiet for most of a lease, which lapse soon anyway. One range of the
    # partial lease index, whatever the planner knows: joining every lease to the rater's done
    # units instead took 95 ms at 400 leases on a freshly filled table.
    held = Assignment.objects.filter(study=study, state=Assignment.State.LEASED,
                                     lease_expires_at__lte=now + first_lease_length()).count()
    if held + _session_need(study) <= NEWCOMER_SESSIONS_FREE * _session_need(study):
        return True
    # held + need <= share * (open + held)  <=>  open >= (held + need) / share - held
    wanted = math.ceil((held + _session_need(study)) / share - held)
    units = Comparison if study.protocol_def.unit_kind == protocols.COMPARISON else Item
    open_units = units.objects.filter(study=study, claims__lt=study.raters_per_item).order_by()  # no Meta ordering joins
    return open_units[:wanted].count() >= wanted


def assignment_batch_claim(*, rater: Rater, study: Study, now: datetime | None = None,
                           participation: Participation | None = None, checked: bool = False) -> int:
    """Claim the rater's next session of screens; return how many screens were claimed.

    Balanced mode: ``units_per_session`` screens, least-claimed units first. Whole-set mode
    (ImagenHub): every unrated item of one model. The order is shuffled with a generator seeded
    by (participation seed, batch number), and recorded as assignment positions. Stale leases in
    the study are expired first, so their units are free to claim. ``checked``: the caller has
    just run ``may_work`` for this rater (skips a second check).

    Against hoarding, raises AssignmentUnavailable (claiming nothing) while the rater still has a
    leased unit in the study (one open session at a time), and for a rater who has not submitted
    anything when such raters already hold their share of the study (``_newcomers_may_claim``);
    that rater's session gets the short first lease.
    """
    if not checked:  # a participation read with the standing (``participation_of``) saves a query
        _check_can_rate(rater, study, standing=getattr(participation, "standing", None))
    now = now or timezone.now()
    assignments_expire(study=study, now=now)
    participation = participation or participation_get_or_create(rater=rater, study=study)
    mine = Assignment.objects.filter(rater=rater, study=study).aggregate(
        top=Max("position"), leased=Count("pk", filter=Q(state=Assignment.State.LEASED)),
        done=Count("pk", filter=Q(state=Assignment.State.DONE)))
    if mine["leased"]:  # one open session per rater: no hoarding by asking again and again
        raise AssignmentUnavailable("Rate the screens you have before asking for more.")
    if not mine["done"] and not _newcomers_may_claim(study=study, now=now):
        raise AssignmentUnavailable("Many new raters are starting right now. Please try again in a few minutes.")
    batch = participation.batches
    # Only one request of this rater claims batch n (two tabs, double clicks).
    if not Participation.objects.filter(pk=participation.pk, batches=batch).update(batches=batch + 1):
        return 0
    rng = random.Random(f"{participation.seed}:{batch}")
    # Until their first submit a rater's units lapse quickly (ids that never rate lock nothing long).
    lease = lease_length() if mine["done"] else first_lease_length()
    kwargs = {"rater": rater, "study": study, "rng": rng, "position": 0 if mine["top"] is None else mine["top"] + 1,
              "lease_until": now + lease}
    claimed = CLAIMS[study.protocol_def.screen_kind](**kwargs)
    if not claimed:  # nothing left: let a later call try again
        Participation.objects.filter(pk=participation.pk, batches=batch + 1).update(batches=batch)
    else:  # hidden gold and due attention checks go into the batch as ordinary assignments
        quality_slots_insert(rater=rater, study=study, first_position=kwargs["position"], screens=claimed)
    return claimed


def screen_insert(*, rater: Rater, study: Study, items: list[Item], position: int | None = None,
                  now: datetime | None = None) -> list[Assignment]:
    """Place a whole screen (one item, or an EvalMi trial of several) at ``position``, outside the quota.

    The items take slots 0, 1, … in the order given, exactly as a claimed trial does, so a gold
    trial is one ordinary screen. Later screens move back by one; default position: after the
    last screen. Raises AssignmentUnavailable (and inserts nothing) when an item belongs to
    another study or the rater already has one of them.
    """
    now = now or timezone.now()
    if not items:
        raise AssignmentUnavailable("A screen needs at least one item")
    if any(item.study_id != study.pk for item in items):
        raise AssignmentUnavailable("The item belongs to another study")
    with transaction.atomic():
        if Assignment.objects.filter(rater=rater, item__in=items).exists():
            raise AssignmentUnavailable("The rater already has this item")
        if position is None:
            position = _next_position(rater, study)
        else:
            Assignment.objects.filter(rater=rater, study=study, position__gte=position).update(
                position=F("position") + 1
            )
        return [
            Assignment.objects.create(study=study, rater=rater, item=item, position=position, slot=slot,
                                      lease_expires_at=now + lease_length())
            for slot, item in enumerate(items)
        ]


def comparison_insert(*, rater: Rater, study: Study, comparison: Comparison, left: str, position: int,
                      now: datetime | None = None) -> Assignment:
    """Place ``comparison`` (a gold comparison) into the rater's queue at ``position``, outside the
    quota, shown with ``left`` ("A" or "B") on the left, as a claimed comparison is. Later screens
    move back by one. Raises AssignmentUnavailable when the rater already has it."""
    now = now or timezone.now()
    if comparison.study_id != study.pk:
        raise AssignmentUnavailable("The comparison belongs to another study")
    with transaction.atomic():
        if Assignment.objects.filter(rater=rater, comparison=comparison).exists():
            raise AssignmentUnavailable("The rater already has this comparison")
        Assignment.objects.filter(rater=rater, study=study, position__gte=position).update(position=F("position") + 1)
        return Assignment.objects.create(study=study, rater=rater, comparison=comparison, position=position, slot=0,
                                         presentation={"left": left}, lease_expires_at=now + lease_length())


def _check_can_rate(rater: Rater, study: Study, standing: RaterStanding | None = None) -> None:
    if not study.is_open:
        raise AssignmentUnavailable(f"This study is {study.get_state_display().lower()}; it takes no ratings now.")
    allowed, why = may_work(rater=rater, study=study, standing=standing)  # active, not paused/rejected here, qualified
    if not allowed:
        raise AssignmentUnavailable(why)


def _live(rater: Rater, study: Study):
    return Assignment.objects.filter(rater=rater, study=study, state__in=LIVE)


def screen_at(*, rater: Rater, study: Study, position: int, place: bool = True) -> Screen | None:
    """The rater's screen at ``position`` (leased or done), or None if there is none.

    With ``place`` (the default) the screen also knows where it is in the queue (``number`` of
    ``total``, the positions ``back`` and ``following``) and the following screen's assignments
    (to preload its images): two queries in all. Without, ``number`` and ``total`` stay 0 until
    ``screen_place``. Each unit comes with its image, instance, gold answer and attention check
    (server side only; pages never show gold), so building and submitting the screen reads
    nothing more per unit.
    """
    if study.protocol_def.unit_kind != protocols.COMPARISON:
        return _item_screen_at(rater=rater, study=study, position=position, place=place)
    stats = _place(rater, study, position) if place else {}
    wanted = [position] + ([stats["following"]] if stats.get("following") is not None else [])
    # Only the joins this protocol's screens use: PostgreSQL plans every join (about 0.15 ms each).
    related = ("comparison__item_a__image", "comparison__item_b__image", "comparison__item_a__instance",
               "comparison__gold")
    live = _live(rater, study).filter(position__in=wanted).select_related(*related).order_by("position", "slot")
    if not place:  # a submit's screen: also the rater's previous submit in the study (bounds time on item)
        live = live.annotate(previous_submit=Subquery(
            Rating.objects.filter(rater=rater, study=study).order_by().values("rater_id")
            .annotate(last=Max("updated_at")).values("last")))
    assignments = list(live)
    for assignment in assignments:  # the caller's objects: no lazy loads of these later
        assignment.study, assignment.rater = study, rater
        assignment.comparison.study = study  # pairwise screens hold comparisons only
    shown = [a for a in assignments if a.position == position]
    if not shown:
        return None
    screen = Screen(study=study, position=position, number=0, total=0, assignments=shown)
    if not place:
        screen.previous_submit, screen.previous_submit_known = shown[0].previous_submit, True
    if place:
        _set_place(screen, stats)
        screen.following_assignments = [a for a in assignments if a.position != position]
    return screen


def _item_screen_at(*, rater: Rater, study: Study, position: int, place: bool) -> Screen | None:
    """``screen_at`` for item studies (ImagenHub, EvalMi): one statement, place included."""
    with connection.cursor() as cursor:
        cursor.execute(sql.item_screen(place), {"rater": rater.pk, "study": study.pk, "position": position})
        rows = cursor.fetchall()
    start = 4 if place else 0
    assignments = []
    for row in rows:
        assignment = sql.ITEM_SCREEN.read(row, start)["a"]
        if assignment is None:  # no live unit at all (the place row alone)
            continue
        assignment.study, assignment.rater = study, rater  # the caller's objects: no lazy loads later
        assignment.item.study = study
        assignments.append(assignment)
    shown = [a for a in assignments if a.position == position]
    if not shown:
        return None
    screen = Screen(study=study, position=position, number=0, total=0, assignments=shown)
    if not place:
        screen.previous_submit, screen.previous_submit_known = _aware(rows[0][-1]), True
    if place and rows:
        total, before, back, following = rows[0][:4]
        _set_place(screen, {"total": total, "before": before, "back": back, "following": following})
        screen.following_assignments = [a for a in assignments if a.position != position]
    return screen


def _aware(value) -> datetime | None:
    """A timestamp read by raw SQL: aware, as the ORM gives it (SQLite returns text)."""
    if value is None or isinstance(value, datetime):
        return value if value is None or timezone.is_aware(value) else timezone.make_aware(value, dt_timezone.utc)
    return _aware(datetime.fromisoformat(str(value)))


def _place(rater: Rater, study: Study, position: int) -> dict:
    """Where ``position`` sits among the rater's live positions, in one aggregate query."""
    before, after = Q(position__lt=position), Q(position__gt=position)
    return _live(rater, study).aggregate(
        total=Count("position", distinct=True),
        before=Count("position", distinct=True, filter=before),
        back=Max("position", filter=before),
        following=Min("position", filter=after),
    )


def _set_place(screen: Screen, stats: dict) -> None:
    screen.number, screen.total = stats["before"] + 1, stats["total"]
    screen.back, screen.following = stats["back"], stats["following"]


def screen_place(*, rater: Rater, study: Study, screen: Screen) -> Screen:
    """Fill in ``number``, ``total``, ``back`` and ``following`` of a screen got with ``place=False``."""
    _set_place(screen, _place(rater, study, screen.position))
    return screen


def assignments_touch(*, rater: Rater, study: Study, now: datetime | None = None) -> None:
    """Extend the leases of the rater's open assignments: they are active (see ``_leases_extend``:
    a rater who has not submitted anything yet keeps only the short first lease)."""
    _leases_extend(rater=rater, study=study, now=now or timezone.now())


def next_position(*, rater: Rater, study: Study) -> int | None:
    """The position of the rater's earliest screen still leased (one query), or None."""
    return (
        Assignment.objects.filter(rater=rater, study=study, state=Assignment.State.LEASED)
        .order_by("position")
        .values_list("position", flat=True)
        .first()
    )


def assignment_next(*, rater: Rater, study: Study, now: datetime | None = None,
                    participation: Participation | None = None, checked: bool = False) -> Screen | None:
    """The rater's next screen to rate, or None when their session is finished.

    Gives the rater back their own expired units, claims the first session when the rater has
    none yet (expiring stale leases in the study first), extends the rater's leases and returns
    the earliest screen still leased. Raises AssignmentUnavailable for a closed study or an
    inactive rater. ``participation``: the rater's, when the caller has it; ``checked``: the
    caller has just run ``may_work``.
    """
    if not checked:
        _check_can_rate(rater, study)
    now = now or timezone.now()
    lease_until = now + lease_length()
    _revive_own(rater=rater, study=study, lease_until=lease_until)
    participation = participation or participation_get_or_create(rater=rater, study=study)
    if participation.batches == 0:
        assignment_batch_claim(rater=rater, study=study, now=now, participation=participation, checked=True)
    assignments_touch(rater=rater, study=study, now=now)
    first = next_position(rater=rater, study=study)
    if first is None:
        return None
    return screen_at(rater=rater, study=study, position=first)


# Leases are extended at most this often: a rater's leased rows (and the lease index) are then
# written once every few minutes, not on every screen. A lease thus runs out between
# ASSIGNMENT_LEASE_SECONDS - TOUCH_EVERY and ASSIGNMENT_LEASE_SECONDS after the last screen.
TOUCH_EVERY = timedelta(minutes=2)


def screen_shown(*, rater: Rater, screen: Screen, now: datetime | None = None) -> None:
    """A screen was rendered: its render time goes to the screen's assignments in memory (the page
    carries it back signed, ``tasks.rating_context.shown_stamp``, so time on item needs no write),
    and the rater's leases are extended unless that was done within ``TOUCH_EVERY`` (judged by
    this screen's own units). So showing a screen writes nothing, except one UPDATE every few
    minutes per rater."""
    now = now or timezone.now()
    # Every extension sets all of the rater's leased units to the same time, and a claim gives a
    # later one, so a recent lease on this screen's leased units means all the rater's leases are
    # recent. A rater who has not submitted yet holds only the short first lease, never that
    # recent: their leases are re-set to a short one on each screen until the first submit (one
    # UPDATE, which also finds out which kind of rater this is). A revisited screen has only done
    # units, whose lease time stayed as it was when completed (possibly a short first lease):
    # judged against the short bound, so going back over the first screens writes nothing.
    leased = [a for a in screen.assignments if a.state == Assignment.State.LEASED]
    until = now + (lease_length() if leased else first_lease_length())
    if not all(a.lease_expires_at and a.lease_expires_at > until - TOUCH_EVERY for a in leased or screen.assignments):
        first = _leases_extend(rater=rater, study=screen.study, now=now)
        for assignment in leased:
            assignment.lease_expires_at = first
    for assignment in screen.assignments:
        assignment.shown_at = now


def quality_slots_insert(*, rater: Rater, study: Study, first_position: int, screens: int) -> int:
    """Slot hidden gold (and due attention checks) into a batch the engine just claimed.

    ``first_position`` and ``screens``: where the batch starts in the rater's queue and how many
    screens it has. Gold screens and attention checks go to seeded random places inside the batch
    (a check not before its ``after_items``); both through :func:`screen_insert`, so they are
    ordinary assignments. What is due comes from :mod:`tasks.assignment.gold`.
    One-item screens (ImagenHub, EvalMi with one image per trial) take a gold item; EvalMi trials
    take a whole gold trial (a gold instance), since a lone gold image among normal ones would
    stand out by its different prompt. Returns how many screens were inserted.
    """
    rng = random.Random(f"slots:{study.pk}:{rater.pk}:{first_position}")
    pairwise = study.protocol_def.unit_kind == protocols.COMPARISON
    if pairwise:
        slot_units = lambda: [c] if (c := gold_slot_comparison(rater=rater, study=study)) else []  # noqa: E731
    elif trial_size(study) == 1:
        slot_units = lambda: [item] if (item := gold_slot_item(rater=rater, study=study)) else []  # noqa: E731
    else:
        slot_units = lambda: gold_slot_trial(rater=rater, study=study)  # noqa: E731
    inserted = 0
    while screens > 0:
        units = slot_units()
        if not units:
            break
        position = first_position + rng.randrange(screens + inserted + 1)
        try:
            if pairwise:  # sides drawn at random, as for every claimed comparison
                comparison_insert(rater=rater, study=study, comparison=units[0], left=rng.choice("AB"),
                                  position=position)
            else:
                screen_insert(rater=rater, study=study, items=units, position=position)
        except AssignmentUnavailable:
            break
        inserted += 1
    while screens > 0 and not pairwise:  # attention checks are items: not for pairwise queues
        check = attention_check_due(rater, study)
        if check is None:
            break
        # At a seeded random place in the batch, like gold (always last, it told a careless rater
        # the one screen to read), but not before its ``after_items`` place in the queue.
        end = first_position + screens + inserted
        position = rng.randint(min(max(first_position, check.after_items), end), end)
        try:
            screen_insert(rater=rater, study=study, items=[check.item], position=position)
        except AssignmentUnavailable:
            break
        inserted += 1
    return inserted
