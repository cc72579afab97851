"""Real-data fixture for the Django analysis tests (the pure tests' fixtures live in tests/science/conftest.py).

It builds on ``shared_datasets`` (tests/conftest.py), which skips with a clear message when
../shared/datasets is absent. Parsed once per session: the EvalMi xlsx has 50,400 rows.
"""

import pandas as pd
import pytest

from analysis.science.formats import read_evalmi_mos


@pytest.fixture(scope="session")
def evalmi_mos(shared_datasets) -> pd.DataFrame:
    return read_evalmi_mos(shared_datasets / "evalmi" / "AIGI2025_MOS_yn.xlsx")
