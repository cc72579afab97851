"""Simulated raters for the quality tests: who they are and how they answer.

A careful rater gives the true ImagenHub value most of the time and a neighbouring one otherwise;
a speeder clicks through in under a second with mostly random answers; a straight-liner gives
every image full marks; a random clicker answers uniformly at random at a normal pace; an
adversary gives everything the lowest score. Seeded, so every run sees the same answers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

SCALE = (0.0, 0.5, 1.0)
CAREFUL = ("careful_1", "careful_2", "careful_3", "careful_4")
BAD = ("speeder", "straight_liner", "random_clicker", "adversary")


@dataclass(frozen=True)
class Answer:
    rater: str
    item: int
    SC: float
    PQ: float
    time_ms: int


def true_scores(n_items: int, seed: int = 7) -> list[tuple[float, float]]:
    rng = np.random.default_rng(seed)
    return [(float(rng.choice(SCALE)), float(rng.choice(SCALE))) for _ in range(n_items)]


def _near(rng, value: float, p_exact: float) -> float:
    if rng.random() < p_exact:
        return value
    neighbours = [v for v in SCALE if abs(v - value) == 0.5]
    return float(rng.choice(neighbours))


def persona_answers(truth: list[tuple[float, float]], seed: int = 11) -> list[Answer]:
    rng = np.random.default_rng(seed)
    answers: list[Answer] = []
    for item, (sc, pq) in enumerate(truth):
        for rater in CAREFUL:
            answers.append(Answer(rater, item, _near(rng, sc, 0.85), _near(rng, pq, 0.85), int(rng.normal(6500, 1200))))
        if rng.random() < 0.3:
            speed = (_near(rng, sc, 1.0), _near(rng, pq, 1.0))
        else:
            speed = (float(rng.choice(SCALE)), float(rng.choice(SCALE)))
        answers.append(Answer("speeder", item, *speed, int(rng.normal(700, 150))))
        answers.append(Answer("straight_liner", item, 1.0, 1.0, int(rng.normal(3000, 500))))
        answers.append(
            Answer("random_clicker", item, float(rng.choice(SCALE)), float(rng.choice(SCALE)), int(rng.normal(4000, 800)))
        )
        answers.append(Answer("adversary", item, 0.0, 0.0, int(rng.normal(4500, 800))))
    return answers


def long_frame(answers: list[Answer]) -> pd.DataFrame:
    """The long (rater, item, dimension, score, time_ms) frame analysis.science.rater_flags takes."""
    rows = []
    for a in answers:
        for dim in ("SC", "PQ"):
            rows.append({"rater": a.rater, "item": a.item, "dimension": dim, "score": getattr(a, dim), "time_ms": a.time_ms})
    return pd.DataFrame(rows)
