"""Pairwise comparisons: win rates and Bradley–Terry scores with bootstrap CIs.

Input: one row per judgement with ``model_a``, ``model_b`` and ``preference`` in
{"A", "B", "tie", "both_bad"} (A = model_a preferred).

Policies (documented because they change the numbers):
* **tie** = half a win for each side, in win rates and in Bradley–Terry (the usual
  "ties as half wins" reading of BT; it keeps the likelihood of the plain BT model).
* **both_bad** says neither output is acceptable but nothing about which is *better*.
  By default (``both_bad="exclude"``) it is left out of win rates and BT and reported
  separately per model as ``both_bad_rate`` (share of the model's judgements that were
  "both bad"). ``both_bad="tie"`` counts it as a tie instead.
* Bradley–Terry strengths are fitted by the MM algorithm (Hunter 2004) with a weak prior:
  every model plays ``prior`` virtual wins and ``prior`` virtual losses against a virtual
  reference of strength 1. Without it a model that never wins (or never loses) has an
  infinite score and disconnected comparison graphs have no unique solution. Scores are
  reported as natural-log strengths centred on the mean over models (0 = average model);
  P(i beats j) = 1 / (1 + exp(score_j - score_i)).
* CIs: percentile 95 % from a seeded bootstrap over judgements (resampled with
  replacement; the replicate is a vector of counts per (pair, outcome), so 1,000
  replicates cost 1,000 small K×K fits, never a pass over raw rows).

No Django here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

OUTCOMES = ("A", "B", "tie", "both_bad")
BOTH_BAD_POLICIES = ("exclude", "tie")


@dataclass
class PairwiseResult:
    """``table``: one row per model (sorted by BT score, best first) with columns
    ``model, comparisons, wins, losses, ties, both_bad, win_rate, win_rate_ci_low,
    win_rate_ci_high, win_rate_boot_undefined, bt_score, bt_ci_low, bt_ci_high, both_bad_rate``;
    ``win_rate_boot_undefined``: bootstrap replicates in which the model had no decisive or tied
    judgement, so its win rate was undefined (left out of its CI and counted here).

    ``win_rate`` = (wins + ties/2) / decisive-or-tied judgements (None if the model has
    none). ``notes`` explain undefined values and policies applied.
    """

    table: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    # bootstrap replicates of the BT scores, (n_boot, models) in the order of ``models`` (sorted names);
    # None without a bootstrap. analysis.science.model_comparisons reads them for rank intervals and all pairs.
    models: list[str] = field(default_factory=list)
    score_replicates: np.ndarray | None = None


def _encode(frame: pd.DataFrame) -> tuple[list[str], np.ndarray]:
    """Return (model names, per-judgement outcome count rows: i, j, outcome code)."""
    bad = ~frame["preference"].isin(OUTCOMES)
    if bad.any():
        raise ValueError(f"unknown preference values: {sorted(set(frame['preference'][bad].astype(str)))[:5]}")
    same = frame["model_a"] == frame["model_b"]
    if same.any():
        raise ValueError(f"a model cannot be compared with itself: {frame['model_a'][same].iloc[0]!r}")
    models = sorted(set(frame["model_a"]) | set(frame["model_b"]))
    index = {m: k for k, m in enumerate(models)}
    i = frame["model_a"].map(index).to_numpy(np.int64)
    j = frame["model_b"].map(index).to_numpy(np.int64)
    code = frame["preference"].map({o: k for k, o in enumerate(OUTCOMES)}).to_numpy(np.int64)
    return models, np.stack([i, j, code], axis=1)


def _cells(encoded: np.ndarray, n_models: int) -> tuple[np.ndarray, np.ndarray]:
    """Unique (i, j, outcome) cells and the index of each judgement's cell."""
    flat = (encoded[:, 0] * n_models + encoded[:, 1]) * len(OUTCOMES) + encoded[:, 2]
    cells, inverse = np.unique(flat, return_inverse=True)
    return cells, inverse


def _tallies(cells: np.ndarray, weights: np.ndarray, n_models: int, both_bad: str):
    """Per replicate (rows of ``weights``): wins W[r, i, j] (i over j, ties as halves) and
    both-bad counts per model."""
    outcome = cells % len(OUTCOMES)
    pair = cells // len(OUTCOMES)
    i, j = pair // n_models, pair % n_models
    n_rep = weights.shape[0]
    wins = np.zeros((n_rep, n_models, n_models))
    tie_share = {"A": (1.0, 0.0), "B": (0.0, 1.0), "tie": (0.5, 0.5)}
    tie_share["both_bad"] = (0.5, 0.5) if both_bad == "tie" else (0.0, 0.0)
    for code, name in enumerate(OUTCOMES):
        a_share, b_share = tie_share[name]
        mask = outcome == code
        if not mask.any():
            continue
        w = weights[:, mask]
        if a_share:
            np.add.at(wins, (slice(None), i[mask], j[mask]), a_share * w)
        if b_share:
            np.add.at(wins, (slice(None), j[mask], i[mask]), b_share * w)
    bad_mask = outcome == OUTCOMES.index("both_bad")
    bad = np.zeros((n_rep, n_models))
    if bad_mask.any():
        np.add.at(bad, (slice(None), i[bad_mask]), weights[:, bad_mask])
        np.add.at(bad, (slice(None), j[bad_mask]), weights[:, bad_mask])
    return wins, bad


def bradley_terry(wins: np.ndarray, *, prior: float = 0.5, tol: float = 1e-10, max_iter: int = 10_000) -> np.ndarray:
    """Log-strengths (mean 0) from a K×K (or R×K×K) matrix of wins (i over j, halves allowed).

    MM updates p_i ← (W_i + prior) / (sum_j n_ij / (p_i + p_j) + 2·prior / (p_i + 1)), where the
    prior terms are the virtual games against a reference of strength 1 (see module docstring).
    """
    w = np.asarray(wins, dtype=float)
    single = w.ndim == 2
    if single:
        w = w[None]
    games = w + np.swapaxes(w, 1, 2)
    total_wins = w.sum(axis=2) + prior
    p = np.ones(w.shape[:2])
    for _ in range(max_iter):
        denom = (games / (p[:, :, None] + p[:, None, :])).sum(axis=2) + 2.0 * prior / (p + 1.0)
        new = total_wins / denom
        change = np.max(np.abs(np.log(new) - np.log(p)))
        p = new
        if change < tol:
            break
    scores = np.log(p)
    scores -= scores.mean(axis=1, keepdims=True)
    return scores[0] if single else scores


def _win_rates(wins: np.ndarray) -> np.ndarray:
    played = (wins + np.swapaxes(wins, -1, -2)).sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(played > 0, wins.sum(axis=-1) / played, np.nan)


def pairwise_summary(
    comparisons: pd.DataFrame, *, both_bad: str = "exclude", n_boot: int = 1000, seed: int = 0, prior: float = 0.5
) -> PairwiseResult:
    """Win rates and Bradley–Terry scores per model, with seeded bootstrap 95 % CIs.

    ``comparisons``: columns ``model_a, model_b, preference``. Raises ``ValueError`` on unknown
    preferences or self-comparisons; an empty frame gives an empty table with a note.
    """
    if both_bad not in BOTH_BAD_POLICIES:
        raise ValueError(f"both_bad must be one of {BOTH_BAD_POLICIES}, got {both_bad!r}")
    columns = ["model", "comparisons", "wins", "losses", "ties", "both_bad", "win_rate", "win_rate_ci_low",
               "win_rate_ci_high", "win_rate_boot_undefined", "bt_score", "bt_ci_low", "bt_ci_high", "both_bad_rate"]
    notes = [f"ties count as half a win; 'both_bad' is {'a tie' if both_bad == 'tie' else 'excluded from win rates and BT'}"]
    if comparisons.empty:
        return PairwiseResult(pd.DataFrame(columns=columns), notes + ["no pairwise judgements"])
    models, encoded = _encode(comparisons)
    k = len(models)
    cells, inverse = _cells(encoded, k)
    counts = np.bincount(inverse, minlength=len(cells)).astype(float)[None]
    wins, bad = _tallies(cells, counts, k, both_bad)
    rate = _win_rates(wins)[0]
    scores = bradley_terry(wins, prior=prior)[0]

    rate_ci = np.full((2, k), np.nan)
    score_ci = np.full((2, k), np.nan)
    rate_undefined = np.zeros(k, np.int64)
    score_reps = None
    if n_boot > 0:
        rng = np.random.default_rng(seed)
        n = len(encoded)
        probabilities = counts[0] / n
        rate_reps, score_reps = [], []
        chunk = max(1, min(n_boot, 2_000_000 // max(k * k, 1)))
        for start in range(0, n_boot, chunk):
            size = min(chunk, n_boot - start)
            weights = rng.multinomial(n, probabilities, size=size).astype(float)
            rep_wins, _ = _tallies(cells, weights, k, both_bad)
            rate_reps.append(_win_rates(rep_wins))
            score_reps.append(bradley_terry(rep_wins, prior=prior))
        rate_reps = np.concatenate(rate_reps)
        score_reps = np.concatenate(score_reps)
        rate_undefined = (~np.isfinite(rate_reps)).sum(axis=0)
        with np.errstate(all="ignore"):
            rate_ci = np.nanpercentile(np.where(np.isfinite(rate_reps), rate_reps, np.nan), [2.5, 97.5], axis=0) \
                if np.isfinite(rate_reps).any() else rate_ci
        score_ci = np.percentile(score_reps, [2.5, 97.5], axis=0)

    outcome = encoded[:, 2]
    table = pd.DataFrame({"model": models})
    as_a = lambda code: np.bincount(encoded[outcome == code, 0], minlength=k)  # noqa: E731
    as_b = lambda code: np.bincount(encoded[outcome == code, 1], minlength=k)  # noqa: E731
    a, b, tie, bb = (OUTCOMES.index(o) for o in OUTCOMES)
    table["comparisons"] = np.bincount(encoded[:, 0], minlength=k) + np.bincount(encoded[:, 1], minlength=k)
    table["wins"] = as_a(a) + as_b(b)
    table["losses"] = as_a(b) + as_b(a)
    table["ties"] = as_a(tie) + as_b(tie)
    table["both_bad"] = bad[0].astype(int)
    table["win_rate"] = rate
    table["win_rate_ci_low"], table["win_rate_ci_high"] = rate_ci
    table["win_rate_boot_undefined"] = rate_undefined
    table["bt_score"] = scores
    table["bt_ci_low"], table["bt_ci_high"] = score_ci
    table["both_bad_rate"] = table["both_bad"] / table["comparisons"]
    undecided = table.loc[table["win_rate"].isna(), "model"].tolist()
    if undecided:
        notes.append(f"no decisive or tied judgements (win rate undefined) for: {', '.join(undecided)}")
    graph_notes = _connectivity_note(models, encoded)
    if graph_notes:
        notes.append(graph_notes)
    table = table.sort_values("bt_score", ascending=False, kind="stable").reset_index(drop=True)
    return PairwiseResult(table[columns], notes, models=models, score_replicates=score_reps)


def _connectivity_note(models: list[str], encoded: np.ndarray) -> str | None:
    """BT scores of models in different components are only tied together by the prior."""
    parent = list(range(len(models)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i, j in np.unique(encoded[:, :2], axis=0):
        parent[find(int(i))] = find(int(j))
    roots = {find(i) for i in range(len(models))}
    if len(roots) > 1:
        return (f"the comparison graph has {len(roots)} disconnected groups of models: BT scores across groups "
                "are not comparable (only the prior links them)")
    return None
