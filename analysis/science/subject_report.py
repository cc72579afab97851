"""The report's ``subject_model`` section: the P.913 subject model beside z-MOS. No Django.

For each rated dimension of a Likert (EvalMi) or ImagenHub study, :mod:`analysis.science.subject_model`
fits item quality, rater bias and rater inconsistency on the raw rating scale (Likert points for
EvalMi, 0–1 for ImagenHub). z-MOS stays the study's headline number (EvalMi defines it); this
section is the alternative that weights raters by their consistency instead of rescaling them.

Layout of ``report["subject_model"]``::

    {"method": "...", "inconsistent_rule": "...",
     "dimensions": {dim: {
         "ratings", "raters", "items", "iterations", "converged", "components", "loglikelihood",
         "models": {model: {"quality", "ci95", "std_fisher", "items"}},
         "raters": {rater: {"bias", "bias_ci95", "inconsistency", "inconsistency_ci95", "ratings",
                            "inconsistent", "at_floor"}},
         "items_table": {"item": [...], "model": [...], "quality": [...], "ci95_low": [...],
                         "ci95_high": [...]},
         "item_ci95_half_width": {"median", "max"},
         "excluded": {rater: why}}}}

``items`` counts the items; ``items_table`` is columnar (one list per field, in the item order of ``item``) because a study can have
50,000 items: :func:`attach_items` puts it in after the report's JSON clean-up (the values are
already plain floats, None for undefined), so the per-item lists do not go through it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from analysis.science.subject_model import FLOOR_SHARE, INCONSISTENCY_FACTOR, SubjectModelResult, subject_model

# The report stops iterating when no item quality moves by more than this (rating points): far
# below any reported digit, and ~40 % fewer iterations than the library default at EvalMi scale.
REPORT_TOL = 1e-5

METHOD = ("ITU-T P.913 clause 12 / SUREAL subject model: rating = item quality + rater bias + rater "
          "inconsistency × N(0, 1), fitted jointly by maximum likelihood (SUREAL's alternating projection, "
          "MLE_CO_AP) on the raw rating scale. Item quality CI: ±1.96 / √Σ(1/v²) over the item's raters "
          "(Fisher information); bias CI: ±1.96 v/√n; inconsistency CI: SUREAL's chi-square interval. Biases "
          "have mean zero within each connected group of raters and items. Model quality: the mean of its "
          "items' qualities, Student-t 95 % CI across items (as the z-MOS CI); std_fisher: the standard error "
          f"of that mean from the raters' noise alone. Inconsistencies are held at ≥ {FLOOR_SHARE:g} × the "
          "median rater's during the fit (the likelihood has a degenerate maximum at 0); at_floor marks raters "
          "held there.")
INCONSISTENT_RULE = (f"inconsistent: the low end of the rater's inconsistency CI exceeds {INCONSISTENCY_FACTOR:g} × "
                     "the median rater's (noise variance above 2.25× a typical rater's). Needs no gold answer; "
                     "reported as a screening signal, applied to nothing.")


def _num(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _pair(low: Any, high: Any) -> list[float] | None:
    low, high = _num(low), _num(high)
    return None if low is None or high is None else [low, high]


def _floats(values: np.ndarray) -> list[float | None]:
    """Plain floats, None where not finite (vectorised: 50,400 items at EvalMi scale)."""
    array = np.asarray(values, float)
    finite = np.isfinite(array)
    if finite.all():
        return array.tolist()
    out = array.astype(object)
    out[~finite] = None
    return out.tolist()


def fit_dimensions(ratings: pd.DataFrame, dims: list[str], codes=None) -> dict[str, SubjectModelResult]:
    """The subject model of every dimension with at least one rating (``codes``: the ratings'
    :class:`~analysis.science.codes.RatingCodes`; subsets are taken per dimension when values are missing)."""
    fits, designs = {}, {}  # dimensions rated on the same rows share one sparse design
    for dim in dims:
        if dim not in ratings.columns:
            continue
        present = ratings[dim].notna().to_numpy()
        if not present.any():
            continue
        if present.all():
            frame, frame_codes = ratings, codes
        else:
            frame = ratings[present]
            frame_codes = codes.take(present) if codes is not None else None
        fits[dim] = subject_model(frame, score=dim, codes=frame_codes, tol=REPORT_TOL,
                                  designs=designs if frame is ratings else None)
    return fits


def section(fits: dict[str, SubjectModelResult]) -> tuple[dict, dict]:
    """(the JSON-ready section without item lists, the item lists per dimension for
    :func:`attach_items`)."""
    out: dict[str, Any] = {"method": METHOD, "inconsistent_rule": INCONSISTENT_RULE, "dimensions": {}}
    items_by_dim: dict[str, dict] = {}
    for dim, result in fits.items():
        fit = result.fit
        block: dict[str, Any] = {
            "ratings": int(fit.rater_ratings.sum()), "raters": int(len(result.raters)),
            "items": int(len(result.items)), "iterations": int(fit.iterations), "converged": bool(fit.converged),
            "components": int(fit.components), "loglikelihood": _num(fit.loglikelihood),
            "models": {}, "excluded": dict(result.excluded),
        }
        if "model" in result.items.index.names and len(result.items):
            for model, row in result.model_table().iterrows():
                block["models"][str(model)] = {
                    "quality": _num(row["quality"]), "ci95": _pair(row["ci_low"], row["ci_high"]),
                    "std_fisher": _num(row["std_fisher"]), "items": int(row["items"]),
                }
        block["raters"] = {
            str(row.Index): {
                "bias": _num(row.bias), "bias_ci95": _pair(row.bias_ci_low, row.bias_ci_high),
                "inconsistency": _num(row.inconsistency),
                "inconsistency_ci95": _pair(row.inconsistency_ci_low, row.inconsistency_ci_high),
                "ratings": int(row.n), "inconsistent": bool(row.inconsistent), "at_floor": bool(row.at_floor),
            }
            for row in result.raters.itertuples()
        }
        half = (result.items["ci_high"] - result.items["quality"]).to_numpy(float)
        finite = half[np.isfinite(half)]
        block["item_ci95_half_width"] = {"median": _num(np.median(finite)) if finite.size else None,
                                         "max": _num(finite.max()) if finite.size else None}
        index = result.items.index
        labels = index.get_level_values(-1)
        items = {"item": (labels.astype(np.int64).tolist() if pd.api.types.is_integer_dtype(labels.dtype)
                          else [_plain(v) for v in labels.tolist()])}
        if "model" in index.names:
            items["model"] = [str(v) for v in index.get_level_values("model").tolist()]
        items.update(quality=_floats(result.items["quality"]), ci95_low=_floats(result.items["ci_low"]),
                     ci95_high=_floats(result.items["ci_high"]))
        items_by_dim[dim] = items
        out["dimensions"][dim] = block
    return out, items_by_dim


def _plain(value: Any) -> Any:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (int, str)):
        return value
    return str(value)


def attach_items(report: dict, items_by_dim: dict[str, dict]) -> None:
    """Put the per-item lists into an already JSON-clean report."""
    for dim, items in items_by_dim.items():
        report["subject_model"]["dimensions"][dim]["items_table"] = items


def model_scores(report: dict, dim: str) -> dict[str, dict]:
    """``{model: {"quality", "ci95", ...}}`` of one dimension, empty without a fit."""
    return ((report.get("subject_model") or {}).get("dimensions", {}).get(dim) or {}).get("models", {})


def item_scores(report: dict, dim: str, instances: pd.Series) -> pd.DataFrame:
    """``model, instance, score`` of one dimension's subject-model item qualities, for the
    leaderboard's paired gap test (``instances``: item id -> instance key)."""
    table = ((report.get("subject_model") or {}).get("dimensions", {}).get(dim) or {}).get("items_table")
    if not table or "model" not in table:
        return pd.DataFrame(columns=["model", "instance", "score"])
    frame = pd.DataFrame({"item": table["item"], "model": table["model"],
                          "score": pd.array(table["quality"], dtype="Float64").astype(float)})
    frame["instance"] = frame["item"].map(instances)
    return frame.dropna(subset=["instance"])[["model", "instance", "score"]]
