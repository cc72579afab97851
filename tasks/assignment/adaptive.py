"""Adaptive assignment: claims take units from the study's current priority list, recomputed from
the ratings so far, and every recomputation is recorded (issue #17).

The list. :func:`recompute` reads the study's ratings of its first dimension (pairwise: the
preferences), estimates every unit's quality and standard error
(:func:`analysis.science.live_estimates.unit_estimates`, the dof-corrected subject model) and
ranks the units with :func:`analysis.science.allocation.allocate`: burn-in units first (fewer
than ``adaptive_min_ratings``), then the least certain units of models whose adjacent pairs are
still open (anytime-valid verdicts at ``adaptive_alpha`` with tie margin ``adaptive_margin``:
reading them after every round is sound), models first whose open pairs are the likeliest to be
the wrong way round (:data:`FOCUS`, recorded with every round); a unit stops at its cap (``raters_per_item``), at the
target CI half-width (``adaptive_target_halfwidth``) or when its model is settled. Pairwise
studies rank comparisons with :func:`analysis.science.allocation.next_pairs` from Bradley–Terry
strengths. The top of the ranking (:data:`LIST_MIN`.. :data:`LIST_MAX` units) is stored as an
:class:`~tasks.models.AllocationRound` with each unit's reason code and a *claim limit*: one claim
more than the unit had when the round was computed (at least the burn-in, never above the cap),
so one round hands each listed unit to one more rater, as a batch of the simulation does
(:func:`analysis.science.simulation.run_adaptive`). A unit's ratings count ``n`` is its live
claims (leased or done): a rating on its way is not handed out again.

When. A claim reads the latest round (one row; its list is parsed once per process) and counts the
study's ratings newer than the round's last one, up to :func:`refresh_step` (an index range, not
the study's ratings). The list is recomputed when that many new ratings arrived, when
:data:`REFRESH_SECONDS` passed with at least one, or when a claim walked the whole list without
filling its session (every listed unit at its limit). Recomputation runs once at a time per study
(a PostgreSQL advisory lock; SQLite serialises writers anyway). A stale list (new ratings, time)
is recomputed by a Celery job (:data:`recompute_queued`, queued once per round; ``tasks.jobs``),
and the claim goes on with the current list: a rater's request never pays the O(ratings)
estimate at EvalMi scale (in eager mode, with no broker, the job runs inside the claim as before,
and the claim uses its result). A claim with no list yet, or one that found the list exhausted,
recomputes itself (or waits for the running recomputation and reads its result). So claims stay
O(batch): reading a page of the list and the conditional claims, never the study's pool, and
recomputation is O(ratings) once per round.

Claims. The rater's free units (the same queryset the balanced claim uses: not gold, not an
attention check, under the quota, not seen by this rater) are read by pages of the list in its
order; each unit is claimed with a conditional UPDATE ``claims < limit`` (limit ≤ quota, so the
quota holds), locking rows in ascending pk order as every claim does. Gold and attention slots
are inserted afterwards by the engine exactly as in balanced mode. EvalMi trials group the listed
units of one instance (up to ``images_per_trial``) into a screen.
"""

from __future__ import annotations

import math
from datetime import timedelta

import numpy as np
from django.core.cache import cache
from django.db import IntegrityError, connection, transaction
from django.dispatch import Signal
from django.db.models import Exists, F, OuterRef
from django.db.models.fields.json import KT
from django.utils import timezone

from analysis.science import allocation, live_estimates, pairwise, protocols, stopping
from raters.models import AttentionCheck
from tasks.models import AllocationRound, Comparison, ComparisonGold, GenModel, GoldAnswer, Item, Rating, Study

LIST_MIN = 200  # units per round's list, at least (or every eligible unit when fewer)
LIST_SHARE = 0.1  # ... and a tenth of the eligible units
LIST_MAX = 5000
REFRESH_SECONDS = 300
REFRESH_RATINGS_MIN = 20
METHOD = "subject_dof"
FOCUS = "uncertain"  # allocation.allocate's focus (recorded with every round); bench.replay --focus
LOCK_CLASS = 1717  # advisory lock namespace: (LOCK_CLASS, study id)
# (round id, created) -> [(unit id, claim limit)], per process (ids alone may come back after a rollback)
_PARSED: dict[tuple, list[tuple[int, int]]] = {}
_PARSED_MAX = 64

# A claim found the round stale: recompute it in the background (study_id, round_id, trigger);
# tasks.apps connects it to tasks.jobs, which sits above this module.
recompute_queued = Signal()


def refresh_step(study: Study, ratings_seen: int = 0) -> int:
    """New ratings that make the list stale: half the smallest list (at least
    :data:`REFRESH_RATINGS_MIN`), or a twentieth of the ratings the last round saw, whichever is
    more; so a large study recomputes (O(ratings)) about every 5 % of growth, not every 100 ratings."""
    return max(REFRESH_RATINGS_MIN, LIST_MIN // 2, ratings_seen // 20)


def parameters_of(study: Study) -> dict:
    """The study's adaptive settings as the allocation uses them (recorded with every round)."""
    return {"cap": study.raters_per_item, "target_halfwidth": study.adaptive_target_halfwidth,
            "alpha": study.adaptive_alpha, "margin": study.adaptive_margin,
            "min_ratings": study.adaptive_min_ratings, "method": METHOD, "focus": FOCUS}


def _finite(value):
    return value if isinstance(value, (int, str)) or value is None or math.isfinite(value) else None


def _clean_rows(rows: list[dict]) -> list[dict]:
    """JSON for PostgreSQL's jsonb: no NaN or infinity."""
    return [{k: _finite(v) for k, v in row.items()} for row in rows]


# ------------------------------------------------------------------ the data


_EMPTY = {"units": [], "eligible": 0, "reasons": {}, "verdicts": [], "ratings": 0, "n_opt": None}


def _item_units(study: Study):
    return (Item.objects.filter(~Exists(GoldAnswer.objects.filter(item=OuterRef("pk"))),
                                ~Exists(AttentionCheck.objects.filter(item=OuterRef("pk"))), study=study)
            .order_by("pk"))


def _compute_items(study: Study, params: dict, seed: int) -> dict:
    units = np.array(list(_item_units(study).values_list("pk", "gen_model_id", "claims")), dtype=np.int64
                     ).reshape(-1, 3)
    if not len(units):
        return _EMPTY
    pk, model_id, claims = units[:, 0], units[:, 1], units[:, 2]
    models, model = np.unique(model_id, return_inverse=True)
    dimension = study.protocol_def.dimensions(study.protocol_settings)[0].key
    rows = list(Rating.objects.filter(study=study, item__isnull=False).order_by()
                .values_list("item_id", "rater_id", KT(f"values__{dimension}")))
    item_ids = np.array([r[0] for r in rows], np.int64)
    place = np.searchsorted(pk, item_ids)
    value = np.array([float(r[2]) if r[2] not in (None, "") else np.nan for r in rows], float)
    known = (place < len(pk)) & (pk[np.minimum(place, len(pk) - 1)] == item_ids) & np.isfinite(value) \
        if len(pk) else np.zeros(len(rows), bool)
    raters, rater = np.unique(np.array([r[1] for r in rows], np.int64)[known], return_inverse=True)
    if known.any():
        estimate, std, rated = live_estimates.unit_estimates(value[known], place[known], rater, len(pk),
                                                             len(raters), METHOD)
    else:  # nothing rated yet: every unit unknown (burn-in)
        estimate, std, rated = np.full(len(pk), np.nan), np.full(len(pk), np.nan), np.zeros(len(pk))
    n = np.maximum(claims, rated)  # live claims (a rating on its way counts), or ratings given without one
    per_model = max(1.0, len(pk) / max(1, len(models)))
    n_opt = 2.0 * per_model * params["cap"]  # the ratings planned on a pair of models (both at the cap)
    decided = allocation.allocate(
        allocation.UnitState.of(model, n, estimate, std, params["cap"]), n_models=len(models),
        target_halfwidth=params["target_halfwidth"], min_ratings=params["min_ratings"], margin=params["margin"],
        alpha=params["alpha"], n_opt=n_opt, seed=seed,
        limit=min(LIST_MAX, max(LIST_MIN, math.ceil(LIST_SHARE * len(pk)))), focus=params["focus"])
    limit = np.minimum(params["cap"], np.maximum(params["min_ratings"], claims + 1))
    names = dict(GenModel.objects.filter(study=study).values_list("pk", "name"))
    labels = [names.get(int(m), str(int(m))) for m in models]
    return {"units": [[int(pk[u]), int(decided.reason[u]), int(limit[u])] for u in decided.order],
            "eligible": int(np.isfinite(decided.priority).sum()), "reasons": decided.reason_counts(),
            "verdicts": _clean_rows(decided.verdicts.rows(labels)), "ratings": int(known.sum()),
            "n_opt": n_opt}


def _compute_comparisons(study: Study, params: dict, seed: int) -> dict:
    units = np.array(list(
        Comparison.objects.filter(~Exists(ComparisonGold.objects.filter(comparison=OuterRef("pk"))), study=study)
        .order_by("pk").values_list("pk", "item_a__gen_model_id", "item_b__gen_model_id", "claims")),
        dtype=np.int64).reshape(-1, 4)
    if not len(units):
        return _EMPTY
    pk, claims = units[:, 0], units[:, 3]
    models, codes = np.unique(units[:, 1:3], return_inverse=True)
    codes = codes.reshape(-1, 2)
    m = len(models)
    wins = np.zeros((m, m))
    rows = list(Rating.objects.filter(study=study, comparison__isnull=False).order_by()
                .values_list("comparison_id", KT("values__preference")))
    place = np.searchsorted(pk, np.array([r[0] for r in rows], np.int64))
    for (comparison, preference), at in zip(rows, place):
        if at >= len(pk) or pk[at] != comparison:
            continue
        a, b = codes[at]
        if preference == "A":
            wins[a, b] += 1
        elif preference == "B":
            wins[b, a] += 1
        elif preference == "tie":
            wins[a, b] += 0.5
            wins[b, a] += 0.5
    score = pairwise.bradley_terry(wins) if m else np.zeros(0)
    games = wins + wins.T
    p = 1.0 / (1.0 + np.exp(-(score[:, None] - score[None, :])))
    info = (games * p * (1 - p)).sum(axis=1)
    with np.errstate(divide="ignore"):
        std = np.where(info > 0, 1.0 / np.sqrt(info), np.nan)
    size = min(LIST_MAX, max(LIST_MIN, math.ceil(LIST_SHARE * len(pk))))
    decided = allocation.next_pairs(codes[:, 0], codes[:, 1], score, std, shown=claims, cap=params["cap"],
                                    seed=seed, limit=size)
    verdicts = stopping.pair_verdicts(score, std, games.sum(axis=1), alpha=params["alpha"],
                                      n_opt=max(1.0, 2.0 * len(pk) * params["cap"] / max(1, m)))
    names = dict(GenModel.objects.filter(study=study).values_list("pk", "name"))
    counts = np.bincount(decided.reason, minlength=len(allocation.PAIR_REASONS))
    limit = np.minimum(params["cap"], claims + 1)
    return {"units": [[int(pk[u]), int(decided.reason[u]), int(limit[u])] for u in decided.order],
            "eligible": int(np.isfinite(decided.priority).sum()),
            "reasons": {allocation.PAIR_REASONS[k]: int(c) for k, c in enumerate(counts) if c},
            "verdicts": _clean_rows(verdicts.rows([names.get(int(x), str(int(x))) for x in models])),
            "ratings": len(rows), "n_opt": None}


# ------------------------------------------------------------------ rounds


class _Lock:
    """Once at a time per study: a PostgreSQL session advisory lock (elsewhere a no-op)."""

    def __init__(self, study: Study, wait: bool):
        self.key, self.wait, self.held = study.pk, wait, False

    def __enter__(self) -> bool:
        if connection.vendor != "postgresql":
            self.held = True
            return True
        with connection.cursor() as cursor:
            call = "pg_advisory_lock" if self.wait else "pg_try_advisory_lock"
            cursor.execute(f"SELECT {call}(%s, %s)", [LOCK_CLASS, self.key])
            row = cursor.fetchone()
        self.held = bool(row[0]) if not self.wait else True
        return self.held

    def __exit__(self, *exc) -> None:
        if self.held and connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_CLASS, self.key])


def _latest(study: Study):
    return (AllocationRound.objects.filter(study=study).order_by("-id")
            .values_list("id", "created_at", "last_rating_id", "ratings_seen").first())


def recompute(study: Study, *, trigger: str) -> AllocationRound:
    """Estimate, rank and store a new round (the caller holds the study's lock)."""
    params = parameters_of(study)
    last = Rating.objects.filter(study=study).order_by("-id").values_list("id", flat=True).first() or 0
    seed = AllocationRound.objects.filter(study=study).count()
    if study.protocol_def.unit_kind == protocols.COMPARISON:
        result = _compute_comparisons(study, params, seed)
    else:
        result = _compute_items(study, params, seed)
    return AllocationRound.objects.create(
        study=study, trigger=trigger, ratings_seen=result["ratings"], last_rating_id=last, units=result["units"],
        truncated=result["eligible"] > len(result["units"]), reasons=result["reasons"], verdicts=result["verdicts"],
        parameters={**params, "seed": seed, "n_opt": result["n_opt"], "list": len(result["units"])})


def _units_of(round_id: int, created) -> list[tuple[int, int]]:
    key = (round_id, created)
    if key not in _PARSED:
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.pop(next(iter(_PARSED)))
        units = AllocationRound.objects.filter(pk=round_id).values_list("units", flat=True).get()
        _PARSED[key] = [(int(u[0]), int(u[2])) for u in units]
    return _PARSED[key]


def current_list(study: Study, *, exhausted_round: int | None = None) -> tuple[int, list[tuple[int, int]]]:
    """(round id, [(unit id, claim limit)] best first): the latest round, recomputed first when
    there is none, when it is stale (new ratings or time; skipped while another recomputation
    runs), or when ``exhausted_round`` (a round a claim walked to its end) is still the latest
    (then this waits for a running recomputation and uses its result)."""
    latest = _latest(study)
    if latest is None or exhausted_round is not None:
        with _Lock(study, wait=True):
            again = _latest(study)
            if again is None or (exhausted_round is not None and again[0] == exhausted_round):
                made = recompute(study, trigger="first" if again is None else "exhausted")
                return made.pk, _units_of(made.pk, made.created_at)
            return again[0], _units_of(again[0], again[1])
    round_id, created, last_rating, seen = latest
    step = refresh_step(study, seen)
    new = Rating.objects.filter(study=study, pk__gt=last_rating).order_by()[:step].count()
    old = timezone.now() - created > timedelta(seconds=REFRESH_SECONDS)
    if new >= step or (new and old):
        # once per round and cache (the job checks again that the round is still the latest)
        if cache.add(f"adaptive-recompute:{study.pk}:{round_id}", True, timeout=REFRESH_SECONDS):
            recompute_queued.send(sender=AllocationRound, study_id=study.pk, round_id=round_id,
                                  trigger="ratings" if new >= step else "time")
            newer = _latest(study)  # eager mode: the job ran already
            if newer is not None and newer[0] != round_id:
                return newer[0], _units_of(newer[0], newer[1])
    return round_id, _units_of(round_id, created)


def recompute_if_stale(study_id: int, round_id: int, trigger: str) -> int | None:
    """The job behind :data:`recompute_queued`: a new round if ``round_id`` is still the study's
    latest and no other recomputation runs (the id of the new round, else None). Idempotent: a
    second delivery finds a newer round and does nothing."""
    study = Study.objects.filter(pk=study_id).first()
    if study is None:
        return None
    with _Lock(study, wait=False) as mine:
        latest = _latest(study)
        if mine and latest is not None and latest[0] == round_id:
            return recompute(study, trigger=trigger).pk
    return None


# ------------------------------------------------------------------ claims


def _take_limited(model, limits: dict[int, int]) -> set[int]:
    """One more claim on each unit still under its own limit; the pks that got it. Rows are locked
    in ascending pk order (as every claim does: concurrent claimers never deadlock)."""
    pks = sorted(limits)
    if connection.vendor != "postgresql":
        return {pk for pk in pks if model.objects.filter(pk=pk, claims__lt=limits[pk]).update(claims=F("claims") + 1)}
    table = connection.ops.quote_name(model._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} t SET claims = t.claims + 1 FROM unnest(%s::bigint[], %s::integer[]) AS l(id, lim) "
            f"WHERE t.id = l.id AND t.claims < l.lim AND t.id IN ("
            f"SELECT id FROM {table} WHERE id = ANY(%s) ORDER BY id FOR UPDATE) RETURNING t.id",
            [pks, [limits[pk] for pk in pks], pks])
        return {row[0] for row in cursor.fetchall()}


def _claim_limited(model, candidates: list[int], limits: dict[int, int], build) -> list[int]:
    """Claim ``candidates`` (best first) within their limits in one transaction, with their
    assignments; the pks won, in order. ``build(pk, n)``: the n-th unit won's Assignment."""
    try:
        with transaction.atomic():
            taken = _take_limited(model, {pk: limits[pk] for pk in candidates})
            won = [pk for pk in candidates if pk in taken]
            model_assignments = [build(pk, n) for n, pk in enumerate(won)]
            if model_assignments:
                type(model_assignments[0]).objects.bulk_create(model_assignments)
            return won
    except IntegrityError:  # another tab of this rater holds one of them: one by one
        won = []
        for pk in candidates:
            try:
                with transaction.atomic():
                    if _take_limited(model, {pk: limits[pk]}):
                        build(pk, len(won)).save()
                        won.append(pk)
            except IntegrityError:
                continue
        return won


def claim(*, study: Study, model, free, screens: int, build, per_screen: int = 1, group: str | None = None) -> int:
    """Claim up to ``screens`` screens for one rater from the priority list; how many were won.

    ``free``: the rater's claimable units (queryset of ``model``). ``build(pk, screen, slot)``:
    the unsaved Assignment. ``group`` (EvalMi trials: ``"instance_id"``): listed units sharing it
    form one screen of up to ``per_screen``; otherwise a screen is one unit."""
    round_id, units = current_list(study)
    tried: set[int] = set()
    won_screens = 0
    for attempt in range(2):  # the list, then once more after a recomputation if it ran dry
        limited = False  # a listed unit free for this rater but at its round's limit (a new round lifts it)
        page = 2 * screens * per_screen + 8
        at = 0
        while won_screens < screens and at < len(units):
            chunk = [(pk, limit) for pk, limit in units[at: at + page] if pk not in tried]
            at += page
            if not chunk:
                continue
            tried.update(pk for pk, _ in chunk)
            limits = dict(chunk)
            fields = ("pk", "claims") + ((group,) if group else ())
            rows = {row[0]: row for row in free.filter(pk__in=list(limits)).order_by().values_list(*fields)}
            ready = [pk for pk, limit in chunk if pk in rows and rows[pk][1] < limit]
            limited = limited or len(ready) < sum(pk in rows for pk, _ in chunk)
            if not ready:
                continue
            if group is None:
                won = _claim_limited(model, ready[:screens - won_screens], limits,
                                     lambda pk, n, first=won_screens: build(pk, first + n, 0))
                won_screens += len(won)
                continue
            grouped: dict[int, list[int]] = {}
            for pk in ready:
                grouped.setdefault(rows[pk][2], []).append(pk)
            for members in grouped.values():
                if won_screens >= screens:
                    break
                won = _claim_limited(model, members[:per_screen], limits,
                                     lambda pk, n, screen=won_screens: build(pk, screen, n))
                if won:
                    won_screens += 1
        if won_screens >= screens or attempt or not limited:
            break  # (seen units, or units at their cap: a new round would not help this rater)
        round_id, units = current_list(study, exhausted_round=round_id)
        tried = set()  # the new round's limits are one higher: units tried before may be free now
    return won_screens


# ------------------------------------------------------------------ audit


def rounds(study: Study, *, limit: int = 20, before: int | None = None) -> list[dict]:
    """The study's latest recorded rounds (newest first) for the API: when, why, what the
    estimates saw, the units chosen in order with their reasons and claim limits, the verdicts."""
    reasons = allocation.PAIR_REASONS if study.protocol_def.unit_kind == protocols.COMPARISON else allocation.REASONS
    found = AllocationRound.objects.filter(study=study)
    if before is not None:
        found = found.filter(pk__lt=before)
    return [{"id": r.pk, "created_at": r.created_at, "trigger": r.trigger, "ratings_seen": r.ratings_seen,
             "parameters": r.parameters, "truncated": r.truncated, "reasons": r.reasons, "verdicts": r.verdicts,
             "units": [{"unit": u[0], "reason": reasons[u[1]], "claim_limit": u[2]} for u in r.units]}
            for r in found.order_by("-id")[:limit]]
