"""Which judge differences are real: intervals on every judge correlation, paired tests between judges
and against the human ceiling, Holm-adjusted across the comparisons of a study. No Django.

Input: one :class:`JudgeBlock` per (judge, report key): the judge's score and the human score of every
item it scored (``item, model, value, human``), as the report's judges section pairs them. Output: a
JSON-ready dict (see :func:`compare_judges`) that the report stores under ``judge_comparisons`` and
merges into each judge block (intervals).

How: per human dimension and model, the items are resampled with replacement ``n_boot`` times (one
count vector per resample, :func:`analysis.science.correlation_tests.bootstrap_counts`, seeded from the seed,
the dimension and the model). Every correlation on that dimension and model is computed on the *same*
resamples, restricted to its own items (an item a judge did not score has weight 0), so

* one judge's per-model SRCC/PLCC get percentile intervals, and the mean over models (Fisher z, or
  tanh of the mean r under VIEScore's conventions) gets one from the same replicates;
* two judges compared on the items both scored give a *paired* bootstrap of their difference
  (models fixed, items resampled within each model, the average recomputed per replicate): CI and
  two-sided p-value. For Pearson per model, Williams' t, Steiger's Z and Zou's interval are given
  beside it (:mod:`analysis.science.correlation_tests`);
* a judge against the human ceiling, like for like: per left-out rater, the judge and that rater each
  correlated with the mean of the *other* raters on the judge's items (Fisher mean over raters, then
  over models), the difference bootstrapped on the same resamples. In a resample, as in the ceiling
  itself, a rater whose correlation is undefined (constant scores) is skipped in the mean over raters.

Kendall's tau gets a Fieller interval per model (no bootstrap: its weighted form costs O(n^2) per
resample). A resample where a statistic is undefined (a model's resampled scores constant) is left
out and counted (``bootstrap_undefined_share``). All summary-level p-values of a study form one
family, Holm-adjusted (``p_holm``): that is what the judges page marks as real.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.science.correlation import fisher_z_mean, sample_correlations, tanh_of_mean
from analysis.science.correlation_tests import (
    bootstrap_counts,
    fisher_interval,
    holm,
    steiger_z,
    summarise_replicates,
    weighted_correlations_both,
    williams_t,
    zou_interval,
)

AVERAGES = ("fisher", "tanh_mean")
_NAMES = {"srcc": "spearman", "plcc": "pearson"}
# resamples x items the bootstrap may touch per human dimension; beyond it the intervals are skipped
# (with a reason) rather than make the report page wait. ImagenHub's largest task (1,432 items) fits
# 1,000 resamples many times over; EvalMi-50K (50,400 items, continuous z-MOS: ~9 s of CPU per judge
# at 1,000 resamples) needs ``n_boot`` <= 238 (``manage.py report --n-boot 200``).
WORK_LIMIT = 12_000_000


@dataclass(frozen=True)
class JudgeBlock:
    judge: str
    key: str  # the report key: "SC", or "CLIP_Score~SC"
    human_dimension: str
    frame: pd.DataFrame  # item, model, value, human (value sign-flipped already if lower is better)


def _average(values: np.ndarray, how: str) -> np.ndarray:
    """Mean over models (last axis) per replicate: Fisher z (tanh of mean atanh) or tanh of mean r."""
    if how == "fisher":
        return np.tanh(np.arctanh(np.clip(values, -1 + 1e-12, 1 - 1e-12)).mean(axis=-1))
    return np.tanh(values.mean(axis=-1))


def _point_average(values: list, how: str) -> float | None:
    return fisher_z_mean(values) if how == "fisher" else tanh_of_mean(values)


def _seed(seed: int, *parts: str) -> np.random.Generator:
    return np.random.default_rng([seed, *(zlib.crc32(p.encode()) for p in parts)])


class _Universe:
    """The items of one (human dimension, model), their human scores and the shared resamples.

    :meth:`replicates` remembers what it computed: the same correlation is asked for again when two
    judges scored the same items (their pair reuses each judge's own replicates) and when several
    judges are set beside the same raters (each rater against the rest is computed once)."""

    def __init__(self, items: np.ndarray, human: np.ndarray, n_boot: int, seed: int, *names: str) -> None:
        self.items, self.human = items, human
        self.n_boot, self.seed, self.names = n_boot, seed, names
        self.position = pd.Series(np.arange(len(items)), index=items)
        self._memo: dict = {}

    @property
    def counts(self) -> np.ndarray:
        """The resamples (n_boot, items), drawn again from the same seed whenever needed rather than
        kept: at EvalMi scale (24 models x 2,100 items x 1,000 resamples) keeping them all would hold
        400 MB; a draw costs a few milliseconds."""
        return bootstrap_counts(len(self.items), self.n_boot, _seed(self.seed, *self.names))

    def replicates(self, x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
        """SRCC and PLCC of x and y (universe-aligned, NaN = not part of it) in every resample."""
        key = (x.tobytes(), y.tobytes())
        if key not in self._memo:
            self._memo[key] = weighted_correlations_both(x, y, self.counts)
        return self._memo[key]

    def values(self, frame: pd.DataFrame) -> np.ndarray:
        """The frame's ``value`` per universe item (NaN where it has none)."""
        out = np.full(len(self.items), np.nan)
        present = frame[frame["item"].isin(self.position.index)]
        out[self.position[present["item"]].to_numpy()] = present["value"].to_numpy(float)
        return out


def compare_judges(blocks: list[JudgeBlock], *, raters: pd.DataFrame | None = None, n_boot: int = 1000,
                   seed: int = 0, average: str = "fisher") -> dict:
    """Intervals and paired comparisons for every block (see module docstring).

    Returns ``{"intervals": {judge: {key: {"models": {model: {srcc_ci95, plcc_ci95, krcc_ci95,
    bootstrap_undefined_share}}, "spearman_mean_ci95", "pearson_mean_ci95", ...}}}, "comparisons": [...],
    "method": str, "reasons": [str]}``. ``raters``: per-rater ratings (``rater, item, model`` and one
    column per human dimension) for the comparisons with the human ceiling; None skips them.
    """
    if average not in AVERAGES:
        raise ValueError(f"average must be one of {AVERAGES}, got {average!r}")
    out: dict = {"intervals": {}, "comparisons": [], "reasons": [], "n_boot": n_boot, "average": average,
                 "method": _METHOD}
    if n_boot <= 0:
        out["reasons"].append("n_boot = 0: no bootstrap intervals or comparisons")
        return out
    by_dimension: dict[str, list[JudgeBlock]] = {}
    for block in blocks:
        by_dimension.setdefault(block.human_dimension, []).append(block)
    for hdim, group in sorted(by_dimension.items()):
        human = pd.concat([b.frame[["item", "model", "human"]] for b in group]).drop_duplicates("item")
        if n_boot * len(human) > WORK_LIMIT:
            out["reasons"].append(f"{hdim}: {len(human)} items x {n_boot} resamples exceeds the bootstrap budget "
                                  f"({WORK_LIMIT:,}); no intervals or comparisons (use n_boot <= "
                                  f"{WORK_LIMIT // max(len(human), 1)})")
            continue
        universes = {}
        for model, part in human.groupby("model", sort=True):
            part = part.sort_values("item")
            universes[str(model)] = _Universe(part["item"].to_numpy(), part["human"].to_numpy(float), n_boot, seed,
                                              hdim, str(model))
        replicates = {}
        for block in group:
            replicates[block.judge, block.key] = _block_intervals(block, universes, average, out)
        for i, first in enumerate(group):
            for second in group[i + 1:]:
                out["comparisons"].append(_judge_pair(first, second, universes, average))
        if raters is not None and hdim in raters.columns:
            for block in group:
                found = _ceiling_comparison(block, universes, raters, average)
                if found is not None:
                    out["comparisons"].append(found)
    adjusted = holm([c["p"] for c in out["comparisons"]])
    for comparison, p_holm in zip(out["comparisons"], adjusted):
        comparison["p_holm"] = p_holm
        comparison["real"] = bool(p_holm is not None and p_holm < 0.05)
    return out


_METHOD = ("paired bootstrap over items (resampled within each model, the same resamples for every judge and "
           "rater on a human dimension); percentile 95% CI; two-sided p from the bootstrap standard error "
           "(normal approximation; p_counted = 2 (k + 1) / (B + 1), k of the B resamples on the far side of 0, beside it); p_holm: Holm over every comparison of the study. Pearson per model also gets "
           "Williams' t, Steiger's Z and Zou's (2007) CI. Kendall intervals: Fieller (Fisher z, SE "
           "sqrt(0.437/(n-4))).")


def _block_intervals(block: JudgeBlock, universes: dict[str, _Universe], average: str, out: dict) -> dict:
    """Per-model intervals of one judge block and of its mean over models; returns the replicates."""
    models: dict = {}
    reps: dict[str, dict[str, np.ndarray]] = {"srcc": {}, "plcc": {}}
    points: dict[str, dict[str, float | None]] = {"srcc": {}, "plcc": {}}
    for model, part in block.frame.groupby("model", sort=True):
        model = str(model)
        universe = universes[model]
        judge = universe.values(part)
        point = sample_correlations(judge, universe.human, logistic=False)
        entry: dict = {"krcc_ci95": _pair(fisher_interval(point.krcc, point.n, method="krcc")),
                       "bootstrap_undefined_share": {}}
        for method in ("srcc", "plcc"):
            estimate = getattr(point, method)
            rep = universe.replicates(judge, universe.human)[method]
            summary = summarise_replicates(estimate, rep)
            entry[f"{method}_ci95"] = list(summary.ci95) if summary.ci95 else None
            if estimate is not None:
                entry["bootstrap_undefined_share"][method] = summary.undefined / summary.n_boot
                reps[method][model] = rep
                points[method][model] = estimate
        models[model] = entry
    summary_block: dict = {"models": models}
    for method, name in _NAMES.items():
        names = sorted(reps[method])
        if not names:
            summary_block[f"{name}_mean_ci95"] = None
            continue
        stacked = np.stack([reps[method][m] for m in names], axis=-1)
        mean_reps = _average(stacked, average)  # NaN where any model is undefined: counted
        summary = summarise_replicates(_point_average([points[method][m] for m in names], average), mean_reps)
        summary_block[f"{name}_mean_ci95"] = list(summary.ci95) if summary.ci95 else None
        summary_block.setdefault("bootstrap_undefined_share", {})[f"{name}_mean"] = summary.undefined / summary.n_boot
    out["intervals"].setdefault(block.judge, {})[block.key] = summary_block
    return reps


def _pair(interval) -> list[float] | None:
    return [float(interval[0]), float(interval[1])] if interval else None


def _judge_pair(first: JudgeBlock, second: JudgeBlock, universes: dict[str, _Universe], average: str) -> dict:
    """First vs second judge on the items both scored, per model and averaged; oriented so that the
    estimated difference is not negative (the better judge first)."""
    per_model: dict = {}
    reps = {"srcc": ([], []), "plcc": ([], [])}
    points = {"srcc": ([], []), "plcc": ([], [])}
    items = 0
    for model in sorted(set(first.frame["model"].astype(str)) & set(second.frame["model"].astype(str))):
        universe = universes[model]
        a = universe.values(first.frame[first.frame["model"].astype(str) == model])
        b = universe.values(second.frame[second.frame["model"].astype(str) == model])
        both = np.isfinite(a) & np.isfinite(b)
        a, b = np.where(both, a, np.nan), np.where(both, b, np.nan)
        pa = sample_correlations(a, universe.human, logistic=False)
        pb = sample_correlations(b, universe.human, logistic=False)
        n = int(both.sum())
        items += n
        entry: dict = {"n": n}
        for method, name in _NAMES.items():
            ra, rb = getattr(pa, method), getattr(pb, method)
            if ra is None or rb is None:
                entry[name] = None
                continue
            rep_a = universe.replicates(a, universe.human)[method]
            rep_b = universe.replicates(b, universe.human)[method]
            reps[method][0].append(rep_a)
            reps[method][1].append(rep_b)
            points[method][0].append(ra)
            points[method][1].append(rb)
            entry[name] = {"first": ra, "second": rb, **summarise_replicates(ra - rb, rep_a - rep_b).as_dict()}
            if method == "plcc":
                entry[name].update(_closed_form(a, b, universe.human, ra, rb, n))
        per_model[model] = entry
    result = {"kind": "judge_vs_judge", "human_dimension": first.human_dimension,
              "first": {"judge": first.judge, "key": first.key}, "second": {"judge": second.judge, "key": second.key},
              "items": items, "per_model": per_model}
    _summaries(result, reps, points, average)
    if result["difference"] is not None and result["difference"] < 0:
        _flip(result)
    return result


def _closed_form(a: np.ndarray, b: np.ndarray, human: np.ndarray, ra: float, rb: float, n: int) -> dict:
    """Williams' t, Steiger's Z and Zou's CI for two Pearson correlations with the human scores."""
    keep = np.isfinite(a) & np.isfinite(b) & np.isfinite(human)
    between = sample_correlations(a[keep], b[keep], logistic=False).plcc
    if between is None:
        return {"williams_t": None, "williams_p": None, "steiger_z": None, "steiger_p": None, "zou_ci95": None,
                "judges_correlation": None}
    w, s = williams_t(ra, rb, between, n), steiger_z(ra, rb, between, n)
    return {"judges_correlation": between, "williams_t": w.statistic, "williams_p": w.p_value,
            "steiger_z": s.statistic, "steiger_p": s.p_value, "zou_ci95": _pair(zou_interval(ra, rb, between, n))}


def _summaries(result: dict, reps: dict, points: dict, average: str) -> None:
    """The mean over models of each side, its difference, CI and p (Spearman is the headline)."""
    for method, name in _NAMES.items():
        first, second = points[method]
        if not first:
            result[name] = None
            continue
        mean_a, mean_b = _point_average(first, average), _point_average(second, average)
        rep = _average(np.stack(reps[method][0], axis=-1), average) - _average(np.stack(reps[method][1], axis=-1),
                                                                              average)
        result[name] = {"first": mean_a, "second": mean_b, "models": len(first),
                        **summarise_replicates(mean_a - mean_b, rep).as_dict()}
    headline = result.get("spearman") or {}
    result["difference"] = headline.get("estimate")
    result["ci95"] = headline.get("ci95")
    result["p"] = headline.get("p")
    result["p_counted"] = headline.get("p_counted")
    result["bootstrap_undefined_share"] = headline.get("bootstrap_undefined_share")


def _flip(result: dict) -> None:
    result["first"], result["second"] = result["second"], result["first"]

    def flip_block(block: dict | None) -> None:
        if not block:
            return
        block["first"], block["second"] = block["second"], block["first"]
        block["estimate"] = -block["estimate"] if block["estimate"] is not None else None
        if block.get("ci95"):
            block["ci95"] = [-block["ci95"][1], -block["ci95"][0]]
        if block.get("zou_ci95"):
            block["zou_ci95"] = [-block["zou_ci95"][1], -block["zou_ci95"][0]]
        for key in ("williams_t", "steiger_z"):
            if block.get(key) is not None:
                block[key] = -block[key]

    for name in _NAMES.values():
        flip_block(result.get(name))
        for entry in result["per_model"].values():
            flip_block(entry.get(name))
    result["difference"] = -result["difference"]
    result["ci95"] = [-result["ci95"][1], -result["ci95"][0]] if result["ci95"] else None


def _over_defined_raters(judge: np.ndarray, own: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fisher means over left-out raters per replicate (last axis), over the raters whose two
    correlations are both defined in that replicate, as the ceiling itself skips a rater whose scores
    are constant (a skewed rater often is in a resample); NaN only where no rater is defined."""
    both = np.isfinite(judge) & np.isfinite(own)
    count = both.sum(axis=-1)

    def mean(values: np.ndarray) -> np.ndarray:
        z = np.where(both, np.arctanh(np.clip(np.nan_to_num(values), -1 + 1e-12, 1 - 1e-12)), 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(count > 0, np.tanh(z.sum(axis=-1) / count), np.nan)

    return mean(judge), mean(own)


def _ceiling_comparison(block: JudgeBlock, universes: dict[str, _Universe], raters: pd.DataFrame,
                        average: str) -> dict | None:
    """The judge against the human ceiling on the judge's items, like for like (module docstring)."""
    hdim = block.human_dimension
    ratings = raters[["rater", "item", hdim]].dropna()
    ratings = ratings[ratings["item"].isin(set(block.frame["item"]))]
    if ratings.empty:
        return None
    matrix = ratings.groupby(["rater", "item"], observed=True)[hdim].mean().unstack("rater")
    per_model: dict = {}
    reps = {"srcc": ([], []), "plcc": ([], [])}
    points = {"srcc": ([], []), "plcc": ([], [])}
    for model, part in block.frame.groupby("model", sort=True):
        model = str(model)
        universe = universes[model]
        judge = universe.values(part)
        grid = matrix.reindex(universe.items).to_numpy(float)  # items x raters
        present = np.isfinite(grid)
        total, count = np.where(present, grid, 0.0).sum(axis=1), present.sum(axis=1)
        entry: dict = {"raters": 0}
        rater_reps = {"srcc": ([], []), "plcc": ([], [])}
        rater_points = {"srcc": ([], []), "plcc": ([], [])}
        for r in range(grid.shape[1]):
            own = grid[:, r]
            with np.errstate(divide="ignore", invalid="ignore"):
                rest = np.where(present[:, r] & (count > 1), (total - np.nan_to_num(own)) / (count - 1), np.nan)
            use = np.isfinite(rest) & np.isfinite(judge)
            if use.sum() < 3:
                continue
            own_u, judge_u = np.where(use, own, np.nan), np.where(use, judge, np.nan)
            p_own = sample_correlations(own_u, rest, logistic=False)
            p_judge = sample_correlations(judge_u, rest, logistic=False)
            for method in ("srcc", "plcc"):
                if getattr(p_own, method) is None or getattr(p_judge, method) is None:
                    continue
                rater_points[method][0].append(getattr(p_judge, method))
                rater_points[method][1].append(getattr(p_own, method))
                rater_reps[method][0].append(universe.replicates(judge_u, rest)[method])
                rater_reps[method][1].append(universe.replicates(own_u, rest)[method])
        for method, name in _NAMES.items():
            judge_points, own_points = rater_points[method]
            if len(judge_points) < 2:
                entry[name] = None
                continue
            judge_m, ceiling_m = fisher_z_mean(judge_points), fisher_z_mean(own_points)
            rep_judge, rep_ceiling = _over_defined_raters(np.stack(rater_reps[method][0], axis=-1),
                                                          np.stack(rater_reps[method][1], axis=-1))
            entry["raters"] = len(judge_points)
            entry[name] = {"first": judge_m, "second": ceiling_m,
                           **summarise_replicates(judge_m - ceiling_m, rep_judge - rep_ceiling).as_dict()}
            reps[method][0].append(rep_judge)
            reps[method][1].append(rep_ceiling)
            points[method][0].append(judge_m)
            points[method][1].append(ceiling_m)
        per_model[model] = entry
    if not points["srcc"][0]:
        return None
    result = {"kind": "judge_vs_ceiling", "human_dimension": hdim,
              "first": {"judge": block.judge, "key": block.key, "measure": "judge vs mean of the other k-1 raters"},
              "second": {"judge": "human ceiling", "key": hdim, "measure": "rater vs mean of the other k-1 raters"},
              "items": int(len(block.frame)), "per_model": per_model}
    _summaries(result, reps, points, average)
    return result



def yes_no_intervals(judge, human, *, n_boot: int, seed: int = 0, where: str = "") -> dict:
    """Bootstrap 95% intervals of a judge's yes/no agreement with the human majority and of Cohen's
    kappa, items resampled with replacement. An item is one of four cells (judge yes/no x human
    yes/no) and both statistics depend only on the cell counts, so a resample is one multinomial draw
    of the four counts (the same distribution as resampling the items). Kappa is undefined in a
    resample where both sides gave one answer only, the same one; such resamples are counted
    (``bootstrap_undefined_share``). ``judge``/``human``: 1/0 arrays of equal length, NaN left out."""
    j, h = np.asarray(judge, float), np.asarray(human, float)
    keep = np.isfinite(j) & np.isfinite(h)
    j, h = j[keep], h[keep]
    n = len(j)
    if n == 0 or n_boot <= 0:
        return {"agreement_ci95": None, "cohen_kappa_ci95": None, "bootstrap_undefined_share": None}
    cells = np.array([((j == 1) & (h == 1)).sum(), ((j == 1) & (h == 0)).sum(),
                      ((j == 0) & (h == 1)).sum(), ((j == 0) & (h == 0)).sum()], float)
    counts = _seed(seed, "yes/no", where).multinomial(n, cells / n, size=n_boot).astype(float)
    agreement, kappa = _agreement_and_kappa(counts)
    point_agreement, point_kappa = (float(v[0]) for v in _agreement_and_kappa(cells[None]))
    a = summarise_replicates(point_agreement, agreement)
    k = summarise_replicates(point_kappa if np.isfinite(point_kappa) else None, kappa)
    return {"agreement_ci95": list(a.ci95) if a.ci95 else None, "cohen_kappa_ci95": list(k.ci95) if k.ci95 else None,
            "bootstrap_undefined_share": {"cohen_kappa": k.undefined / n_boot} if k.estimate is not None else {}}


def _agreement_and_kappa(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(agreement, Cohen's kappa) per row of cell counts (yes/yes, yes/no, no/yes, no/no); kappa NaN
    where the expected agreement is 1."""
    n = counts.sum(axis=1)
    observed = (counts[:, 0] + counts[:, 3]) / n
    judge_yes = (counts[:, 0] + counts[:, 1]) / n
    human_yes = (counts[:, 0] + counts[:, 2]) / n
    expected = judge_yes * human_yes + (1 - judge_yes) * (1 - human_yes)
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = np.where(np.isclose(expected, 1.0), np.nan, (observed - expected) / (1 - expected))
    return observed, kappa
