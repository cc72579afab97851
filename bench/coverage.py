"""Coverage of 95 % intervals with known truth: item-only vs items+raters (analysis.science.rater_bootstrap).

    .venv/bin/python -m bench.coverage [--reps 200] [--n-boot 400] [--seed 0] [--scenarios pool,spammers]

No database, no Django: data are simulated, the truth is the estimand over the population of
items *and* raters, computed once per scenario from a very large simulated study (Monte Carlo).

Rating scenarios (3 models x 50 images, 1-5 Likert, each image rated by 3 raters of the panel;
image quality ~ N(model mean, 0.8), rating = clip(round(quality + rater bias + N(0, 0.7)))):

* ``fixed``: the same 3 expert raters rate everything, in every replication; the truth is what
  *these* raters would give on the population of images (the item-only interval is the right one;
  items+raters is wider than needed);
* ``pool``: each replication draws a panel of 10 raters from the crowd (bias sd 0.5); every image
  gets 3 of them at random;
* ``biased``: as pool with bias sd 1.0 and a personal scale (rating = 3 + s_r (quality - 3) + bias,
  s_r log-normal, sd 0.3);
* ``spammers``: as pool, each panel member is a spammer (uniform 1-5) with probability 0.25.

Statistics: model MOS (mean over images of the mean of their raters), Krippendorff's alpha
(interval) and Fleiss' kappa over all images, and the Spearman / Pearson correlation of a judge
(quality + N(0, 0.6)) with the human image means, pooled over models.

Pairwise scenarios (``pairwise_sd0.4``, ``pairwise_sd0.8``): 4 models with log-strengths
-0.6, -0.2, 0.2, 0.6; 150 comparisons (a random pair of models on a prompt with its own
deviations, sd 0.3), each judged by 3 raters of a panel of 10 drawn from the crowd; a rater's own
strengths deviate from the population's by N(0, sd). Statistics: win rate and Bradley–Terry score
per model. The truth is the BT fit / win rate of a study with 210,000 judgements by fresh raters.

Coverage is the share of replications (and models) whose interval contains the truth; with 200
replications its standard error is about 0.015 at 0.95 (per model; models share replications).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.science.pairwise import _cells, _encode, _tallies, _win_rates, bradley_terry
from analysis.science.rater_bootstrap import (BOOTSTRAP, JACKKNIFE, agreement_intervals, agreement_statistics, correlation_intervals,
                                      mean_intervals, pairwise_intervals)

MODEL_MEANS = (2.6, 3.0, 3.4)
ITEMS_PER_MODEL = 50
RATERS_PER_ITEM = 3
PANEL = 10
QUALITY_SD, NOISE_SD, JUDGE_SD = 0.8, 0.7, 0.6
STRENGTHS = np.array([-0.6, -0.2, 0.2, 0.6])
COMPARISONS, PROMPT_SD = 150, 0.3


@dataclass(frozen=True)
class RatingScenario:
    name: str
    bias_sd: float = 0.5
    scale_sd: float = 0.0
    spam_share: float = 0.0
    fixed: bool = False


RATING_SCENARIOS = {
    "fixed": RatingScenario("fixed", fixed=True),
    "pool": RatingScenario("pool"),
    "biased": RatingScenario("biased", bias_sd=1.0, scale_sd=0.3),
    "spammers": RatingScenario("spammers", spam_share=0.25),
}
PAIRWISE_SCENARIOS = {"pairwise_sd0.4": 0.4, "pairwise_sd0.8": 0.8}
SCENARIOS = (*RATING_SCENARIOS, *PAIRWISE_SCENARIOS)
FIXED_PANEL_SEED = 20_071  # the three experts of the "fixed" scenario, the same in every replication


# ------------------------------------------------------------------ ratings


def _panel(scenario: RatingScenario, size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    if scenario.fixed:
        rng = np.random.default_rng(FIXED_PANEL_SEED)
    return {
        "bias": rng.normal(0.0, scenario.bias_sd, size),
        "scale": np.exp(rng.normal(0.0, scenario.scale_sd, size)) if scenario.scale_sd else np.ones(size),
        "spam": rng.random(size) < scenario.spam_share,
    }


def simulate_ratings(scenario: RatingScenario, rng: np.random.Generator, *, items_per_model: int = ITEMS_PER_MODEL,
                     panel_size: int = PANEL, fresh_raters: bool = False) -> tuple[pd.DataFrame, pd.Series]:
    """(ratings ``rater, item, model, score``; judge score per item). ``fresh_raters``: every
    rating by a new rater from the crowd (the large study that defines the truth)."""
    n_models = len(MODEL_MEANS)
    n_items = n_models * items_per_model
    model = np.repeat(np.arange(n_models), items_per_model)
    quality = np.asarray(MODEL_MEANS)[model] + rng.normal(0.0, QUALITY_SD, n_items)
    judge = quality + rng.normal(0.0, JUDGE_SD, n_items)
    k = RATERS_PER_ITEM
    if scenario.fixed:
        panel = _panel(scenario, k, rng)
        rater = np.tile(np.arange(k), n_items)
    elif fresh_raters:
        panel = _panel(scenario, n_items * k, rng)
        rater = np.arange(n_items * k)
    else:
        panel = _panel(scenario, panel_size, rng)
        rater = np.argsort(rng.random((n_items, panel_size)), axis=1)[:, :k].ravel()
    item = np.repeat(np.arange(n_items), k)
    q = quality[item]
    latent = 3.0 + panel["scale"][rater] * (q - 3.0) + panel["bias"][rater] + rng.normal(0.0, NOISE_SD, len(item))
    score = np.clip(np.round(latent), 1, 5)
    spam = panel["spam"][rater]
    score[spam] = rng.integers(1, 6, int(spam.sum()))
    ratings = pd.DataFrame({"rater": rater, "item": item, "model": model[item], "score": score})
    return ratings, pd.Series(judge, index=np.arange(n_items))


def _spearman_pearson(ratings: pd.DataFrame, judge: pd.Series) -> tuple[float, float]:
    human = ratings.groupby("item")["score"].mean()
    x = judge.reindex(human.index)
    return float(x.corr(human, method="spearman")), float(x.corr(human))


def rating_truth(scenario: RatingScenario, *, seed: int = 12_345, items_per_model: int = 40_000,
                 agreement_items: int = 10_000) -> dict:
    """The estimands over images and raters, from one very large study (every rating by a new
    crowd rater; for ``fixed``, by the same three experts); alpha and kappa from the first
    ``agreement_items`` images of every model."""
    rng = np.random.default_rng(seed)
    ratings, judge = simulate_ratings(scenario, rng, items_per_model=items_per_model, fresh_raters=True)
    item_means = ratings.groupby(["model", "item"])["score"].mean()
    truth = {f"mos_{m}": float(v) for m, v in item_means.groupby(level="model").mean().items()}
    # agreement over the design of the study (3 raters per image) with crowd raters; computed on a
    # subsample large enough that its own sampling error (sd 0.001-0.004 at 30,000 images, against
    # 0.05-0.08 for a study of 50 images per model) is negligible, the same number
    # of images of every model as a study has (items are numbered model by model: the first 30,000
    # were all of one model, whose alpha is not the study's)
    sub = ratings[ratings["item"] % items_per_model < agreement_items]
    unit, _ = pd.factorize(sub["item"], sort=True)
    categories, category = np.unique(sub["score"].to_numpy(), return_inverse=True)
    n_units = int(unit.max()) + 1
    stats = agreement_statistics(unit, np.ones((1, len(sub))), category, categories, np.ones((1, n_units)), n_units)
    truth["alpha_interval"] = float(stats["alpha_interval"][0])
    truth["fleiss_kappa"] = float(stats["fleiss_kappa"][0])
    truth["spearman"], truth["pearson"] = _spearman_pearson(ratings, judge)
    return truth


def rating_replication(scenario: RatingScenario, truth: dict, rng: np.random.Generator, *, n_boot: int,
                       seed: int, method: str = "percentile bootstrap", items_per_model: int = ITEMS_PER_MODEL
                       ) -> dict[str, dict[str, list[bool]]]:
    """One simulated study: for each kind of interval, whether each interval covered its truth."""
    ratings, judge = simulate_ratings(scenario, rng, items_per_model=items_per_model)
    hits: dict[str, dict[str, list[bool]]] = {}
    for kind, raters in (("items", False), ("items+raters", True)):
        out = hits.setdefault(kind, {})
        for model, interval in mean_intervals(ratings, value="score", raters=raters, n_boot=n_boot, seed=seed,
                                                  method=method).items():
            out.setdefault("model MOS", []).append(_covers(interval, truth[f"mos_{model}"]))
        _, agreement = agreement_intervals(ratings, value="score", raters=raters, n_boot=n_boot, seed=seed,
                                           method=method)
        out["alpha (interval)"] = [_covers(agreement["alpha_interval"], truth["alpha_interval"])]
        out["Fleiss kappa"] = [_covers(agreement["fleiss_kappa"], truth["fleiss_kappa"])]
        correlations = correlation_intervals(ratings, judge, value="score", raters=raters, n_boot=n_boot, seed=seed)
        out["judge SRCC"] = [_covers(correlations["spearman"], truth["spearman"])]
        out["judge PLCC"] = [_covers(correlations["pearson"], truth["pearson"])]
    return hits


# ------------------------------------------------------------------ pairwise


def simulate_comparisons(rater_sd: float, rng: np.random.Generator, *, comparisons: int = COMPARISONS,
                         panel_size: int = PANEL, fresh_raters: bool = False) -> pd.DataFrame:
    """``item, rater, model_a, model_b, preference`` (A or B): 3 judgements per comparison."""
    k = len(STRENGTHS)
    first = rng.integers(0, k, comparisons)
    second = (first + rng.integers(1, k, comparisons)) % k
    prompt = rng.normal(0.0, PROMPT_SD, (comparisons, k))
    item = np.repeat(np.arange(comparisons), RATERS_PER_ITEM)
    if fresh_raters:
        rater = np.arange(len(item))
        taste = rng.normal(0.0, rater_sd, (len(item), k))
    else:
        rater = np.argsort(rng.random((comparisons, panel_size)), axis=1)[:, :RATERS_PER_ITEM].ravel()
        taste = rng.normal(0.0, rater_sd, (panel_size, k))
    a, b = first[item], second[item]
    margin = (STRENGTHS[a] + taste[rater, a] + prompt[item, a]) - (STRENGTHS[b] + taste[rater, b] + prompt[item, b])
    a_wins = rng.random(len(item)) < 1.0 / (1.0 + np.exp(-margin))
    return pd.DataFrame({"item": item, "rater": rater, "model_a": a, "model_b": b,
                         "preference": np.where(a_wins, "A", "B")})


def pairwise_truth(rater_sd: float, *, seed: int = 54_321, comparisons: int = 70_000) -> dict:
    frame = simulate_comparisons(rater_sd, np.random.default_rng(seed), comparisons=comparisons, fresh_raters=True)
    models, encoded = _encode(frame)
    cells, inverse = _cells(encoded, len(models))
    counts = np.bincount(inverse, minlength=len(cells)).astype(float)[None]
    wins, _ = _tallies(cells, counts, len(models), "exclude")
    rates = _win_rates(wins)[0]
    scores = bradley_terry(wins, prior=0.5)[0]
    return {f"{kind}_{m}": float(v) for m, r, s in zip(models, rates, scores)
            for kind, v in (("win_rate", r), ("bt", s))}


def pairwise_replication(rater_sd: float, truth: dict, rng: np.random.Generator, *, n_boot: int,
                         seed: int) -> dict[str, dict[str, list[bool]]]:
    frame = simulate_comparisons(rater_sd, rng)
    hits: dict[str, dict[str, list[bool]]] = {}
    for kind, raters in (("items", False), ("items+raters", True)):
        out = hits.setdefault(kind, {})
        for model, intervals in pairwise_intervals(frame, raters=raters, n_boot=n_boot, seed=seed).items():
            out.setdefault("win rate", []).append(_covers(intervals["win_rate"], truth[f"win_rate_{model}"]))
            out.setdefault("Bradley-Terry", []).append(_covers(intervals["bt"], truth[f"bt_{model}"]))
    return hits


# ------------------------------------------------------------------ the table


def _covers(interval, truth: float) -> bool:
    return interval.low is not None and interval.low <= truth <= interval.high


def coverage(scenario: str, *, reps: int, n_boot: int, seed: int = 0, method: str = "percentile bootstrap",
             items_per_model: int = ITEMS_PER_MODEL, truth_items: int = 40_000) -> dict[str, dict[str, float]]:
    """``{kind: {statistic: coverage}}`` over ``reps`` simulated studies of ``scenario``
    (``items_per_model`` images of each of the 3 models; the truth from ``truth_items`` per model)."""
    rng = np.random.default_rng(seed)
    if scenario in RATING_SCENARIOS:
        spec = RATING_SCENARIOS[scenario]
        # alpha and kappa: 10,000 images per model at the default size, every image when asked for more
        truth = rating_truth(spec, items_per_model=truth_items,
                             agreement_items=truth_items if truth_items > 40_000 else min(10_000, truth_items))
        run = lambda r: rating_replication(spec, truth, rng, n_boot=n_boot, seed=seed + r, method=method,  # noqa: E731
                                           items_per_model=items_per_model)
    elif scenario in PAIRWISE_SCENARIOS:
        sd = PAIRWISE_SCENARIOS[scenario]
        truth = pairwise_truth(sd)
        run = lambda r: pairwise_replication(sd, truth, rng, n_boot=n_boot, seed=seed + r)  # noqa: E731
    else:
        raise ValueError(f"unknown scenario {scenario!r}; choose from {', '.join(SCENARIOS)}")
    hits: dict[str, dict[str, list[bool]]] = {}
    for r in range(reps):
        for kind, stats in run(r).items():
            for name, covered in stats.items():
                hits.setdefault(kind, {}).setdefault(name, []).extend(covered)
    return {kind: {name: float(np.mean(v)) for name, v in stats.items()} for kind, stats in hits.items()}


def table(results: dict[str, dict[str, dict[str, float]]]) -> str:
    """A Markdown table: one row per (scenario, statistic), coverage of each kind of interval."""
    lines = ["| scenario | statistic | items | items+raters |", "|---|---|---|---|"]
    for scenario, kinds in results.items():
        for name in kinds["items"]:
            lines.append(f"| {scenario} | {name} | {kinds['items'][name]:.3f} | {kinds['items+raters'][name]:.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=200, help="simulated studies per scenario")
    parser.add_argument("--n-boot", type=int, default=400, help="bootstrap replicates per interval")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated, default: all")
    parser.add_argument("--method", default=BOOTSTRAP, choices=(BOOTSTRAP, JACKKNIFE),
                        help="interval method of the model MOS and agreement rows (the report's 'auto' takes the "
                             "jackknife at scale); correlations and pairwise are always bootstrapped")
    parser.add_argument("--items-per-model", type=int, default=ITEMS_PER_MODEL,
                        help="images per model in a simulated study (rating scenarios; 3 models)")
    parser.add_argument("--truth-items", type=int, default=40_000,
                        help="images per model of the huge study that gives the truth (α and κ: up to 10,000 of "
                             "them, all past 40,000); its own error must stay well below the studies'")
    args = parser.parse_args(argv)
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    unknown = [s for s in scenarios if s not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}")
    started = time.perf_counter()
    results = {}
    for scenario in scenarios:
        results[scenario] = coverage(scenario, reps=args.reps, n_boot=args.n_boot, seed=args.seed,
                                     method=args.method, items_per_model=args.items_per_model,
                                     truth_items=args.truth_items)
        print(f"{scenario}: done ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
    print(f"95 % interval coverage, {args.reps} simulated studies per scenario ({args.items_per_model} images per "
          f"model), {args.n_boot} bootstrap replicates, model MOS and agreement by {args.method}")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())



