"""How a pairwise judge agrees with human votes, and its position bias (seed 002). Pure Python.

Labels are the comparison's: "A", "B" or "tie" ("both_bad" human votes count as tie).

- Agreement = share of comparisons where two evaluators give the same label; two random
  evaluators over three labels agree 1/3 of the time, the paper's 33% baseline.
- Human label = the majority of the human votes; a tie between the top labels is "tie".
- Position bias (the paper's Table 7, after Zheng et al. 2023), over comparisons judged in both
  orders: *consistent* when both orders give the same label; *biased toward first* when the
  judge picked whichever output was shown first both times (A first then B first); *biased
  toward second* likewise. Mixed tie/choice answers are inconsistent but in neither bias.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

CHANCE_AGREEMENT = 1 / 3


def majority_label(votes: list[str]) -> str | None:
    """Majority of human votes (A/B/tie/both_bad); None without votes; top-label tie → "tie"."""
    labels = ["tie" if v in ("tie", "both_bad") else v for v in votes if v]
    if not labels:
        return None
    counts = Counter(labels).most_common()
    if len(counts) > 1 and counts[0][1] == counts[1][1]:
        return "tie"
    return counts[0][0]


def single_label(score_a: float | None, score_b: float | None) -> str | None:
    """Single-answer grading turned into a preference: the higher score wins, equal → tie."""
    if score_a is None or score_b is None:
        return None
    return "A" if score_a > score_b else "B" if score_b > score_a else "tie"


def _share(pairs: list[tuple[str | None, str | None]]) -> tuple[float | None, int]:
    usable = [(x, y) for x, y in pairs if x and y]
    if not usable:
        return None, 0
    return sum(x == y for x, y in usable) / len(usable), len(usable)


@dataclass(frozen=True)
class PairwiseAgreement:
    n_pair: int
    pair_vs_human: float | None
    n_single: int
    single_vs_human: float | None
    n_single_vs_pair: int
    single_vs_pair: float | None
    n_orders: int
    consistency: float | None
    biased_first: float | None
    biased_second: float | None
    chance: float = CHANCE_AGREEMENT


def pairwise_agreement(rows: list[dict]) -> PairwiseAgreement:
    """``rows``: one dict per comparison with ``human`` (majority label or None), ``final``,
    ``first``, ``second`` (judge, pairwise) and ``single`` (judge, single grading) labels or None.
    Shares are fractions in [0, 1]; None when no comparison has both labels."""
    pair, n_pair = _share([(r.get("final"), r.get("human")) for r in rows])
    single, n_single = _share([(r.get("single"), r.get("human")) for r in rows])
    both, n_both = _share([(r.get("single"), r.get("final")) for r in rows])
    ordered = [r for r in rows if r.get("first") and r.get("second")]
    n = len(ordered)
    consistency = sum(r["first"] == r["second"] for r in ordered) / n if n else None
    first = sum(r["first"] == "A" and r["second"] == "B" for r in ordered) / n if n else None
    second = sum(r["first"] == "B" and r["second"] == "A" for r in ordered) / n if n else None
    return PairwiseAgreement(n_pair, pair, n_single, single, n_both, both, n, consistency, first, second)
