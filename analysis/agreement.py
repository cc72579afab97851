"""Inter-rater agreement: Krippendorff's alpha and Fleiss' kappa.

Inputs are reliability matrices: rows = raters, columns = units (items),
``NaN`` where a rater did not rate a unit. Build one from long ratings with
:func:`reliability_matrix`.

Both coefficients are computed from per-unit category counts, which makes a
bootstrap over units cheap: a bootstrap replicate is just a vector of unit
weights (how often each unit was drawn), and the coincidence matrix of the
replicate is a weighted sum of per-unit coincidence matrices. So 1,000
replicates cost one matrix product instead of 1,000 calls.

Point estimates of alpha come from the ``krippendorff`` package (the
reference implementation); our coincidence code reproduces it to 1e-9 and is
only used for the bootstrap replicates.

Undefined cases never produce NaN or raise: the :class:`Estimate` carries
``value=None`` and a human-readable ``reason``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Literal

import krippendorff
import numpy as np
import pandas as pd

Level = Literal["nominal", "ordinal", "interval", "ratio"]
LEVELS: tuple[str, ...] = ("nominal", "ordinal", "interval", "ratio")

# Values closer than this are the same category. Means of sqrt() values carry
# float noise (0.7071067811865476 vs ...475); without snapping they would be
# counted as different nominal categories.
SNAP_DECIMALS = 9

# Bootstrap replicates are processed in chunks so weights (chunk x units)
# and coincidences (chunk x V x V) stay around a few tens of MB.
_CHUNK_CELLS = 4_000_000


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
    data = np.round(data, SNAP_DECIMALS)
    present = np.isfinite(data)
    values = np.unique(data[present])
    n_units = data.shape[1]
    counts = np.zeros((n_units, len(values)))
    if len(values):
        unit_idx = np.broadcast_to(np.arange(n_units), data.shape)[present]
        value_idx = np.searchsorted(values, data[present])
        np.add.at(counts, (unit_idx, value_idx), 1)
    return counts, values


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


def _bootstrap_weights(n_units: int, n_boot: int, seed: int) -> Iterable[np.ndarray]:
    """Yield chunks of multinomial unit weights (replicates x units)."""
    rng = np.random.default_rng(seed)
    chunk = max(1, min(n_boot, _CHUNK_CELLS // max(n_units, 1)))
    done = 0
    while done < n_boot:
        size = min(chunk, n_boot - done)
        done += size
        yield rng.multinomial(n_units, np.full(n_units, 1.0 / n_units), size=size).astype(float)


def _percentile_ci(replicates: np.ndarray, n_boot: int) -> tuple[tuple[float, float] | None, str | None]:
    finite = replicates[np.isfinite(replicates)]
    if len(finite) < max(2, n_boot // 2):
        return None, f"bootstrap CI undefined: only {len(finite)} of {n_boot} resamples had a defined value"
    low, high = np.percentile(finite, [2.5, 97.5])
    return (float(low), float(high)), None


# ---------------------------------------------------------------- Krippendorff


def _alpha_from_weights(counts: np.ndarray, values: np.ndarray, weights: np.ndarray, level: str) -> np.ndarray:
    """Alpha for each row of ``weights`` (replicates x units); NaN if undefined."""
    m = counts.sum(axis=1)
    pairable = m >= 2
    c = counts[pairable]
    f = weights[:, pairable] / (m[pairable] - 1)
    # Coincidence matrix o[b, c, k] = sum_u w_u (n_uc n_uk - [c==k] n_uc) / (m_u - 1)
    o = np.einsum("bu,uc,uk->bck", f, c, c, optimize=True)
    diag = f @ c
    idx = np.arange(len(values))
    o[:, idx, idx] -= diag
    n_c = o.sum(axis=2)
    n = n_c.sum(axis=1)

    if level == "nominal":
        delta = np.broadcast_to(1.0 - np.eye(len(values)), o.shape)
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
    counts, values = _unit_counts(matrix)
    n_pairable = int((counts.sum(axis=1) >= 2).sum())
    reason = _undefined_reason(counts, values)
    if reason:
        return Estimate(None, None, reason, n_pairable)
    value = float(
        krippendorff.alpha(
            reliability_data=np.round(np.asarray(matrix, dtype=float), SNAP_DECIMALS),
            level_of_measurement=level,
        )
    )
    if n_boot <= 0:
        return Estimate(value, None, None, n_pairable)
    replicates = np.concatenate(
        [
            _alpha_from_weights(counts, values, w, level)
            for w in _bootstrap_weights(counts.shape[0], n_boot, seed)
        ]
    )
    ci, ci_reason = _percentile_ci(replicates, n_boot)
    return Estimate(value, ci, ci_reason, n_pairable)


# ---------------------------------------------------------------- Fleiss


def _kappa_from_weights(counts: np.ndarray, weights: np.ndarray) -> np.ndarray:
    m = counts.sum(axis=1)
    pairable = m >= 2
    c, m = counts[pairable], m[pairable]
    w = weights[:, pairable]
    agreement = ((c**2).sum(axis=1) - m) / (m * (m - 1))  # P_i per unit
    total_w = w.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        p_bar = (w @ agreement) / total_w
        p_c = (w @ c) / (w @ m)[:, None]
        p_e = (p_c**2).sum(axis=1)
        kappa = (p_bar - p_e) / (1.0 - p_e)
    return np.where(np.isclose(p_e, 1.0) | (total_w == 0), np.nan, kappa)


def fleiss_kappa(matrix: np.ndarray, *, n_boot: int = 0, seed: int = 0) -> Estimate:
    """Fleiss' kappa treating each distinct value as a nominal category.

    Unequal numbers of raters per unit: units with fewer than 2 ratings are
    dropped; each remaining unit i gets its own agreement
    P_i = (sum_j n_ij^2 - n_i) / (n_i (n_i - 1)); P-bar is their plain mean;
    category shares p_j pool all ratings of those units; kappa =
    (P-bar - sum p_j^2) / (1 - sum p_j^2). With a constant number of raters
    this is exactly Fleiss (1971).
    """
    counts, values = _unit_counts(matrix)
    n_pairable = int((counts.sum(axis=1) >= 2).sum())
    reason = _undefined_reason(counts, values)
    if reason:
        return Estimate(None, None, reason, n_pairable)
    value = float(_kappa_from_weights(counts, np.ones((1, counts.shape[0])))[0])
    if n_boot <= 0:
        return Estimate(value, None, None, n_pairable)
    replicates = np.concatenate(
        [_kappa_from_weights(counts, w) for w in _bootstrap_weights(counts.shape[0], n_boot, seed)]
    )
    ci, ci_reason = _percentile_ci(replicates, n_boot)
    return Estimate(value, ci, ci_reason, n_pairable)


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
) -> pd.DataFrame:
    """Agreement per group (e.g. per model) and dimension, in long form.

    ``by=()`` treats the whole study as one group; units are then
    (model, item) pairs if a ``model`` column exists, so the same prompt
    rendered by two models counts as two units.

    Columns: ``*by, dimension, measure`` ('alpha_<level>' or 'fleiss_kappa'),
    ``value, ci_low, ci_high, reason, n_units``. ``value`` is None (object
    column) when undefined, never NaN.
    """
    by = list(by)
    scores = list(scores)
    frame = ratings
    unit = item
    if not by and "model" in ratings.columns and item != "model":
        frame = ratings.assign(_unit=ratings["model"].astype(str) + "\x1f" + ratings[item].astype(str))
        unit = "_unit"
    groups = frame.groupby(by, sort=True) if by else [((), frame)]
    rows = []
    for key, group in groups:
        key = key if isinstance(key, tuple) else (key,)
        for dimension in scores:
            matrix = reliability_matrix(group, score=dimension, rater=rater, item=unit)
            estimates = {
                f"alpha_{level}": krippendorff_alpha(matrix, level=level, n_boot=n_boot, seed=seed)
                for level in levels
            }
            if kappa:
                estimates["fleiss_kappa"] = fleiss_kappa(matrix, n_boot=n_boot, seed=seed)
            for measure, est in estimates.items():
                rows.append(
                    (
                        *key,
                        dimension,
                        measure,
                        est.value,
                        est.ci95[0] if est.ci95 else None,
                        est.ci95[1] if est.ci95 else None,
                        est.reason,
                        est.n_units,
                    )
                )
    columns = [*by, "dimension", "measure", "value", "ci_low", "ci_high", "reason", "n_units"]
    table = pd.DataFrame(rows, columns=columns)
    for column in ("value", "ci_low", "ci_high", "reason"):
        table[column] = table[column].astype(object).where(table[column].notna(), None)
    return table
