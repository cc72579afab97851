"""Pure modules: no database."""

from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest

from analysis.science import plots
from analysis.science.leaderboard import rank_agreement, rank_models
from analysis.science.progress import study_progress

NOW = datetime(2025, 1, 1, 12, tzinfo=timezone.utc)


def _items(scores: dict[str, list[float]]) -> pd.DataFrame:
    return pd.DataFrame(
        [{"model": m, "instance": f"i{k}", "score": v} for m, values in scores.items() for k, v in enumerate(values)]
    )


def test_a_clearly_better_model_is_separated_from_the_next_and_equal_models_are_not():
    rows = rank_models(_items({"good": [0.9, 0.8, 0.95, 0.85, 0.9, 0.88], "bad": [0.1, 0.2, 0.15, 0.1, 0.2, 0.12],
                               "bad_twin": [0.12, 0.18, 0.15, 0.1, 0.2, 0.12]}))
    assert [r.model for r in rows] == ["good", "bad", "bad_twin"] or [r.model for r in rows] == ["good", "bad_twin", "bad"]
    assert rows[0].separated is True and rows[0].gap_p < 0.05
    assert rows[1].separated is False and rows[1].gap_p > 0.05
    assert rows[2].gap_to_next is None and rows[2].separated is None
    assert rows[0].ci_low < rows[0].mean < rows[0].ci_high


def test_the_gap_test_is_seeded_and_reproducible():
    items = _items({"a": [0.5, 0.7, 0.6, 0.9], "b": [0.4, 0.6, 0.7, 0.5]})
    assert rank_models(items, seed=3)[0].gap_ci == rank_models(items, seed=3)[0].gap_ci


def test_an_imposed_order_is_kept():
    rows = rank_models(_items({"a": [1, 1], "b": [0, 0]}), order=["b", "a"])
    assert [r.model for r in rows] == ["b", "a"] and rows[0].gap_to_next == -1


def test_rank_agreement_is_spearman_over_shared_models():
    assert rank_agreement(["a", "b", "c", "x"], ["c", "b", "a"])["spearman"] == pytest.approx(-1.0)
    assert rank_agreement(["a", "b"], ["a", "b"])["spearman"] == 1.0
    assert rank_agreement(["a"], ["a", "b"])["spearman"] is None


def test_progress_caps_each_unit_at_its_target_and_estimates_time_left_from_the_last_hour():
    stamps = [NOW - timedelta(minutes=m) for m in range(0, 60, 6)]  # 10 ratings in the last hour
    progress = study_progress([3, 5, 1, 0], 3, stamps, NOW)
    assert (progress.counted, progress.needed, progress.units_complete) == (7, 12, 2)
    assert progress.histogram == {0: 1, 1: 1, 2: 0, 3: 2}
    assert progress.rate_per_hour == 10 and progress.eta == timedelta(minutes=30)


def test_a_quiet_hour_falls_back_to_the_last_ratings_and_no_ratings_give_a_reason():
    stamps = [NOW - timedelta(hours=4), NOW - timedelta(hours=2)]
    assert study_progress([1, 0], 2, stamps, NOW).rate_per_hour == pytest.approx(0.5)
    empty = study_progress([0, 0], 2, [], NOW)
    assert empty.eta is None and empty.eta_reason == "no ratings yet"
    assert study_progress([2, 2], 2, stamps, NOW).eta == timedelta(0)


def test_plots_are_svg_even_without_data():
    ratings = pd.DataFrame({"model": ["a", "a", "b"], "SC": [0, 0.5, 1.0], "PQ": [1, 1, 0.5]})
    assert plots.score_histograms(ratings, ["SC", "PQ"]).lstrip().startswith("<?xml")
    for svg in (plots.score_histograms(ratings.iloc[:0], ["SC"]), plots.alpha_over_time(
            pd.DataFrame(columns=["dimension", "ratings", "alpha"])), plots.mos_with_ci(
            pd.DataFrame(columns=["model", "mean", "ci_low", "ci_high"]))):
        assert "<svg" in svg and ("No " in svg or "needs" in svg)


def test_histograms_give_every_scale_point_a_bar_even_when_nobody_chose_it():
    pq_votes = np.array([0.0, 1.0, 1.0])  # nobody chose 0.5
    edges = plots._bin_edges(pq_votes, (0.0, 0.5, 1.0))
    counts, _ = np.histogram(pq_votes, bins=edges)
    assert list(counts) == [1, 0, 2]
    # Without the scale only the observed points get bars: the empty 0.5 bar disappears.
    assert len(plots._bin_edges(pq_votes)) - 1 == 2
