"""Verdicts on model pairs that stay valid while the dashboard is watched, a study-level stop
recommendation, and what settling the open pairs will cost. No Django.

A pair of models (``a`` ranked above ``b``) is

* **separated** when the interval of their difference excludes 0,
* **tied** when it lies inside ``(-margin, margin)`` (the study's tie margin, in score units),
* **open** otherwise.

Optional stopping. A dashboard is looked at after every batch and a study is stopped when it looks
good; a fixed-level 95 % CI re-checked at every look declares a separation between two truly equal
models far more often than 5 % (the simulation in :mod:`analysis.science.simulation` prints ~25-40 %
over 50 looks). Method: **anytime-valid confidence sequences**, the two-sided normal-mixture boundary
(Robbins 1970, "Statistical methods related to the law of the iterated logarithm", Ann. Math.
Statist.; Howard, Ramdas, McAuliffe & Sekhon 2021, "Time-uniform, nonparametric, nonasymptotic
confidence sequences", Ann. Statist. 49(2), eq. (14); in its estimated-variance form the asymptotic
confidence sequence of Waudby-Smith, Arbour, Sinha, Kennedy & Ramdas 2024, "Time-uniform central
limit theory and asymptotic confidence sequences", Ann. Statist., Thm 2.2). With ``n`` ratings
behind an estimate of standard error ``std``:

    halfwidth = std * sqrt((x + 1) / x * log((x + 1) / alpha²)),   x = rho² n

and by Ville's inequality the interval covers the truth at *every* n simultaneously with probability
≥ 1 - alpha: peeking after every batch, or every rating, costs nothing extra. ``rho`` is fixed in
advance (never from the data): ``rho² = (-2 log alpha + log(1 - 2 log alpha)) / n_opt`` makes the
boundary tightest at ``n_opt`` ratings (the pair's planned ratings), where the multiplier is 3.03
instead of 1.96 at alpha = 0.05; it grows slowly (√log) away from it.

Why this and not alpha spending (Lan-DeMets, or Bonferroni/Holm over looks): spending needs the
number or the information times of the looks fixed in advance, and a live dashboard is looked at
whenever a researcher opens it; Bonferroni over K looks costs z(1 - alpha / 2K) (3.02 at K = 20,
3.29 at K = 50) and breaks at look K + 1. The confidence sequence is closed-form, vectorised over
pairs, and holds for any number of looks. Caveats: validity is asymptotic in ``n`` (the std is
estimated), pairs are checked one at a time (``alpha`` is per pair; pass ``alpha / pairs`` for a
family-wise guarantee), and "adjacent" follows the current ranking.

Cost forecast: a plug-in answer. A pair's variance falls as 1 / ratings (per-rating variance
``std² n``); assuming the current gap is the true one, the ratings at which the half-width
reaches the gap (separation) or ``margin - |gap|`` (tie), whichever comes first, minus the ratings
already there. Pay and pace turn it into money and hours. A pair whose gap is 0 with no margin
never settles (inf).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

ALPHA = 0.05
SEPARATED, TIED, OPEN = "separated", "tied", "open"
VERDICTS = (OPEN, SEPARATED, TIED)  # codes 0, 1, 2
FORECAST_GROWTH = 1.02  # the forecast searches ratings on a 2 % geometric grid
FORECAST_STEPS = 1400  # up to 1.02 ** 1400 ~ 1e12 times the current ratings


def mixture_multiplier(n, n_opt, alpha: float = ALPHA) -> np.ndarray:
    """The confidence sequence's half-width in standard errors after ``n`` ratings, tuned to be
    tightest at ``n_opt`` (inf where n ≤ 0)."""
    n = np.asarray(n, float)
    log_term = -2.0 * np.log(alpha)
    x = np.asarray(n_opt, float) ** -1.0 * (log_term + np.log1p(log_term)) * n
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.sqrt((x + 1.0) / x * np.log((x + 1.0) / alpha**2))
    return np.where(n > 0, out, np.inf)


def fixed_multiplier(alpha: float = ALPHA) -> float:
    """A fixed-level two-sided interval's half-width in standard errors (valid for one look)."""
    return float(stats.norm.ppf(1 - alpha / 2))


def halfwidth(std, n, *, alpha: float = ALPHA, n_opt=None, anytime: bool = True) -> np.ndarray:
    """Half-width of the interval around an estimate of standard error ``std`` from ``n`` ratings:
    the confidence sequence's (``anytime``, needs ``n_opt``) or the fixed-level one. Use it for any
    number watched as data arrive (a model gap, Krippendorff's α)."""
    std = np.asarray(std, float)
    if not anytime:
        return std * fixed_multiplier(alpha)
    if n_opt is None:
        raise ValueError("an anytime interval needs n_opt, fixed before the study (its planned ratings)")
    return std * mixture_multiplier(n, n_opt, alpha)


def classify(diff, std, n, *, margin: float = 0.0, alpha: float = ALPHA, n_opt=None,
             anytime: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(verdict codes into :data:`VERDICTS`, half-widths) for differences ``diff`` with standard
    errors ``std`` from ``n`` ratings. NaN std: open."""
    diff = np.asarray(diff, float)
    hw = halfwidth(std, n, alpha=alpha, n_opt=n_opt, anytime=anytime)
    gap = np.abs(diff)
    with np.errstate(invalid="ignore"):
        separated = gap > hw
        tied = (gap + hw < margin) if margin > 0 else np.zeros(gap.shape, bool)
    code = np.where(separated, 1, np.where(tied, 2, 0))
    return code, hw


def adjacent_pairs(estimate) -> tuple[np.ndarray, np.ndarray]:
    """(upper, lower) model indices of neighbours in the ranking by ``estimate`` (best first; NaN
    estimates rank last; ties in a stable order)."""
    estimate = np.asarray(estimate, float)
    order = np.argsort(-np.nan_to_num(estimate, nan=-np.inf), kind="stable")
    return order[:-1], order[1:]


@dataclass(frozen=True)
class PairVerdicts:
    """One row per pair: ``a`` ranked above ``b`` (model indices), ``diff`` = estimate[a] - estimate[b],
    its ``std``, the ratings ``n`` on both models, the interval ``low``/``high`` and the verdict."""

    a: np.ndarray
    b: np.ndarray
    diff: np.ndarray
    std: np.ndarray
    n: np.ndarray
    halfwidth: np.ndarray
    code: np.ndarray
    margin: float
    anytime: bool

    @property
    def verdict(self) -> np.ndarray:
        return np.asarray(VERDICTS, dtype=object)[self.code]

    @property
    def low(self) -> np.ndarray:
        return self.diff - self.halfwidth

    @property
    def high(self) -> np.ndarray:
        return self.diff + self.halfwidth

    @property
    def open(self) -> np.ndarray:
        return self.code == 0

    def settled_models(self, n_models: int) -> np.ndarray:
        """True for models in no open pair (a model with no pair at all counts as settled)."""
        busy = np.zeros(n_models, bool)
        busy[self.a[self.open]] = True
        busy[self.b[self.open]] = True
        return ~busy

    def rows(self, names=None) -> list[dict]:
        """For the dashboard and the audit log."""
        label = (lambda k: str(names[k])) if names is not None else int
        return [{"a": label(a), "b": label(b), "diff": float(d), "low": float(d - h), "high": float(d + h),
                 "ratings": int(n), "verdict": VERDICTS[c]}
                for a, b, d, h, n, c in zip(self.a, self.b, self.diff, self.halfwidth, self.n, self.code)]


def pair_verdicts(estimate, std, n, *, margin: float = 0.0, alpha: float = ALPHA, n_opt=None,
                  anytime: bool = True, pairs: tuple[np.ndarray, np.ndarray] | None = None) -> PairVerdicts:
    """Verdicts on model pairs from per-model ``estimate``, standard error ``std`` and ratings ``n``
    (arrays indexed by model code). ``pairs``: (a, b) index arrays; default the adjacent pairs of
    the current ranking. The models' errors are taken as independent (shared raters' biases make
    the difference's true variance a little smaller: conservative)."""
    estimate, std, n = (np.asarray(x, float) for x in (estimate, std, n))
    a, b = adjacent_pairs(estimate) if pairs is None else (np.asarray(pairs[0]), np.asarray(pairs[1]))
    diff = estimate[a] - estimate[b]
    pair_std = np.sqrt(std[a] ** 2 + std[b] ** 2)
    pair_n = n[a] + n[b]
    code, hw = classify(diff, pair_std, pair_n, margin=margin, alpha=alpha, n_opt=n_opt, anytime=anytime)
    return PairVerdicts(a=a, b=b, diff=diff, std=pair_std, n=pair_n, halfwidth=hw, code=code, margin=margin,
                        anytime=anytime)


def ratings_to_settle(diff, std, n, *, margin: float = 0.0, alpha: float = ALPHA, n_opt=None,
                      anytime: bool = True) -> np.ndarray:
    """Expected extra ratings (on the pair's two models together) until each pair is separated or
    tied, if its current gap were the truth: 0 for settled pairs, inf when it never settles."""
    diff, std, n = (np.asarray(x, float) for x in (diff, std, n))
    gap = np.abs(diff)
    target = np.maximum(gap, margin - gap)  # separation needs hw < gap, a tie hw < margin - gap
    per_rating = std**2 * n  # variance of one rating's worth
    grid = n[:, None] * FORECAST_GROWTH ** np.arange(FORECAST_STEPS)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        std_at = np.sqrt(per_rating[:, None] / grid)
    n_opt_rows = None if n_opt is None else np.broadcast_to(np.asarray(n_opt, float), n.shape)[:, None]
    hw = halfwidth(std_at, grid, alpha=alpha, n_opt=n_opt_rows, anytime=anytime)
    with np.errstate(invalid="ignore"):
        reached = hw < target[:, None]
    first = np.argmax(reached, axis=1)
    ok = reached[np.arange(len(n)), first] & np.isfinite(per_rating) & (n > 0)
    extra = np.where(ok, np.ceil(grid[np.arange(len(n)), first] - n), np.inf)
    code, _ = classify(diff, std, n, margin=margin, alpha=alpha, n_opt=n_opt, anytime=anytime)
    return np.where(code > 0, 0.0, extra)


@dataclass(frozen=True)
class CostForecast:
    """``per_pair``: extra ratings per pair (aligned with the verdicts; 0 settled, inf never).
    ``total``: extra ratings for the study: per model, the largest half-share among its open pairs
    (ratings on a model serve all its pairs), summed. ``cost`` and ``hours`` at the given pay and
    current rate (None when not given)."""

    per_pair: np.ndarray
    total: float
    cost: float | None
    hours: float | None


def forecast(verdicts: PairVerdicts, n_models: int, *, alpha: float = ALPHA, n_opt=None,
             pay_per_rating: float | None = None, ratings_per_hour: float | None = None) -> CostForecast:
    per_pair = ratings_to_settle(verdicts.diff, verdicts.std, verdicts.n, margin=verdicts.margin, alpha=alpha,
                                 n_opt=n_opt, anytime=verdicts.anytime)
    need = np.zeros(n_models)
    half = per_pair / 2.0
    np.maximum.at(need, verdicts.a, half)
    np.maximum.at(need, verdicts.b, half)
    total = float(need.sum())
    cost = total * pay_per_rating if pay_per_rating is not None else None
    hours = total / ratings_per_hour if ratings_per_hour else None
    return CostForecast(per_pair=per_pair, total=total, cost=cost, hours=hours)


@dataclass(frozen=True)
class StopRecommendation:
    stop: bool
    reason: str
    open_pairs: int
    separated: int
    tied: int


def recommend(verdicts: PairVerdicts, cost: CostForecast, *, remaining_ratings: float | None = None
              ) -> StopRecommendation:
    """Stop when every pair is settled, or when the open ones need more ratings than the study has
    left (then they are reported as open: the data cannot settle them at this budget)."""
    counts = np.bincount(verdicts.code, minlength=3)
    open_, separated, tied = int(counts[0]), int(counts[1]), int(counts[2])
    if open_ == 0:
        return StopRecommendation(True, "every pair is separated or tied", open_, separated, tied)
    if remaining_ratings is not None and cost.total > remaining_ratings:
        need = "never (a zero gap with no tie margin)" if not np.isfinite(cost.total) else f"~{cost.total:,.0f}"
        return StopRecommendation(
            True, f"{open_} open pair(s) need {need} more ratings, beyond the {remaining_ratings:,.0f} left: "
                  "report them as open", open_, separated, tied)
    need = "an unbounded number of" if not np.isfinite(cost.total) else f"~{cost.total:,.0f}"
    return StopRecommendation(False, f"{open_} open pair(s): {need} more ratings expected to settle them",
                              open_, separated, tied)
