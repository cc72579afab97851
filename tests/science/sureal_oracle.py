"""Run SUREAL (the reference implementation of the P.913 subject model) on long ratings.

Reads ``{"ratings": [[rater, item, score], ...], "models": [...]}`` as JSON on stdin and writes,
per SUREAL model type, item quality, rater bias and inconsistency with their standard errors and
CIs as JSON on stdout. Kept a script so the oracle test can run it with an interpreter that has
``sureal`` installed (``SUREAL_PYTHON``) when the test's own environment does not.
"""

import contextlib
import io
import json
import sys
import types


def run(payload: dict) -> dict:
    from sureal.dataset_reader import RawDatasetReader
    from sureal.subjective_model import SubjectiveModel

    ratings = payload["ratings"]
    items = sorted({row[1] for row in ratings}, key=str)
    raters = sorted({row[0] for row in ratings}, key=str)
    scores: dict = {item: {} for item in items}
    for rater, item, score in ratings:
        scores[item][rater] = float(score)
    dataset = types.SimpleNamespace(
        dataset_name="oracle", yuv_fmt="yuv420p", width=1, height=1,
        ref_videos=[{"content_id": 0, "content_name": "c0", "path": "ref"}],
        dis_videos=[{"content_id": 0, "asset_id": k, "os": scores[item], "path": f"dis{k}"}
                    for k, item in enumerate(items)],
    )
    out = {"items": [str(i) for i in items], "raters": [str(r) for r in raters]}
    for name in payload.get("models", ["MLE_CO_AP"]):
        model = SubjectiveModel.find_subclass(name)(RawDatasetReader(dataset))
        with contextlib.redirect_stdout(io.StringIO()):  # SUREAL prints every iteration
            result = model.run_modeling()
        observers = result.get("observers") or raters
        order = [observers.index(r) for r in raters]
        out[name] = {
            "quality": list(map(float, result["quality_scores"])),
            "quality_std": list(map(float, result["quality_scores_std"])),
            "bias": [float(result["observer_bias"][k]) for k in order],
            "bias_std": [float(result["observer_bias_std"][k]) for k in order],
            "inconsistency": [float(result["observer_inconsistency"][k]) for k in order],
            "inconsistency_std": [float(result["observer_inconsistency_std"][k]) for k in order],
            "inconsistency_ci95": [[float(result["observer_inconsistency_ci95"][s][k]) for k in order]
                                   for s in (0, 1)],
            "num_iter": int(result.get("num_iter", -1)),
        }
    return out


if __name__ == "__main__":
    json.dump(run(json.load(sys.stdin)), sys.stdout)
