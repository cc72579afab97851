"""The study report's computation (no Django); analysis.report runs it for the pages, CLI, API and exports.

``build_report(source)`` reads a study through ``source`` (:class:`ReportSource`: analysis.report
adapts a site study; a released package answers the same calls), runs the pure analysis modules
and returns a JSON-ready dict (schema in the README, "Analysis report"). Rules:

* No NaN/inf ever: an undefined number is ``None`` and the ``reasons`` list says why
  (``"models.Imagic.dimensions.SC.alpha: only one value present (0): agreement is undefined"``).
* Human figures come from the study's own ratings (imported ratings included). An EvalMi study
  without ratings falls back to its published human reference (EvalMi-50K MOS, stored as scores
  of a judge whose ``params.role`` is ``human_reference``); ``human_source`` says which.
* Blocked raters are excluded unless ``include_excluded=True``; ``excluded_raters`` lists them.

Dimensions: ImagenHub SC, PQ and O = sqrt(SC·PQ) on 0–1; EvalMi perception and correspondence as
z-MOS on 0–100 (seed 004 §3.3); pairwise studies report win rates and Bradley–Terry scores.
"""

from __future__ import annotations

import math
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

import numpy as np
import pandas as pd

from analysis.science.agreement import BOOTSTRAP, agreement_table, agreement_tables
from analysis.science.ceiling import human_ceilings, judge_vs_rest
from analysis.science.codes import RatingCodes, dense_rank
from analysis.science.correlation import (KENDALL_VARIANTS, fisher_z_mean, model_level_agreement, per_group_correlations,
                                  tanh_of_mean)
from analysis.science.imagenhub import add_overall, item_scores, model_summary
from analysis.science.judge_comparisons import JudgeBlock, compare_judges, yes_no_intervals
from analysis.science.model_comparisons import compare_bradley_terry, compare_models
from analysis.science.pairwise import pairwise_summary
from analysis.science.rater_bootstrap import HumanReplicates
from analysis.science.report_intervals import (correlation_block, is_sampled, put_pairwise_intervals,
                                              put_rating_intervals, rating_intervals)
from analysis.science.qa import item_verdicts, majority_votes, model_accuracy, verdict_as_number, yes_no_agreement
from analysis.science.screening import mos_with_and_without_screening, screen_observers
from analysis.science.subject_report import attach_items, fit_dimensions, section as subject_section
from analysis.science.viescore_conventions import CONVENTIONS, DIFFERENCES, apply_truncation
from analysis.science.zmos import group_means, mos_from_item_scores, zscore_by_rater
from analysis.science import protocols

LEVELS = ("nominal", "ordinal", "interval")
# The role (a judge's ``params.role``) of the published human reference scores stored as a judge
HUMAN_REFERENCE = "human_reference"
QA_DIMENSION = "qa"  # a judge's yes/no answer to the item's question, stored as 1 (yes) / 0 (no)
_CORR_KEYS = {"srcc": "spearman", "plcc": "pearson", "krcc": "kendall"}


class ReportSource(Protocol):
    """What the report reads of a study: its fields and its frames (the columns of analysis.data).

    analysis.report adapts a site study (read through analysis.data); a released package
    (analysis.science.release.PackagedStudy) answers the same calls from its own tables."""

    slug: str
    title: str
    protocol: str
    task_type: str
    rater_sampling: str

    def excluded_raters(self) -> dict: ...
    def ratings_frame(self, *, include_excluded: bool = False) -> pd.DataFrame: ...
    def answers_frame(self, *, include_excluded: bool = False) -> pd.DataFrame: ...
    def comparisons_frame(self, *, include_excluded: bool = False) -> pd.DataFrame: ...
    def judge_scores_frame(self) -> pd.DataFrame: ...
    def judge_sub_scores_frame(self) -> pd.DataFrame: ...
    def item_table(self) -> pd.DataFrame: ...


class Reasons:
    """Collects "where: why" strings for undefined values, without duplicates, in order."""

    def __init__(self) -> None:
        self._items: dict[str, None] = {}

    def add(self, where: str, why: str | None) -> None:
        if why:
            self._items.setdefault(f"{where}: {why}", None)

    def as_list(self) -> list[str]:
        return list(self._items)


def _num(value: Any, reasons: Reasons | None = None, where: str = "", why: str | None = None) -> float | None:
    """A finite float, or None (recording ``why`` under ``where``)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        number = None
    else:
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = None
        if number is not None and not math.isfinite(number):
            number = None
    if number is None and reasons is not None:
        reasons.add(where, why or "undefined")
    return number


def _ci(low: Any, high: Any, reasons: Reasons, where: str, why: str,
        scale: tuple[float, float] | None = None) -> list[float] | None:
    """``[low, high]``, or None (with ``why``). ``scale``: the bounds of a bounded score. A
    Student-t interval of a mean near a bound, or of a handful of items (t(1) = 12.7), reaches
    past the scale, where no mean can lie; it is clipped to the scale and the clip is recorded
    (an interval inside the scale is returned unchanged)."""
    lo, hi = _num(low), _num(high)
    if lo is None or hi is None:
        reasons.add(where, why)
        return None
    if scale is not None and (lo < scale[0] or hi > scale[1]):
        reasons.add(where, f"clipped to the scale {scale[0]:g}–{scale[1]:g}: the Student-t interval "
                           f"[{lo:.3f}, {hi:.3f}] reached past it (too few items or a mean at the edge)")
        lo, hi = max(lo, scale[0]), min(hi, scale[1])
    return [lo, hi]


IMAGENHUB_SCALE = (0.0, 1.0)  # SC, PQ and O = sqrt(SC·PQ)


# ------------------------------------------------------------------ entry point


JUDGE_ITEMS = ("per_dimension", "all_aspects")


def build_report(study: ReportSource, *, include_excluded: bool = False, judges: bool = True,
                 seed: int = 0, n_boot: int = 1000, judge_items: str = "per_dimension",
                 kendall: str = "b", conventions: str = "default") -> dict:
    """The study report as a JSON-ready dict (see module docstring and README for the schema).

    ``n_boot`` replicates are used where the report bootstraps (agreement CIs over items,
    pairwise CIs); ``seed`` makes them reproducible; ``n_boot=0`` leaves those CIs null. At
    EvalMi scale (50,400 items, 1.6M scores) 1,000 agreement replicates add about 2 s.

    ``judge_items``: which items a judge is compared on. ``per_dimension`` (default): every item
    the judge scored on that dimension, so a judge with missing outputs may use different items
    for SC, PQ and O (each block says how many: ``items``); ``all_aspects``: only items the judge
    scored on every one of its dimensions (the VIEScore notebook's convention). ``kendall``: "b"
    (tau-b, default) or "a" (tau-a, EvalMi-50K's convention where scores tie) for the judge
    correlations. ``conventions``: "default" or "viescore" (VIEScore's own analysis, so its published
    tables reproduce: tanh(mean r), items with every aspect scored, truncated fractional sub-scores;
    see analysis.science.viescore_conventions; ``report["conventions"]`` lists what differs).
    """
    if conventions not in CONVENTIONS:
        raise ValueError(f"conventions must be one of {', '.join(CONVENTIONS)}, got {conventions!r}")
    if conventions == "viescore":
        judge_items = "all_aspects"
    if judge_items not in JUDGE_ITEMS:
        raise ValueError(f"judge_items must be one of {', '.join(JUDGE_ITEMS)}, got {judge_items!r}")
    if kendall not in KENDALL_VARIANTS:
        raise ValueError(f"kendall must be one of {', '.join(KENDALL_VARIANTS)}, got {kendall!r}")
    reasons = Reasons()
    frames: dict[str, Any] = {}  # the per-rater frame the ceiling used (judges: like-for-like); subject items
    excluded = study.excluded_raters()
    report: dict[str, Any] = {
        "study": study.slug,
        "title": study.title,
        "protocol": study.protocol,
        "task_type": study.task_type,
        "include_excluded": include_excluded,
        "excluded_raters": [
            {"rater": str(pk), "reason": why, "included": include_excluded} for pk, why in sorted(excluded.items())
        ],
        "human_source": "ratings",
        "judge_items": judge_items,
        "kendall": f"tau-{kendall}",
        "conventions": {"name": conventions, "differences": DIFFERENCES if conventions == "viescore" else []},
        # sampled (a crowd): intervals resample items and raters; fixed (experts): items only
        "rater_sampling": study.rater_sampling,
        "models": {},
        "study_level": {},
        "judges": {},
        "subject_model": None,  # analysis.science.subject_report: filled for rated (non-pairwise) studies
        "reasons": [],
    }
    definition = protocols.protocol_for(study)  # study: a site study, a release's StudyVersion or a PackagedStudy
    if not definition.has_scales:
        _pairwise_section(study, report, reasons, include_excluded, seed, n_boot)
    else:
        ratings = _coded(study.ratings_frame(include_excluded=include_excluded))
        scores = study.judge_scores_frame() if (judges or definition.has_reference_scores) else None
        if conventions == "viescore" and judges and scores is not None and not scores.empty:
            scores, changed = apply_truncation(scores, study.judge_sub_scores_frame())
            report["conventions"]["truncated_scores_changed"] = changed
        human_qa = None
        if definition.score_scale == "raw":
            human_items = _imagenhub_section(ratings, report, reasons, n_boot=n_boot, seed=seed, frames=frames)
        else:
            human_items, human_qa = _evalmi_section(study, ratings, scores, report, reasons, include_excluded,
                                                    n_boot=n_boot, seed=seed, frames=frames)
        if human_items is not None and not human_items.empty:
            # an EvalMi section computes it in the background as soon as its z-MOS is known
            report["leaderboard"] = (frames.pop("leaderboard") if "leaderboard" in frames
                                     else _leaderboard(study.item_table(), human_items, n_boot=n_boot, seed=seed))
        if judges and scores is not None and not scores.empty and human_items is not None:
            _judges_section(scores, human_items, report, reasons, human_qa=human_qa, raters=frames.get("ceiling"),
                            judge_items=judge_items, kendall=kendall, n_boot=n_boot, seed=seed,
                            average="tanh_mean" if conventions == "viescore" else "fisher")
    report["reasons"] = reasons.as_list()
    subject_items = frames.pop("subject_items", None)
    out = _jsonable(report, "report", reasons, report)
    if subject_items:  # per-item lists (50K items at EvalMi scale) are plain already: not walked
        attach_items(out, subject_items)
    return out


def _put_subject_model(fits: Future, report: dict, frames: dict | None) -> None:
    """The subject model beside z-MOS (analysis.science.subject_report), from its background fit."""
    report["subject_model"], items = subject_section(fits.result())
    if frames is not None:
        frames["subject_items"] = items


# ------------------------------------------------------------------ shared blocks


def _coded(ratings: pd.DataFrame) -> pd.DataFrame:
    """The ratings with ``rater`` and ``model`` as categoricals (sorted categories): every section
    groups or codes by them, and coding a categorical reuses its codes instead of hashing 1.6M
    strings again (results are the same: groupings keep only observed values, in sorted order)."""
    return ratings.astype({"rater": "category", "model": "category"})


def _background() -> ThreadPoolExecutor:
    """One worker thread for independent parts of the report. They are numpy-heavy and numpy
    releases the GIL in its array loops, so on two cores they overlap with the caller's work (EvalMi
    scale: agreement and screening, ~1.3 s, alongside z-MOS and the ceiling); on one core they
    simply take turns. Results are read in a fixed order, so the report does not depend on timing."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="report")


# agreement_table measure -> report key (alpha levels go under "alpha")
_FLAT_MEASURES = {"fleiss_kappa": "fleiss_kappa", "percent_agreement": "percent_agreement",
                  "gwet_ac1": "gwet_ac1", "gwet_ac2_quadratic": "gwet_ac2"}


def _put_agreement(entry: dict, row: Any, where: str, reasons: Reasons, n_boot: int) -> None:
    """One agreement_table row into a dimension block: the value, its 95% CI (its method in
    ``interval_methods``) and, for a bootstrap CI, the share of resamples where it was undefined
    (left out of that CI)."""
    ci_why = row.reason or ("bootstrap interval undefined" if n_boot else "n_boot = 0: no bootstrap interval")
    if row.measure in _FLAT_MEASURES:
        key = _FLAT_MEASURES[row.measure]
        ci_key = f"{key}_ci95"
        entry[key] = _num(row.value, reasons, f"{where}.{key}", row.reason)
        entry[ci_key] = _ci(row.ci_low, row.ci_high, reasons, f"{where}.{key}_ci95", ci_why)
    else:
        key = row.measure.removeprefix("alpha_")
        ci_key = "alpha_ci95"
        entry["alpha"][key] = _num(row.value, reasons, f"{where}.alpha.{key}", row.reason)
        entry.setdefault("alpha_ci95", {})[key] = _ci(row.ci_low, row.ci_high, reasons,
                                                      f"{where}.alpha_ci95.{key}", ci_why)
        key = f"alpha.{key}"
    if n_boot:
        entry.setdefault("interval_methods", {})[ci_key] = row.method
    if n_boot and row.value is not None and row.method == BOOTSTRAP:
        entry.setdefault("bootstrap_undefined_share", {})[key] = float(row.boot_undefined) / n_boot


def _agreement(ratings: pd.DataFrame, dims: list[str], *, n_boot: int, seed: int,
               codes: RatingCodes | None = None) -> list[pd.DataFrame]:
    """Alpha, Fleiss' kappa, Gwet's AC1/AC2 and percent agreement per model and over the study (one
    call: they share count tables and bootstrap draws)."""
    return agreement_tables(ratings, scores=dims, groupings=[("model",), ()], levels=LEVELS, kappa=True,
                            n_boot=n_boot, seed=seed, codes=codes, gwet=True, method="auto")


def _agreement_and_ceiling(agreement: Future, dims: list[str], report: dict, reasons: Reasons,
                           ceiling_frame: pd.DataFrame, *, n_boot: int = 0,
                           ceiling_codes: RatingCodes | None = None, frames: dict | None = None) -> None:
    """Fill alpha, Fleiss' kappa (with bootstrap 95% CIs over items when ``n_boot`` > 0) and the
    human ceiling per model and for the whole study. ``agreement``: :func:`_agreement` running in
    the background while this thread computes the ceiling of ``ceiling_frame`` (whose codes are
    ``ceiling_codes``, if known)."""
    models = report["models"]
    if frames is not None:
        frames["ceiling"] = ceiling_frame
    ceiling, study_ceiling = human_ceilings(ceiling_frame, scores=dims, groupings=[("model",), ()],
                                            codes=ceiling_codes)
    table, overall = agreement.result()
    if n_boot:  # the item-only agreement intervals' methods (the jackknife at scale)
        report["item_interval_methods"] = sorted(set(table["method"]) | set(overall["method"]))
    for row in table.itertuples(index=False):
        entry = models[row.model]["dimensions"][row.dimension]
        _put_agreement(entry, row, f"models.{row.model}.dimensions.{row.dimension}", reasons, n_boot)
    for row in ceiling.itertuples(index=False):
        where = f"models.{row.model}.dimensions.{row.dimension}.human_ceiling"
        why = row.reason or "no rater had a defined correlation"
        models[row.model]["dimensions"][row.dimension]["human_ceiling"] = {
            name: _num(getattr(row, key), reasons, f"{where}.{name}", why) for key, name in _CORR_KEYS.items()
        }

    level = report["study_level"].setdefault("dimensions", {})
    for dim in dims:
        entry = level.setdefault(dim, {})
        rows = overall[overall["dimension"] == dim]
        entry["alpha"], entry["alpha_ci95"] = {}, {}
        for row in rows.itertuples(index=False):
            _put_agreement(entry, row, f"study_level.dimensions.{dim}", reasons, n_boot)
        crow = study_ceiling[study_ceiling["dimension"] == dim].iloc[0]
        entry["human_ceiling"] = {
            name: _num(crow[key], reasons, f"study_level.dimensions.{dim}.human_ceiling.{name}",
                       crow["reason"] or "no rater had a defined correlation")
            for key, name in _CORR_KEYS.items()
        }


def _distinct_per_model(codes: RatingCodes, column: np.ndarray, width: int) -> pd.Series:
    """How many distinct values of a coded column (raters, items) each model has, indexed by model
    (models with ratings): ``groupby("model")[column].nunique()`` on the codes."""
    _, pairs = dense_rank([codes.model, column], [len(codes.model_names), width])
    per_model = np.bincount(pairs // max(width, 1), minlength=len(codes.model_names))
    present = per_model > 0
    return pd.Series(per_model[present], index=codes.model_names[present])


def _empty_dimension() -> dict:
    return {"mean": None, "std_between_raters": None, "ci95": None, "alpha": {}, "alpha_ci95": {},
            "fleiss_kappa": None, "fleiss_kappa_ci95": None, "percent_agreement": None,
            "percent_agreement_ci95": None, "gwet_ac1": None, "gwet_ac1_ci95": None, "gwet_ac2": None,
            "gwet_ac2_ci95": None, "human_ceiling": {"spearman": None, "pearson": None, "kendall": None}}


def _counts(frame: pd.DataFrame, report: dict, codes: RatingCodes | None = None) -> None:
    if codes is not None:  # the codes' labels are the frame's distinct non-missing values
        counts = (len(codes.item_names), len(codes.rater_names), len(codes.model_names))
    else:
        counts = (frame["item"].nunique(), frame["rater"].nunique(), frame["model"].nunique())
    report["study_level"].update({
        "items": int(counts[0]),
        "raters": int(counts[1]),
        "ratings": int(len(frame)),
        "models": int(counts[2]),
    })


def _leaderboard(item_table: pd.DataFrame, human_items: pd.DataFrame, *, n_boot: int, seed: int) -> dict:
    """Per dimension: every pair of models (paired bootstrap over instances, Holm) and bootstrap rank
    intervals (analysis.science.model_comparisons) from the per-item human scores the report uses
    (``item_table``: the study's, for each item's instance)."""
    instances = item_table.set_index("item")["instance"]
    out, reuse = {}, {}
    for dim, part in human_items.dropna(subset=["human"]).groupby("dimension", sort=False):
        items = pd.DataFrame({"model": part["model"].astype(str).to_numpy(),
                              "instance": instances.reindex(part["item"]).to_numpy(),
                              "score": part["human"].to_numpy(float)})
        out[str(dim)] = compare_models(items.dropna(subset=["instance"]), n_boot=n_boot, seed=seed, reuse=reuse)
    return out


# ------------------------------------------------------------------ ImagenHub


def _imagenhub_section(ratings: pd.DataFrame, report: dict, reasons: Reasons, *, n_boot: int = 0,
                       seed: int = 0, frames: dict | None = None) -> pd.DataFrame | None:
    dims = ["SC", "PQ", "O"]
    _counts(ratings, report)
    if ratings.empty:
        reasons.add("models", "no ratings yet")
        return None
    ratings = add_overall(ratings)
    summary = model_summary(ratings)
    items = item_scores(ratings)
    cis = {dim: mos_from_item_scores(items, score=dim).set_index("model") for dim in dims}
    for model, row in summary.iterrows():
        entry = {"items": int(row["n_items"]), "raters": int(row["n_raters"]), "O_sum": _num(row["O_sum"]),
                 "dimensions": {}, "qa_accuracy": None, "judges": {}}
        for dim in dims:
            where = f"models.{model}.dimensions.{dim}"
            block = _empty_dimension()
            block["mean"] = _num(row[f"{dim}_mean"], reasons, f"{where}.mean")
            block["std_between_raters"] = _num(row[f"{dim}_std"], reasons, f"{where}.std_between_raters")
            ci = cis[dim].loc[model]
            block["ci95"] = _ci(ci["ci_low"], ci["ci_high"], reasons, f"{where}.ci95",
                                "fewer than 2 items: no interval", scale=IMAGENHUB_SCALE)
            entry["dimensions"][dim] = block
        report["models"][str(model)] = entry
    reasons.add("models.*.qa_accuracy", "ImagenHub studies ask no yes/no questions")
    with _background() as background:
        agreement = background.submit(_agreement, ratings, dims, n_boot=n_boot, seed=seed)
        subject = background.submit(fit_dimensions, ratings, dims)
        _agreement_and_ceiling(agreement, dims, report, reasons, ratings, n_boot=n_boot, frames=frames)
        _put_subject_model(subject, report, frames)
    put_rating_intervals(report, reasons.add, mos_frame=ratings, agreement_frame=ratings, dims=dims,
                         sampled=is_sampled(report["rater_sampling"]), estimator="rater_means", n_boot=n_boot,
                         seed=seed)
    return items.melt(id_vars=["model", "item"], value_vars=dims, var_name="dimension", value_name="human")


# ------------------------------------------------------------------ EvalMi


def _zscores(ratings: pd.DataFrame, dims: list[str], reasons: Reasons | None = None,
             codes: RatingCodes | None = None) -> dict[str, pd.DataFrame]:
    """The ratings z-scored per rater, per dim (rows of usable raters, the ratings' row labels)."""
    zscored = {}
    for dim in dims:
        frame, dropped = zscore_by_rater(ratings, score=dim, codes=codes)
        if reasons is not None:
            for rater, why in dropped.items():
                reasons.add(f"study_level.zmos.{dim}.rater {rater}", f"excluded from z-MOS: {why}")
        zscored[dim] = frame
    return zscored


def _zmos_items(ratings: pd.DataFrame, dims: list[str], reasons: Reasons | None = None,
                codes: RatingCodes | None = None, zscored: dict[str, pd.DataFrame] | None = None
                ) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """z-MOS per item (wide: ``model, item, <dims>`` on 0–100) and the z-scored ratings per dim
    (``zscored``: :func:`_zscores` already computed)."""
    if zscored is None:
        zscored = _zscores(ratings, dims, reasons, codes)
    per_dim_items = []
    for dim in dims:
        frame = zscored[dim]
        frame_codes = codes.of_subframe(frame, ratings.index) if codes is not None else None
        per_dim_items.append(group_means(frame, ["model", "item"], "z_scaled", codes=frame_codes).rename(dim))
    return pd.concat(per_dim_items, axis=1).reset_index(), zscored


def human_item_scores(study: ReportSource, *, include_excluded: bool = False) -> pd.DataFrame:
    """The per-item human scores the report correlates judges with: ``item, model, dimension, human``.

    ImagenHub: rater-averaged SC, PQ and O (0–1). EvalMi: z-MOS per item (0–100) from the
    study's ratings, else the published reference MOS. Pages plotting judge against human item
    scores use this so the dots are the numbers behind the report's correlations.
    """
    columns = ["item", "model", "dimension", "human"]
    definition = protocols.protocol_for(study)
    if not definition.has_scales:
        return pd.DataFrame(columns=columns)
    ratings = study.ratings_frame(include_excluded=include_excluded)
    if definition.score_scale == "raw":
        if ratings.empty:
            return pd.DataFrame(columns=columns)
        dims = definition.analysis_dimensions(getattr(study, "protocol_settings", None) or {})
        wide = item_scores(definition.derived_scores(ratings), dimensions=dims)
    elif ratings.empty:
        scores = study.judge_scores_frame()
        reference = scores[(scores["role"] == HUMAN_REFERENCE) & scores["dimension"].isin(["perception", "correspondence"])]
        return reference.rename(columns={"value": "human"})[columns].reset_index(drop=True)
    else:
        dims = ["perception", "correspondence"]
        wide, _ = _zmos_items(ratings, dims)
    long = wide.melt(id_vars=["model", "item"], value_vars=dims, var_name="dimension", value_name="human")
    return long.dropna(subset=["human"])[columns].reset_index(drop=True)


def _evalmi_section(study: ReportSource, ratings: pd.DataFrame, scores: pd.DataFrame | None, report: dict,
                    reasons: Reasons, include_excluded: bool, *, n_boot: int = 0, seed: int = 0,
                    frames: dict | None = None) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """Fills the EvalMi figures; returns (human item scores in long form, human yes/no per item)."""
    dims = ["perception", "correspondence"]
    if ratings.empty:
        reference = scores[scores["role"] == HUMAN_REFERENCE] if scores is not None else None
        if reference is not None and len(reference):
            return _evalmi_reference(reference, report, reasons)
        _counts(ratings, report)
        report["human_source"] = "none"
        reasons.add("models", "no ratings yet")
        return None, None

    codes = RatingCodes(ratings)  # rater, model and item coded once for every part of the report
    _counts(ratings, report, codes)
    with _background() as background:
        # agreement (on the raw Likert points) and screening run in the background while this
        # thread computes z-MOS and the ceiling; the report is filled in the same order as without
        # the thread. Screening's MOS with and without the rejected raters reuse the z-scores.
        agreement = background.submit(_agreement, ratings, dims, n_boot=n_boot, seed=seed, codes=codes)
        zscored = _zscores(ratings, dims, reasons, codes)
        screening = background.submit(_screening, ratings, dims, codes, zscored)
        subject = background.submit(fit_dimensions, ratings, dims, codes)
        items, zscored = _zmos_items(ratings, dims, reasons, codes, zscored)
        human_items = items.melt(id_vars=["model", "item"], value_vars=dims, var_name="dimension", value_name="human")
        # the leaderboard needs only the z-MOS per item: it follows the subject model in the
        # background instead of running alone after the ceiling
        leaderboard = (background.submit(_leaderboard, study.item_table(), human_items, n_boot=n_boot, seed=seed)
                       if frames is not None and not human_items.empty else None)
        human_qa = _evalmi_figures(study, ratings, dims, items, agreement, report, reasons, include_excluded,
                                   n_boot=n_boot, codes=codes, zscored=zscored, frames=frames, seed=seed,
                                   background=background)
        _put_screening(screening.result(), report)
        _put_subject_model(subject, report, frames)
        if leaderboard is not None:
            frames["leaderboard"] = leaderboard.result()
    return human_items, human_qa


def _evalmi_figures(study: ReportSource, ratings: pd.DataFrame, dims: list[str], items: pd.DataFrame,
                    agreement: Future, report: dict, reasons: Reasons, include_excluded: bool, *, n_boot: int,
                    codes: RatingCodes, zscored: dict[str, pd.DataFrame], frames: dict | None = None, seed: int = 0,
                    background: ThreadPoolExecutor | None = None) -> pd.DataFrame | None:
    """z-MOS per model, agreement, ceiling and QA of an EvalMi study with ratings; returns the human
    yes/no per item. ``items``: z-MOS per item, wide, and ``zscored`` the z-scored ratings
    (:func:`_zmos_items`); ``codes``: the ratings' codes."""

    raters_per_model = _distinct_per_model(codes, codes.rater, len(codes.rater_names))
    items_per_model = _distinct_per_model(codes, codes.item, len(codes.item_names))
    for model in sorted(ratings["model"].unique()):
        report["models"][str(model)] = {
            "items": int(items_per_model[model]), "raters": int(raters_per_model[model]),
            "dimensions": {dim: _empty_dimension() for dim in dims}, "qa_accuracy": None, "judges": {},
        }
    for dim in dims:
        table = mos_from_item_scores(items.dropna(subset=[dim]), score=dim).set_index("model")
        rater_means = group_means(zscored[dim], ["model", "rater"], "z_scaled",
                                  codes=codes.of_subframe(zscored[dim], ratings.index))
        spread = rater_means.groupby(level="model").std(ddof=0)
        for model, entry in report["models"].items():
            where = f"models.{model}.dimensions.{dim}"
            block = entry["dimensions"][dim]
            if model not in table.index:
                reasons.add(f"{where}.mean", "no z-scored ratings (all its raters had sigma = 0)")
                continue
            row = table.loc[model]
            block["mean"] = _num(row["mos"], reasons, f"{where}.mean")
            block["std_between_raters"] = _num(spread.get(model), reasons, f"{where}.std_between_raters")
            block["ci95"] = _ci(row["ci_low"], row["ci_high"], reasons, f"{where}.ci95",
                                "fewer than 2 items: no interval")
    ceiling_frame = ratings
    if all(len(zscored[d]) for d in dims):
        # the ceiling is computed on z' (what the MOS averages), agreement on the raw Likert points
        # z-scored frames keep the ratings' row labels: align on them instead of merging 1.6M rows
        ceiling_frame = ratings[["rater", "item", "model"]].assign(
            **{dim: zscored[dim]["z_scaled"].reindex(ratings.index) for dim in dims}
        ).dropna(subset=dims, how="all")
    sampled = is_sampled(report["rater_sampling"])
    with _background() as beside:
        # the rater-inclusive intervals (pure: computed, then put in the same order as ever) run in
        # a thread of their own while this one computes the ceiling; the later dimensions' join the
        # caller's ``background`` queue (after its own work), so both threads finish near together
        intervals = [(beside if k == 0 or background is None else background).submit(
                         rating_intervals, mos_frame=ceiling_frame, agreement_frame=ratings, dims=[dim],
                         estimator="item_means", n_boot=n_boot, seed=seed)
                     for k, dim in enumerate(dims)] if sampled else None
        _agreement_and_ceiling(agreement, dims, report, reasons, ceiling_frame, n_boot=n_boot,
                               ceiling_codes=codes.of_subframe(ceiling_frame, ratings.index), frames=frames)
        put_rating_intervals(report, reasons.add, mos_frame=ceiling_frame, agreement_frame=ratings, dims=dims,
                             sampled=sampled, estimator="item_means", n_boot=n_boot, seed=seed,
                             computed={dim: block for part in intervals for dim, block in part.result().items()}
                             if intervals is not None else None)
    return _evalmi_qa(study, report, reasons, include_excluded)


def _evalmi_qa(study: ReportSource, report: dict, reasons: Reasons, include_excluded: bool) -> pd.DataFrame | None:
    """Fills QA accuracy; returns the human verdict per item (``item, human``: 1 yes, 0 no, NaN tie)."""
    answers = study.answers_frame(include_excluded=include_excluded)
    if answers.empty:
        reasons.add("models.*.qa_accuracy", "no yes/no answers")
        return None
    verdicts = item_verdicts(majority_votes(answers))
    accuracy = model_accuracy(verdicts).set_index("model")
    undecided = int(accuracy["n_undecided"].sum())
    report["study_level"]["qa"] = {
        "items": int(accuracy["n_items"].sum()), "yes": int(accuracy["n_yes"].sum()),
        "no": int(accuracy["n_no"].sum()), "undecided": undecided,
        "tie_policy": "an even split is undecided and counts against the model (yes / all items)",
    }
    for model, entry in report["models"].items():
        if model in accuracy.index:
            entry["qa_accuracy"] = _num(accuracy.loc[model, "accuracy"] / 100.0)
        else:
            reasons.add(f"models.{model}.qa_accuracy", "no yes/no answers for this model")
    return pd.DataFrame({"item": verdicts["item"].to_numpy(), "human": verdict_as_number(verdicts["verdict"]).to_numpy()})


def _screening(ratings: pd.DataFrame, dims: list[str], codes: RatingCodes | None = None,
               zscored: dict[str, pd.DataFrame] | None = None) -> dict[str, tuple]:
    """Per dimension with ratings: the BT.500 screening and the model MOS with and without it
    (from the z-scores when ``zscored`` (:func:`_zscores`) and the ratings' ``codes`` are given)."""
    out = {}
    for dim in dims:
        present = ratings[dim].notna()
        frame = ratings if present.all() else ratings[present]
        if frame.empty:
            continue
        frame_codes = codes.take(present.to_numpy()) if codes is not None else None
        result = screen_observers(frame, score=dim, codes=frame_codes)
        shifts = mos_with_and_without_screening(frame, score=dim, screening=result, codes=frame_codes,
                                                zscored=zscored[dim] if zscored is not None else None)
        out[dim] = result, shifts.set_index("model")
    return out


def _put_screening(results: dict[str, tuple], report: dict) -> None:
    screening: dict[str, Any] = {}
    for dim, (result, shifts) in results.items():
        screening[dim] = {
            "raters": int(len(result.raters)),
            "rejected": result.rejected,
            "reasons": {str(r): row["reason"] for r, row in result.raters.iterrows() if row["rejected"]},
            "mos_all": {str(m): _num(v) for m, v in shifts["mos_all"].items()},
            "mos_screened": {str(m): _num(v) for m, v in shifts["mos_screened"].items()},
        }
    screening["rule"] = ("ITU-R BT.500 observer screening: beta2 in [2, 4] → ±2σ else ±√20σ; reject when "
                         "(P+Q)/N > 0.05 and |P−Q|/(P+Q) < 0.3. Reported, not applied to the MOS above.")
    report["study_level"]["screening"] = screening


def _evalmi_reference(reference: pd.DataFrame, report: dict, reasons: Reasons) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """EvalMi figures from the published per-image MOS (no per-rater data exists)."""
    report["human_source"] = "published_reference"
    names = sorted(reference["judge"].unique())
    report["study_level"]["reference"] = {"source": names, "note": (
        "published per-image MOS (already z-scored to 0-100 by the authors) and majority yes/no answers; "
        "per-rater statistics (std between raters, agreement, ceiling, screening) need raw ratings")}
    wide = reference.pivot_table(index=["model", "item"], columns="dimension", values="value", aggfunc="last")
    wide = wide.reset_index()
    dims = [d for d in ("perception", "correspondence") if d in wide.columns]
    report["study_level"].update({"items": int(wide["item"].nunique()), "raters": None,
                                  "ratings": 0, "models": int(wide["model"].nunique())})
    reasons.add("study_level.raters", "published MOS: the number of annotators per image is not released")
    tables = {dim: mos_from_item_scores(wide.dropna(subset=[dim]), score=dim).set_index("model") for dim in dims}
    qa = wide.groupby("model")["qa"].mean() if "qa" in wide.columns else pd.Series(dtype=float)
    per_rater = "published MOS has no per-rater ratings"
    for model in sorted(wide["model"].unique()):
        entry = {"items": int((wide["model"] == model).sum()), "raters": None, "dimensions": {},
                 "qa_accuracy": _num(qa.get(model), reasons, f"models.{model}.qa_accuracy", "no qa answers"),
                 "judges": {}}
        for dim in dims:
            where = f"models.{model}.dimensions.{dim}"
            block = _empty_dimension()
            row = tables[dim].loc[model]
            block["mean"] = _num(row["mos"], reasons, f"{where}.mean")
            block["ci95"] = _ci(row["ci_low"], row["ci_high"], reasons, f"{where}.ci95", "fewer than 2 items")
            block["alpha"] = {level: None for level in LEVELS}
            block["alpha_ci95"] = {level: None for level in LEVELS}
            entry["dimensions"][dim] = block
        report["models"][str(model)] = entry
    for entry in report["models"].values():
        for block in entry["dimensions"].values():
            block["intervals"] = {"ci95": "items"}  # no per-rater ratings: nothing to resample raters from
    if is_sampled(report["rater_sampling"]):
        reasons.add("models.*.dimensions.*.ci95", "published MOS has no per-rater ratings: the interval resamples "
                    "items only although the study's raters are sampled")
    for key in ("raters", "dimensions.*.std_between_raters", "dimensions.*.alpha", "dimensions.*.fleiss_kappa",
                "dimensions.*.human_ceiling"):
        reasons.add(f"models.*.{key}", per_rater)
    human_qa = wide[["item", "qa"]].rename(columns={"qa": "human"}) if "qa" in wide.columns else None
    return wide.melt(id_vars=["model", "item"], value_vars=dims, var_name="dimension", value_name="human"), human_qa


# ------------------------------------------------------------------ judges


def _judges_section(scores: pd.DataFrame, human: pd.DataFrame, report: dict, reasons: Reasons,
                    human_qa: pd.DataFrame | None = None, raters: pd.DataFrame | None = None,
                    judge_items: str = "per_dimension", kendall: str = "b", n_boot: int = 0, seed: int = 0,
                    average: str = "fisher") -> None:
    """Judge vs human per model (sample level) and across models (Fisher z), per human dimension.

    A judge dimension named like a human one (SC, PQ, O, perception…) is compared with that one;
    any other (CLIP_Score, LPIPS…) is compared with every human dimension, under the human
    dimension's name when it is the judge's only dimension, else as ``<judge dim>~<human dim>``.
    A judge's yes/no answers (dimension ``qa``, EvalMi) are compared with the human majority
    answer per item instead (:func:`_judge_qa`). ``raters``: the per-rater frame the human ceiling
    used, for the like-for-like comparison (:func:`analysis.science.ceiling.judge_vs_rest`);
    ``judge_items`` and ``kendall``: see :func:`build_report`. ``n_boot`` > 0 adds bootstrap intervals
    to every correlation and the paired comparisons (:func:`_put_comparisons`); ``average`` is how
    they average over models ("fisher", or "tanh_mean" under VIEScore's conventions).
    Each per-model block also gets ``ci95`` (Spearman, Pearson) over items, and over raters when the
    study's raters are sampled (:func:`analysis.science.report_intervals.correlation_block`); the pooled
    correlation has none (over every item of the study it costs ten times a model's, on every view).
    """
    blocks: list[JudgeBlock] = []
    sampled = is_sampled(report.get("rater_sampling", "sampled"))
    reuse = HumanReplicates()  # every judge compared on the same items shares the human resamples
    judged = scores[scores["role"] != HUMAN_REFERENCE]
    human_dims = list(dict.fromkeys(human["dimension"]))
    for judge, frame in judged.groupby("judge", sort=True):
        lower = bool(frame["lower_is_better"].iloc[0])
        summary = report["judges"].setdefault(str(judge), {})
        if QA_DIMENSION in set(frame["dimension"]):
            _judge_qa(str(judge), frame[frame["dimension"] == QA_DIMENSION], human_qa, report, reasons,
                      n_boot=n_boot, seed=seed)
            frame = frame[frame["dimension"] != QA_DIMENSION]
        judge_dims = list(dict.fromkeys(frame["dimension"]))
        # items the judge scored on every one of its dimensions (VIEScore's notebook keeps only these)
        per_item = frame.groupby("item")["dimension"].nunique()
        complete = set(per_item.index[per_item == len(judge_dims)])
        if judge_items == "all_aspects":
            frame = frame[frame["item"].isin(complete)]
        pairs = []
        for jdim in judge_dims:
            if jdim in human_dims:
                pairs.append((jdim, jdim, jdim))
            else:
                for hdim in human_dims:
                    key = hdim if len(judge_dims) == 1 else f"{jdim}~{hdim}"
                    pairs.append((jdim, hdim, key))
        for jdim, hdim, key in pairs:
            merged = frame[frame["dimension"] == jdim][["item", "model", "value"]].merge(
                human[human["dimension"] == hdim][["item", "human"]], on="item", how="inner"
            )
            where = f"judges.{judge}.{key}"
            if merged.empty:
                reasons.add(where, "no items scored by both the judge and the humans")
                continue
            table = per_group_correlations(merged, judge="value", human="human", by=("model",),
                                           lower_is_better=lower, logistic=True, kendall=kendall)
            blocks.append(JudgeBlock(str(judge), key, hdim, merged.assign(
                model=merged["model"].astype(str), value=-merged["value"] if lower else merged["value"])))
            vs_rest = _judge_vs_rest(merged, raters, hdim, lower, reasons, where)
            for row in table.to_dict("records"):
                model = str(row["model"])
                if model not in report["models"]:
                    continue
                mwhere = f"models.{model}.judges.{judge}.{key}"
                report["models"][model]["judges"].setdefault(str(judge), {})[key] = {
                    **{name: _num(row[col], reasons, f"{mwhere}.{name}", row["reason"])
                       for col, name in _CORR_KEYS.items()},
                    "plcc_logistic": _num(row["plcc_logistic"], reasons, f"{mwhere}.plcc_logistic",
                                          row["logistic_reason"] or row["reason"]),
                    "n": int(row["n"]),
                    "vs_rest": vs_rest[0].get(row["model"]) if vs_rest else None,
                    **_correlation_interval(merged[merged["model"] == row["model"]], raters, hdim, sampled, lower,
                                            reasons, mwhere, n_boot, seed, reuse),
                    **({"judge_dimension": jdim} if jdim != hdim else {}),
                }
            pooled = per_group_correlations(merged.assign(_all="all"), judge="value", human="human", by=("_all",),
                                            lower_is_better=lower, logistic=False, kendall=kendall).iloc[0]
            ranking = model_level_agreement(
                merged.groupby("model")["value"].mean(), merged.groupby("model")["human"].mean(),
                # a judge dimension on another scale (DINO vs O) keeps its sign; only its RMSE is meaningless
                lower_is_better=lower, same_scale=jdim == hdim,
            )
            weights = [n - 3 for n in table["n"]]  # atanh(r) has variance ~1/(n-3): weight models by it
            items = set(merged["item"])
            summary[key] = {
                **{f"{name}_fisher_mean": _num(fisher_z_mean(table[col]), reasons, f"{where}.{name}_fisher_mean",
                                               "no model with a defined correlation")
                   for col, name in _CORR_KEYS.items()},
                **{f"{name}_fisher_mean_weighted": _num(fisher_z_mean(table[col], weights=weights))
                   for col, name in _CORR_KEYS.items()},
                "plcc_logistic_fisher_mean": _num(fisher_z_mean(table["plcc_logistic"])),
                **({f"{name}_tanh_mean": _num(tanh_of_mean(table[col])) for col, name in _CORR_KEYS.items()}
                   if average == "tanh_mean" else {}),
                "pooled_spearman": _num(pooled["srcc"], reasons, f"{where}.pooled_spearman", pooled["reason"]),
                "pooled": {name: _num(pooled[col]) for col, name in _CORR_KEYS.items()},
                "n": int(len(merged)),
                "items": len(items),
                "items_missing_other_dimensions": len(items - complete),
                "models": int(table["srcc"].notna().sum()),
                "ceiling_comparison": _ceiling_comparison(report, table, vs_rest, hdim),
                "model_level": {
                    "spearman_rho": _num(ranking.spearman_rho, reasons, f"{where}.model_level.spearman_rho",
                                         ranking.reason),
                    "footrule": _num(ranking.footrule),
                    "rmse": _num(ranking.rmse),
                },
                "lower_is_better": lower,
                **({"judge_dimension": jdim} if jdim != hdim else {}),
            }
    if blocks:
        _put_comparisons(report, reasons, blocks, raters, n_boot=n_boot, seed=seed, average=average)
    if report["judges"]:
        report["study_level"]["judge_averaging"] = (
            "*_fisher_mean: tanh of the mean atanh over models, equal weights; *_fisher_mean_weighted: weights "
            "n - 3 (inverse variance of atanh r). Kendall's tau is averaged the same way although atanh is not its "
            "variance-stabilising transform. Compare the study-level human ceiling (raters pooled over all models) "
            "with ceiling_comparison.pooled, not with a mean of per-model correlations.")


def _put_comparisons(report: dict, reasons: Reasons, blocks: list, raters: pd.DataFrame | None, *, n_boot: int,
                     seed: int, average: str) -> None:
    """Bootstrap intervals into every judge block (per model: ``srcc_ci95``, ``plcc_ci95``, and a
    Fieller ``krcc_ci95``; per judge: ``spearman_mean_ci95``, ``pearson_mean_ci95`` around the mean
    over models) and the paired comparisons, Holm-adjusted, under ``report["judge_comparisons"]``
    (analysis.science.judge_comparisons)."""
    result = compare_judges(blocks, raters=raters, n_boot=n_boot, seed=seed, average=average)
    for why in result["reasons"]:
        reasons.add("judge_comparisons", why)
    for judge, keys in result["intervals"].items():
        for key, found in keys.items():
            for model, entry in found["models"].items():
                target = report["models"].get(model, {}).get("judges", {}).get(judge, {}).get(key)
                if target is not None:
                    target.update(entry)
            summary = report["judges"][judge][key]
            for name in ("spearman_mean_ci95", "pearson_mean_ci95"):
                summary[name] = found[name]
            summary["bootstrap_undefined_share"] = found.get("bootstrap_undefined_share", {})
    report["judge_comparisons"] = {key: result[key] for key in ("method", "n_boot", "average", "comparisons")}


def _correlation_interval(merged: pd.DataFrame, raters: pd.DataFrame | None, hdim: str, sampled: bool, lower: bool,
                          reasons: Reasons, where: str, n_boot: int, seed: int,
                          reuse: HumanReplicates | None = None) -> dict:
    """``ci95`` (Spearman, Pearson) and ``interval`` of the judge's correlation on ``merged``'s items."""
    judged = raters[raters["item"].isin(set(merged["item"]))] if raters is not None else None
    block, why = correlation_block(judged, merged.set_index("item")["value"], hdim=hdim, sampled=sampled,
                                   lower_is_better=lower, n_boot=n_boot, seed=seed, reuse=reuse)
    reasons.add(f"{where}.ci95", why)
    return block


def _judge_vs_rest(merged: pd.DataFrame, raters: pd.DataFrame | None, hdim: str, lower: bool, reasons: Reasons,
                   where: str) -> tuple[dict, dict] | None:
    """(per model, pooled) correlations of the judge with the mean of the other raters, averaged over
    left-out raters (:func:`analysis.science.ceiling.judge_vs_rest`); None without per-rater ratings."""
    if raters is None or hdim not in raters.columns:
        reasons.add(f"{where}.ceiling_comparison", "no per-rater ratings: no leave-one-out comparison")
        return None
    judged = raters[raters["item"].isin(set(merged["item"]))]
    per_model, pooled = judge_vs_rest(judged, merged.set_index("item")["value"], score=hdim,
                                      groupings=[("model",), ()], lower_is_better=lower)

    def block(row) -> dict:
        return {**{name: _num(row[col]) for col, name in _CORR_KEYS.items()}, "raters": int(row["n_raters"])}

    return {row["model"]: block(row) for _, row in per_model.iterrows()}, block(pooled.iloc[0])


def _ceiling_comparison(report: dict, table: pd.DataFrame, vs_rest: tuple[dict, dict] | None, hdim: str) -> dict:
    """Judge and human ceiling side by side, like for like: per model (Fisher means over the judged
    models of the judge against the mean of k - 1 raters, and of the ceiling) and pooled over the study
    (the judge's pooled correlation against k - 1 raters beside the study-level ceiling)."""
    models = [m for m, srcc in zip(table["model"], table["srcc"]) if srcc is not None
              and str(m) in report["models"]]
    ceilings = [report["models"][str(m)]["dimensions"].get(hdim, {}).get("human_ceiling") or {} for m in models]
    study = report["study_level"].get("dimensions", {}).get(hdim, {}).get("human_ceiling") or {}
    names = list(_CORR_KEYS.values())
    rest_models = [vs_rest[0].get(m) for m in models] if vs_rest else []
    return {
        "per_model": {
            "judge_vs_rest": {name: _num(fisher_z_mean([b[name] for b in rest_models if b])) for name in names},
            "human_ceiling": {name: _num(fisher_z_mean([c.get(name) for c in ceilings])) for name in names},
        },
        "pooled": {
            "judge_vs_rest": {name: vs_rest[1][name] for name in names} if vs_rest else None,
            "human_ceiling": {name: study.get(name) for name in names},
        },
    }


def _judge_qa(judge: str, answers: pd.DataFrame, human_qa: pd.DataFrame | None, report: dict,
              reasons: Reasons, *, n_boot: int = 0, seed: int = 0) -> None:
    """The judge's yes/no answer (1/0) per item against the human majority answer: agreement and
    Cohen's kappa per model and over the study. Items whose human majority is a tie are left out
    (``undecided_excluded``). With ``n_boot`` > 0 both get bootstrap 95% intervals over items
    (:func:`analysis.science.judge_comparisons.yes_no_intervals`)."""
    where = f"judges.{judge}.{QA_DIMENSION}"
    if human_qa is None or human_qa.empty:
        reasons.add(where, "no human yes/no answers to compare with")
        return
    merged = answers[["item", "model", "value"]].merge(human_qa[["item", "human"]], on="item", how="inner")
    if merged.empty:
        reasons.add(where, "no item answered by both the judge and the humans")
        return
    table = yes_no_agreement(merged.rename(columns={"value": "judge"}), by=("model",))
    parts = {str(m): p for m, p in merged.groupby("model", observed=True)}

    def block(row: dict, at: str) -> dict:
        part = merged if row["model"] == "all" and at == where else parts.get(str(row["model"]), merged.iloc[:0])
        return {
            **yes_no_intervals(part["value"], part["human"], n_boot=n_boot, seed=seed, where=at),
            "agreement": _num(row["agreement"], reasons, f"{at}.agreement", row["reason"]),
            "cohen_kappa": _num(row["cohen_kappa"], reasons, f"{at}.cohen_kappa", row["reason"]),
            "judge_yes_rate": _num(row["judge_yes_rate"]),
            "human_yes_rate": _num(row["human_yes_rate"]),
            "n": int(row["n"]),
            "undecided_excluded": int(row["n_excluded"]),
        }

    records = table.to_dict("records")
    for row in records[:-1]:
        model = str(row["model"])
        if model in report["models"]:
            report["models"][model]["judges"].setdefault(judge, {})[QA_DIMENSION] = block(
                row, f"models.{model}.judges.{judge}.{QA_DIMENSION}")
    overall = block(records[-1], where)
    per_model = [r["agreement"] for r in records[:-1] if r["n"]]
    overall["agreement_model_mean"] = _num(float(np.mean(per_model)) if per_model else None)
    overall["models"] = len(per_model)
    report["judges"][judge][QA_DIMENSION] = overall


# ------------------------------------------------------------------ pairwise


def _pairwise_section(study: ReportSource, report: dict, reasons: Reasons, include_excluded: bool, seed: int,
                      n_boot: int) -> None:
    frame = study.comparisons_frame(include_excluded=include_excluded)
    report["study_level"].update({
        "comparisons": int(frame["comparison"].nunique()), "raters": int(frame["rater"].nunique()),
        "ratings": int(len(frame)),
    })
    if frame.empty:
        reasons.add("models", "no pairwise judgements yet")
        return
    result = pairwise_summary(frame, n_boot=n_boot, seed=seed)
    report["study_level"]["pairwise_notes"] = result.notes
    report["leaderboard"] = {"bt_score": compare_bradley_terry(result.models, [
        result.table.set_index("model").loc[m, "bt_score"] for m in result.models], result.score_replicates)}
    raters = pd.concat([frame[["model_a", "rater"]].set_axis(["model", "rater"], axis=1),
                        frame[["model_b", "rater"]].set_axis(["model", "rater"], axis=1)])
    rater_counts = raters.groupby("model")["rater"].nunique()
    for row in result.table.to_dict("records"):
        model = str(row["model"])
        where = f"models.{model}"
        win_rate = _num(row["win_rate"], reasons, f"{where}.win_rate", "no decisive or tied judgements")
        report["models"][model] = {
            "items": int(row["comparisons"]), "raters": int(rater_counts.get(row["model"], 0)),
            "comparisons": int(row["comparisons"]), "wins": int(row["wins"]), "losses": int(row["losses"]),
            "ties": int(row["ties"]), "both_bad": int(row["both_bad"]),
            "win_rate": win_rate,
            "win_rate_ci95": _ci(row["win_rate_ci_low"], row["win_rate_ci_high"], reasons,
                                 f"{where}.win_rate_ci95", "bootstrap interval undefined"),
            "bootstrap_undefined_share": ({"win_rate": int(row["win_rate_boot_undefined"]) / n_boot}
                                          if n_boot and win_rate is not None else {}),
            "bt_score": _num(row["bt_score"], reasons, f"{where}.bt_score"),
            "bt_ci95": _ci(row["bt_ci_low"], row["bt_ci_high"], reasons, f"{where}.bt_ci95",
                           "bootstrap interval undefined"),
            "both_bad_rate": _num(row["both_bad_rate"]),
            "dimensions": {}, "qa_accuracy": None, "judges": {},
        }
    put_pairwise_intervals(report, reasons.add, frame, sampled=is_sampled(report["rater_sampling"]), n_boot=n_boot,
                           seed=seed)
    # Agreement on the preference itself (nominal: A / B / tie / both_bad of the same comparison).
    codes = frame.assign(code=frame["preference"].map({p: k for k, p in enumerate(protocols.PAIRWISE_CHOICES)}))
    table = agreement_table(codes.rename(columns={"comparison": "item"}).drop(columns=["model_a", "model_b"]),
                            scores=["code"], by=(), levels=("nominal",), kappa=True, n_boot=0)
    agreement = {}
    for row in table.itertuples(index=False):
        name = "alpha_nominal" if row.measure == "alpha_nominal" else "fleiss_kappa"
        agreement[name] = _num(row.value, reasons, f"study_level.preference.{name}", row.reason)
    report["study_level"]["preference"] = agreement


# ------------------------------------------------------------------ JSON safety


def _jsonable(value: Any, where: str, reasons: Reasons, root: dict) -> Any:
    """Plain Python types only; any NaN/inf that slipped through becomes None with a reason."""
    if isinstance(value, dict):
        out = {str(k): _jsonable(v, f"{where}.{k}", reasons, root) for k, v in value.items()}
        if value is root:
            out["reasons"] = reasons.as_list()
        return out
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, f"{where}[{i}]", reasons, root) for i, v in enumerate(value)]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        number = float(value)
        if not math.isfinite(number):
            reasons.add(where.removeprefix("report."), "undefined (not a finite number)")
            return None
        return number
    if value is None or isinstance(value, str):
        return value
    return str(value)
