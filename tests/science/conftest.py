"""Real-data fixtures for the pure science tests (they run with ``-p no:django``).

They build on ``shared_datasets`` (tests/conftest.py), which skips with a
clear message when ../shared/datasets is absent. Parsed data is cached per
session: the EvalMi xlsx alone has 50,400 rows.
"""

from pathlib import Path

import pandas as pd
import pytest

from analysis.science.formats import read_evalmi_mos, read_imagenhub_task
from analysis.science.imagenhub import add_overall

IMAGENHUB_TASKS = (
    "Text-To-Image",
    "Mask-Guided_IE",
    "Text-Guided_IE",
    "Subject-Driven_IG",
    "Subject-Driven_IE",
    "Multi-Subject_IG",
    "Control-Guided_IG",
)


@pytest.fixture(scope="session")
def imagenhub_ratings(shared_datasets) -> dict[str, pd.DataFrame]:
    root = shared_datasets / "imagenhub" / "human_ratings"
    return {
        task: add_overall(read_imagenhub_task(root / task).rename(columns={"uid": "item"}))
        for task in IMAGENHUB_TASKS
    }


@pytest.fixture(scope="session")
def viescore_root(shared_datasets) -> Path:
    return shared_datasets / "viescore"


@pytest.fixture(scope="session")
def evalmi_mos(shared_datasets) -> pd.DataFrame:
    return read_evalmi_mos(shared_datasets / "evalmi" / "AIGI2025_MOS_yn.xlsx")
