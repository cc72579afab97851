import pandas as pd
import pytest

from analysis.science.qa import combine_sub_answers, item_verdicts, majority_votes, model_accuracy, normalise_answers


def answers(rows):
    return pd.DataFrame(rows, columns=["model", "item", "question", "rater", "answer"])


def test_even_split_is_undecided_not_yes_or_no():
    votes = majority_votes(answers([("m", "i", "q1", r, a) for r, a in zip("abcd", [1, 1, 0, 0])]))
    assert votes.loc[0, "majority"] == "undecided"
    assert (votes.loc[0, "yes"], votes.loc[0, "no"]) == (2, 2)


def test_complex_prompt_is_yes_only_if_every_sub_question_is_yes():
    rows = [("m", "all_yes", q, r, 1) for q in ("q1", "q2") for r in "abc"]
    rows += [("m", "one_no", "q1", r, 1) for r in "abc"] + [("m", "one_no", "q2", r, a) for r, a in zip("abc", [0, 0, 1])]
    verdicts = item_verdicts(majority_votes(answers(rows))).set_index("item")["verdict"]
    assert verdicts["all_yes"] == "yes"
    assert verdicts["one_no"] == "no"


def test_any_no_beats_undecided_and_undecided_beats_yes():
    rows = [("m", "no_and_tie", "q1", r, a) for r, a in zip("ab", [1, 0])]
    rows += [("m", "no_and_tie", "q2", r, 0) for r in "ab"]
    rows += [("m", "yes_and_tie", "q1", r, a) for r, a in zip("ab", [1, 0])]
    rows += [("m", "yes_and_tie", "q2", r, 1) for r in "ab"]
    verdicts = item_verdicts(majority_votes(answers(rows))).set_index("item")["verdict"]
    assert verdicts["no_and_tie"] == "no"
    assert verdicts["yes_and_tie"] == "undecided"


def test_model_accuracy_counts_undecided_separately():
    verdicts = pd.DataFrame({"model": ["m"] * 4, "verdict": ["yes", "yes", "no", "undecided"]})
    row = model_accuracy(verdicts).iloc[0]
    assert (row["n_yes"], row["n_no"], row["n_undecided"]) == (2, 1, 1)
    assert row["accuracy"] == pytest.approx(50.0)
    assert row["accuracy_decided"] == pytest.approx(200 / 3)


def test_answers_accept_common_spellings_and_reject_typos():
    assert normalise_answers(pd.Series(["Yes", "n", 1, 0.0, True, "FALSE"])).tolist() == [1, 0, 1, 0, 1, 0]
    with pytest.raises(ValueError, match="yse"):
        normalise_answers(pd.Series(["yes", "yse"]))


def test_sub_answers_combine_to_all_yes_and_leave_simple_prompts_missing():
    sub = pd.DataFrame({"YN_1": [1, 1, None], "YN_2": [1, 0, None], "YN_3": [None, 1, None]})
    combined = combine_sub_answers(sub)
    assert combined.iloc[0] == 1 and combined.iloc[1] == 0 and pd.isna(combined.iloc[2])


def test_yes_no_agreement_counts_matches_and_cohens_kappa_and_skips_ties():
    import numpy as np

    from analysis.science.qa import verdict_as_number, yes_no_agreement

    frame = pd.DataFrame({
        "model": ["A"] * 4 + ["B"] * 4,
        "judge": [1, 1, 0, 0, 1, 1, 1, np.nan],
        "human": verdict_as_number(pd.Series(["yes", "no", "no", "no", "yes", "yes", "undecided", "yes"])),
    })
    table = yes_no_agreement(frame).set_index("model")
    assert table.loc["A", "agreement"] == 0.75 and table.loc["A", "n"] == 4
    # A: judge yes rate 0.5, human 0.25 → expected 0.5; kappa = (0.75 - 0.5) / 0.5
    assert table.loc["A", "cohen_kappa"] == pytest.approx(0.5)
    assert (table.loc["B", "n"], table.loc["B", "n_excluded"]) == (2, 2)
    assert np.isnan(table.loc["B", "cohen_kappa"]) and "one answer only" in table.loc["B", "reason"]
    assert table.loc["all", "n"] == 6 and table.loc["all", "agreement"] == pytest.approx(5 / 6)
