"""CLIPScore, CLIP-I and DINO judges on tiny randomly initialised models that the test builds.

Needs the optional extra (``pip install -r requirements-clip.txt``); skipped without it. Nothing
is downloaded: the tokenizer is a word-level one written here, the models are random
``CLIPModel``/``Dinov2Model``/``ViTModel`` instances saved to a temporary directory.
"""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from PIL import Image

torch = pytest.importorskip("torch", reason="the CLIP extra is not installed (pip install -r requirements-clip.txt)")
transformers = pytest.importorskip("transformers", reason="the CLIP extra is not installed")

from analysis.judge_services import JudgeRunError, judge_create, judge_run_start  # noqa: E402
from analysis.science.judges import embedding  # noqa: E402
from analysis.models import JudgeScore  # noqa: E402
from tasks.images import store_image  # noqa: E402
from tasks.models import ConditionImage  # noqa: E402
from tests.factories import make_instance, make_item, make_study  # noqa: E402

pytestmark = pytest.mark.django_db

WORDS = "a an the two three red blue green circle circles square squares left right of on dog cat photo [v] sks".split()
PAD, UNK, BOS, EOS = 0, 1, 2, 3


def tiny_tokenizer():
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    vocab = {token: i for i, token in enumerate(["[PAD]", "[UNK]", "[BOS]", "[EOS]", *WORDS])}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[BOS] $A [EOS]", special_tokens=[("[BOS]", BOS), ("[EOS]", EOS)]
    )
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]", bos_token="[BOS]", eos_token="[EOS]",
        model_max_length=16,
    ), len(vocab)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """Directories holding a tiny CLIP (with tokenizer and processor), a tiny DINOv2 and a tiny ViT."""
    root = tmp_path_factory.mktemp("checkpoints")
    torch.manual_seed(0)
    tokenizer, vocab_size = tiny_tokenizer()
    tiny = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2}
    clip_config = transformers.CLIPConfig(
        text_config={**tiny, "vocab_size": vocab_size, "max_position_embeddings": 16,
                     "pad_token_id": PAD, "bos_token_id": BOS, "eos_token_id": EOS},
        vision_config={**tiny, "image_size": 32, "patch_size": 8},
        projection_dim=16,
    )
    crop = {"crop_size": {"height": 32, "width": 32}, "size": {"shortest_edge": 32}}
    clip_dir = root / "clip"
    transformers.CLIPModel(clip_config).save_pretrained(clip_dir)
    tokenizer.save_pretrained(clip_dir)
    transformers.CLIPImageProcessor(**crop).save_pretrained(clip_dir)

    dino_dir = root / "dinov2"
    transformers.Dinov2Model(transformers.Dinov2Config(**tiny, image_size=32, patch_size=8)).save_pretrained(dino_dir)
    transformers.BitImageProcessor(**crop).save_pretrained(dino_dir)

    vit_dir = root / "vit"
    transformers.ViTModel(transformers.ViTConfig(**tiny, image_size=32, patch_size=8)).save_pretrained(vit_dir)
    transformers.ViTImageProcessor(size={"height": 32, "width": 32}).save_pretrained(vit_dir)
    return {"clip": str(clip_dir), "dino": str(dino_dir), "vit": str(vit_dir), "root": root}


@pytest.fixture
def run_now(django_capture_on_commit_callbacks):
    def start(judge, study):
        with django_capture_on_commit_callbacks(execute=True):
            run = judge_run_start(judge=judge, study=study)
        run.refresh_from_db()
        return run

    return start


def textured_png(seed: int, size=(40, 36)) -> bytes:
    """A noisy image with a seed-dependent pattern: distinct seeds give distinct embeddings."""
    rng = np.random.default_rng(seed)
    pixels = (rng.random((size[1], size[0], 3)) * 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def with_output(item, data: bytes):
    item.image = store_image(data)
    item.save()
    return item


def subject_study(*, items=3, subjects=2):
    """Subject-driven generation: each instance has a subject set of ``subjects`` images."""
    study = make_study(task_type="subject_driven_generation")
    for i in range(items):
        instance = make_instance(study, prompt=f"a photo of [v] dog left of {'two' if i % 2 else 'a'} red circle")
        for position in range(subjects):
            ConditionImage.objects.create(instance=instance, role="subject_1", position=position, token="[V]",
                                          image=store_image(textured_png(100 * i + position)))
        with_output(make_item(study, instance=instance, model=f"Model{i % 2}"), textured_png(1000 + i))
    return study


def scores(run) -> dict[tuple[int, str], float]:
    return {(s.item_id, s.dimension): s.value for s in JudgeScore.objects.filter(run=run)}


def test_a_researcher_gets_clip_score_clip_i_and_dino_for_every_subject_driven_item(checkpoints, run_now):
    study = subject_study()
    judge = judge_create(name="clip+dino", kind="embedding",
                         params={"clip_checkpoint": checkpoints["clip"], "dino_checkpoint": checkpoints["dino"]})
    assert judge.lower_is_better is False
    run = run_now(judge, study)
    assert (run.state, run.total, run.done, run.failed, run.calls) == ("done", 3, 3, 0, 0)
    rows = list(JudgeScore.objects.filter(run=run))
    assert sorted({r.dimension for r in rows}) == ["CLIP_I", "CLIP_Score", "DINO"] and len(rows) == 9
    for row in rows:
        assert row.parse_status == "ok" and math.isfinite(row.value)
        if row.dimension == "CLIP_Score":
            assert 0.0 <= row.value <= 1.0 and -1.0 <= row.details["cosine"] <= 1.0
            assert row.value == pytest.approx(max(row.details["cosine"], 0.0), abs=1e-6)  # details rounded to 6 places
        else:  # mean over the two subject images, each cosine kept
            per_image = row.details["per_role"]["subject_1"]
            assert len(per_image) == 2 and -1.0 <= row.value < 1.0
            assert row.value == pytest.approx(np.mean(per_image), abs=1e-6)


def test_an_output_identical_to_its_source_has_clip_i_and_dino_of_one(checkpoints, run_now):
    study = make_study(task_type="text_guided_editing")
    source = textured_png(7)
    for i, output in enumerate([source, textured_png(8)]):
        instance = make_instance(study, prompt="make the dog blue")
        ConditionImage.objects.create(instance=instance, role="source", image=store_image(source))
        with_output(make_item(study, instance=instance, model=f"Model{i}"), output)
    judge = judge_create(name="vit-dino", kind="embedding", params={
        "clip_checkpoint": checkpoints["clip"], "dino_checkpoint": checkpoints["vit"], "metrics": ["CLIP_I", "DINO"]})
    run = run_now(judge, study)
    values = sorted(scores(run).items())
    same, different = (dict((d, v) for (item, d), v in values if item == pk) for pk in sorted({k[0] for k, _ in values}))
    assert same == {"CLIP_I": pytest.approx(1.0, abs=1e-9), "DINO": pytest.approx(1.0, abs=1e-9)}
    assert different["CLIP_I"] < 1.0 - 1e-6 and different["DINO"] < 1.0 - 1e-6


def test_scores_are_the_same_whatever_the_batch_size_and_a_rerun_is_served_from_the_cache(checkpoints, run_now):
    study = subject_study(items=5)
    params = {"clip_checkpoint": checkpoints["clip"], "dino_checkpoint": checkpoints["dino"]}
    batched = run_now(judge_create(name="batch-16", kind="embedding", params=params), study)
    one_by_one = run_now(judge_create(name="batch-1", kind="embedding", params={**params, "batch_size": 1}), study)
    a, b = scores(batched), scores(one_by_one)
    assert a.keys() == b.keys() and len(a) == 15
    assert all(a[key] == pytest.approx(b[key], abs=1e-5) for key in a)
    again = run_now(judge_create(name="batch-16", kind="embedding", params=params), study)
    assert (again.done, again.cached) == (5, 5)
    assert scores(again) == a


def test_the_prompt_changes_clip_score_but_not_the_image_similarities(checkpoints):
    params = embedding.parse_params({"clip_checkpoint": checkpoints["clip"], "dino_checkpoint": checkpoints["dino"]})
    image, subject = textured_png(1), textured_png(2)
    items = [
        embedding.EmbeddingItem("subject_driven_generation", prompt, image, {"subject_1": [subject]})
        for prompt in ("a photo of [v] dog", "three green squares right of the cat")
    ]
    first, second = (dict((s.dimension, s) for s in result) for result in embedding.score_items(items, params))
    assert first["CLIP_Score"].details["cosine"] != pytest.approx(second["CLIP_Score"].details["cosine"], abs=1e-6)
    assert first["CLIP_I"].value == second["CLIP_I"].value and first["DINO"].value == second["DINO"].value


def test_multi_concept_composition_averages_the_two_subject_sets(checkpoints):
    params = embedding.parse_params({"dino_checkpoint": checkpoints["dino"]})
    output = textured_png(3)
    item = embedding.EmbeddingItem("multi_concept_composition", "a dog and a cat", output,
                                   {"subject_1": [output, output], "subject_2": [textured_png(4)]})
    (dino,) = embedding.score_items([item], params)[0]
    assert dino.dimension == "DINO" and len(dino.sub_scores) == 2
    assert dino.sub_scores[0] == pytest.approx(1.0)
    assert dino.value == pytest.approx((1.0 + dino.sub_scores[1]) / 2)


def test_clip_score_weight_rescales_as_hessel_et_al(checkpoints):
    image = textured_png(5)
    cosines = {}
    for weight in (1.0, 2.5):
        params = embedding.parse_params({"clip_checkpoint": checkpoints["clip"], "metrics": ["CLIP_Score"], "clip_score_weight": weight})
        (score,) = embedding.score_items([embedding.EmbeddingItem("text_to_image", "a red circle", image)], params)[0]
        cosines[weight] = score
    assert cosines[2.5].value == pytest.approx(2.5 * cosines[1.0].value)
    assert cosines[1.0].value == pytest.approx(max(cosines[1.0].details["cosine"], 0.0), abs=1e-6)


def test_an_editing_item_without_its_source_fails_alone_with_the_reason(checkpoints, run_now):
    study = make_study(task_type="mask_guided_editing")
    instance = make_instance(study)
    ConditionImage.objects.create(instance=instance, role="source", image=store_image(textured_png(9)))
    with_output(make_item(study, instance=instance), textured_png(10))
    orphan = with_output(make_item(study, model="ModelB"), textured_png(11))  # instance without a source image
    run = run_now(judge_create(name="dino", kind="embedding", params={"dino_checkpoint": checkpoints["dino"]}), study)
    assert (run.state, run.done, run.failed) == ("done", 2, 1)
    error = JudgeScore.objects.get(run=run, item=orphan)
    assert error.parse_status == "failed" and error.value is None and "need the source image" in error.rationale


def test_dino_on_a_text_to_image_study_is_refused_before_it_starts(checkpoints):
    study = make_study(task_type="text_to_image")
    make_item(study)
    judge = judge_create(name="dino", kind="embedding", params={"dino_checkpoint": checkpoints["dino"]})
    with pytest.raises(JudgeRunError, match="need reference images .* text_to_image items have none"):
        judge_run_start(judge=judge, study=study)


def test_a_checkpoint_removed_after_the_judge_was_made_stops_the_run_from_starting(checkpoints):
    import shutil

    moved = checkpoints["root"] / "gone"
    shutil.copytree(checkpoints["clip"], moved)
    study = subject_study(items=1)
    judge = judge_create(name="clip-gone", kind="embedding", params={"clip_checkpoint": str(moved)})
    shutil.rmtree(moved)
    with pytest.raises(JudgeRunError, match="gone does not exist"):
        judge_run_start(judge=judge, study=study)


def test_a_checkpoint_with_broken_weights_fails_the_run_with_a_clear_error(checkpoints, run_now):
    import shutil

    broken = checkpoints["root"] / "broken-clip"
    shutil.copytree(checkpoints["clip"], broken)
    (broken / "model.safetensors").write_bytes(b"truncated download")
    study = subject_study(items=1)
    judge = judge_create(name="broken", kind="embedding", params={"clip_checkpoint": str(broken)})
    with pytest.raises(JudgeRunError, match="cannot load the CLIP model"):
        run_now(judge, study)
    run = study.judge_runs.get()
    assert run.state == "failed" and "cannot load the CLIP model" in run.error
    assert not JudgeScore.objects.filter(run=run).exists()


def test_a_cancelled_run_stops_between_batches_and_resumes_where_it_stopped(checkpoints, run_now, monkeypatch,
                                                                           django_capture_on_commit_callbacks):
    from analysis.judge_services import judge_run_resume
    from analysis.models import JudgeRun

    study = subject_study(items=3)
    judge = judge_create(name="one-at-a-time", kind="embedding", params={"dino_checkpoint": checkpoints["dino"], "batch_size": 1})
    real = embedding.score_items

    def score_then_cancel(items, params, **kwargs):  # a researcher presses cancel during the first batch
        JudgeRun.objects.update(cancel_requested=True)
        return real(items, params, **kwargs)

    monkeypatch.setattr(embedding, "score_items", score_then_cancel)
    run = run_now(judge, study)
    assert (run.state, run.done) == ("cancelled", 1)
    monkeypatch.setattr(embedding, "score_items", real)
    with django_capture_on_commit_callbacks(execute=True):
        judge_run_resume(run=run)
    run.refresh_from_db()
    assert (run.state, run.done, run.failed) == ("done", 3, 0)
    assert JudgeScore.objects.filter(run=run, dimension="DINO").count() == 3


@pytest.mark.django_db(transaction=True)
def test_the_run_judge_command_runs_an_embedding_judge(checkpoints):
    from io import StringIO

    from django.core.management import call_command

    study = subject_study(items=2)
    out = StringIO()
    call_command("run_judge", study.slug, "--judge", "cli-clip", "--kind", "embedding",
                 "--param", f"clip_checkpoint={checkpoints['clip']}", "--param", 'metrics=["CLIP_Score"]', stdout=out)
    assert "done, 2/2 units, 0 failed or refused, 0 requests, 0 from cache" in out.getvalue()
    assert set(JudgeScore.objects.filter(run__study=study).values_list("dimension", flat=True)) == {"CLIP_Score"}


def test_a_researcher_sees_clip_score_next_to_the_human_numbers(client, checkpoints, run_now):
    import random

    from django.urls import reverse

    from tasks.models import Rating
    from tests.factories import make_rater, make_user

    researcher = make_user("researcher-clip")
    study = make_study(title="CLIP study", task_type="text_to_image")
    study.owners.add(researcher)
    raters, rng = [make_rater() for _ in range(3)], random.Random(5)
    for i in range(5):
        instance = make_instance(study, prompt=["a red circle", "two blue squares", "a dog left of a cat"][i % 3])
        for model in ("Alpha", "Beta"):
            item = with_output(make_item(study, instance=instance, model=model), textured_png(50 + 2 * i + (model == "Beta")))
            for rater in raters:
                Rating.objects.create(study=study, rater=rater, item=item,
                                      values={"SC": rng.choice([0, 0.5, 1]), "PQ": rng.choice([0, 0.5, 1])})
    run_now(judge_create(name="CLIPScore (tiny)", kind="embedding", params={"clip_checkpoint": checkpoints["clip"]}), study)
    client.force_login(researcher)
    response = client.get(reverse("judge_side_by_side", args=[study.slug]))
    assert response.status_code == 200
    html = response.content.decode()
    assert "CLIPScore (tiny)" in html and "CLIP / DINO embeddings (local checkpoint)" in html
    judges = response.context["report"]["models"]["Alpha"]["judges"]["CLIPScore (tiny)"]
    # the judge's only dimension (CLIP_Score: text-to-image has no reference images) meets every human one
    assert set(JudgeScore.objects.filter(run__study=study).values_list("dimension", flat=True)) == {"CLIP_Score"}
    assert judges["SC"]["n"] == 5 and math.isfinite(judges["SC"]["spearman"])
