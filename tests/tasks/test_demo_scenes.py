"""Procedural demo scenes: deterministic, and their ground truth agrees with the failures drawn."""

import json
import statistics

import numpy as np
import pytest

from tasks import demo_scenes
from tasks.demo_scenes import MODELS, TASKS, generate_task_set

SMALL = 96  # pixels; big enough for every drawing path, small enough to keep the suite fast


@pytest.fixture(scope="module")
def task_sets() -> dict[str, list[demo_scenes.DemoInstance]]:
    return {task: generate_task_set(task, 6, seed=3, size=SMALL) for task in TASKS}


def all_outputs(task_sets):
    return [(inst, out) for instances in task_sets.values() for inst in instances for out in inst.outputs]


@pytest.mark.parametrize("task", TASKS)
def test_every_task_gives_one_output_per_model(task_sets, task):
    for instance in task_sets[task]:
        assert [o.model for o in instance.outputs] == [m.name for m in MODELS]
        assert all(o.image.size == (SMALL, SMALL) and o.image.mode == "RGB" for o in instance.outputs)
        assert instance.prompt and instance.question and instance.task == task


def test_keys_are_unique_across_tasks(task_sets):
    keys = [inst.key for instances in task_sets.values() for inst in instances]
    assert len(keys) == len(set(keys))


@pytest.mark.parametrize("task", ["text_to_image", "mask_guided_editing", "multi_concept_composition"])
def test_the_same_seed_gives_identical_bytes(task):
    first, second = (generate_task_set(task, 3, seed=11, size=64) for _ in range(2))
    for a, b in zip(first, second):
        assert (a.prompt, a.facts, a.question) == (b.prompt, b.facts, b.question)
        for role in a.condition_images:
            assert [i.tobytes() for i in a.condition_images[role]] == [i.tobytes() for i in b.condition_images[role]]
        for out_a, out_b in zip(a.outputs, b.outputs):
            assert out_a.image.tobytes() == out_b.image.tobytes()
            assert (out_a.failures, out_a.truth) == (out_b.failures, out_b.truth)


def test_a_different_seed_gives_different_scenes():
    prompts = {seed: [i.prompt for i in generate_task_set("text_to_image", 4, seed=seed, size=32)] for seed in (1, 2)}
    assert prompts[1] != prompts[2]


def test_an_output_without_failures_gets_full_marks(task_sets):
    clean = [(inst, out) for inst, out in all_outputs(task_sets) if not out.failures]
    assert clean
    for instance, output in clean:
        truth = output.truth
        assert (truth["sc"], truth["pq"], truth["perception"], truth["correspondence"]) == (1.0, 1.0, 5, 5)
        assert truth["answers"]["question"] is True
        assert all(truth["answers"]["sub_questions"])


def test_a_semantic_failure_lowers_semantic_consistency_and_correspondence(task_sets):
    broken = [out for _, out in all_outputs(task_sets) if set(out.failures) & set(demo_scenes.SEMANTIC_SEVERITY)]
    assert broken
    for output in broken:
        assert output.truth["sc"] < 1 and output.truth["correspondence"] < 5


def test_a_count_failure_gives_partial_or_no_semantic_consistency(task_sets):
    counted = [out for _, out in all_outputs(task_sets) if "wrong_count" in out.failures]
    assert counted
    assert all(out.truth["sc"] in (0.0, 0.5) for out in counted)
    assert any(out.truth["sc"] == 0.5 for out in counted)


def test_total_failures_score_zero(task_sets):
    for _, output in all_outputs(task_sets):
        if any(demo_scenes.SEMANTIC_SEVERITY.get(f) == 0 for f in output.failures):
            assert output.truth["sc"] == 0.0
            assert output.truth["correspondence"] <= 2


def test_blur_lowers_perceptual_quality_and_perception(task_sets):
    blurred = [out for _, out in all_outputs(task_sets) if "blur" in out.failures]
    assert blurred
    for output in blurred:
        assert output.truth["pq"] < 1 and output.truth["perception"] < 5
        if output.truth["severity"]["blur"] == "severe":
            assert output.truth["pq"] == 0.0


def test_an_artifact_leaves_semantic_consistency_alone(task_sets):
    for _, output in all_outputs(task_sets):
        if output.failures and all(f in demo_scenes.ARTIFACTS for f in output.failures):
            assert output.truth["sc"] == 1.0 and output.truth["pq"] < 1


def test_scores_stay_on_the_published_scales(task_sets):
    for _, output in all_outputs(task_sets):
        truth = output.truth
        assert truth["sc"] in (0.0, 0.5, 1.0) and truth["pq"] in (0.0, 0.5, 1.0)
        assert truth["perception"] in range(1, 6) and truth["correspondence"] in range(1, 6)
        assert set(truth["severity"]) == set(output.failures)


def test_models_really_differ_in_how_often_they_fail():
    instances = generate_task_set("text_to_image", 40, seed=5, size=48)
    mean = {
        (model.name, scale): statistics.mean(
            out.truth[scale] for inst in instances for out in inst.outputs if out.model == model.name
        )
        for model in MODELS
        for scale in ("sc", "pq")
    }
    assert mean["PixelForge", "sc"] > mean["ShapeDiffusion-XL", "sc"] > mean["NoiseGAN", "sc"]
    assert mean["PixelForge", "pq"] > mean["Sketchy-1.5", "pq"] > mean["NoiseGAN", "pq"]
    assert mean["ShapeDiffusion-XL", "pq"] > mean["ShapeDiffusion-XL", "sc"]  # pretty but careless


def test_masks_are_binary_and_the_size_of_the_source(task_sets):
    for instance in task_sets["mask_guided_editing"]:
        (source,), (mask,) = instance.condition_images["source"], instance.condition_images["mask"]
        assert mask.size == source.size
        values = set(np.unique(np.asarray(mask)))
        assert values == {0, 255}


def test_a_clean_mask_edit_changes_nothing_outside_the_mask(task_sets):
    checked = 0
    for instance in task_sets["mask_guided_editing"]:
        source = np.asarray(instance.condition_images["source"][0])
        outside = np.asarray(instance.condition_images["mask"][0].convert("L")) == 0
        for output in instance.outputs:
            if not output.failures:
                assert (np.asarray(output.image)[outside] == source[outside]).all()
                assert (np.asarray(output.image) != source).any()
                checked += 1
    assert checked


@pytest.mark.parametrize("task", ["mask_guided_editing", "text_guided_editing", "subject_driven_editing"])
def test_editing_tasks_give_a_source_an_instruction_and_a_description(task_sets, task):
    for instance in task_sets[task]:
        assert len(instance.condition_images["source"]) == 1
        assert instance.alt_prompt and instance.alt_prompt != instance.prompt
        assert instance.facts["source"]["objects"]


@pytest.mark.parametrize(("task", "tokens"), [
    ("subject_driven_generation", {"subject_1": "[V]"}),
    ("subject_driven_editing", {"subject_1": "[V]"}),
    ("multi_concept_composition", {"subject_1": "[V]", "subject_2": "[M]"}),
])
def test_subject_tasks_give_three_references_per_token(task_sets, task, tokens):
    for instance in task_sets[task]:
        assert instance.tokens == tokens
        for role, token in tokens.items():
            assert len(instance.condition_images[role]) == 3
            assert token in (instance.alt_prompt or instance.prompt)


def test_control_images_are_outlines_on_black(task_sets):
    for instance in task_sets["control_guided_generation"]:
        control = np.asarray(instance.condition_images["control"][0].convert("L"))
        assert (control < 20).mean() > 0.7 and control.max() > 200


def test_questions_mention_the_prompts_facts(task_sets):
    for instance in task_sets["evalmi"] + task_sets["text_to_image"]:
        objects = instance.facts["objects"]
        questions = instance.sub_questions or [instance.question]
        facts = len(objects) + (1 if instance.facts["relation"] else 0)
        assert len(instance.sub_questions) == (facts if facts >= 2 else 0)
        for obj, question in zip(objects, questions):
            assert obj["colour"] in question and obj["shape"] in question
            assert obj["colour"] in instance.prompt and obj["shape"] in instance.prompt
        if instance.facts["relation"]:
            assert any(instance.facts["relation"] in q for q in questions)
        if instance.sub_questions:
            # one question about the whole prompt, never a repeat of a sub-question
            assert instance.question not in instance.sub_questions
        else:
            assert instance.question in questions


def test_the_overall_answer_of_a_complex_prompt_is_yes_only_when_every_sub_answer_is(task_sets):
    for instance, output in all_outputs({"evalmi": task_sets["evalmi"]}):
        answers = output.truth["answers"]
        if answers["sub_questions"]:
            assert answers["question"] == all(answers["sub_questions"])


def test_answers_turn_false_when_a_fact_is_broken(task_sets):
    for instance, output in all_outputs({"evalmi": task_sets["evalmi"], "t2i": task_sets["text_to_image"]}):
        answers = output.truth["answers"]
        flat = answers["sub_questions"] or [answers["question"]]
        if {"wrong_count", "wrong_colour", "wrong_shape", "missing_object", "wrong_relation"} & set(output.failures):
            assert not all(flat)
        else:
            assert all(flat)


def test_facts_and_truth_are_json_serialisable(task_sets):
    for instance, output in all_outputs(task_sets):
        json.dumps(instance.facts)
        json.dumps(output.truth)
        assert instance.facts["tag"]


def test_an_unknown_task_is_rejected():
    with pytest.raises(ValueError, match="unknown task"):
        generate_task_set("image_to_video", 1, seed=0)


@pytest.mark.parametrize("task", TASKS)
def test_ground_truth_agrees_with_failures_over_many_instances(task):
    for instance in generate_task_set(task, 25, seed=99, size=32):
        for output in instance.outputs:
            truth = output.truth
            answers = [truth["answers"]["question"], *truth["answers"]["sub_questions"]]
            semantic = [f for f in output.failures if f in demo_scenes.SEMANTIC_SEVERITY]
            if not semantic:
                assert truth["sc"] == 1.0 and truth["correspondence"] == 5 and all(answers)
            else:
                assert truth["sc"] < 1 and truth["correspondence"] < 5
            if "wrong_relation" in output.failures:
                assert truth["answers"]["sub_questions"][-1] is False


def test_a_single_group_drawn_in_the_wrong_colour_and_shape_does_not_follow_the_prompt():
    hits = [
        out
        for inst in generate_task_set("text_to_image", 80, seed=8, size=32)
        if len(inst.facts["objects"]) == 1
        for out in inst.outputs
        if {"wrong_colour", "wrong_shape"} <= set(out.failures)
    ]
    assert hits
    assert all(out.truth["sc"] == 0.0 for out in hits)
