"""The report's intervals that include the raters (:mod:`analysis.science.rater_bootstrap`), put into its blocks.

A study declares its raters ``sampled`` (a crowd, the default: the intervals resample items and
raters) or ``fixed`` (an expert panel whose verdict defines quality, as ImagenHub: the intervals
resample items only, and the published numbers stay exactly as they were). Every block that
carries an interval also carries ``intervals``: which kind each of its ``*ci95`` keys is,

* ``"items"``: items resampled (or a t interval over items: ``ci95`` of a fixed-rater model MOS);
* ``"items+raters"``: the two-way bootstrap of items and raters;
* ``"judgements"``: judgements resampled one by one (a fixed-rater pairwise study, as before).

Each two-way interval's method is in ``interval_methods``: ``"percentile bootstrap"``, or
``"jackknife"`` (delete-one over items plus over raters) where the bootstrap would handle more than
:data:`analysis.science.agreement.JACKKNIFE_ABOVE` ratings x replicates (EvalMi-50K's
per-model intervals: 33,600 ratings each). The agreement intervals over items only switch by the
same rule (delete-one over items): their method is in ``interval_methods`` too (``<key>_items``
once a two-way interval took the key) and the report lists the methods used in
``item_interval_methods``.

In a sampled study the item-only interval stays beside the new one as ``<key>_items`` so a
reader can see how much the raters add. Gwet's AC1/AC2 and percent agreement keep their item
intervals (``"items"``) in both kinds of study.

Pure: takes data frames and the report dict, no Django (the report builder calls it).
"""

from __future__ import annotations

from typing import Callable

import pandas as pd

from analysis.science.rater_bootstrap import (ITEMS, ITEMS_RATERS, HumanReplicates, Interval, agreement_intervals,
                                              agreement_jackknife_by, correlation_intervals, mean_intervals,
                                              pairwise_intervals, use_jackknife)

SAMPLED, FIXED = "sampled", "fixed"
JUDGEMENTS = "judgements"
Note = Callable[[str, str | None], None]  # Reasons.add(where, why)

# agreement measure -> (report key of its value, report key of its interval)
_AGREEMENT_KEYS = {
    "alpha_nominal": ("alpha.nominal", "alpha_ci95.nominal"),
    "alpha_ordinal": ("alpha.ordinal", "alpha_ci95.ordinal"),
    "alpha_interval": ("alpha.interval", "alpha_ci95.interval"),
    "fleiss_kappa": ("fleiss_kappa", "fleiss_kappa_ci95"),
}
_ITEM_ONLY = ("percent_agreement_ci95", "gwet_ac1_ci95", "gwet_ac2_ci95")


def is_sampled(rater_sampling: str) -> bool:
    if rater_sampling not in (SAMPLED, FIXED):
        raise ValueError(f"rater_sampling must be {SAMPLED!r} or {FIXED!r}, got {rater_sampling!r}")
    return rater_sampling == SAMPLED


def _kind(sampled: bool) -> str:
    return ITEMS_RATERS if sampled else ITEMS


def _replace(block: dict, key: str, value_key: str, interval: Interval, note: Note, where: str) -> None:
    """Move the item interval ``block[key]`` (a dotted key goes one level down) and its bootstrap
    undefined share to ``<key>_items`` / ``bootstrap_undefined_share_items`` and put the two-way
    interval and its share (of ``value_key``) in their place."""
    parent, _, leaf = key.rpartition(".")
    if parent:
        block.setdefault(f"{parent}_items", {})[leaf] = (block.get(parent) or {}).get(leaf)
        target = block.setdefault(parent, {})
    else:
        block[f"{key}_items"] = block.get(key)
        target = block
    old_kind = block["intervals"].get(parent or key, ITEMS)
    block["intervals"][f"{parent or key}_items"] = old_kind
    block["intervals"][parent or key] = interval.kind
    methods = block.setdefault("interval_methods", {})
    if (parent or key) in methods:  # the item interval's method (agreement: bootstrap or jackknife)
        methods[f"{parent or key}_items"] = methods[parent or key]
    methods[parent or key] = interval.method
    target[leaf] = interval.ci95
    if interval.ci95 is None:
        note(f"{where}.{key}", interval.reason or "bootstrap interval undefined")
    shares = block.setdefault("bootstrap_undefined_share", {})
    if value_key in shares:
        block.setdefault("bootstrap_undefined_share_items", {})[value_key] = shares[value_key]
    if interval.total:
        shares[value_key] = interval.undefined_share


def rating_intervals(*, mos_frame: pd.DataFrame, agreement_frame: pd.DataFrame, dims: list[str], estimator: str,
                     n_boot: int, seed: int) -> dict:
    """The two-way intervals of a sampled study's model MOS and agreement, computed (no report
    touched, so a report can run it in a thread beside other work): ``{dim: {"means": {model:
    Interval}, "agreement": {None (the study) | model: {measure: Interval}}}}``."""
    out: dict = {}
    for dim in dims:
        if dim not in mos_frame.columns:
            continue
        entry = out[dim] = {"means": mean_intervals(mos_frame[["rater", "item", "model", dim]], value=dim,
                                                    estimator=estimator, raters=True, n_boot=n_boot, seed=seed),
                            "agreement": {}}
        if dim not in agreement_frame.columns:
            continue
        frame = agreement_frame.loc[agreement_frame[dim].notna(), ["rater", "item", "model", dim]]
        if use_jackknife(frame, value=dim, group="model", n_boot=n_boot):  # EvalMi scale: one pass for all
            entry["agreement"] = {key: intervals for key, (_, intervals)
                                  in agreement_jackknife_by(frame, value=dim, group="model").items()}
        else:
            groups = [(None, frame)] + list(frame.groupby("model", sort=True, observed=True))
            entry["agreement"] = {key: agreement_intervals(group, value=dim, raters=True, n_boot=n_boot,
                                                           seed=seed)[1] for key, group in groups}
    return out


def put_rating_intervals(report: dict, note: Note, *, mos_frame: pd.DataFrame, agreement_frame: pd.DataFrame,
                         dims: list[str], sampled: bool, estimator: str, n_boot: int, seed: int,
                         computed: dict | None = None) -> None:
    """Model MOS and agreement intervals of an ImagenHub / EvalMi report, per model and dimension
    and (agreement) over the study. ``mos_frame``: ``rater, item, model, <dims>`` as the MOS averages
    them (ImagenHub 0-1 scores; EvalMi z' on 0-100); ``agreement_frame``: the ratings agreement
    is computed on (raw points). Fixed raters only label the existing intervals ``"items"``.
    ``computed``: :func:`rating_intervals` of the same arguments, when the caller ran it already."""
    models = report["models"]
    for model, entry in models.items():
        for dim, block in entry.get("dimensions", {}).items():
            block["intervals"] = {"ci95": ITEMS, "alpha_ci95": ITEMS, "fleiss_kappa_ci95": ITEMS,
                                  **{key: ITEMS for key in _ITEM_ONLY}}
    for dim, block in report["study_level"].get("dimensions", {}).items():
        block["intervals"] = {"alpha_ci95": ITEMS, "fleiss_kappa_ci95": ITEMS, **{key: ITEMS for key in _ITEM_ONLY}}
    if not sampled:
        return
    if computed is None:
        computed = rating_intervals(mos_frame=mos_frame, agreement_frame=agreement_frame, dims=dims,
                                    estimator=estimator, n_boot=n_boot, seed=seed)
    used: set[str] = set()
    for dim, entry in computed.items():
        for model, interval in entry["means"].items():
            block = models.get(str(model), {}).get("dimensions", {}).get(dim)
            if block is None or block.get("mean") is None:
                continue
            _replace(block, "ci95", "mean", interval, note, f"models.{model}.dimensions.{dim}")
            used.add(interval.method)
        for key, intervals in entry["agreement"].items():
            if key is None:
                where, block = f"study_level.dimensions.{dim}", report["study_level"].get("dimensions", {}).get(dim)
            else:
                where = f"models.{key}.dimensions.{dim}"
                block = models.get(str(key), {}).get("dimensions", {}).get(dim)
            if block is None:
                continue
            for measure, (value_key, name) in _AGREEMENT_KEYS.items():
                _replace(block, name, value_key, intervals[measure], note, where)
                used.add(intervals[measure].method)
    report["two_way_interval_methods"] = sorted(used)


def correlation_block(raters: pd.DataFrame | None, judge: pd.Series, *, hdim: str, sampled: bool,
                      lower_is_better: bool, n_boot: int, seed: int, reuse: HumanReplicates | None = None
                      ) -> tuple[dict, str | None]:
    """``({"ci95": {"spearman": [lo, hi], "pearson": [lo, hi]}, "interval": kind, ...}, reason)`` of a
    judge's correlation with the human item scores on the items of ``judge`` (indexed by item).
    ``raters``: the per-rater frame the human item scores average (``rater, item, <hdim>``); without
    it (published MOS) there is no interval and the reason says so. ``reuse``: human replicates
    shared by the judges of one report (:class:`analysis.science.rater_bootstrap.HumanReplicates`)."""
    kind = _kind(sampled)
    if raters is None or hdim not in raters.columns or n_boot <= 0:
        why = "n_boot = 0: no bootstrap interval" if n_boot <= 0 else "no per-rater ratings: no interval"
        return {"ci95": {"spearman": None, "pearson": None}, "interval": kind}, why
    intervals = correlation_intervals(raters[["rater", "item", hdim]], judge, value=hdim, raters=sampled,
                                      lower_is_better=lower_is_better, n_boot=n_boot, seed=seed, reuse=reuse)
    reasons = [i.reason for i in intervals.values() if i.reason]
    return {
        "ci95": {name: interval.ci95 for name, interval in intervals.items()},
        "interval": kind,
        "bootstrap_undefined_share": {name: interval.undefined_share for name, interval in intervals.items()},
    }, (reasons[0] if reasons else None)


def put_pairwise_intervals(report: dict, note: Note, frame: pd.DataFrame, *, sampled: bool, n_boot: int, seed: int,
                           both_bad: str = "exclude") -> None:
    """Win-rate and Bradley–Terry intervals of a pairwise report. ``frame``: the judgements (``rater,
    comparison, instance, model_a, model_b, preference``); the item resampled is the prompt (instance;
    the comparison where it has none), so comparisons of one prompt move together."""
    for entry in report["models"].values():
        entry["intervals"] = {"win_rate_ci95": JUDGEMENTS, "bt_ci95": JUDGEMENTS}
    if not sampled or frame.empty:
        return
    item = frame["instance"].where(frame["instance"].notna(), "comparison:" + frame["comparison"].astype(str))
    intervals = pairwise_intervals(frame.assign(item=item.astype(str)), raters=True, both_bad=both_bad,
                                   n_boot=n_boot, seed=seed)
    for model, pair in intervals.items():
        entry = report["models"].get(str(model))
        if entry is None:
            continue
        where = f"models.{model}"
        for key, value_key, name in (("win_rate_ci95", "win_rate", "win_rate"), ("bt_ci95", "bt_score", "bt")):
            _replace(entry, key, value_key, pair[name], note, where)
