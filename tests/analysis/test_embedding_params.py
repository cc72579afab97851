"""Embedding judges without torch: parameter checks, clear errors, and a site that never imports torch.

These run on every install; the scoring itself is in test_embedding_judges.py (needs the extra).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.judge_services import JudgeRunError, judge_create
from analysis.science.judges import embedding
from analysis.models import Judge

pytestmark = pytest.mark.django_db


def fake_checkpoint(path: Path) -> Path:
    """A directory that passes the layout check (config + weights); enough for validation."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text('{"model_type": "clip"}')
    (path / "model.safetensors").write_bytes(b"not really weights")
    return path


def test_a_researcher_naming_a_missing_checkpoint_is_told_it_is_never_downloaded(tmp_path):
    missing = tmp_path / "nowhere" / "clip"
    with pytest.raises(JudgeRunError, match=r"checkpoint directory .*nowhere/clip does not exist.*never downloaded"):
        judge_create(name="clip", kind="embedding", params={"clip_checkpoint": str(missing)})
    assert not Judge.objects.exists()


def test_a_hub_model_name_instead_of_a_directory_is_refused():
    with pytest.raises(JudgeRunError, match="must be an absolute path to a local directory"):
        judge_create(name="clip", kind="embedding", params={"clip_checkpoint": "openai/clip-vit-base-patch32"})


def test_a_directory_without_weights_is_refused(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(JudgeRunError, match="has no weights"):
        judge_create(name="clip", kind="embedding", params={"clip_checkpoint": str(tmp_path)})


def test_a_checkpoint_of_another_model_type_is_refused(tmp_path):
    clip = fake_checkpoint(tmp_path / "clip")
    with pytest.raises(JudgeRunError, match="holds a 'clip' model, not a DINO model"):
        judge_create(name="dino", kind="embedding", params={"dino_checkpoint": str(clip)})


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "give clip_checkpoint"),
        ({"metrics": ["DINO"], "clip_checkpoint": "/x"}, "DINO needs params.dino_checkpoint"),
        ({"metrics": ["CLIP_Score"], "dino_checkpoint": "/x"}, "need params.clip_checkpoint"),
        ({"metrics": ["FID"], "clip_checkpoint": "/x"}, "unknown metric"),
        ({"clip_checkpoint": "/x", "clip_score_weight": 0}, "clip_score_weight must be a positive number"),
        ({"clip_checkpoint": "/x", "batch_size": 0}, "batch_size must be a whole number"),
        ({"clip_checkpoint": "/x", "checkpoint": "/y"}, "unknown parameter"),
    ],
)
def test_bad_parameters_are_refused_with_the_reason(params, message):
    with pytest.raises(ValueError, match=message):
        embedding.parse_params(params)


def test_metrics_default_to_what_the_given_checkpoints_allow():
    assert embedding.parse_params({"clip_checkpoint": "/c"}).metrics == ("CLIP_Score", "CLIP_I")
    both = embedding.parse_params({"clip_checkpoint": "/c", "dino_checkpoint": "/d"})
    assert both.metrics == ("CLIP_Score", "CLIP_I", "DINO")
    assert embedding.parse_params({"clip_checkpoint": "/c", "dino_checkpoint": "/d", "metrics": ["DINO"]}).clip_checkpoint == ""


def test_image_metrics_apply_only_to_tasks_with_reference_images():
    chosen = ("CLIP_Score", "CLIP_I", "DINO")
    assert embedding.applicable(chosen, "text_to_image") == ("CLIP_Score",)
    assert embedding.applicable(chosen, "subject_driven_generation") == chosen
    assert embedding.applicable(("DINO",), "control_guided_generation") == ()


def test_without_torch_the_error_says_which_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    with pytest.raises(embedding.CheckpointError, match=r"need torch and transformers.*pip install .*\[clip\]"):
        embedding.require_backend()


def test_without_torch_a_run_cannot_start_and_says_why(tmp_path, monkeypatch):
    from analysis.judge_services import judge_run_start
    from tests.factories import make_item, make_study

    study = make_study(task_type="text_to_image")
    make_item(study)
    judge = judge_create(name="clip", kind="embedding", params={"clip_checkpoint": str(fake_checkpoint(tmp_path / "clip"))})
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(JudgeRunError, match=r"pip install .*\[clip\]"):
        judge_run_start(judge=judge, study=study)
    assert not study.judge_runs.exists()


def test_the_site_imports_the_judge_runner_without_importing_torch():
    code = (
        "import django, sys; django.setup(); import analysis.judge_services, analysis.api, analysis.judge_views; "
        "print('torch' in sys.modules, 'transformers' in sys.modules)"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "annotation_site.settings"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60,
                            cwd=Path(__file__).resolve().parents[2])
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "False"]


def test_a_researchers_own_embedding_judge_loads_checkpoints_only_from_the_operators_directories(tmp_path, settings):
    from tests.factories import make_user

    researcher = make_user("embedding-researcher")
    models = tmp_path / "models"
    inside = fake_checkpoint(models / "clip")
    outside = fake_checkpoint(tmp_path / "elsewhere" / "clip")
    (models / "escape").symlink_to(outside)
    settings.JUDGE_CHECKPOINT_DIRS = []
    with pytest.raises(JudgeRunError, match="lists no checkpoint directories"):
        judge_create(name="clip", kind="embedding", params={"clip_checkpoint": str(inside)}, owner=researcher)
    settings.JUDGE_CHECKPOINT_DIRS = [str(models)]
    for sneaky in (outside, models / ".." / "elsewhere" / "clip", models / "escape"):
        with pytest.raises(JudgeRunError, match="inside a checkpoint directory the operator lists"):
            judge_create(name="clip", kind="embedding", params={"clip_checkpoint": str(sneaky)}, owner=researcher)
    judge = judge_create(name="clip", kind="embedding", params={"clip_checkpoint": str(inside)}, owner=researcher)
    assert judge.owner == researcher
    # staff's shared judges are the operator's own choice of directory
    assert judge_create(name="clip", kind="embedding", params={"clip_checkpoint": str(outside)}).is_shared
