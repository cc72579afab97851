"""EvalMi-50K (seed 004) Table 4, human columns, from the released MOS file.

Model-level perception / correspondence = mean of the per-image MOS1 / MOS2
(already z-scored and rescaled to 0-100 by the authors); QA accuracy = share
of images whose majority answer Y/N is yes.
"""

import pytest

from analysis.science.qa import combine_sub_answers, model_accuracy
from analysis.science.zmos import mos_from_item_scores

# data model name -> (perception, correspondence, QA %)  (Table 4, "Human")
TABLE4_HUMAN = {
    "ali_flux_schnell": (60.63, 58.10, 80.29),
    "sd3_5_large": (59.50, 58.35, 81.43),
    "playground": (61.64, 56.06, 73.86),
    "Infinity": (60.86, 57.43, 78.10),
    "DALLE3": (59.35, 57.97, 80.24),
    "Kolors": (61.14, 53.53, 65.05),
    "omnigen": (59.12, 55.81, 73.29),
    "PixArt-sigma": (57.43, 54.72, 70.71),
    "Show-o": (52.31, 54.21, 71.71),
    "sdxl_base_1": (53.50, 52.23, 63.67),
    "EMU3": (54.29, 50.97, 59.90),
    "NOVA": (50.69, 52.73, 68.19),
    "Kandinsky-3": (58.21, 48.37, 50.14),
    "seed-xi": (50.73, 50.96, 61.43),
    "LaVi-Bridge": (50.56, 50.19, 59.10),
    "hart": (49.80, 50.30, 59.29),
    "ELLA": (44.61, 49.07, 54.90),
    "sd_v2-1": (47.68, 47.96, 48.86),
    "LLMGA": (48.67, 43.43, 37.67),
    "Janus": (36.98, 45.94, 42.95),
    "vila-u": (33.80, 43.47, 35.24),
    "i-Code-V3": (34.70, 39.80, 25.00),
    "LlamaGen_256": (29.96, 37.73, 21.19),
    "LWM": (28.88, 35.46, 15.48),
}

# Table 4 prints DALLE3 perception 59.35, appendix Table 9 of the same paper
# 59.34. The data gives 59.34496: a hair under the rounding boundary, so the
# paper double-rounded (59.345 -> 59.35) in one table and not the other.
KNOWN_DISCREPANCIES = {("DALLE3", "perception"): 59.34496}

HALF_CENT = 0.005 + 1e-9


@pytest.fixture(scope="module")
def measured(evalmi_mos):
    perception = mos_from_item_scores(evalmi_mos, score="perception").set_index("model")["mos"]
    correspondence = mos_from_item_scores(evalmi_mos, score="correspondence").set_index("model")["mos"]
    qa = model_accuracy(evalmi_mos, verdict="answer").set_index("model")["accuracy"]
    return {"perception": perception, "correspondence": correspondence, "qa": qa}


@pytest.mark.parametrize("model", sorted(TABLE4_HUMAN))
def test_human_model_level_figures_reproduce_to_two_decimals(measured, model):
    problems = []
    for column, value in zip(("perception", "correspondence", "qa"), TABLE4_HUMAN[model]):
        got = measured[column][model]
        known = KNOWN_DISCREPANCIES.get((model, column))
        if known is not None:
            if abs(got - known) > 1e-3:
                problems.append(f"{column}: known discrepancy moved, now {got:.4f}")
        elif abs(got - value) > HALF_CENT:
            problems.append(f"{column}: measured {got:.4f}, published {value}")
    assert not problems, f"{model}: " + "; ".join(problems)


def test_all_24_models_have_2100_images(evalmi_mos):
    counts = evalmi_mos.groupby("model").size()
    assert len(counts) == 24 and (counts == 2100).all()


def test_model_mos_has_a_narrow_t_interval(evalmi_mos):
    table = mos_from_item_scores(evalmi_mos, score="perception").set_index("model")
    flux = table.loc["ali_flux_schnell"]
    assert flux["ci_low"] < flux["mos"] < flux["ci_high"]
    assert flux["ci_high"] - flux["ci_low"] < 1.0  # 2,100 images: well under one MOS point


def test_released_yes_no_mostly_follows_the_all_sub_questions_rule(evalmi_mos):
    """Y/N should be 1 iff every sub-answer is 1; the release deviates on 194 of 4,368 complex images.

    The published accuracies use the released Y/N column as is (test above), so we
    record the deviation rather than "fixing" it.
    """
    recomputed = combine_sub_answers(evalmi_mos[["YN_1", "YN_2", "YN_3", "YN_4"]])
    complex_images = recomputed.notna()
    disagreements = int((recomputed[complex_images] != evalmi_mos.loc[complex_images, "answer"]).sum())
    assert int(complex_images.sum()) == 4368
    assert disagreements == 194
