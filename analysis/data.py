"""Querysets → DataFrames for the pure analysis modules.

The only place where the analysis touches the ORM for reading. Everything here uses
``values_list`` (no model instances per row) and pulls the numeric rating dimensions out of the
``Rating.values`` JSON *inside the database* (``KT("values__SC")`` cast to float), so a study with
1.6M ratings turns into a few numpy columns without decoding 1.6M JSON objects in Python.

Frames use the column names the analysis modules expect: ``rater`` (rater id as a string),
``item`` (Item id, unique across models), ``model`` (GenModel name), ``instance`` (Instance key),
then one float column per dimension.

Excluded raters are left out unless ``include_excluded=True``; who and why is decided by the one
rule in :mod:`raters.exclusion` (``excluded_raters`` here is that rule, answering from the tables
of a released package when the study is one).
"""

from __future__ import annotations

import functools
from typing import Iterable

import pandas as pd
from django.db.models import FloatField, QuerySet
from django.db.models.fields.json import KT
from django.db.models.functions import Cast

from analysis.models import Judge, JudgeScore
from raters import exclusion
from tasks.models import Comparison, Item, Study

_CHUNK = 20_000


def _packaged(function):
    """A study read back from a released package (analysis.science.release.PackagedStudy) answers from its
    own tables: the same frames, so build_report rebuilds a report without the site's database."""

    @functools.wraps(function)
    def read(study, *args, **kwargs):
        if getattr(study, "is_packaged", False):
            return getattr(study, function.__name__)(*args, **kwargs)
        return function(study, *args, **kwargs)

    return read


excluded_raters = _packaged(exclusion.excluded_raters)


@_packaged
def item_table(study: Study) -> pd.DataFrame:
    """One row per item: ``item`` (id), ``model``, ``instance`` (key), ``position``."""
    rows = Item.objects.filter(study=study).values_list(
        "id", "gen_model__name", "instance__key", "instance__position"
    )
    return pd.DataFrame.from_records(list(rows), columns=["item", "model", "instance", "position"])


def _item_models(study: Study) -> pd.Series:
    """Item id → model name."""
    rows = Item.objects.filter(study=study).values_list("id", "gen_model__name")
    frame = pd.DataFrame.from_records(list(rows), columns=["item", "model"])
    return frame.set_index("item")["model"]


def _frame(queryset, columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame.from_records(list(queryset.iterator(chunk_size=_CHUNK)), columns=columns)


def ratings_query(study: Study, *, unit: str, include_excluded: bool = False,
                  questions: Iterable[str] = ()) -> tuple[QuerySet, dict]:
    """The one reader of a study's ratings, for the report's frames and the dataset export.

    The ratings analysis uses (:func:`raters.exclusion.analysis_ratings`) of ``unit`` ("item" or
    "comparison"), annotated inside the database: per item, each protocol dimension cast to
    float and each yes/no answer of ``questions`` as text; per comparison, the preference as text.
    Returns the queryset and its annotations, in column order, for ``values_list``.
    """
    if unit == "comparison":
        annotations = {"_preference": KT("values__preference")}
    else:
        dimensions = [d.key for d in study.protocol_def.dimensions(study.protocol_settings)]
        annotations = {**{f"_d_{dim}": Cast(KT(f"values__{dim}"), FloatField()) for dim in dimensions},
                       **{f"_q_{q}": KT(f"answers__{q}") for q in questions}}
    ratings = exclusion.analysis_ratings(study, include_excluded=include_excluded)
    return ratings.filter(**{f"{unit}__isnull": False}).annotate(**annotations), annotations


@_packaged
def ratings_frame(study: Study, *, include_excluded: bool = False, items: pd.DataFrame | None = None) -> pd.DataFrame:
    """Item ratings of a (non-pairwise) study in long form.

    Columns: ``rater, item, model, instance`` and one float column per protocol dimension
    (SC, PQ for ImagenHub; perception, correspondence for EvalMi). Imported ratings are
    included like any other rating. ``items``: the study's :func:`item_table` when the caller has
    read it already (the report reads it once for the ratings and the leaderboard).
    """
    dimensions = [d.key for d in study.protocol_def.dimensions(study.protocol_settings)]
    ratings, annotations = ratings_query(study, unit="item", include_excluded=include_excluded)
    frame = _frame(ratings.values_list("rater_id", "item_id", *annotations), ["rater", "item", *dimensions])
    items = (item_table(study) if items is None else items).set_index("item")
    frame["model"] = items["model"].reindex(frame["item"]).to_numpy()
    frame["instance"] = items["instance"].reindex(frame["item"]).to_numpy()
    frame["rater"] = frame["rater"].astype(str)
    for dim in dimensions:
        frame[dim] = frame[dim].astype(float)
    return frame[["rater", "item", "model", "instance", *dimensions]]


@_packaged
def answers_frame(study: Study, *, include_excluded: bool = False) -> pd.DataFrame:
    """Yes/no answers in long form: ``rater, item, model, question, answer`` ('yes'/'no').

    Only ratings that carry answers are read; the JSON of those is decoded in Python (answers
    are short and only EvalMi studies have them).
    """
    queryset = (
        exclusion.analysis_ratings(study, include_excluded=include_excluded)
        .filter(item__isnull=False)
        .exclude(answers={})
        .values_list("rater_id", "item_id", "answers")
    )
    rows = [
        (str(rater), item, question, answer)
        for rater, item, answers in queryset.iterator(chunk_size=_CHUNK)
        for question, answer in (answers or {}).items()
    ]
    frame = pd.DataFrame.from_records(rows, columns=["rater", "item", "question", "answer"])
    models = _item_models(study) if len(frame) else pd.Series(dtype=object)  # no answers: no item query
    frame.insert(2, "model", models.reindex(frame["item"]).to_numpy())
    return frame


@_packaged
def comparisons_frame(study: Study, *, include_excluded: bool = False) -> pd.DataFrame:
    """Pairwise ratings: ``rater, comparison, instance, model_a, model_b, preference``."""
    ratings, annotations = ratings_query(study, unit="comparison", include_excluded=include_excluded)
    frame = _frame(ratings.values_list("rater_id", "comparison_id", *annotations), ["rater", "comparison", "preference"])
    pairs = pd.DataFrame.from_records(
        list(
            Comparison.objects.filter(study=study).values_list(
                "id", "item_a__instance__key", "item_a__gen_model__name", "item_b__gen_model__name"
            )
        ),
        columns=["comparison", "instance", "model_a", "model_b"],
    ).set_index("comparison")
    for column in ("instance", "model_a", "model_b"):
        frame[column] = pairs[column].reindex(frame["comparison"]).to_numpy()
    frame["rater"] = frame["rater"].astype(str)
    return frame[["rater", "comparison", "instance", "model_a", "model_b", "preference"]]


@_packaged
def judge_scores_frame(study: Study) -> pd.DataFrame:
    """Judge scores on this study's items: ``judge, lower_is_better, role, item, model, dimension, value``.

    When a judge has several runs on the study, the newest score per (item, dimension) wins.
    ``role`` is ``Judge.params.get("role", "judge")``; ``human_reference`` marks published human
    figures stored as scores (EvalMi-50K MOS, see analysis.importers.evalmi_import).
    Failed/refused scores (value NULL) are dropped.
    """
    queryset = (
        JudgeScore.objects.filter(run__study=study, value__isnull=False)
        .order_by("run__created_at", "id")
        .values_list("run__judge_id", "item_id", "dimension", "value")
    )
    frame = _frame(queryset, ["judge_id", "item", "dimension", "value"])
    columns = ["judge", "lower_is_better", "role", "item", "model", "dimension", "value"]
    if frame.empty:  # no judge has scored the study: skip the judge and item look-ups
        return pd.DataFrame({c: pd.Series(dtype=bool if c == "lower_is_better" else float if c == "value" else object)
                             for c in columns})
    frame = frame.drop_duplicates(subset=["judge_id", "item", "dimension"], keep="last")
    judges = pd.DataFrame.from_records(
        [
            (pk, name, lower, (params or {}).get("role", "judge"))
            for pk, name, lower, params in Judge.objects.filter(
                id__in=frame["judge_id"].unique().tolist()
            ).values_list("id", "name", "lower_is_better", "params")
        ],
        columns=["judge_id", "judge", "lower_is_better", "role"],
    ).set_index("judge_id")
    for column in ("judge", "lower_is_better", "role"):
        frame[column] = judges[column].reindex(frame["judge_id"]).to_numpy()
    frame["lower_is_better"] = frame["lower_is_better"].astype(bool)
    frame["model"] = _item_models(study).reindex(frame["item"]).to_numpy()
    frame["value"] = frame["value"].astype(float)
    return frame[columns].reset_index(drop=True)


def judge_sub_scores_frame(study: Study) -> pd.DataFrame:
    """VIEScore judges' sub-scores on this study's items: ``judge, item, dimension, sub_scores`` (the
    0-10 list each SC/PQ score was the minimum of), newest run winning as in :func:`judge_scores_frame`.
    Only the report's VIEScore-conventions option reads them (VIEScore truncates fractional
    sub-scores; the stored value keeps them)."""
    rows = (
        JudgeScore.objects.filter(run__study=study, run__judge__kind=Judge.Kind.VIESCORE, value__isnull=False,
                                  dimension__in=["SC", "PQ"])
        .order_by("run__created_at", "id")
        .values_list("run__judge__name", "item_id", "dimension", "sub_scores")
    )
    frame = pd.DataFrame.from_records(list(rows), columns=["judge", "item", "dimension", "sub_scores"])
    return frame.drop_duplicates(subset=["judge", "item", "dimension"], keep="last").reset_index(drop=True)
