"""Synthetic EvalMi-scale ratings around the real EvalMi-50K MOS, and loading them.

50,400 items (2,100 prompts × 24 models) × 16 raters × 2 dimensions (perception,
correspondence) = 1.61M scores in 806,400 ``Rating`` rows (one row per rater and item holds
both dimensions, as the rating UI stores them).

Raters: a pool of 64; items are split into 4 blocks by prompt and each block is rated by 16 of
them, so every item has 16 raters. Each good rater has an offset, a scale and noise on the
1–5 Likert scale around the item's real MOS (z-scored); two raters per block are bad (one
answers at random, one always the same point, with a little noise so σ > 0).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

DATASET = Path(os.environ.get("EVALMI_DIR", "/work/shared/datasets/evalmi"))
SLUG = "bench-evalmi"
RATERS_PER_ITEM = 16
BLOCKS = 4
DIMENSIONS = ["perception", "correspondence"]


def read_mos() -> pd.DataFrame:
    from analysis.science.formats import read_evalmi_mos

    return read_evalmi_mos(DATASET / "AIGI2025_MOS_yn.xlsx")


def synthesize(mos: pd.DataFrame, seed: int = 0) -> tuple[pd.DataFrame, list[str]]:
    """Long frame ``rater, image, model, prompt_number, perception, correspondence`` (Likert 1–5)
    and the names of the bad raters."""
    rng = np.random.default_rng(seed)
    n_items = len(mos)
    block = (mos["prompt_number"].to_numpy() - 1) * BLOCKS // int(mos["prompt_number"].max())
    frames, bad = [], []
    z = {dim: ((mos[dim] - mos[dim].mean()) / mos[dim].std()).to_numpy() for dim in DIMENSIONS}
    for b in range(BLOCKS):
        rows = np.flatnonzero(block == b)
        for r in range(RATERS_PER_ITEM):
            name = f"bench-rater-{b * RATERS_PER_ITEM + r:02d}"
            kind = "random" if r == 0 else "constant" if r == 1 else "good"
            offset, scale = rng.normal(0, 0.4), rng.uniform(0.6, 1.3)
            out = {"rater": name, "row": rows}
            for dim in DIMENSIONS:
                if kind == "random":
                    score = rng.integers(1, 6, len(rows)).astype(float)
                elif kind == "constant":
                    score = np.where(rng.random(len(rows)) < 0.05, 4.0, 3.0)
                else:
                    score = np.clip(np.rint(3 + offset + scale * z[dim][rows] + rng.normal(0, 0.6, len(rows))), 1, 5)
                out[dim] = score
            if kind != "good":
                bad.append(name)
            frames.append(pd.DataFrame(out))
    long = pd.concat(frames, ignore_index=True)
    meta = mos[["image", "model", "prompt_number"]].reset_index(drop=True)
    long = pd.concat([long.drop(columns="row"), meta.iloc[long["row"].to_numpy()].reset_index(drop=True)], axis=1)
    assert len(long) == n_items * RATERS_PER_ITEM
    return long, bad


def build_study(mos: pd.DataFrame):
    """The EvalMi study, its models, instances and items, through the importers' own helpers."""
    from analysis.importers import ImportSummary, _ensure_gen_models, _ensure_instances, _ensure_items, _ensure_study

    summary = ImportSummary()
    study = _ensure_study(SLUG, protocol="evalmi", task_type="overall", title="EvalMi scale bench",
                          raters_per_item=RATERS_PER_ITEM, summary=summary)
    models = _ensure_gen_models(study, sorted(mos["model"].unique()), summary)
    numbers = sorted(mos["prompt_number"].unique())
    keys = pd.DataFrame({"key": [f"p{n:04d}" for n in numbers], "position": numbers, "prompt": [f"prompt {n}" for n in numbers]})
    instances = _ensure_instances(study, keys, summary)
    pairs = pd.DataFrame({
        "instance_id": mos["prompt_number"].map(lambda n: instances[f"p{n:04d}"]).to_numpy(),
        "gen_model_id": mos["model"].map(models).to_numpy(),
    })
    item_ids = _ensure_items(study, pairs, summary)
    return study, pd.Series(item_ids.to_numpy(), index=mos["image"].to_numpy())


def rating_rows(long: pd.DataFrame, item_ids: pd.Series) -> pd.DataFrame:
    """The importers' row frame: ``rater_id, item_id, source_detail`` and the dimensions."""
    from analysis.importers import ImportSummary, _ensure_import_rater

    summary = ImportSummary()
    raters = {name: _ensure_import_rater(name, summary) for name in long["rater"].unique()}
    return pd.DataFrame({
        "rater_id": long["rater"].map(raters).to_numpy(),
        "item_id": item_ids.reindex(long["image"]).to_numpy(),
        "source_detail": "bench synthetic EvalMi",
        **{dim: long[dim].to_numpy() for dim in DIMENSIONS},
    })


def load_ratings(study, rows: pd.DataFrame):
    """Store the rows with the importers' writer (COPY on PostgreSQL) in one transaction."""
    from django.db import transaction

    from analysis.importers import ImportSummary, _store_ratings

    summary = ImportSummary()
    with transaction.atomic():
        _store_ratings(study, rows, DIMENSIONS, summary)
    return summary
