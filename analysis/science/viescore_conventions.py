"""VIEScore's own analysis conventions, on request, so its published tables reproduce. No Django.

The VIEScore notebook (``paper_implementation/analyze_json.ipynb`` of the release) differs from the
report's defaults in three ways, each of which moves published numbers:

1. **Average over models**: ``tanh(mean(r))`` (its ``average_correlation`` is fed raw correlations,
   not Fisher z values), and the all-task figure is the same applied to the task figures. The report's
   default is the Fisher mean ``tanh(mean(atanh r))`` (:func:`analysis.science.correlation.fisher_z_mean`).
2. **Items**: per model, only the items the judge scored on *both* SC and PQ (``align_dicts``); the
   default compares each dimension on every item the judge scored on it.
3. **Fractional sub-scores are truncated**: a list score is read with ``int()`` per element before the
   minimum (``[8.5, 9.0]`` -> 8 -> 0.8); a bare number is divided by 10 as it is. The default keeps
   8.5 (0.85): the judge said 8.5. (GPT-4o 0-shot: 2 of 9,602 outputs, enough to move Multi-Concept
   PQ from 0.2733 to the published 0.2751.)

One more difference is not a convention but float noise, and is left alone: the notebook ranks
unsnapped values, so O scores equal on paper (sqrt(0.6*0.6) vs sqrt(0.4*0.9)) may rank apart, and
the human O mean depends on the order the rater files were read. The published O cells of
Text-Guided IG (0.3928) and Control-Guided IG (0.5439) come out exactly when the three raters' O are
summed last file first without snapping; the report snaps, so O may differ in the third decimal.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

CONVENTIONS = ("default", "viescore")

DIFFERENCES = [
    "average over models: tanh(mean r) as the VIEScore paper reports it (*_tanh_mean), beside the Fisher mean "
    "tanh(mean atanh r) (*_fisher_mean, the default); comparisons and their intervals use tanh(mean r)",
    "items: per judge, only items it scored on every one of its dimensions (SC and PQ), as VIEScore's align_dicts",
    "VIEScore judges' fractional sub-scores truncated toward zero before the minimum (int(8.5) = 8), as the "
    "notebook reads list scores; O recomputed from the truncated SC and PQ",
    "not reproduced: the notebook ranks unsnapped values (float noise in O ties) and sums the raters' O in file "
    "order, so O correlations may differ from the paper in the third decimal; SC and PQ match",
]


def truncated_score(sub_scores) -> float | None:
    """min(int(s) for s in sub_scores) / 10 clipped to [0, 1], the notebook's reading of a list score;
    None for an empty or unusable list. ``int`` truncates toward zero as Python's int() does."""
    try:
        values = [math.trunc(float(s)) for s in sub_scores]
    except (TypeError, ValueError, OverflowError):
        return None
    if not values:
        return None
    return float(np.clip(min(values) / 10.0, 0.0, 1.0))


def apply_truncation(scores: pd.DataFrame, sub_scores: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """``scores`` (the report's judge scores frame: ``judge, item, dimension, value`` ...) with the
    SC and PQ of every VIEScore judge recomputed from ``sub_scores`` (``judge, item, dimension,
    sub_scores``) by :func:`truncated_score`, and their O = sqrt(SC * PQ) recomputed from those.
    Returns the frame and how many SC/PQ values changed."""
    if sub_scores.empty:
        return scores, 0
    truncated = sub_scores.assign(truncated=sub_scores["sub_scores"].map(truncated_score)).dropna(subset=["truncated"])
    keyed = truncated.set_index(["judge", "item", "dimension"])["truncated"]
    out = scores.copy()
    index = pd.MultiIndex.from_frame(out[["judge", "item", "dimension"]])
    new = keyed.reindex(index).to_numpy(float)
    replace = np.isfinite(new)
    changed = int((replace & (np.abs(new - out["value"].to_numpy(float)) > 1e-12)).sum())
    out.loc[replace, "value"] = new[replace]
    wide = truncated.pivot_table(index=["judge", "item"], columns="dimension", values="truncated", aggfunc="last")
    if {"SC", "PQ"} <= set(wide.columns):
        overall = np.sqrt(wide["SC"] * wide["PQ"]).dropna()
        o_rows = out["dimension"] == "O"
        o_index = pd.MultiIndex.from_frame(out.loc[o_rows, ["judge", "item"]])
        o_new = overall.reindex(o_index).to_numpy(float)
        o_replace = np.isfinite(o_new)
        positions = np.flatnonzero(o_rows.to_numpy())[o_replace]
        out.iloc[positions, out.columns.get_loc("value")] = o_new[o_replace]
    return out, changed
