"""Yes/no question answering: majority votes and model QA accuracy.

EvalMi-50K asks raters a task question per image ("Is there exactly one
bench?"); complex prompts have several sub-questions. The image's answer is
the majority vote per question, and a complex prompt counts as "yes" only if
*every* sub-question's majority is yes.

Tie policy: an even split (e.g. 2 yes / 2 no) is ``undecided``. It is never
silently turned into yes or no; undecided questions are counted separately.
An image with any "no" sub-question is "no" (one failure is enough); an image
with no "no" but at least one undecided sub-question is undecided.

Accuracy (0-100 %) is reported two ways: ``accuracy`` = yes / all images
(undecided counts against the model, the conservative reading, and what the
paper's per-image Y/N implies), and ``accuracy_decided`` = yes / (yes + no).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

YES, NO, UNDECIDED = "yes", "no", "undecided"

_TRUTHY = {"1", "y", "yes", "true", "t"}
_FALSY = {"0", "n", "no", "false", "f"}


def normalise_answers(answers: pd.Series) -> pd.Series:
    """Map 1/0, True/False, 'yes'/'no', 'Y'/'N' (any case) to 1.0/0.0.

    Anything else (including missing) raises ``ValueError`` listing the
    offending values: a typo must not become a silent "no".
    """
    text = answers.astype(str).str.strip().str.lower().str.replace(r"\.0$", "", regex=True)
    result = pd.Series(np.nan, index=answers.index)
    result[text.isin(_TRUTHY)] = 1.0
    result[text.isin(_FALSY)] = 0.0
    if result.isna().any():
        bad = sorted(set(answers[result.isna()].astype(str)))[:5]
        raise ValueError(f"unrecognised yes/no answers: {bad}")
    return result


def majority_votes(
    answers: pd.DataFrame, *, item: str = "item", question: str = "question", answer: str = "answer"
) -> pd.DataFrame:
    """Majority per (item, question); extra key ``model`` kept if present.

    Returns columns ``[model,] item, question, yes, no, n, majority`` with
    majority in {'yes', 'no', 'undecided'}.
    """
    keys = [c for c in ("model",) if c in answers.columns and c not in (item, question)] + [item, question]
    votes = answers[keys].copy()
    votes["_yes"] = normalise_answers(answers[answer])
    table = votes.groupby(keys, sort=True)["_yes"].agg(yes="sum", n="size").reset_index()
    table["yes"] = table["yes"].astype(int)
    table["no"] = table["n"] - table["yes"]
    table["majority"] = np.select(
        [table["yes"] > table["no"], table["no"] > table["yes"]], [YES, NO], default=UNDECIDED
    )
    return table[[*keys, "yes", "no", "n", "majority"]]


def item_verdicts(
    majorities: pd.DataFrame, *, item: str = "item", question: str = "question"
) -> pd.DataFrame:
    """Combine sub-question majorities into one verdict per item.

    yes if all sub-questions are yes; no if any is no; otherwise undecided.
    Returns ``[model,] item, n_questions, verdict``.
    """
    keys = [c for c in ("model",) if c in majorities.columns and c not in (item, question)] + [item]
    flags = majorities.assign(
        _no=majorities["majority"].eq(NO), _undecided=majorities["majority"].eq(UNDECIDED)
    )
    table = flags.groupby(keys, sort=True).agg(
        n_questions=(question, "size"), any_no=("_no", "any"), any_undecided=("_undecided", "any")
    ).reset_index()
    table["verdict"] = np.select([table["any_no"], table["any_undecided"]], [NO, UNDECIDED], default=YES)
    return table[[*keys, "n_questions", "verdict"]]


def model_accuracy(verdicts: pd.DataFrame, *, verdict: str = "verdict") -> pd.DataFrame:
    """QA accuracy per model from item verdicts (or 0/1 answers).

    ``verdict`` may hold 'yes'/'no'/'undecided' strings or 1/0 numbers.
    Returns ``model, n_items, n_yes, n_no, n_undecided, accuracy,
    accuracy_decided`` (percentages, 0-100; accuracy_decided is NaN when
    every item is undecided).
    """
    column = verdicts[verdict]
    if column.isin([YES, NO, UNDECIDED]).all():
        labels = column
    else:
        labels = normalise_answers(column).map({1.0: YES, 0.0: NO})
    frame = pd.DataFrame({"model": verdicts["model"].to_numpy(), "label": labels.to_numpy()})
    counts = pd.crosstab(frame["model"], frame["label"]).reindex(columns=[YES, NO, UNDECIDED], fill_value=0)
    table = pd.DataFrame(
        {
            "n_items": counts.sum(axis=1),
            "n_yes": counts[YES],
            "n_no": counts[NO],
            "n_undecided": counts[UNDECIDED],
        }
    )
    table["accuracy"] = 100.0 * table["n_yes"] / table["n_items"]
    decided = table["n_yes"] + table["n_no"]
    table["accuracy_decided"] = (100.0 * table["n_yes"] / decided).where(decided > 0)
    table.index.name = "model"
    return table.reset_index()


def combine_sub_answers(sub_answers: pd.DataFrame) -> pd.Series:
    """Image-level 0/1 from per-sub-question 0/1 columns (NaN = no such question).

    1 only when every present sub-answer is 1; rows without any sub-answer
    give NaN (the caller keeps the task question's answer for those).
    """
    present = sub_answers.notna()
    all_yes = (sub_answers.fillna(1) == 1).all(axis=1)
    return all_yes.astype(float).where(present.any(axis=1))


def verdict_as_number(verdicts: pd.Series) -> pd.Series:
    """'yes' → 1.0, 'no' → 0.0, 'undecided' (a tie) → NaN."""
    return verdicts.map({YES: 1.0, NO: 0.0}).astype(float)


def yes_no_agreement(
    frame: pd.DataFrame, *, judge: str = "judge", human: str = "human", by: tuple[str, ...] = ("model",)
) -> pd.DataFrame:
    """How often a judge's yes/no answer matches the human majority, per group and overall.

    ``judge`` and ``human`` columns hold 1.0 (yes) / 0.0 (no); a NaN human answer (an undecided
    majority) or judge answer (refused, failed) leaves the item out and is counted in
    ``n_excluded``. Returns one row per group plus a final row whose group keys are
    ``"all"``: ``n, n_excluded, agreement`` (share of matching answers, 0–1),
    ``cohen_kappa`` (agreement beyond chance given each side's yes rate),
    ``judge_yes_rate, human_yes_rate`` and ``reason`` (why a value is NaN: no items; kappa
    undefined when both sides answer the same thing on every item, expected agreement 1).
    """
    by = list(by)
    rows = []
    groups = [(key if isinstance(key, tuple) else (key,), part) for key, part in frame.groupby(by, sort=True)] if by else []
    groups.append((tuple("all" for _ in by), frame))
    for key, part in groups:
        both = part[[judge, human]].astype(float)
        decided = both.dropna()
        n = len(decided)
        row = dict(zip(by, key), n=n, n_excluded=int(len(both) - n), agreement=np.nan, cohen_kappa=np.nan,
                   judge_yes_rate=np.nan, human_yes_rate=np.nan, reason=None)
        if n == 0:
            row["reason"] = "no item with both a judge answer and a decided human majority"
            rows.append(row)
            continue
        j, h = decided[judge].to_numpy(), decided[human].to_numpy()
        observed = float((j == h).mean())
        pj, ph = float(j.mean()), float(h.mean())
        expected = pj * ph + (1 - pj) * (1 - ph)
        row.update(agreement=observed, judge_yes_rate=pj, human_yes_rate=ph)
        if np.isclose(expected, 1.0):
            row["reason"] = "Cohen's kappa undefined: judge and humans each gave one answer only, the same one"
        else:
            row["cohen_kappa"] = (observed - expected) / (1 - expected)
        rows.append(row)
    return pd.DataFrame(rows, columns=[*by, "n", "n_excluded", "agreement", "cohen_kappa", "judge_yes_rate",
                                       "human_yes_rate", "reason"])
