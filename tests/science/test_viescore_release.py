"""Every judge setting of the VIEScore release (17 MLLM settings: GPT-4o, GPT-4v, Gemini, LLaVA,
Qwen-VL, CogVLM, BLIP-2, InstructBLIP, Fuyu, OpenFlamingo, 0- and 1-shot) reads, and its per-model
correlations with the human mean equal an independent scipy computation on the raw JSON.

The release is not in ../shared/datasets (only GPT-4o 0-shot is); point ``VIESCORE_RELEASE`` at
its ``paper_implementation/_answers`` folder (github.com/TIGER-AI-Lab/VIEScore) to run these.
LLaVA 0/1-shot, Qwen-VL 0-shot and CogVLM write some scores as a bare number or numeric text:
they were refused before, and are read here as the VIEScore notebook reads them.
"""

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis.science.correlation import per_group_correlations, viescore_table
from analysis.science.formats import read_imagenhub_task, read_viescore_judge
from analysis.science.imagenhub import add_overall, item_scores

RELEASE = Path(os.environ.get("VIESCORE_RELEASE", "/nonexistent"))
SETTINGS = sorted(p.name for p in RELEASE.glob("results_*") if any(p.glob("*/*/SC.json")))

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not SETTINGS, reason="VIESCORE_RELEASE does not point at VIEScore's _answers folder"),
]


@pytest.fixture(scope="module")
def human(viescore_root) -> pd.DataFrame:
    frames = []
    for folder in sorted((viescore_root / "human_ratings").iterdir()):
        ratings = add_overall(read_imagenhub_task(folder).rename(columns={"uid": "item"}))
        frames.append(item_scores(ratings).assign(task=folder.name))
    return pd.concat(frames, ignore_index=True)


def _independent(setting: Path, human: pd.DataFrame) -> dict[tuple[str, str, str], tuple[int, float]]:
    """(task, model, aspect) -> (n, Spearman) straight from the JSON files, the notebook's way."""
    out = {}
    for model_dir in sorted(setting.glob("*/*")):
        task, model = model_dir.parent.name, model_dir.name
        aspects = {}
        for aspect in ("SC", "PQ"):
            path = model_dir / f"{aspect}.json"
            if path.exists():
                raw = json.loads(path.read_text())
                aspects[aspect] = {uid: min(float(s) for s in (e["score"] if isinstance(e["score"], list)
                                                                else [e["score"]])) / 10 for uid, e in raw.items()}
        if len(aspects) == 2:
            both = aspects["SC"].keys() & aspects["PQ"].keys()
            aspects["O"] = {u: np.sqrt(np.clip(aspects["SC"][u], 0, 1) * np.clip(aspects["PQ"][u], 0, 1))
                            for u in both}
        people = human[(human["task"] == task) & (human["model"] == model)].set_index("item")
        for aspect, scores in aspects.items():
            shared = sorted(set(scores) & set(people.index))
            judge = np.round(np.clip([scores[u] for u in shared], 0, 1), 9)
            humans = np.round(people.loc[shared, aspect].to_numpy(float), 9)
            if len(shared) >= 3 and np.ptp(judge) > 0 and np.ptp(humans) > 0:
                out[task, model, aspect] = (len(shared), stats.spearmanr(judge, humans)[0])
    return out


@pytest.mark.parametrize("name", SETTINGS)
def test_every_viescore_judge_setting_reads_and_matches_scipy_per_model(name, human):
    long = read_viescore_judge(RELEASE / name)
    judge = viescore_table(long).rename(columns={"uid": "item"})
    ours = {}
    for aspect in ("SC", "PQ", "O"):
        paired = human.merge(judge[["task", "model", "item", aspect]].dropna(), on=["task", "model", "item"],
                             suffixes=("_h", "_j"))
        table = per_group_correlations(paired, judge=f"{aspect}_j", human=f"{aspect}_h", by=("task", "model"),
                                       logistic=False)
        for row in table.itertuples():
            if row.srcc is not None:
                ours[row.task, row.model, aspect] = (row.n, row.srcc)
    expected = _independent(RELEASE / name, human)
    assert ours.keys() == expected.keys()
    assert all(ours[k][0] == expected[k][0] and ours[k][1] == pytest.approx(expected[k][1], abs=1e-9)
               for k in expected), [k for k in expected if ours[k] != pytest.approx(expected[k])]
