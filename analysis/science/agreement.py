"""Inter-rater agreement: Krippendorff's alpha, Fleiss' kappa, Gwet's AC1/AC2 and percent agreement.

Inputs are reliability matrices: rows = raters, columns = units (items),
``NaN`` where a rater did not rate a unit. Build one from long ratings with
:func:`reliability_matrix`.

Both coefficients are computed from per-unit category counts, which makes a
bootstrap over units cheap: a bootstrap replicate is just a vector of unit
weights (how often each unit was drawn), and the coincidence matrix of the
replicate is a weighted sum of per-unit coincidence matrices. Units with the
same category counts are collapsed into one pattern first, so 1,000 replicates
cost one multinomial draw and one matrix product, shared by every level of
alpha and by kappa (:func:`agreement_estimates`). The resampling unit is the
unit (item, or the (model, item) image over a whole study), drawn with
replacement from all units of the group; raters are not resampled.

Point estimates use the same coincidence sums with every unit weighted 1;
they equal the ``krippendorff`` package (the reference implementation) to
~1e-15, which the tests check on random data, and need no second pass over
the ratings. :func:`agreement_table` builds the count tables straight from
the long ratings (integer codes, no matrix per group).

Gwet's AC1 (nominal) and AC2 (quadratic weights on the category values) and the raw percent
agreement sit beside alpha and kappa for skewed data, where nearly every rating is the same value:
kappa and alpha then fall towards 0 however often the raters agree (the "kappa paradox"). They
follow Gwet (2014) as the ``irrCAC`` package computes them: percent agreement is the mean over
units with >= 2 ratings of the share of agreeing rater pairs (Fleiss' P-bar; AC2 gives partial
credit w_kl = 1 - ((x_k - x_l) / (x_max - x_min))^2); the chance agreement uses the category
shares pi_k averaged over units with >= 1 rating: pe = T_w / (q (q - 1)) * sum pi_k (1 - pi_k),
q = the categories observed (T_w = q unweighted). They come from the same per-unit sums, so they
share the bootstrap draws.

Undefined cases never produce NaN or raise: the :class:`Estimate` carries
``value=None`` and a human-readable ``reason``. Bootstrap resamples where a coefficient is
undefined (every drawn unit has the same value) are left out of its percentile interval and
counted: ``Estimate.boot_undefined`` of ``Estimate.boot_total``.

At scale (:data:`JACKKNIFE_ABOVE`) the interval can instead be the delete-one jackknife over units
(``method``): leaving one unit out subtracts its features from the sums, so every coefficient's
delete-one values come from one evaluation per count pattern, with no draws (EvalMi-50K: 0.6 s of
draws and products per report saved). The interval is T +- 1.96 se, capped at 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Literal

import numpy as np
import pandas as pd

from analysis.science.codes import RatingCodes, distinct_values, group_codes, sort_order

Level = Literal["nominal", "ordinal", "interval", "ratio"]
LEVELS: tuple[str, ...] = ("nominal", "ordinal", "interval", "ratio")

# Values closer than this are the same category. Means of sqrt() values carry
# float noise (0.7071067811865476 vs ...475); without snapping they would be
# counted as different nominal categories.
SNAP_DECIMALS = 9

# Bootstrap replicates are processed in chunks so weights (chunk x units)
# and coincidences (chunk x V x V) stay around a few tens of MB.
_CHUNK_CELLS = 4_000_000
# Position draws shared between equally sized groups are kept up to this many counts (float64: 64 MB).
_SHARED_CELLS = 8_000_000

BOOTSTRAP = "percentile bootstrap"
JACKKNIFE = "jackknife"
METHODS = (BOOTSTRAP, JACKKNIFE, "auto")
# "auto" takes the jackknife for a statistic when its bootstrap would handle more than this many (rating x
# replicate) cells: 20,000 ratings at 1,000 replicates. EvalMi-50K's per-model agreement with raters
# resampled (33,600 ratings, 50 intervals in a report) took 30 s of a 36 s report; over items only,
# the draws and products took 0.6 s. analysis.science.rater_bootstrap applies the same rule.
JACKKNIFE_ABOVE = 20_000_000


def use_jackknife_for(method: str, cells: int, n_boot: int) -> bool:
    """Whether ``method`` means the jackknife for a statistic whose largest group has ``cells`` ratings."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))}, got {method!r}")
    return method == JACKKNIFE or (method == "auto" and cells * max(n_boot, 0) > JACKKNIFE_ABOVE)


@dataclass(frozen=True)
class Estimate:
    """A statistic with an optional 95 % CI; ``value is None`` means undefined.

    ``reason`` explains a missing value or CI (e.g. "only one value present
    (0.0): agreement is undefined"). ``n_units`` counts units that entered the
    computation (units with >= 2 ratings for agreement measures).
    """

    value: float | None
    ci95: tuple[float, float] | None = None
    reason: str | None = None
    n_units: int = 0
    boot_undefined: int = 0  # bootstrap resamples where the coefficient was undefined (left out of the CI)
    boot_total: int = 0
    method: str = BOOTSTRAP  # of the CI: BOOTSTRAP, or JACKKNIFE (delete-one over units, no resamples)


def reliability_matrix(
    ratings: pd.DataFrame, *, score: str, rater: str = "rater", item: str = "item"
) -> np.ndarray:
    """Pivot long ratings into a raters x units float matrix (NaN = missing).

    If a rater rated a unit twice the mean is used. Row/column order is the
    sorted order of rater and item labels.
    """
    table = ratings.pivot_table(index=rater, columns=item, values=score, aggfunc="mean", dropna=False)
    return table.to_numpy(dtype=float)


# --------------------------------------------------------------------- counts


def _unit_counts(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (counts U x V, sorted distinct values) for a raters x units matrix."""
    data = np.asarray(matrix, dtype=float)
    if data.ndim != 2:
        raise ValueError("reliability matrix must be 2-D (raters x units)")
    data = np.round(data, SNAP_DECIMALS) + 0.0  # + 0.0: -0.0 (a rounded tiny negative) is 0
    present = np.isfinite(data)
    values = np.unique(data[present])
    n_units = data.shape[1]
    counts = np.zeros((n_units, len(values)))
    if len(values):
        unit_idx = np.broadcast_to(np.arange(n_units), data.shape)[present]
        value_idx = np.searchsorted(values, data[present])
        flat = np.bincount(unit_idx * len(values) + value_idx, minlength=n_units * len(values))
        counts = flat.reshape(n_units, len(values)).astype(float)
    return counts, values


def _patterns(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(counts, axis=0, return_counts=True)``: the distinct count rows in lexicographic
    order and how many units have each. Rows of small counts are read as digits of one integer
    (same order) so one integer sort replaces the slower row-wise unique."""
    n_units, n_values = counts.shape
    base = int(counts.max(initial=0)) + 1
    if n_units == 0 or n_values == 0 or n_values * np.log2(base) >= 62:
        return np.unique(counts, axis=0, return_counts=True)
    digits = counts.astype(np.int64)
    key = np.zeros(n_units, np.int64)
    for column in range(n_values):
        key = key * base + digits[:, column]
    keys, first, frequency = np.unique(key, return_index=True, return_counts=True)
    return counts[first], frequency


def _undefined_reason(counts: np.ndarray, values: np.ndarray) -> str | None:
    pairable = counts.sum(axis=1) >= 2
    if not pairable.any():
        return "fewer than 2 ratings on every unit: agreement is undefined"
    present = counts[pairable].sum(axis=0) > 0
    if present.sum() < 2:
        only = values[present]
        shown = f" ({only[0]:g})" if len(only) else ""
        return f"only one value present{shown}: agreement is undefined"
    return None


def _bootstrap_weights(frequency: np.ndarray, n_boot: int, seed: int,
                       draws: "_SharedDraws | None" = None) -> Iterable[np.ndarray]:
    """Yield chunks of replicate weights (replicates x patterns).

    ``frequency[k]`` is how many units share count pattern k (units with the same category
    counts contribute identically, so they are collapsed first). A replicate resamples all
    units with replacement (the resampling unit is the unit, e.g. the item; all its ratings travel
    together); its weight for pattern k is how many drawn units have that pattern. With few
    patterns (Likert data: a few hundred patterns for 50,000 units) the weights are drawn directly
    as multinomial counts over the patterns (:func:`_multinomial_counts`); with many, unit
    positions are drawn (units listed pattern by pattern) and counted. Those position draws depend
    only on (seed, number of units, n_boot), so ``draws`` can share them between groups of the same
    size (every model of a balanced study): the weights are the same integers as drawing afresh, at
    a fraction of the cost.
    """
    n_units, n_patterns = int(frequency.sum()), len(frequency)
    few = n_patterns * 8 <= n_units
    if few:
        rng = np.random.default_rng(seed)
        chunk = max(1, min(n_boot, _CHUNK_CELLS // max(n_patterns, 1)))
        for size in _chunk_sizes(n_boot, chunk):
            yield _multinomial_counts(rng, frequency, size).astype(float)
        return
    pattern_start = np.cumsum(frequency) - frequency  # positions of pattern k: [start, start + freq)
    for positions in (draws or _SharedDraws()).position_counts(n_units, n_boot, seed):
        yield np.add.reduceat(positions, pattern_start, axis=1)


def _multinomial_counts(rng: np.random.Generator, frequency: np.ndarray, size: int,
                        rate: float | None = None) -> np.ndarray:
    """``size`` draws (rows) of Multinomial(n, frequency / n), n = ``frequency.sum()``: how many of
    n units drawn with replacement fall in each pattern. Same distribution as ``rng.multinomial``,
    about twice as fast with hundreds of patterns (EvalMi study level: ~0.07 s instead of ~0.12 s
    per dimension for 1,000 replicates).

    Independent Poisson counts with means ``rate * frequency`` are, given their total t, exactly
    Multinomial(t, frequency / n). Adding n - t further units drawn uniformly (their patterns) makes
    that Multinomial(n, frequency / n); if t > n, removing t - n of the t drawn units at random
    does. ``rate`` keeps t below n but for about one replicate in 700 (three standard deviations),
    so the top-up is the common, vectorised step and the removal a rare loop (any ``rate`` >= 0
    gives the same distribution; tests pass a large one to exercise the removal)."""
    frequency = np.asarray(frequency, np.int64)
    n_units, n_patterns = int(frequency.sum()), len(frequency)
    if rate is None:
        rate = max(n_units - 3.0 * np.sqrt(n_units), 0.0) / max(n_units, 1)
    counts = rng.poisson(frequency * rate, size=(size, n_patterns))
    missing = n_units - counts.sum(axis=1)
    replicate = np.repeat(np.arange(size), np.maximum(missing, 0))
    pattern_of_unit = np.repeat(np.arange(n_patterns), frequency)
    added = pattern_of_unit[rng.integers(0, n_units, len(replicate))]
    counts += np.bincount(replicate * n_patterns + added, minlength=size * n_patterns).reshape(size, n_patterns)
    for row in np.flatnonzero(missing < 0):
        drawn = np.cumsum(counts[row])
        removed = rng.choice(drawn[-1], -missing[row], replace=False)  # which of the drawn units
        counts[row] -= np.bincount(np.searchsorted(drawn, removed, side="right"), minlength=n_patterns)
    return counts


class _ReplicateBatch:
    """:func:`_weighted_sums` of every bootstrap replicate (replicates x features) for many groups,
    computed together.

    Each group's sums are the same replicates as ``_weighted_sums(patterns, _bootstrap_weights(...))``.
    Groups on the position-draw path that have the same number of units share their draws
    (:class:`_SharedDraws`), so their per-position features are laid side by side and multiplied by
    the draws in one matrix product (EvalMi scale: 48 model x dimension groups of 2,100 units, one
    product instead of 48; equal up to float rounding). :meth:`add` returns a slot, filled by :meth:`run`.
    """

    def __init__(self, n_boot: int, seed: int, draws: "_SharedDraws | None" = None) -> None:
        self.n_boot, self.seed = n_boot, seed
        self.draws = draws or _SharedDraws()
        self._waiting: dict[int, list[tuple[np.ndarray, list]]] = {}  # units -> [(per-position features, slot)]

    def add(self, patterns: np.ndarray, frequency: np.ndarray, values: np.ndarray | None = None) -> list:
        n_units, n_patterns = int(frequency.sum()), len(frequency)
        slot: list = [None]
        if n_patterns * 8 <= n_units:
            slot[0] = _weighted_sums(patterns, _bootstrap_weights(frequency, self.n_boot, self.seed, self.draws),
                                     values)
            return slot
        pairable, features = _unit_features(patterns, values)
        full = np.zeros((n_patterns, features.shape[1]))
        full[pairable] = features
        # the position counts multiply per-position features directly: cheaper than first adding
        # positions up into patterns
        self._waiting.setdefault(n_units, []).append((full[np.repeat(np.arange(n_patterns), frequency)], slot))
        return slot

    def run(self) -> None:
        for n_units, jobs in self._waiting.items():
            for batch in _batches(jobs, n_units):
                stacked = np.hstack([features for features, _ in batch])
                sums = np.vstack([positions @ stacked
                                  for positions in self.draws.position_counts(n_units, self.n_boot, self.seed)])
                start = 0
                for features, slot in batch:
                    slot[0] = sums[:, start:start + features.shape[1]]
                    start += features.shape[1]
        self._waiting.clear()


def _batches(jobs: list, n_units: int) -> Iterable[list]:
    """Jobs in runs whose side-by-side features stay under ``_SHARED_CELLS`` values."""
    batch, cells = [], 0
    for job in jobs:
        width = job[0].shape[1] * n_units
        if batch and cells + width > _SHARED_CELLS:
            yield batch
            batch, cells = [], 0
        batch.append(job)
        cells += width
    if batch:
        yield batch


def _chunk_sizes(n_boot: int, chunk: int) -> Iterable[int]:
    done = 0
    while done < n_boot:
        size = min(chunk, n_boot - done)
        done += size
        yield size


class _SharedDraws:
    """Bootstrap draws of unit positions, counted per replicate (replicates x units), cached by
    (units, n_boot, seed) while small enough (``_SHARED_CELLS``), else drawn chunk by chunk."""

    def __init__(self) -> None:
        self._cache: dict[tuple[int, int, int], list[np.ndarray]] = {}

    def position_counts(self, n_units: int, n_boot: int, seed: int) -> Iterable[np.ndarray]:
        key = (n_units, n_boot, seed)
        if key in self._cache:
            return self._cache[key]
        chunks = self._draw(n_units, n_boot, seed)
        if n_units * n_boot <= _SHARED_CELLS:
            chunks = self._cache[key] = list(chunks)
        return chunks

    @staticmethod
    def _draw(n_units: int, n_boot: int, seed: int) -> Iterable[np.ndarray]:
        rng = np.random.default_rng(seed)
        chunk = max(1, min(n_boot, _CHUNK_CELLS // max(n_units, 1)))
        for size in _chunk_sizes(n_boot, chunk):
            # int32 draws are several times faster than the default int64 (fine below 2**31 units)
            draws = rng.integers(0, n_units, size=(size, n_units), dtype=np.int32).astype(np.int64)
            draws += (np.arange(size) * n_units)[:, None]
            yield np.bincount(draws.ravel(), minlength=size * n_units).reshape(size, n_units).astype(float)


def _percentile_ci(replicates: np.ndarray, n_boot: int) -> tuple[tuple[float, float] | None, str | None]:
    """The percentile 95 % interval of the defined replicates (None with a reason when fewer than half
    are defined). The undefined ones are left out: the caller reports how many
    (``n_boot - np.isfinite(replicates).sum()``), since an interval over the remaining resamples
    describes only those where the coefficient exists."""
    finite = replicates[np.isfinite(replicates)]
    if len(finite) < max(2, n_boot // 2):
        return None, f"bootstrap CI undefined: only {len(finite)} of {n_boot} resamples had a defined value"
    low, high = np.percentile(finite, [2.5, 97.5])
    return (float(low), float(high)), None


# ---------------------------------------------------------------- Krippendorff


def _unit_features(counts: np.ndarray, values: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per rated unit (>= 1 rating), everything the coefficients sum over units.

    Returns (rated mask over all units, features U' x (V(V+1)/2 + 4 + V), laid out as
    :class:`_Columns` says): the unit's coincidence contributions (n_uc n_uk - [c==k] n_uc) /
    (m_u - 1) for c <= k (the matrix is symmetric: :func:`_coincidences` restores it), Fleiss'
    per-unit agreement P_u, 1 if the unit is pairable (those three are 0 for a unit with one
    rating), P_u with quadratic weights on ``values`` (AC2), the unit's category shares n_uc / m_u
    and 1 (Gwet's pi_k average over rated units). The category counts and m_u that kappa needs are
    the coincidence matrix's row sums and total (sum over k of the contributions is n_uc), so they
    take no columns. A bootstrap replicate with unit weights w is then ``w @ features``: one matrix
    product for every coefficient together. ``values``: the categories' values (default 0..V-1).
    """
    m = counts.sum(axis=1)
    rated = m >= 1
    c, mr = counts[rated], m[rated]
    n_values = c.shape[1]
    pair = mr >= 2
    denominator = np.where(pair, mr - 1, 1.0)
    row, column = np.triu_indices(n_values)
    coincidence = c[:, row] * c[:, column]
    coincidence[:, row == column] -= c  # the diagonal, in category order
    coincidence /= denominator[:, None]
    coincidence[~pair] = 0.0
    both = mr * denominator
    agreement = np.where(pair, ((c**2).sum(axis=1) - mr) / both, 0.0)
    weights = _quadratic_weights(np.arange(n_values, dtype=float) if values is None else values)
    weighted = np.where(pair, (np.einsum("uk,kl,ul->u", c, weights, c) - mr) / both, 0.0)
    features = np.hstack([coincidence, agreement[:, None], pair[:, None].astype(float), weighted[:, None],
                          c / mr[:, None], np.ones((len(c), 1))])
    return rated, features


class _Columns:
    """Where each sum sits in a :func:`_unit_features` / :func:`_weighted_sums` row of V values."""

    def __init__(self, n_values: int) -> None:
        self.agreement = n_values * (n_values + 1) // 2  # sum of P_u over pairable units
        self.pairable = self.agreement + 1  # how many pairable units
        self.weighted = self.agreement + 2  # sum of quadratic-weighted P_u
        self.shares = slice(self.agreement + 3, self.agreement + 3 + n_values)  # sum of n_uc / m_u
        self.rated = self.agreement + 3 + n_values  # how many rated units


def _quadratic_weights(values: np.ndarray) -> np.ndarray:
    """w_kl = 1 - ((x_k - x_l) / (x_max - x_min))^2 (irrCAC's "quadratic"); the identity for one value."""
    values = np.asarray(values, dtype=float)
    spread = float(np.ptp(values)) if len(values) else 0.0
    if spread == 0:
        return np.eye(len(values))
    return 1.0 - ((values[:, None] - values[None, :]) / spread) ** 2


def _coincidences(sums: np.ndarray, n_values: int) -> np.ndarray:
    """The full V x V coincidence matrix of every :func:`_weighted_sums` row (replicates x V x V)."""
    row, column = np.triu_indices(n_values)
    o = np.empty((len(sums), n_values, n_values))
    o[:, row, column] = sums[:, : len(row)]
    o[:, column, row] = sums[:, : len(row)]
    return o


def _weighted_sums(counts: np.ndarray, weights: Iterable[np.ndarray], values: np.ndarray | None = None
                   ) -> np.ndarray:
    """``weights @ features`` for every chunk of replicates, stacked (replicates x features)."""
    pairable, features = _unit_features(counts, values)
    if pairable.all():
        return np.vstack([w @ features for w in weights])
    # zero rows for units without a pair: cheaper than selecting the weights' columns every chunk
    full = np.zeros((len(counts), features.shape[1]))
    full[pairable] = features
    return np.vstack([w @ full for w in weights])


def _alpha_from_sums(sums: np.ndarray, values: np.ndarray, level: str) -> np.ndarray:
    """Alpha per replicate from :func:`_weighted_sums` rows; NaN where undefined.

    Works on the upper triangle the rows hold (T = V(V+1)/2 coincidences): an off-diagonal entry
    counts twice in the full matrix. The ordinal metric is the interval metric on each
    replicate's mid-ranks a_c = N_<=c - n_c / 2 (Krippendorff's ordinal difference of c and k is
    (a_k - a_c)^2), so no V x V array per replicate is built (3-7x faster than summing the full
    matrix at EvalMi scale; equal to 1e-15)."""
    n_values = len(values)
    if level not in LEVELS:
        raise ValueError(f"unknown level of measurement {level!r}; use one of {LEVELS}")
    if level == "ratio":
        return _alpha_from_full_matrix(sums, values, level)
    row, column = np.triu_indices(n_values)
    upper = sums[:, : len(row)]
    off = row != column
    twice = np.where(off, 2.0, 1.0)
    to_margins = np.zeros((len(row), n_values))
    to_margins[np.arange(len(row)), row] = 1.0
    to_margins[np.flatnonzero(off), column[off]] = 1.0
    n_c = upper @ to_margins
    n = n_c.sum(axis=1)
    if level == "ordinal":
        ranks = np.cumsum(n_c, axis=1) - n_c / 2
        gaps = twice * (ranks[:, column] - ranks[:, row]) ** 2
        observed = (upper * gaps).sum(axis=1)
        expected = (n_c[:, row] * n_c[:, column] * gaps).sum(axis=1)
    else:
        delta = 1.0 - np.eye(n_values) if level == "nominal" else (values[:, None] - values[None, :]) ** 2
        observed = upper @ (twice * delta[row, column])
        expected = ((n_c @ delta) * n_c).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = 1.0 - (n - 1) * observed / expected
    return np.where(expected > 0, alpha, np.nan)


def _alpha_from_full_matrix(sums: np.ndarray, values: np.ndarray, level: str) -> np.ndarray:
    """:func:`_alpha_from_sums` summing the full V x V coincidence matrix of every row (the ratio
    metric, and the tests' reference for the others)."""
    n_values = len(values)
    o = _coincidences(sums, n_values)
    idx = np.arange(n_values)
    n_c = o.sum(axis=2)
    n = n_c.sum(axis=1)
    if level == "nominal":
        delta = np.broadcast_to(1.0 - np.eye(n_values), o.shape)
    elif level == "interval":
        delta = np.broadcast_to((values[:, None] - values[None, :]) ** 2, o.shape)
    elif level == "ratio":
        total = values[:, None] + values[None, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(total == 0, 0.0, (values[:, None] - values[None, :]) / total)
        delta = np.broadcast_to(ratio**2, o.shape)
    elif level == "ordinal":
        cum = np.cumsum(n_c, axis=1)
        lo = np.minimum(idx[:, None], idx[None, :])
        hi = np.maximum(idx[:, None], idx[None, :])
        between = cum[:, hi] - cum[:, lo] + n_c[:, lo]
        delta = (between - (n_c[:, :, None] + n_c[:, None, :]) / 2) ** 2
    else:
        raise ValueError(f"unknown level of measurement {level!r}; use one of {LEVELS}")
    observed = (o * delta).sum(axis=(1, 2))
    expected = (n_c[:, :, None] * n_c[:, None, :] * delta).sum(axis=(1, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = 1.0 - (n - 1) * observed / expected
    return np.where(expected > 0, alpha, np.nan)


def _kappa_from_sums(sums: np.ndarray, n_values: int) -> np.ndarray:
    """Fleiss' kappa per replicate from :func:`_weighted_sums` rows; NaN where undefined."""
    c_sum = _coincidences(sums, n_values).sum(axis=2)  # per category: sum of w_u n_uc
    columns = _Columns(n_values)
    p_sum, m_sum, total_w = sums[:, columns.agreement], c_sum.sum(axis=1), sums[:, columns.pairable]
    with np.errstate(divide="ignore", invalid="ignore"):
        p_bar = p_sum / total_w
        p_c = c_sum / m_sum[:, None]
        p_e = (p_c**2).sum(axis=1)
        kappa = (p_bar - p_e) / (1.0 - p_e)
    return np.where(np.isclose(p_e, 1.0) | (total_w == 0), np.nan, kappa)


def _percent_from_sums(sums: np.ndarray, n_values: int) -> np.ndarray:
    """Raw percent agreement (0-1) per replicate: the mean over pairable units of the share of
    agreeing rater pairs; NaN without a pairable unit."""
    columns = _Columns(n_values)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = sums[:, columns.agreement] / sums[:, columns.pairable]
    return np.where(sums[:, columns.pairable] > 0, share, np.nan)


def _gwet_from_sums(sums: np.ndarray, values: np.ndarray, weighted: bool) -> np.ndarray:
    """Gwet's AC1 (``weighted=False``) or AC2 with quadratic weights per replicate; NaN where
    undefined (fewer than 2 categories, no pairable unit, or chance agreement 1)."""
    n_values = len(values)
    columns = _Columns(n_values)
    if n_values < 2:
        return np.full(len(sums), np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        pa = sums[:, columns.weighted if weighted else columns.agreement] / sums[:, columns.pairable]
        pi = sums[:, columns.shares] / sums[:, [columns.rated]]
        total_weight = _quadratic_weights(values).sum() if weighted else n_values
        pe = total_weight * (pi * (1.0 - pi)).sum(axis=1) / (n_values * (n_values - 1))
        coefficient = (pa - pe) / (1.0 - pe)
    return np.where((sums[:, columns.pairable] > 0) & ~np.isclose(pe, 1.0), coefficient, np.nan)


def _alpha_from_weights(counts: np.ndarray, values: np.ndarray, weights: np.ndarray, level: str) -> np.ndarray:
    """Alpha for each row of ``weights`` (replicates x units); NaN if undefined."""
    return _alpha_from_sums(_weighted_sums(counts, [weights], values), values, level)


def agreement_estimates(
    matrix: np.ndarray,
    *,
    levels: Iterable[Level] = ("nominal", "ordinal", "interval"),
    kappa: bool = True,
    n_boot: int = 0,
    seed: int = 0,
    gwet: bool = False,
) -> dict[str, Estimate]:
    """Alpha at each level (keys ``alpha_<level>``) and Fleiss' kappa (``fleiss_kappa``) of one
    raters x units matrix, sharing the unit counts and the bootstrap replicates; with ``gwet``
    also ``percent_agreement``, ``gwet_ac1`` and ``gwet_ac2_quadratic`` (see module docstring).

    With ``n_boot > 0`` every coefficient gets a percentile 95 % CI over the same resampled
    units (seeded): one matrix product per chunk of replicates serves all levels and kappa.
    """
    counts, values = _unit_counts(matrix)
    return _estimates_from_counts(counts, values, levels=levels, kappa=kappa, n_boot=n_boot, seed=seed, gwet=gwet)


def _estimates_from_counts(
    counts: np.ndarray,
    values: np.ndarray,
    *,
    levels: Iterable[Level],
    kappa: bool,
    n_boot: int,
    seed: int,
    draws: _SharedDraws | None = None,
    gwet: bool = False,
) -> dict[str, Estimate]:
    """:func:`agreement_estimates` from the units x values count table.

    Point estimates use the same coincidence sums as the replicates (all units weighted 1); they
    equal the ``krippendorff`` package's alpha to ~1e-15 (tests compare them), without building
    the matrix again.
    """
    batch = _ReplicateBatch(n_boot, seed, draws)
    finish = _planned_estimates(counts, values, levels=levels, kappa=kappa, batch=batch, gwet=gwet)
    batch.run()
    return finish()


GWET_MEASURES = ("percent_agreement", "gwet_ac1", "gwet_ac2_quadratic")


def _planned_estimates(
    counts: np.ndarray, values: np.ndarray, *, levels: Iterable[Level], kappa: bool, batch: _ReplicateBatch,
    gwet: bool = False, jackknife: bool = False,
) -> Callable[[], dict[str, Estimate]]:
    """:func:`_estimates_from_counts` in two steps: the point estimates now, the group's bootstrap
    replicates queued on ``batch`` (shared with other groups); the returned function gives the
    estimates once ``batch.run()`` has run. ``jackknife``: the delete-one jackknife interval over
    units instead (:func:`_jackknife_estimates`; nothing queued)."""
    levels = list(levels)
    for level in levels:
        if level not in LEVELS:
            raise ValueError(f"unknown level of measurement {level!r}; use one of {LEVELS}")
    names = ([f"alpha_{level}" for level in levels] + (["fleiss_kappa"] if kappa else [])
             + (list(GWET_MEASURES) if gwet else []))
    n_pairable = int((counts.sum(axis=1) >= 2).sum())
    reason = _undefined_reason(counts, values)
    if reason:
        out = {name: Estimate(None, None, reason, n_pairable) for name in names}
        if gwet and n_pairable:  # one value everywhere: every pair of ratings agrees
            out["percent_agreement"] = Estimate(1.0, None, f"{reason.split(':')[0]}: every pair agrees, no interval",
                                                n_pairable)
        return lambda: out
    patterns, frequency = _patterns(counts)

    def coefficients(sums: np.ndarray) -> dict[str, np.ndarray]:
        out = {f"alpha_{level}": _alpha_from_sums(sums, values, level) for level in levels}
        if kappa:
            out["fleiss_kappa"] = _kappa_from_sums(sums, len(values))
        if gwet:
            out["percent_agreement"] = _percent_from_sums(sums, len(values))
            out["gwet_ac1"] = _gwet_from_sums(sums, values, weighted=False)
            out["gwet_ac2_quadratic"] = _gwet_from_sums(sums, values, weighted=True)
        return out

    point = {name: float(value[0])
             for name, value in coefficients(_weighted_sums(patterns, [frequency[None, :].astype(float)],
                                                            values)).items()}
    n_boot = batch.n_boot
    if n_boot <= 0:
        return lambda: {name: Estimate(point[name], None, None, n_pairable) for name in names}
    if jackknife:
        out = _jackknife_estimates(patterns, frequency, values, coefficients, point, n_pairable)
        return lambda: out
    slot = batch.add(patterns, frequency, values)

    def finish() -> dict[str, Estimate]:
        replicates = coefficients(slot[0])
        out = {}
        for name in names:
            ci, ci_reason = _percentile_ci(replicates[name], n_boot)
            undefined = int(n_boot - np.isfinite(replicates[name]).sum())
            out[name] = Estimate(point[name], ci, ci_reason, n_pairable, undefined, n_boot)
        return out

    return finish


def _jackknife_estimates(patterns: np.ndarray, frequency: np.ndarray, values: np.ndarray,
                         coefficients: Callable[[np.ndarray], dict[str, np.ndarray]], point: dict[str, float],
                         n_pairable: int) -> dict[str, Estimate]:
    """Every coefficient with the delete-one jackknife interval over units: without one unit of
    count pattern p the sums are the total minus that pattern's features, so one evaluation per
    pattern gives the delete-one value of all of its ``frequency[p]`` units. The variance is
    (n - 1)/n * sum over units of (T_(u) - mean)^2 over the units whose delete-one value is defined
    (units that no rating reached included, as the bootstrap resamples them: leaving one out
    changes nothing); the interval T +- 1.96 se, capped at 1 (no coefficient exceeds it; percent
    agreement also stays >= 0)."""
    rated, features = _unit_features(patterns, values)
    full = np.zeros((len(patterns), features.shape[1]))
    full[rated] = features
    total = frequency.astype(float) @ full
    with np.errstate(divide="ignore", invalid="ignore"):
        delete_one = coefficients(total[None, :] - full)
    z = 1.959963984540054  # norm.ppf(0.975)
    out = {}
    for name, value in point.items():
        t = delete_one[name]
        finite = np.isfinite(t)
        weight = frequency[finite].astype(float)
        n = weight.sum()
        if not np.isfinite(value) or n < 2:
            out[name] = Estimate(value, None, "jackknife interval undefined: fewer than 2 units leave a defined value",
                                 n_pairable, method=JACKKNIFE)
            continue
        mean = (weight * t[finite]).sum() / n
        half = z * float(np.sqrt((n - 1) / n * (weight * (t[finite] - mean) ** 2).sum()))
        low = max(value - half, 0.0) if name == "percent_agreement" else value - half
        out[name] = Estimate(value, (float(low), float(min(value + half, 1.0))), None, n_pairable, method=JACKKNIFE)
    return out


def krippendorff_alpha(
    matrix: np.ndarray, *, level: Level = "interval", n_boot: int = 0, seed: int = 0
) -> Estimate:
    """Krippendorff's alpha of a raters x units matrix (NaN = missing).

    ``level``: nominal, ordinal, interval or ratio. With ``n_boot > 0`` a
    percentile 95 % CI is bootstrapped over units (seeded, reproducible).
    Undefined (value None + reason): no unit with >= 2 ratings, or only one
    distinct value in the pairable data (e.g. SC = 0 everywhere).
    """
    if level not in LEVELS:
        raise ValueError(f"unknown level of measurement {level!r}; use one of {LEVELS}")
    return agreement_estimates(matrix, levels=[level], kappa=False, n_boot=n_boot, seed=seed)[f"alpha_{level}"]


# ---------------------------------------------------------------- Fleiss


def fleiss_kappa(matrix: np.ndarray, *, n_boot: int = 0, seed: int = 0) -> Estimate:
    """Fleiss' kappa treating each distinct value as a nominal category.

    Unequal numbers of raters per unit: units with fewer than 2 ratings are
    dropped; each remaining unit i gets its own agreement
    P_i = (sum_j n_ij^2 - n_i) / (n_i (n_i - 1)); P-bar is their plain mean;
    category shares p_j pool all ratings of those units; kappa =
    (P-bar - sum p_j^2) / (1 - sum p_j^2). With a constant number of raters
    this is exactly Fleiss (1971).
    """
    return agreement_estimates(matrix, levels=[], kappa=True, n_boot=n_boot, seed=seed)["fleiss_kappa"]


# ---------------------------------------------------------------- tables


def agreement_table(
    ratings: pd.DataFrame,
    *,
    scores: Iterable[str],
    by: Iterable[str] = ("model",),
    levels: Iterable[Level] = ("ordinal", "interval"),
    kappa: bool = True,
    n_boot: int = 1000,
    seed: int = 0,
    rater: str = "rater",
    item: str = "item",
    codes: RatingCodes | None = None,
    gwet: bool = False,
    method: str = BOOTSTRAP,
) -> pd.DataFrame:
    """Agreement per group (e.g. per model) and dimension, in long form.

    ``by=()`` treats the whole study as one group; units are then
    (model, item) pairs if a ``model`` column exists, so the same prompt
    rendered by two models counts as two units.

    Columns: ``*by, dimension, measure`` ('alpha_<level>', 'fleiss_kappa' and, with ``gwet``,
    'percent_agreement', 'gwet_ac1', 'gwet_ac2_quadratic'), ``value, ci_low, ci_high, reason,
    n_units, boot_undefined`` (resamples left out of the CI, of ``n_boot``), ``method`` (of the
    CI: see :func:`agreement_tables`). ``value`` is None (object column) when undefined, never NaN.

    Works on the long frame directly (no raters x units matrix per group): units x values count
    tables come from integer codes, as :func:`reliability_matrix` would give them (a rater's
    repeated ratings of a unit count once, as their mean; every unit of the group is resampled,
    including units this dimension left empty), and groups of the same size share their bootstrap
    draws. 48 model x dimension groups with 1,000 replicates at EvalMi scale: about a second.
    """
    return agreement_tables(ratings, scores=scores, groupings=[by], levels=levels, kappa=kappa, n_boot=n_boot,
                            seed=seed, rater=rater, item=item, codes=codes, gwet=gwet, method=method)[0]


def agreement_tables(
    ratings: pd.DataFrame,
    *,
    scores: Iterable[str],
    groupings: Iterable[Iterable[str]] = (("model",), ()),
    levels: Iterable[Level] = ("ordinal", "interval"),
    kappa: bool = True,
    n_boot: int = 1000,
    seed: int = 0,
    rater: str = "rater",
    item: str = "item",
    codes: RatingCodes | None = None,
    gwet: bool = False,
    method: str = BOOTSTRAP,
) -> list[pd.DataFrame]:
    """:func:`agreement_table` for several groupings (default: per model, and the whole study), one
    table each. Groupings whose units are the same (items unique to one model: per model the unit
    is the item, over the study the (model, item) pair) share one units x values count table per
    dimension, and all share the bootstrap draws of equally sized groups. ``codes``: the ratings'
    :class:`~analysis.science.codes.RatingCodes`, to not code raters, models and items again (same tables).

    ``method``: of the intervals, :data:`BOOTSTRAP` (percentile, ``n_boot`` resamples of units),
    :data:`JACKKNIFE` (delete-one over units) or ``"auto"``: per dimension the jackknife when the
    largest group of the finest grouping has more than :data:`JACKKNIFE_ABOVE` / ``n_boot``
    ratings, for every group alike. The tables' ``method`` column says which."""
    groupings = [list(by) for by in groupings]
    scores, levels = list(scores), list(levels)
    factorized: dict[str, np.ndarray] = {}
    if codes is not None:
        codes.check(ratings, rater=rater, item=item)

    def codes_of(column: str) -> np.ndarray:
        if column not in factorized:
            coded = codes.of(column) if codes is not None else None
            factorized[column] = coded[0] if coded is not None else pd.factorize(ratings[column])[0]
        return factorized[column]

    rater_code = codes_of(rater)
    plans = []
    for by in groupings:
        group_code, keys = group_codes(ratings, by, codes)
        unit_columns = ["model", item] if not by and "model" in ratings.columns and item != "model" else [item]
        if codes is not None and set(by) <= {"model"} and (codes.model is not None or not by):
            # the coded (model, item) pairs (items without a model column): the same partition
            unit = np.where(group_code < 0, -1, codes.unit)
        else:
            unit = _combine([group_code, *(codes_of(c) for c in unit_columns)])  # group-qualified unit per row
        plans.append({"by": by, "keys": keys, "group": group_code, "unit": unit})
    batch = _ReplicateBatch(n_boot, seed)
    base = plans[0]
    for plan in plans:
        plan["shares_base"] = plan is base or _same_partition(base["unit"], plan["unit"])
        # each unit's group under this plan, over the base units when the count tables are shared
        units = base["unit"] if plan["shares_base"] else plan["unit"]
        plan["unit_group"] = _group_of_unit(units, plan["group"])
    finest = max(plans, key=lambda plan: len(plan["keys"]))
    jackknife = {dimension: use_jackknife_for(method, _largest_group(finest["group"], ratings[dimension]), n_boot)
                 for dimension in scores}
    count_tables: dict[tuple[int, str], tuple[np.ndarray, np.ndarray]] = {}
    planned = []  # (plan, key, dimension, finish): estimated once every group's replicates are queued
    for index, plan in enumerate(plans):
        owner = 0 if plan["shares_base"] else index
        units = plans[owner]["unit"]
        members = _members(plan["unit_group"], len(plan["keys"]))
        for k, key in enumerate(plan["keys"]):
            for dimension in scores:
                if (owner, dimension) not in count_tables:
                    count_tables[owner, dimension] = _unit_value_counts(
                        units, rater_code, ratings[dimension].to_numpy(float), len(plan["unit_group"]))
                all_counts, all_values = count_tables[owner, dimension]
                counts = all_counts[members[k]]
                present = counts.sum(axis=0) > 0  # the group's own distinct values
                finish = _planned_estimates(counts[:, present], all_values[present], levels=levels, kappa=kappa,
                                            batch=batch, gwet=gwet, jackknife=jackknife[dimension])
                planned.append((plan, key, dimension, finish))
    batch.run()
    rows: dict[int, list] = {id(plan): [] for plan in plans}
    for plan, key, dimension, finish in planned:
        for measure, est in finish().items():
            rows[id(plan)].append((*key, dimension, measure, est.value, est.ci95[0] if est.ci95 else None,
                                   est.ci95[1] if est.ci95 else None, est.reason, est.n_units, est.boot_undefined,
                                   est.method))
    tables = []
    for plan in plans:
        columns = [*plan["by"], "dimension", "measure", "value", "ci_low", "ci_high", "reason", "n_units",
                   "boot_undefined", "method"]
        table = pd.DataFrame(rows[id(plan)], columns=columns)
        for column in ("value", "ci_low", "ci_high", "reason"):
            table[column] = table[column].astype(object).where(table[column].notna(), None)
        tables.append(table)
    return tables


def _largest_group(group: np.ndarray, values: pd.Series) -> int:
    """The most ratings (non-missing ``values``) any group (code >= 0) has."""
    keep = (group >= 0) & values.notna().to_numpy()
    return int(np.bincount(group[keep]).max()) if keep.any() else 0


def _combine(codes: list[np.ndarray]) -> np.ndarray:
    """One dense code per distinct combination of the given codes (-1 if any is -1)."""
    combined = np.zeros(len(codes[0]), np.int64)
    for code in codes:
        width = int(code.max(initial=-1)) + 1
        combined = np.where((combined < 0) | (code < 0), -1, combined * max(width, 1) + code)
        combined = np.where(combined < 0, -1, pd.factorize(combined)[0])  # keep the numbers small
    return combined


def _same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    """True when codes a and b group the rows identically (missing in the same rows)."""
    if a is b or np.array_equal(a, b):
        return True
    if not np.array_equal(a < 0, b < 0):
        return False
    valid = a >= 0
    n_a, n_b = int(a.max(initial=-1)) + 1, int(b.max(initial=-1)) + 1
    return n_a == n_b == len(pd.unique(a[valid] * max(n_b, 1) + b[valid]))


def _group_of_unit(unit: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Each unit's group (units are group-qualified, so one group per unit)."""
    out = np.full(int(unit.max(initial=-1)) + 1, -1)
    valid = (unit >= 0) & (group >= 0)
    out[unit[valid]] = group[valid]
    return out


def _members(unit_group: np.ndarray, n_groups: int) -> list[np.ndarray]:
    order = np.argsort(unit_group, kind="stable")
    bounds = np.searchsorted(unit_group[order], np.arange(n_groups + 1))
    return [order[bounds[k]:bounds[k + 1]] for k in range(n_groups)]


def _unit_value_counts(unit: np.ndarray, rater: np.ndarray, score: np.ndarray, n_units: int
                       ) -> tuple[np.ndarray, np.ndarray]:
    """(units x values counts, sorted distinct snapped values) over every unit: the rows of the
    raters x units matrices' count tables. A rater who rated a unit twice counts once, with the
    mean, as ``pivot_table`` fills the matrix."""
    present = np.isfinite(score) & (rater >= 0) & (unit >= 0)
    unit, rater, score = unit[present], rater[present], score[present]
    n_raters = int(rater.max(initial=0)) + 1
    cell = unit * n_raters + rater
    order = sort_order(cell)
    cell, unit, score = cell[order], unit[order], score[order]
    first = np.r_[True, cell[1:] != cell[:-1]] if len(cell) else np.zeros(0, bool)
    if not first.all():
        which = np.cumsum(first) - 1
        score = np.bincount(which, weights=score) / np.bincount(which)
        unit = unit[first]
    score = np.round(score, SNAP_DECIMALS) + 0.0  # + 0.0: -0.0 (a rounded tiny negative) is 0
    values, value_index = distinct_values(score)
    flat = np.bincount(unit * len(values) + value_index, minlength=n_units * len(values))
    return flat.reshape(n_units, len(values)).astype(float), values
