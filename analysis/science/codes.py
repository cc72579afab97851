"""Integer codes of a long ratings frame's labels, computed once and shared by the analyses.

z-MOS, screening, agreement and the human ceiling all group the same ratings by rater, model and
(model, item). Factorizing 1.6M labels (EvalMi scale) costs 5-30 ms a time, and the report used to
do it ~30 times. :class:`RatingCodes` codes them once; those analyses take it as an optional
``codes=`` argument (without it they code the labels themselves, with the same results).

Codes are per row of the frame they were computed from, -1 where the label is missing, and index
*sorted* labels (as ``pd.factorize(..., sort=True)``). A subset of the rows (:meth:`RatingCodes.take`)
keeps the labels, so some codes may have no row: users count rows per code instead of assuming
every label is present.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# Dense ranks by counting (one bin per possible combination) while the bins do not outnumber the
# rows by more than this; past it, a sort.
_BINS_PER_ROW = 4
# Below this many keys a comparison sort costs about what the radix passes of sort_order do.
_RADIX_FROM = 1 << 14
# distinct_values hashes when a strided sample of this many values holds at most a quarter as many
# distinct ones (Likert points, one rater's z-scores: tens to hundreds of values in 10^6 rows).
_SAMPLE = 4096


class RatingCodes:
    """Sorted codes of ``rater``, ``item`` and (if the frame has one) ``model`` per row, and
    ``unit``: the (model, item) pair per row (the item alone without a model column), numbered in
    sorted (model, item) order, -1 if either is missing."""

    def __init__(self, ratings: pd.DataFrame | None = None, *, rater: str = "rater", item: str = "item") -> None:
        self.rater_column, self.item_column = rater, item
        if ratings is None:  # filled by take()
            return
        self.n_rows = len(ratings)
        self.rater, self.rater_names = pd.factorize(ratings[rater], sort=True)
        self.item, self.item_names = pd.factorize(ratings[item], sort=True)
        if "model" in ratings.columns and item != "model":
            self.model, self.model_names = pd.factorize(ratings["model"], sort=True)
            self.unit = dense_rank([self.model, self.item], [len(self.model_names), len(self.item_names)])[0]
        else:
            self.model, self.model_names = None, None
            self.unit = self.item
        self.n_units = int(self.unit.max(initial=-1)) + 1

    def of(self, column: str) -> tuple[np.ndarray, pd.Index] | None:
        """(codes, sorted labels) of ``column`` if it is one of the coded columns, else None."""
        if column == self.rater_column:
            return self.rater, self.rater_names
        if column == self.item_column:
            return self.item, self.item_names
        if column == "model" and self.model is not None:
            return self.model, self.model_names
        return None

    def check(self, frame: pd.DataFrame, rater: str | None = None, item: str | None = None) -> None:
        """Raise ValueError unless these codes can be codes of ``frame``'s rows: the same number of
        rows and (those given) the same rater and item columns. Codes of another frame would
        silently mislabel."""
        if (self.n_rows != len(frame) or rater not in (None, self.rater_column)
                or item not in (None, self.item_column)):
            raise ValueError(f"codes of {self.n_rows} rows ({self.rater_column}, {self.item_column}) do not fit "
                             f"a frame of {len(frame)} rows ({rater or self.rater_column}, {item or self.item_column})")

    def take(self, rows: np.ndarray) -> RatingCodes:
        """The codes of a subset of the rows (a boolean mask or positions, in the subset's order)."""
        rows = np.asarray(rows)
        if rows.dtype == bool and rows.all():
            return self
        out = RatingCodes(rater=self.rater_column, item=self.item_column)
        out.rater, out.rater_names = self.rater[rows], self.rater_names
        out.item, out.item_names = self.item[rows], self.item_names
        out.model = self.model[rows] if self.model is not None else None
        out.model_names = self.model_names
        out.unit, out.n_units = self.unit[rows], self.n_units
        out.n_rows = len(out.rater)
        return out

    def of_subframe(self, frame: pd.DataFrame, source_index: pd.Index) -> RatingCodes:
        """The codes of ``frame``, a subset of the rows of the frame these codes were computed from
        (whose index was ``source_index``), matched by row label."""
        if len(frame) == len(source_index) and frame.index.equals(source_index):
            return self
        return self.take(source_index.get_indexer(frame.index))


def dense_rank(codes: list[np.ndarray], widths: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """One code per distinct combination of the given codes (each in 0..width-1, or -1), numbered
    in sorted order of the combination; -1 where any code is -1. Returns (codes, the combined value
    ``(c1 * w2 + c2) * w3 + ...`` of each combination, ascending): the same as
    ``pd.factorize(combined, sort=True)``, by counting when the combinations are few."""
    combined = np.zeros(len(codes[0]), np.int64)
    for code, width in zip(codes, widths):
        combined = np.where((combined < 0) | (code < 0), -1, combined * max(width, 1) + code)
    valid = combined >= 0
    space = int(np.prod([max(w, 1) for w in widths], dtype=np.int64)) if widths else 1
    if space <= _BINS_PER_ROW * len(combined) + 1024:
        seen = np.bincount(combined[valid], minlength=space) > 0
        rank = np.cumsum(seen) - 1
        return np.where(valid, rank[np.where(valid, combined, 0)], -1), np.flatnonzero(seen)
    values, inverse = np.unique(combined[valid], return_inverse=True)
    out = np.full(len(combined), -1, np.int64)
    out[valid] = inverse
    return out, values


def sort_order(keys: np.ndarray) -> np.ndarray:
    """``np.argsort(keys, kind="stable")`` for integer keys: for 10^5-10^6 non-negative keys under
    2^48 (the report's cell and group codes), least-significant-digit radix passes over 16-bit
    digits. numpy sorts 16-bit integers stably by counting, ~10x faster than its comparison sort
    of 64-bit ones, so one to three passes take a third to a half of the time. Ties keep their
    input order, as in any stable sort."""
    keys = np.asarray(keys)
    if len(keys) < _RADIX_FROM or keys.dtype.kind not in "iu" or keys.ndim != 1:
        return np.argsort(keys, kind="stable")
    low, top = int(keys.min()), int(keys.max())
    if low < 0 or top >= 1 << 48:
        return np.argsort(keys, kind="stable")
    order = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
    shift = 16
    while top >> shift:
        digit = ((keys[order] >> shift) & 0xFFFF).astype(np.uint16)
        order = order[np.argsort(digit, kind="stable")]
        shift += 16
    return order


def distinct_values(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` of a 1-D numeric array: (sorted distinct values,
    each value's index among them). When a strided sample shows few distinct values among many
    (Likert points, one rater's z-scores) it hashes them (``pd.factorize``) and sorts only the
    distinct ones, ~5x faster than sorting every value; the result is the same."""
    values = np.asarray(values)
    if (len(values) >= _RADIX_FROM and values.ndim == 1 and values.dtype.kind in "iuf"
            and len(pd.unique(values[:: len(values) // _SAMPLE])) * 4 <= _SAMPLE
            and not (values.dtype.kind == "f" and np.isnan(values).any())):
        codes, uniques = pd.factorize(values + 0 if values.dtype.kind == "f" else values, sort=False)
        order = np.argsort(uniques, kind="stable")
        rank = np.empty(len(uniques), np.int64)
        rank[order] = np.arange(len(uniques))
        return uniques[order], rank[codes]
    distinct, inverse = np.unique(values, return_inverse=True)
    return distinct, inverse.reshape(-1)


def appearance_order(codes: np.ndarray) -> np.ndarray:
    """Renumber codes (-1 kept) by first appearance, dense from 0: what ``pd.factorize`` of the
    labels would give."""
    n = int(codes.max(initial=-1)) + 1
    valid = np.flatnonzero(codes >= 0)
    first = np.full(n, len(codes))
    first[codes[valid[::-1]]] = valid[::-1]  # the last write wins: each code's first row
    present = np.flatnonzero(first < len(codes))
    rank = np.full(n, -1)
    rank[present[np.argsort(first[present], kind="stable")]] = np.arange(len(present))
    return np.where(codes >= 0, rank[np.maximum(codes, 0)], -1)


def group_codes(ratings: pd.DataFrame, by: list[str], codes: RatingCodes | None = None
                ) -> tuple[np.ndarray, list[tuple]]:
    """Per row its group code (-1: a missing key, no group) and the sorted group keys, as
    ``ratings.groupby(by, sort=True)`` numbers them; by the model's codes when ``by`` is the
    model and ``codes`` are given."""
    if not by:
        return np.zeros(len(ratings), np.int64), [()]
    if codes is not None and list(by) == ["model"] and codes.model is not None:
        codes.check(ratings)
        group, present = dense_rank([codes.model], [len(codes.model_names)])
        return group, [(codes.model_names[k],) for k in present]
    grouped = ratings.groupby(by, sort=True)
    keys = [k if isinstance(k, tuple) else (k,) for k in grouped.size().index]
    return grouped.ngroup().fillna(-1).to_numpy(np.int64), keys
