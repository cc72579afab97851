import pytest

from analysis.science.protocols import ProtocolError, get_protocol


def test_imagenhub_accepts_only_zero_half_and_one():
    proto = get_protocol("imagenhub")
    settings = proto.clean_settings({})
    assert proto.clean_rating(settings, {"SC": 0.5, "PQ": 1}) == ({"SC": 0.5, "PQ": 1.0}, {})
    with pytest.raises(ProtocolError, match=r"Semantic consistency \(SC\) must be one of 0 / 0.5 / 1, got 0.7"):
        proto.clean_rating(settings, {"SC": 0.7, "PQ": 1})


def test_imagenhub_rejects_missing_and_unknown_dimensions():
    proto = get_protocol("imagenhub")
    settings = proto.clean_settings({})
    with pytest.raises(ProtocolError, match=r"Perceptual quality \(PQ\) is missing"):
        proto.clean_rating(settings, {"SC": 1})
    with pytest.raises(ProtocolError, match="unknown dimension: beauty"):
        proto.clean_rating(settings, {"SC": 1, "PQ": 1, "beauty": 1})


def test_imagenhub_rejects_booleans_and_text_as_scores():
    proto = get_protocol("imagenhub")
    settings = proto.clean_settings({})
    with pytest.raises(ProtocolError, match="a number is required"):
        proto.clean_rating(settings, {"SC": True, "PQ": 1})
    with pytest.raises(ProtocolError, match="is not a number"):
        proto.clean_rating(settings, {"SC": "high", "PQ": 1})


def test_evalmi_likert_must_be_in_the_study_range():
    proto = get_protocol("evalmi")
    settings = proto.clean_settings({"likert_min": 1, "likert_max": 5})
    values = {"perception": 5, "correspondence": 1}
    assert proto.clean_rating(settings, values, {"q1": "yes"})[0] == {"perception": 5.0, "correspondence": 1.0}
    with pytest.raises(ProtocolError, match="Perception \\(perception\\) must be one of 1 / 2 / 3 / 4 / 5, got 6"):
        proto.clean_rating(settings, {"perception": 6, "correspondence": 1}, {"q1": "yes"})
    with pytest.raises(ProtocolError, match="must be one of"):
        proto.clean_rating(settings, {"perception": 2.5, "correspondence": 1}, {"q1": "yes"})


def test_evalmi_needs_yes_or_no_for_the_task_question_and_each_sub_question():
    proto = get_protocol("evalmi")
    settings = proto.clean_settings({})
    values = {"perception": 3, "correspondence": 3}
    assert proto.clean_rating(settings, values, {"q1": "Yes", "q2": False}, sub_question_count=1)[1] == {"q1": "yes", "q2": "no"}
    with pytest.raises(ProtocolError, match="question q2 needs a yes/no answer"):
        proto.clean_rating(settings, values, {"q1": "yes"}, sub_question_count=1)
    with pytest.raises(ProtocolError, match="question q1 needs a yes/no answer, got 'maybe'"):
        proto.clean_rating(settings, values, {"q1": "maybe"})


def test_evalmi_without_qa_takes_no_answers():
    proto = get_protocol("evalmi")
    settings = proto.clean_settings({"qa": False})
    with pytest.raises(ProtocolError, match="unknown question: q1"):
        proto.clean_rating(settings, {"perception": 3, "correspondence": 3}, {"q1": "yes"})


def test_evalmi_settings_are_validated():
    proto = get_protocol("evalmi")
    assert proto.clean_settings({"likert_min": 0, "likert_max": 10})["likert_max"] == 10
    with pytest.raises(ProtocolError, match="must have between 2 and 101 points"):
        proto.clean_settings({"likert_min": 3, "likert_max": 3})
    with pytest.raises(ProtocolError, match="unknown setting: colour"):
        proto.clean_settings({"colour": "blue"})
    with pytest.raises(ProtocolError, match="gold_share"):
        proto.clean_settings({"gold_share": 1.5})


def test_pairwise_preference_respects_both_bad_setting():
    proto = get_protocol("pairwise")
    assert proto.clean_rating(proto.clean_settings({}), {"preference": "both_bad"}) == ({"preference": "both_bad"}, {})
    strict = proto.clean_settings({"allow_both_bad": False})
    with pytest.raises(ProtocolError, match="preference must be one of A, B, tie"):
        proto.clean_rating(strict, {"preference": "both_bad"})


def test_unknown_protocol_is_named_in_the_error():
    with pytest.raises(ProtocolError, match="unknown protocol 'mos'"):
        get_protocol("mos")
