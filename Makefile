# The two commands: `make run` (demo site on http://127.0.0.1:8000) and `make test`.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
HOST ?= 127.0.0.1
PORT ?= 8000
PYTEST_ARGS ?=
# Tests that need no Django: they run first, with `-p no:django`, and the Django run leaves them out.
PURE_TESTS := tests/science tests/test_architecture.py

.PHONY: install install-test run test imports migrate demo clean bench

$(VENV)/bin/activate:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

$(VENV)/.installed: requirements.txt $(VENV)/bin/activate
	$(PIP) install --quiet -r requirements.txt
	touch $@

$(VENV)/.installed-test: requirements-test.txt requirements.txt $(VENV)/.installed
	$(PIP) install --quiet -r requirements-test.txt
	touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

migrate: install
	$(PY) manage.py migrate --noinput

demo: migrate
	$(PY) manage.py build_demo

# The web server and a Celery worker on the embedded broker (files under var/celery, no server):
# judge runs, study builds and exports run in the worker while the pages show their progress.
# A CELERY_BROKER_URL from the environment (e.g. redis://…) is used instead.
CELERY_BROKER_URL ?= filesystem://
run: demo
	@echo "Serving on http://$(HOST):$(PORT)/ with a Celery worker on $(CELERY_BROKER_URL) (Ctrl-C stops both)"
	CELERY_BROKER_URL=$(CELERY_BROKER_URL) $(PY) manage.py runsite $(HOST):$(PORT)

$(VENV)/.installed-clip: requirements-clip.txt $(VENV)/.installed
	$(PIP) install --quiet -r requirements-clip.txt
	touch $@

# `make test`: the import contracts, the tests without Django, then the rest.
# Browser tests need Debian's chromium; scripts/ensure_chromium installs it when apt is usable.
# The optional CLIP extra is installed for the tests only when a CPU torch wheel lies on disk
# (/opt/wheels on the project's machines); elsewhere its tests skip instead of pulling a GPU build.
test: install-test
	@bash scripts/ensure_chromium || true
	@if ls /opt/wheels/torch-*.whl >/dev/null 2>&1; then $(MAKE) --no-print-directory $(VENV)/.installed-clip; \
	 else echo "CLIP extra not installed (no local torch wheel under /opt/wheels): its tests will skip"; fi
	$(MAKE) --no-print-directory imports
	@# The pure science and the architecture check, without Django (exit 5 = nothing selected by PYTEST_ARGS).
	$(PY) -m pytest -p no:django $(PURE_TESTS) $(PYTEST_ARGS) || [ $$? -eq 5 ]
	$(PY) -m pytest $(addprefix --ignore=,$(PURE_TESTS)) $(PYTEST_ARGS)

# The import contracts (pyproject.toml [tool.importlinter]): about a second.
imports: install-test
	$(VENV)/bin/lint-imports --no-logo --no-cache

# Benchmarks (need the local PostgreSQL; see bench/README.md). A missed target exits 1; `-` keeps going.
bench: install-test
	-$(PY) -m bench.page_weight
	-$(PY) -m bench.judge_runner
	-$(PY) -m bench.import_speed
	-$(PY) -m bench.analysis_scale
	-$(PY) -m bench.rating_loop
	-$(PY) -m bench.rating_inprocess
	-$(PY) -m bench.assignment_scale

clean:
	rm -rf $(VENV) db.sqlite3 media staticfiles .pytest_cache
