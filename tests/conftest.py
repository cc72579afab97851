import os
import shutil
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATASETS = REPO_ROOT.parent / "shared" / "datasets"


@pytest.fixture(autouse=True)
def _media_in_tmp(request, tmp_path_factory):
    """Every test writes uploaded and derived images into its own temporary MEDIA_ROOT."""
    if not request.config.pluginmanager.hasplugin("django"):
        return  # pure tests run with `-p no:django`
    settings = request.getfixturevalue("settings")
    settings.MEDIA_ROOT = tmp_path_factory.mktemp("media")
    # Password hashing is deliberately slow; tests create many users and need no real security.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(scope="session")
def shared_datasets() -> Path:
    """The real data beside the checkout (../shared/datasets); tests skip clearly without it."""
    if not SHARED_DATASETS.is_dir():
        pytest.skip(f"real data not found at {SHARED_DATASETS} (see README: 'Published numbers')")
    return SHARED_DATASETS


def chromium_path() -> str | None:
    path = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
    return path if shutil.which(path) or Path(path).exists() else None
