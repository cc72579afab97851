"""The protocol objects (analysis.science.protocols): the registry and what each protocol answers.

Pure: runs with ``-p no:django``. Every question the site asks about a study's protocol has its
answer here, so a change of an answer is a deliberate change of this file.
"""

import numpy as np
import pandas as pd
import pytest

from analysis.science import protocols
from analysis.science.protocols import task_types


class _Study:
    def __init__(self, protocol):
        self.protocol = protocol


def test_registry_holds_one_object_per_protocol():
    assert set(protocols.PROTOCOLS) == {protocols.IMAGENHUB, protocols.EVALMI, protocols.PAIRWISE}
    for key, definition in protocols.PROTOCOLS.items():
        assert definition.key == key
        assert protocols.get(key) is definition
        assert protocols.get_protocol(key) is definition
        assert protocols.protocol_for(key) is definition
        assert protocols.protocol_for(_Study(key)) is definition
        assert isinstance(definition, protocols.Protocol)


def test_unknown_protocol_is_a_protocol_error():
    with pytest.raises(protocols.ProtocolError, match="unknown protocol 'likert'"):
        protocols.get("likert")
    with pytest.raises(protocols.ProtocolError):
        protocols.protocol_for(_Study("likert"))


def test_every_protocol_has_its_task_types():
    assert list(task_types.TASK_TYPES) == [protocols.IMAGENHUB, protocols.EVALMI, protocols.PAIRWISE]
    assert task_types.TASK_TYPES[protocols.IMAGENHUB] == protocols.IMAGENHUB_TASKS
    assert task_types.TASK_TYPES[protocols.PAIRWISE] == protocols.IMAGENHUB_TASKS
    assert task_types.TASK_TYPES[protocols.EVALMI] == {"mixed": "Text-to-image, mixed task tags (EvalMi-50K)",
                                                      "text_to_image": "Text-guided image generation"}


def test_imagenhub_answers():
    p = protocols.get(protocols.IMAGENHUB)
    settings = p.clean_settings({})
    assert p.title == "ImagenHub"
    assert (p.unit_kind, p.screen_kind, p.unit_plural) == (protocols.ITEM, protocols.ITEM, "items")
    assert p.has_scales and p.agreement_level == "ordinal"
    assert p.headline_dimension == "O"
    assert [d.key for d in p.dimensions(settings)] == ["SC", "PQ"]
    assert [d.label for d in p.dimensions(settings)] == ["Semantic consistency", "Perceptual quality"]
    assert [d.label for d in p.dimensions(settings)] == [protocols.SC_LABEL, protocols.PQ_LABEL]
    assert p.dimensions(settings)[0].choices == (0.0, 0.5, 1.0)
    assert p.analysis_dimensions(settings) == ["SC", "PQ", "O"]
    assert p.score_scale == "raw" and p.scale_unit == "0–1 scale points"
    assert p.plots == ("histograms", "sc-pq", "mos", "alpha")
    assert "imagenhub" in p.export_layouts
    assert p.layout_name("mask_guided_editing") == "mask_guided_editing"
    assert p.screen_task("subject_driven_editing") == "subject_driven_editing"
    assert p.images_per_screen(settings) == 1
    assert p.takes_attention_checks and p.needs_condition_images and p.takes_checklist
    assert not p.uses_checklist(settings) and p.uses_checklist(p.clean_settings({"checklist_mode": True}))
    assert not p.needs_task_question(settings)
    assert p.min_outputs_per_instance == 1 and p.instance_text_columns == ()
    assert p.rater_sampling == "fixed"
    assert p.planning_targets == {"halfwidth": 0.1, "gap": 0.05}
    assert p.required_task_types == protocols.IMAGENHUB_TASKS
    assert not p.has_reference_scores and p.all_choices == ()


def test_imagenhub_overall_is_the_geometric_mean_once():
    p = protocols.get(protocols.IMAGENHUB)
    frame = pd.DataFrame({"SC": [0.0, 0.5, 1.0, 0.5], "PQ": [1.0, 0.5, 1.0, 1.0]})
    derived = p.derived_scores(frame)
    assert list(derived.columns) == ["SC", "PQ", "O"]
    assert np.allclose(derived["O"], [0.0, 0.5, 1.0, np.sqrt(0.5)])
    assert "O" not in frame.columns  # a copy
    assert float(protocols.overall(0.5, 0.5)) == 0.5
    assert float(protocols.overall(0.0, 1.0)) == 0.0


def test_imagenhub_checklist_labels_are_the_screen_labels():
    p = protocols.get(protocols.IMAGENHUB)
    assert [key for key, _, _ in protocols.PERCEPTUAL_MARKS] == ["objects", "artifacts", "unusual"]
    assert protocols.PERCEPTUAL_MARKS[0][1] == "Objects in the image"
    marks = {"prompt": "most", "artifacts": "none", "unusual": "none"}
    with pytest.raises(protocols.ProtocolError, match="Objects in the image is missing"):
        p.derive_from_checklist("text_to_image", marks)
    assert p.derive_from_checklist("text_to_image", {**marks, "objects": "recognizable"})[0] == {"SC": 1.0, "PQ": 1.0}


def test_evalmi_answers():
    p = protocols.get(protocols.EVALMI)
    settings = p.clean_settings({})
    assert (p.unit_kind, p.screen_kind, p.unit_plural) == (protocols.ITEM, protocols.TRIAL, "items")
    assert p.has_scales and p.agreement_level == "interval"
    assert p.headline_dimension == "correspondence"
    assert p.analysis_dimensions(settings) == ["perception", "correspondence"]
    assert p.dimensions(settings)[0].choices == (1.0, 2.0, 3.0, 4.0, 5.0)
    assert p.score_scale == "z-MOS" and p.scale_unit == "Likert points"
    assert p.plots == ("histograms", "mos", "alpha")
    assert p.export_layouts == ("evalmi",)
    assert p.layout_name("mixed") == "evalmi"
    assert p.screen_task("mixed") == "text_to_image"
    assert p.images_per_screen(settings) == 3
    assert p.images_per_screen(p.clean_settings({"images_per_trial": 5})) == 5
    assert p.takes_attention_checks and not p.needs_condition_images and not p.takes_checklist
    assert not p.uses_checklist(settings)
    assert p.needs_task_question(settings) and not p.needs_task_question(p.clean_settings({"qa": False}))
    assert p.instance_text_columns == ("task_tag", "question", "sub_questions")
    assert p.rater_sampling == "sampled"
    assert p.planning_targets == {"halfwidth": 0.25, "gap": 0.2}
    assert p.required_task_types is None
    assert p.has_reference_scores
    frame = pd.DataFrame({"perception": [1.0], "correspondence": [5.0]})
    assert p.derived_scores(frame) is frame


def test_pairwise_answers():
    p = protocols.get(protocols.PAIRWISE)
    settings = p.clean_settings({})
    assert (p.unit_kind, p.screen_kind, p.unit_plural) == (protocols.COMPARISON, protocols.COMPARISON, "comparisons")
    assert not p.has_scales
    assert p.headline_dimension is None
    assert p.analysis_dimensions(settings) == []
    assert p.plots == () and p.export_layouts == ()
    assert p.layout_name("text_to_image") == "pairwise"
    assert p.images_per_screen(settings) == 1
    assert not p.takes_attention_checks and not p.takes_checklist
    assert p.min_outputs_per_instance == 2
    assert p.all_choices == protocols.PAIRWISE_CHOICES == ("A", "B", "tie", "both_bad")
    assert p.choices(p.clean_settings({"allow_both_bad": False})) == ("A", "B", "tie")
    assert p.required_task_types is None


def test_only_imagenhub_takes_a_checklist():
    for key in (protocols.EVALMI, protocols.PAIRWISE):
        p = protocols.get(key)
        with pytest.raises(protocols.ProtocolError, match="only ImagenHub studies take a checklist"):
            p.clean_answer(p.clean_settings({}), "text_to_image", {}, None, {"prompt": "most"})
    p = protocols.get(protocols.IMAGENHUB)
    with pytest.raises(protocols.ProtocolError, match="either the checklist or SC/PQ values"):
        p.clean_answer(p.clean_settings({}), "text_to_image", {"SC": 1}, None, {"prompt": "most"})
    with pytest.raises(protocols.ProtocolError, match="rates with the checklist"):
        p.clean_answer(p.clean_settings({"checklist_mode": True}), "text_to_image", {"SC": 1, "PQ": 1}, None, None,
                       checklist_required=True)
