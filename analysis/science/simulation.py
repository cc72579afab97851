"""Simulated studies with known truth: fixed against adaptive allocation at equal budgets. No Django.

Pieces, each a function of arrays so the replay through the real assignment engine can reuse them:

* **truth**: item quality per (model, prompt) on the rating scale, from given arrays
  (:func:`truth_from_arrays`) or from a published MOS sheet (:func:`truth_from_mos`,
  :func:`load_evalmi_truth`: EvalMi-50K's 0-100 MOS mapped linearly onto 1-5). The ranking's truth
  is each model's mean item quality over *all* its prompts (the finite set the study rates);
* **raters** (:func:`simulate_raters`, :func:`rate`): rating = clip(round(mid + scale (q - mid) +
  bias + noise · N(0, 1)), 1, 5), each rater with their own bias, scale, noise and pace; a share of
  spammers answers uniformly at random;
* **estimators** (:func:`estimate_units`): the subject model (:mod:`analysis.science.subject_model`)
  or z-MOS (back on the rating scale: grand mean + z × mean rater sd), each with a per-unit std;
* **designs**: :func:`run_fixed` (EvalMi's design: blocks of prompts, each unit rated by the same
  first ``k`` raters of its block) and :func:`run_adaptive` (burn-in of ``min_ratings`` per unit,
  then batches ranked by :func:`analysis.science.allocation.allocate`, verdicts after every batch,
  stopping when every adjacent pair is settled or the budget is spent);
* **metrics** (:func:`study_metrics`): Kendall τ of the model ranking against the truth, the share
  of truly different adjacent pairs (true gap > margin) separated the right way round, the share
  of declared separations (among the final ranking's adjacent pairs) that are the wrong way round,
  item RMSE of both estimators after a least-squares linear map onto the truth (so neither is
  penalised for its scale), ratings used;
* :func:`compare`, the table; :func:`optional_stopping`, the peeking proof;
* the yardstick (:func:`best_split_tau`, :func:`yardstick`): the expected τ of the best split of a
  budget over models *knowing the true means*, at a run's fitted per-rating noise: how far a
  budget share can go on a given truth, whatever the allocation.

Fixed designs are judged with a fixed-level CI (one look at the end: valid); adaptive runs with the
anytime-valid confidence sequence their verdicts used while running (:mod:`analysis.science.stopping`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from analysis.science import allocation, live_estimates, stopping
from analysis.science.formats import read_mos_table

LIKERT = (1, 5)
MOS = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "evalmi" / "AIGI2025_MOS_yn.xlsx"


# ---------------------------------------------------------------- truth


@dataclass(frozen=True)
class Truth:
    """``quality``: models × prompts, on the rating scale. Unit u is (u // prompts, u % prompts)."""

    quality: np.ndarray
    models: tuple[str, ...]

    @property
    def n_models(self) -> int:
        return self.quality.shape[0]

    @property
    def n_prompts(self) -> int:
        return self.quality.shape[1]

    @property
    def n_units(self) -> int:
        return self.quality.size

    @property
    def unit_model(self) -> np.ndarray:
        return np.repeat(np.arange(self.n_models), self.n_prompts)

    @property
    def unit_prompt(self) -> np.ndarray:
        return np.tile(np.arange(self.n_prompts), self.n_models)

    @property
    def unit_quality(self) -> np.ndarray:
        return self.quality.ravel()

    @property
    def model_means(self) -> np.ndarray:
        return self.quality.mean(axis=1)


def truth_from_arrays(quality, models=None) -> Truth:
    quality = np.asarray(quality, float)
    if quality.ndim != 2 or not np.isfinite(quality).all():
        raise ValueError("quality must be a finite models x prompts array")
    names = tuple(models) if models is not None else tuple(f"model-{k}" for k in range(quality.shape[0]))
    return Truth(quality=quality, models=names)


def model_subset(truth: Truth, n_models: int | None, seed: int = 0) -> Truth:
    """A seeded subset of ``n_models`` of the truth's models, in their order (all of them when
    ``n_models`` is None or not fewer): how bench.replay and this module's command pick models."""
    if n_models is None or n_models >= truth.n_models:
        return truth
    keep = np.sort(np.random.default_rng(seed).choice(truth.n_models, n_models, replace=False))
    return truth_from_arrays(truth.quality[keep], [truth.models[k] for k in keep])


def truth_from_mos(mos: pd.DataFrame, dim: str, *, scale=LIKERT, mos_range=(0.0, 100.0), prompts: int | None = None,
                   seed: int = 0) -> Truth:
    """Per-image MOS (``model``, ``prompt_number`` or ``instance``, ``<dim>``) as truth: MOS mapped
    linearly from ``mos_range`` onto ``scale``; only prompts every model has; ``prompts``: a seeded
    sample of that many prompts (None: all)."""
    frame = mos.rename(columns={"prompt_number": "instance"})
    wide = frame.pivot_table(index="model", columns="instance", values=dim, aggfunc="mean").dropna(axis=1)
    if prompts is not None and prompts < wide.shape[1]:
        keep = np.sort(np.random.default_rng(seed).choice(wide.shape[1], prompts, replace=False))
        wide = wide.iloc[:, keep]
    low, high = scale
    values = low + (high - low) * (wide.to_numpy(float) - mos_range[0]) / (mos_range[1] - mos_range[0])
    return truth_from_arrays(values, [str(m) for m in wide.index])


def load_evalmi_truth(path: Path | str, dim: str = "perception", *, prompts: int | None = None, seed: int = 0) -> Truth:
    """EvalMi-50K's ``AIGI2025_MOS_yn.xlsx`` (or a .parquet / .csv of :func:`analysis.science.formats.read_evalmi_mos`'s
    columns) as truth; ``dim``: ``perception`` or ``correspondence``."""
    return truth_from_mos(read_mos_table(path), dim, prompts=prompts, seed=seed)


# ---------------------------------------------------------------- raters


@dataclass(frozen=True)
class Raters:
    """Per rater: additive ``bias``, ``scale`` (slope around the scale's midpoint), ``noise`` sd,
    ``spammer`` (answers uniformly at random) and ``pace`` (ratings per hour)."""

    bias: np.ndarray
    scale: np.ndarray
    noise: np.ndarray
    spammer: np.ndarray
    pace: np.ndarray

    def __len__(self) -> int:
        return len(self.bias)


def simulate_raters(n: int, *, bias_sd: float = 0.3, scale_sd: float = 0.15, noise: float = 0.7,
                    noise_spread: float = 0.3, spammer_share: float = 0.0, pace: float = 120.0,
                    pace_spread: float = 0.5, seed: int = 0) -> Raters:
    """``n`` raters: bias ~ N(0, bias_sd), scale ~ lognormal(0, scale_sd), noise ~ noise ×
    lognormal(0, noise_spread), round(spammer_share × n) spammers, pace ~ pace × lognormal(0,
    pace_spread) ratings per hour."""
    rng = np.random.default_rng(seed)
    spammer = np.zeros(n, bool)
    spammer[rng.choice(n, int(round(spammer_share * n)), replace=False)] = True
    return Raters(bias=rng.normal(0, bias_sd, n), scale=np.exp(rng.normal(0, scale_sd, n)),
                  noise=noise * np.exp(rng.normal(0, noise_spread, n)), spammer=spammer,
                  pace=pace * np.exp(rng.normal(0, pace_spread, n)))


def rate(quality, rater, raters: Raters, rng: np.random.Generator, *, scale=LIKERT) -> np.ndarray:
    """One rating per (quality, rater) pair; ``scale`` (low, high) clips and rounds to integers,
    None keeps them continuous."""
    quality, rater = np.asarray(quality, float), np.asarray(rater, np.int64)
    mid = 3.0 if scale is None else (scale[0] + scale[1]) / 2
    value = (mid + raters.scale[rater] * (quality - mid) + raters.bias[rater]
             + raters.noise[rater] * rng.standard_normal(len(rater)))
    if scale is None:
        return np.where(raters.spammer[rater], rng.uniform(1, 5, len(rater)), value)
    low, high = scale
    value = np.clip(np.round(value), low, high)
    return np.where(raters.spammer[rater], rng.integers(low, high + 1, len(rater)), value)


# ---------------------------------------------------------------- estimators


def estimate_units(values, unit, rater, n_units: int, n_raters: int, method: str = "subject_dof"
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(estimate, std, ratings) per unit: :func:`analysis.science.live_estimates.unit_estimates`."""
    return live_estimates.unit_estimates(values, unit, rater, n_units, n_raters, method)


# ---------------------------------------------------------------- designs


@dataclass
class StudyRun:
    """The ratings of one simulated study (codes into the truth's units and the raters) and, for
    adaptive runs, what the verdicts said after each batch (``looks``) and the allocation's
    reasons (``decisions``: reason -> units, summed over batches)."""

    values: np.ndarray
    unit: np.ndarray
    rater: np.ndarray
    design: str
    budget: int
    looks: list[dict] = field(default_factory=list)
    decisions: dict[str, int] = field(default_factory=dict)
    n_opt: float | None = None

    @property
    def used(self) -> int:
        return len(self.values)


def run_fixed(truth: Truth, raters: Raters, per_unit: int, *, blocks: int = 4, seed: int = 0, scale=LIKERT
              ) -> StudyRun:
    """EvalMi's design: prompts fall into ``blocks`` contiguous blocks, each with its own
    ``len(raters) // blocks`` raters; every unit is rated by the first ``per_unit`` of its block's."""
    per_block = len(raters) // blocks
    if per_unit > per_block:
        raise ValueError(f"{per_unit} raters per unit but only {per_block} per block")
    rng = np.random.default_rng(seed)
    block = truth.unit_prompt * blocks // truth.n_prompts
    unit = np.repeat(np.arange(truth.n_units), per_unit)
    rater = block[unit] * per_block + np.tile(np.arange(per_unit), truth.n_units)
    values = rate(truth.unit_quality[unit], rater, raters, rng, scale=scale)
    return StudyRun(values=values, unit=unit, rater=rater, design=f"fixed {per_unit}/unit",
                    budget=per_unit * truth.n_units)


def _assign_raters(units: np.ndarray, seen: np.ndarray, weights: np.ndarray, rng: np.random.Generator,
                   tries: int = 30) -> np.ndarray:
    """A rater per unit, drawn by pace, who has not rated it (-1 when none was found in ``tries``)."""
    out = np.full(len(units), -1)
    todo = np.arange(len(units))
    for _ in range(tries):
        if not len(todo):
            break
        draw = rng.choice(len(weights), len(todo), p=weights)
        fine = ~seen[draw, units[todo]]
        out[todo[fine]] = draw[fine]
        todo = todo[~fine]
    return out


def run_adaptive(truth: Truth, raters: Raters, budget: int, *, batches: int = 20, min_ratings: int = 1,
                 cap: int = 16, margin: float = 0.0, alpha: float = stopping.ALPHA, n_opt: float | None = None,
                 target_halfwidth: float | None = None, method: str = "subject_dof", stop_early: bool = True,
                 seed: int = 0, scale=LIKERT, focus: str = "uncertain", anytime: bool = True) -> StudyRun:
    """Burn-in (``min_ratings`` per unit), then ``batches`` equal batches ranked by
    :func:`allocation.allocate` on the ``method`` estimates, one new rating per chosen unit per round,
    each from a pace-weighted rater who has not rated it. ``anytime=False`` judges every look with a
    naive fixed-level CI (for the peeking comparison only). ``n_opt`` (the anytime verdicts' tuning):
    default the ratings a pair gets when the budget is spread evenly, 2 × budget / models."""
    rng = np.random.default_rng(seed)
    n_units, n_raters = truth.n_units, len(raters)
    n_opt = 2.0 * budget / truth.n_models if n_opt is None else n_opt
    weights = raters.pace / raters.pace.sum()
    seen = np.zeros((n_raters, n_units), bool)
    values, units, who = [], [], []
    used = 0

    def add(chosen: np.ndarray) -> int:
        rater = _assign_raters(chosen, seen, weights, rng)
        ok = rater >= 0
        chosen, rater = chosen[ok], rater[ok]
        seen[rater, chosen] = True
        values.append(rate(truth.unit_quality[chosen], rater, raters, rng, scale=scale))
        units.append(chosen)
        who.append(rater)
        return int(ok.sum())

    burn = np.tile(rng.permutation(n_units), min_ratings)[:budget]
    used += add(burn)
    step = max(1, (budget - used) // batches) if batches else 0
    run = StudyRun(values=np.empty(0), unit=np.empty(0, np.int64), rater=np.empty(0, np.int64),
                   design=f"adaptive ({method})", budget=budget, n_opt=n_opt)
    look = 0
    while True:
        value, unit, rater = np.concatenate(values), np.concatenate(units), np.concatenate(who)
        est, std, n = estimate_units(value, unit, rater, n_units, n_raters, method)
        state = allocation.UnitState.of(truth.unit_model, n, est, std, cap)
        decided = allocation.allocate(state, n_models=truth.n_models, target_halfwidth=target_halfwidth,
                                      min_ratings=min_ratings, margin=margin, alpha=alpha, n_opt=n_opt,
                                      anytime=anytime, seed=seed * 1000 + look, limit=min(step, budget - used) if step else 0,
                                      focus=focus)
        counts = np.bincount(decided.verdicts.code, minlength=3)
        sep = decided.verdicts.code == 1
        run.looks.append({"ratings": used, "open": int(counts[0]), "separated": int(counts[1]),
                          "tied": int(counts[2]),
                          "separated_pairs": list(zip(decided.verdicts.a[sep].tolist(), decided.verdicts.b[sep].tolist()))})
        for reason, count in decided.reason_counts().items():
            run.decisions[reason] = run.decisions.get(reason, 0) + count
        if used >= budget or not step or not len(decided.order) or (stop_early and counts[0] == 0):
            break
        chosen = decided.order
        room = (cap - n[chosen]).astype(int)
        want = min(step, budget - used)
        rounds = int(math.ceil(want / len(chosen)))
        added = 0
        for r in range(rounds):  # one rating per unit per round: distinct raters within the batch
            part = chosen[room > r][: max(0, want - added)]
            if len(part):
                added += add(part)
        if not added:
            break
        used += added
        look += 1
    run.values, run.unit, run.rater = np.concatenate(values), np.concatenate(units), np.concatenate(who)
    return run


# ---------------------------------------------------------------- metrics


def linear_rmse(estimate, truth) -> float:
    """RMSE after the least-squares line from estimate to truth (NaN estimates left out)."""
    estimate, truth = np.asarray(estimate, float), np.asarray(truth, float)
    ok = np.isfinite(estimate)
    if ok.sum() < 3:
        return float("nan")
    slope, intercept = np.polyfit(estimate[ok], truth[ok], 1)
    return float(np.sqrt(np.mean((intercept + slope * estimate[ok] - truth[ok]) ** 2)))


def ranking_metrics(model_estimate, model_std, model_n, true_means, *, margin: float = 0.0,
                    alpha: float = stopping.ALPHA, n_opt=None, anytime: bool = False) -> dict:
    """τ, the share of truly different adjacent pairs separated the right way, the share of
    declared separations (adjacent in the estimated ranking) that are wrong, and their counts."""
    true_means = np.asarray(true_means, float)
    tau = float(stats.kendalltau(model_estimate, true_means).statistic)
    order = np.argsort(-true_means, kind="stable")
    a, b = order[:-1], order[1:]
    different = (true_means[a] - true_means[b]) > margin
    on_truth = stopping.pair_verdicts(model_estimate, model_std, model_n, margin=margin, alpha=alpha, n_opt=n_opt,
                                      anytime=anytime, pairs=(a, b))
    right = (on_truth.code == 1) & (on_truth.diff > 0)
    declared = stopping.pair_verdicts(model_estimate, model_std, model_n, margin=margin, alpha=alpha, n_opt=n_opt,
                                      anytime=anytime)
    sep = declared.code == 1
    wrong = sep & (true_means[declared.a] <= true_means[declared.b])
    return {"tau": tau, "separated": float(right[different].mean()) if different.any() else float("nan"),
            "wrong": float(wrong.sum() / sep.sum()) if sep.any() else 0.0, "declared": int(sep.sum()),
            "wrong_count": int(wrong.sum()), "tied": int((declared.code == 2).sum())}


def study_metrics(run: StudyRun, truth: Truth, raters: Raters, *, margin: float = 0.0,
                  alpha: float = stopping.ALPHA) -> dict:
    """The table's row for one run: ranking metrics from the subject model (``*_subject``: the
    dof-corrected fit of :mod:`analysis.science.live_estimates`, whose std is calibrated; adaptive:
    anytime verdicts at the run's ``n_opt``; fixed: a fixed-level CI) and from z-MOS (``*_zmos``),
    item RMSE of both."""
    row = {"design": run.design, "budget": run.budget, "ratings": run.used}
    anytime = run.n_opt is not None
    for method, estimator in (("subject", "subject_dof"), ("zmos", "zmos")):
        est, std, n = estimate_units(run.values, run.unit, run.rater, truth.n_units, len(raters), estimator)
        models = allocation.model_state(allocation.UnitState.of(truth.unit_model, n, est, std, 0), truth.n_models)
        ranking = ranking_metrics(models.estimate, models.std, models.n, truth.model_means, margin=margin,
                                  alpha=alpha, n_opt=run.n_opt, anytime=anytime)
        for key, value in ranking.items():
            row[f"{key}_{method}"] = value
        row[f"rmse_{method}"] = linear_rmse(est, truth.unit_quality)
    return row


def compare(truth: Truth, raters: Raters, *, fixed_per_unit=(1, 2, 4, 8, 16), adaptive_shares=(0.1, 0.2, 0.3, 0.4),
            reference: int = 16, seeds=(0,), margin: float = 0.0, alpha: float = stopping.ALPHA, batches: int = 20,
            min_ratings: int = 1, cap: int = 16, scale=LIKERT, focus: str = "uncertain") -> pd.DataFrame:
    """One row per (design, budget, seed): fixed designs at ``fixed_per_unit`` raters per unit and
    adaptive runs at ``adaptive_shares`` of the ``reference`` fixed design's budget."""
    rows = []
    full = reference * truth.n_units
    for seed in seeds:
        for k in fixed_per_unit:
            run = run_fixed(truth, raters, k, seed=seed, scale=scale)
            rows.append({"seed": seed, "share": run.budget / full, **study_metrics(run, truth, raters, margin=margin,
                                                                                  alpha=alpha)})
        for share in adaptive_shares:
            run = run_adaptive(truth, raters, int(round(share * full)), batches=batches, min_ratings=min_ratings,
                               cap=cap, margin=margin, alpha=alpha, seed=seed, scale=scale, focus=focus)
            rows.append({"seed": seed, "share": share, **study_metrics(run, truth, raters, margin=margin,
                                                                       alpha=alpha)})
    return pd.DataFrame(rows)


def expected_tau(true_means, ratings, noise: float) -> float:
    """Kendall τ expected when model m's mean is estimated from ``ratings[m]`` ratings of per-rating
    noise sd ``noise`` (spread evenly over its prompts, independent normal errors): 1 - 2 Σ_pairs
    Φ(-|gap| / s) / pairs."""
    means, ratings = np.asarray(true_means, float), np.asarray(ratings, float)
    upper = np.triu_indices(len(means), 1)
    gap = np.abs(means[:, None] - means[None, :])[upper]
    s = noise * np.sqrt(1.0 / ratings[:, None] + 1.0 / ratings[None, :])[upper]
    return float(1.0 - 2.0 * stats.norm.cdf(-gap / s).sum() / len(gap))


def best_split_tau(true_means, prompts: int, budget: int, noise: float, *, cap: int) -> tuple[float, np.ndarray]:
    """The best any allocation fixed in advance can do, *knowing the true means*: (expected τ,
    ratings per model) of the greedy split of ``budget`` ratings (every unit at least one, at most
    ``cap``; a model's ratings spread evenly over its ``prompts``, a step being one more rating on
    every unit of one model) that most raises :func:`expected_tau`. A yardstick for how far a
    budget share can go on a given truth, not a strict bound: an adaptive design does not know
    the truth but reacts to its data as they come (it may stop early on a pair whose estimates
    came out far apart), which a split fixed in advance cannot."""
    return _greedy_split(true_means, prompts, budget, noise, cap=cap)[-1]


def _greedy_split(true_means, prompts: int, budget: int, noise: float, *, cap: int) -> list[tuple[float, np.ndarray]]:
    """:func:`best_split_tau`'s greedy split, every step of it: (expected τ, ratings per model)
    from one rating per unit up to ``budget`` ratings (or every model at ``cap``)."""
    means = np.asarray(true_means, float)
    ratings = np.full(len(means), float(prompts))
    steps = [(expected_tau(means, ratings, noise), ratings.copy())]
    left = budget - ratings.sum()
    while left >= prompts:
        best, pick = -np.inf, -1
        for m in np.flatnonzero(ratings + prompts <= cap * prompts):
            trial = ratings.copy()
            trial[m] += prompts
            tau = expected_tau(means, trial, noise)
            if tau > best:
                best, pick = tau, m
        if pick < 0:
            break
        ratings[pick] += prompts
        left -= prompts
        steps.append((best, ratings.copy()))
    return steps


def share_to_match_fixed(true_means, prompts: int, noise: float, *, per_unit: int, cap: int | None = None
                         ) -> float | None:
    """The smallest share of fixed ``per_unit``/unit's ratings at which the best split knowing the
    true means (:func:`best_split_tau`, at most ``cap`` ratings per unit, default ``per_unit``)
    expects fixed ``per_unit``'s τ; None if it never does below the cap. What no allocation fixed
    in advance can beat on this truth, and what an adaptive one, which must learn the means
    first, should not be expected to beat by much."""
    means = np.asarray(true_means, float)
    full = per_unit * prompts * len(means)
    goal = expected_tau(means, np.full(len(means), float(per_unit * prompts)), noise)
    for tau, ratings in _greedy_split(means, prompts, 10 * full, noise, cap=cap or per_unit):
        if tau >= goal - 1e-12:
            return float(ratings.sum() / full)
    return None


def yardstick_sweep(mos: Path | str, *, prompts=(30, 100, 300), models=(12, 24), noise: float = 0.76,
                    per_unit=(8, 16), dim: str = "perception", cap_factor: int = 4) -> pd.DataFrame:
    """:func:`share_to_match_fixed` on EvalMi-50K truth for several study sizes (a seeded sample of
    ``prompts``; the seeded subset of ``models``, as the replay takes them): per size and fixed
    design, fixed τ, the best split's τ at 40 % of its ratings and the share it needs to match,
    the best split allowed ``cap_factor`` times the fixed design's ratings per unit."""
    rows = []
    for n_prompts in prompts:
        base = load_evalmi_truth(mos, dim, prompts=n_prompts)
        for n_models in models:
            truth = model_subset(base, n_models)
            means = truth.model_means
            gaps = np.diff(np.sort(means))
            for k in per_unit:
                full = k * truth.n_units
                rows.append({
                    "prompts": truth.n_prompts, "models": truth.n_models, "fixed": f"{k}/unit",
                    "adjacent_gaps_below_0.05": int((gaps < 0.05).sum()),
                    "tau_fixed": expected_tau(means, np.full(truth.n_models, float(k * truth.n_prompts)), noise),
                    "tau_best_split_40": best_split_tau(means, truth.n_prompts, int(round(0.4 * full)), noise,
                                                        cap=cap_factor * k)[0],
                    "share_to_match": share_to_match_fixed(means, truth.n_prompts, noise, per_unit=k,
                                                           cap=cap_factor * k),
                })
    return pd.DataFrame(rows)


def fitted_noise(run: StudyRun, truth: Truth, n_raters: int) -> float:
    """Per-rating noise sd of a run as the subject model sees it: √(mean over models of std² ×
    ratings) from the dof-corrected fit (for :func:`best_split_tau`)."""
    est, std, n = estimate_units(run.values, run.unit, run.rater, truth.n_units, n_raters, "subject_dof")
    models = allocation.model_state(allocation.UnitState.of(truth.unit_model, n, est, std, 0), truth.n_models)
    return float(np.sqrt(np.nanmean(models.std**2 * models.n)))


def yardstick(truth: Truth, noise: float, shares, *, per_unit=(4, 8), cap: int = 8) -> dict[str, float]:
    """Expected τ of the fixed designs (``per_unit`` ratings on every unit) and of the best split
    knowing the truth (:func:`best_split_tau`) at each share of the largest fixed design's
    ratings, for per-rating noise ``noise``."""
    out = {f"fixed {k}/unit": expected_tau(truth.model_means, np.full(truth.n_models, k * truth.n_prompts), noise)
           for k in per_unit}
    full = max(per_unit) * truth.n_units
    for share in shares:
        out[f"best split {share:.0%}"] = best_split_tau(truth.model_means, truth.n_prompts, int(round(share * full)),
                                                        noise, cap=cap)[0]
    return out


def share_to_match(table: pd.DataFrame, *, reference: str = "fixed 16/unit", metric: str = "tau_subject",
                   reference_metric: str = "tau_zmos", max_wrong: float = 0.05) -> float | None:
    """The smallest adaptive budget share whose mean ``metric`` over seeds reaches the reference
    design's mean ``reference_metric`` with mean wrong separations ≤ ``max_wrong`` (None: never)."""
    goal = table.loc[table["design"] == reference, reference_metric].mean()
    adaptive = table[table["design"].str.startswith("adaptive")].groupby("share")[[metric, "wrong_subject"]].mean()
    fine = adaptive[(adaptive[metric] >= goal - 1e-12) & (adaptive["wrong_subject"] <= max_wrong)]
    return float(fine.index.min()) if len(fine) else None


# ---------------------------------------------------------------- optional stopping


def optional_stopping(*, reps: int = 4000, looks: int = 50, batch: int = 20, alpha: float = stopping.ALPHA,
                      n_opt: float | None = None, seed: int = 0) -> dict:
    """Two truly equal models, each batch adds ``batch`` ratings to each (rating noise around item
    qualities drawn from the same distribution), and after every batch the pair's verdict is read:
    the share of studies that ever declare a separation, with the confidence sequence and with a
    naive fixed-level CI re-checked at every look. ``n_opt``: default the ratings at the last look."""
    rng = np.random.default_rng(seed)
    # one column per look: each batch's per-model rating means and sums of squares
    x = rng.normal(0.0, 1.0, (reps, looks, batch)) + rng.normal(0.0, 0.5, (reps, looks, batch))
    y = rng.normal(0.0, 1.0, (reps, looks, batch)) + rng.normal(0.0, 0.5, (reps, looks, batch))
    n = batch * np.arange(1, looks + 1)  # ratings per model after each look
    mean_x = np.cumsum(x.sum(axis=2), axis=1) / n
    mean_y = np.cumsum(y.sum(axis=2), axis=1) / n
    var_x = (np.cumsum((x**2).sum(axis=2), axis=1) - n * mean_x**2) / (n - 1)
    var_y = (np.cumsum((y**2).sum(axis=2), axis=1) - n * mean_y**2) / (n - 1)
    diff, std = mean_x - mean_y, np.sqrt(var_x / n + var_y / n)
    total = np.broadcast_to(2 * n, diff.shape)
    n_opt = float(2 * n[-1]) if n_opt is None else n_opt
    out = {"reps": reps, "looks": looks, "alpha": alpha}
    for name, anytime in (("anytime", True), ("naive", False)):
        code, _ = stopping.classify(diff.ravel(), std.ravel(), total.ravel(), alpha=alpha, n_opt=n_opt,
                                    anytime=anytime)
        ever = (code.reshape(diff.shape) == 1).any(axis=1)
        out[name] = float(ever.mean())
        out[f"{name}_last_look"] = float((code.reshape(diff.shape)[:, -1] == 1).mean())
    return out


def equal_models_check(truth: Truth, raters: Raters, budget: int, *, seeds=(0, 1, 2), batches: int = 20,
                       alpha: float = stopping.ALPHA) -> dict:
    """The peeking proof through the whole adaptive loop: every model gets model 0's item
    qualities (all truly equal, so every separation is wrong) and the adaptive design runs with its
    verdicts read after every batch, once with the confidence sequence and once with a naive
    fixed-level CI. Returns, per method, the share of (study, adjacent pair slot) ever declared
    separated at any look, and the share of studies with any such declaration."""
    equal = truth_from_arrays(np.tile(truth.quality[:1], (truth.n_models, 1)), truth.models)
    slots = truth.n_models - 1
    out = {"studies": len(seeds), "pairs": slots, "looks": batches + 1}
    for name, anytime in (("anytime", True), ("naive", False)):
        pairs, studies = 0, 0
        for seed in seeds:
            run = run_adaptive(equal, raters, budget, batches=batches, alpha=alpha, seed=seed, anytime=anytime,
                               stop_early=False)
            ever = {tuple(sorted(p)) for look in run.looks for p in look["separated_pairs"]}
            pairs += min(len(ever), slots)
            studies += bool(ever)
        out[f"{name}_pairs"] = pairs / (slots * len(seeds))
        out[f"{name}_studies"] = studies / len(seeds)
    return out


# ---------------------------------------------------------------- command line

COLUMNS = ["design", "share", "ratings", "tau_subject", "tau_zmos", "separated_subject", "separated_zmos",
           "wrong_subject", "wrong_zmos", "declared_subject", "rmse_subject", "rmse_zmos"]


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Means over seeds per design and budget share, in the order of :data:`COLUMNS`."""
    keep = [c for c in COLUMNS if c in table.columns]
    return table[keep].groupby(["design", "share"], sort=False).mean().reset_index()


def main(argv=None) -> None:
    """``python -m analysis.science.simulation --mos ../shared/datasets/evalmi/AIGI2025_MOS_yn.xlsx``:
    the pure fixed-vs-adaptive table on EvalMi-50K truth (means over seeds)."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--mos", default=str(MOS), help="AIGI2025_MOS_yn.xlsx (or .parquet/.csv of its parsed columns); "
                        "default ../shared/datasets/evalmi/ beside the checkout, as bench.replay")
    parser.add_argument("--dim", default="perception", choices=("perception", "correspondence"))
    parser.add_argument("--prompts", type=int, default=None, help="a seeded sample of prompts (default: all 2,100)")
    parser.add_argument("--models", type=int, default=None,
                        help="a seeded subset of the models (seed 0: bench.replay's subset at its default seed)")
    parser.add_argument("--raters", type=int, default=64, help="rater pool (EvalMi: 4 blocks of 16)")
    parser.add_argument("--bias-sd", type=float, default=0.3)
    parser.add_argument("--scale-sd", type=float, default=0.15)
    parser.add_argument("--noise", type=float, default=0.7)
    parser.add_argument("--noise-spread", type=float, default=0.3)
    parser.add_argument("--spammer-share", type=float, default=0.05)
    parser.add_argument("--pace", type=float, default=120.0)
    parser.add_argument("--fixed", type=int, nargs="+", default=[2, 4, 8, 16])
    parser.add_argument("--shares", type=float, nargs="+", default=[0.1, 0.15, 0.2, 0.3, 0.4])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--margin", type=float, default=0.0, help="tie margin, rating-scale points")
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--min-ratings", type=int, default=1)
    parser.add_argument("--cap", type=int, default=16, help="most ratings per unit in the adaptive design")
    parser.add_argument("--focus", default="uncertain", choices=("uncertain", "ranking", "cheapest"),
                        help="the adaptive allocation's focus (analysis.science.allocation)")
    parser.add_argument("--equal-check", action="store_true",
                        help="also run the peeking proof through the loop with all models made equal")
    parser.add_argument("--yardstick-sweep", action="store_true",
                        help="only the yardstick over study sizes (--sweep-prompts x --sweep-models, fixed --fixed "
                             "designs, per-rating noise --sweep-noise): what share of each fixed design's ratings the "
                             "best split knowing the true means needs to expect its tau")
    parser.add_argument("--sweep-prompts", type=int, nargs="+", default=[30, 100, 300])
    parser.add_argument("--sweep-models", type=int, nargs="+", default=[12, 24])
    parser.add_argument("--sweep-noise", type=float, default=0.76,
                        help="per-rating noise sd (0.76: the subject model's in bench.replay's default run)")
    parser.add_argument("--sweep-cap-factor", type=int, default=4,
                        help="the best split may give a unit this many times the fixed design's ratings")
    args = parser.parse_args(argv)
    if args.yardstick_sweep:
        table = yardstick_sweep(args.mos, prompts=args.sweep_prompts, models=args.sweep_models, noise=args.sweep_noise,
                                per_unit=args.fixed, dim=args.dim, cap_factor=args.sweep_cap_factor)
        with pd.option_context("display.width", 250, "display.max_columns", 30, "display.precision", 3):
            print(f"EvalMi-50K {args.dim} truth, per-rating noise {args.sweep_noise}; share_to_match: the smallest "
                  "share of the fixed design's ratings at which the best split knowing the true means (up to "
                  f"{args.sweep_cap_factor}x the fixed ratings per unit) expects its tau (None: never)")
            print(table.to_string(index=False))
        return
    truth = model_subset(load_evalmi_truth(args.mos, args.dim, prompts=args.prompts), args.models)
    tables = []
    for seed in args.seeds:
        raters = simulate_raters(args.raters, bias_sd=args.bias_sd, scale_sd=args.scale_sd, noise=args.noise,
                                 noise_spread=args.noise_spread, spammer_share=args.spammer_share, pace=args.pace,
                                 seed=seed)
        tables.append(compare(truth, raters, fixed_per_unit=args.fixed, adaptive_shares=args.shares,
                              reference=max(args.fixed), seeds=(seed,), margin=args.margin, batches=args.batches,
                              min_ratings=args.min_ratings, cap=args.cap, focus=args.focus))
    table = pd.concat(tables, ignore_index=True)
    with pd.option_context("display.width", 250, "display.max_columns", 30, "display.precision", 3):
        print(f"{truth.n_models} models x {truth.n_prompts} prompts ({args.dim}), {args.raters} raters, "
              f"seeds {args.seeds}")
        print(summary(table).to_string(index=False))
    reference = f"fixed {max(args.fixed)}/unit"
    share = share_to_match(table, reference=reference)
    print(f"adaptive reaches {reference}'s tau (z-MOS, EvalMi's estimator) with wrong separations <= 5% at "
          f"budget share: {share if share is not None else 'not within the shares tried'}")
    share = share_to_match(table, reference=reference, metric="separated_subject", reference_metric="separated_zmos")
    print(f"adaptive reaches {reference}'s share of truly different adjacent pairs separated at budget share: "
          f"{share if share is not None else 'not within the shares tried'}")
    raters = simulate_raters(args.raters, bias_sd=args.bias_sd, scale_sd=args.scale_sd, noise=args.noise,
                             noise_spread=args.noise_spread, spammer_share=args.spammer_share, seed=args.seeds[0])
    noise = fitted_noise(run_fixed(truth, raters, max(args.fixed), seed=args.seeds[0]), truth, args.raters)
    bound = yardstick(truth, noise, args.shares, per_unit=args.fixed, cap=args.cap)
    print(f"expected tau, per-rating noise {noise:.2f} (the subject model's, fixed {max(args.fixed)}/unit), "
          "the best split knowing the true means: " + ", ".join(f"{k} {v:.3f}" for k, v in bound.items()))
    print("optional stopping (two equal models, 50 looks):", optional_stopping())
    if args.equal_check:
        raters = simulate_raters(args.raters, bias_sd=args.bias_sd, scale_sd=args.scale_sd, noise=args.noise,
                                 noise_spread=args.noise_spread, spammer_share=args.spammer_share, seed=0)
        budget = int(round(min(args.shares) * max(args.fixed) * truth.n_units))
        print(f"equal models through the adaptive loop ({budget:,} ratings, verdicts after each of "
              f"{args.batches} batches):", equal_models_check(truth, raters, budget, seeds=args.seeds,
                                                             batches=args.batches))


if __name__ == "__main__":
    main()
