"""The science package runs without Django: importing every module of it loads no Django module.

tests/test_architecture.py checks the source text; this checks what Python really loads, in a fresh
interpreter (the test run itself may have Django loaded by pytest-django).
"""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent

PROBE = """
import importlib, pkgutil, sys
import analysis.science as science
names = [m.name for m in pkgutil.walk_packages(science.__path__, "analysis.science.")]
for name in names:
    importlib.import_module(name)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in {"django", "rest_framework", "celery", "tasks", "raters"}
                or (m.startswith("analysis.") and not m.startswith("analysis.science")))
print(len(names))
print("\\n".join(loaded))
"""


def test_importing_all_of_the_science_loads_no_django_and_no_app():
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    count, *loaded = [line for line in done.stdout.splitlines() if line]
    assert int(count) > 10, "walk_packages found too few science modules"
    assert not loaded, "importing analysis.science loaded:\n  " + "\n  ".join(loaded)
