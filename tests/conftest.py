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
    settings.EXPORTS_ROOT = tmp_path_factory.mktemp("exports")  # background exports (analysis.export_services)
    # Password hashing is deliberately slow; tests create many users and need no real security.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _empty_cache(request):
    """Each test starts with an empty cache: rate-limit counters (tasks.ratelimit) from earlier
    tests, all from 127.0.0.1, must not refuse this one."""
    if not request.config.pluginmanager.hasplugin("django"):
        yield  # pure tests run with `-p no:django`: no settings, no cache
        return
    from django.core.cache import cache

    cache.clear()
    yield


@pytest.fixture(scope="session")
def shared_datasets() -> Path:
    """The real data beside the checkout (../shared/datasets); tests skip clearly without it."""
    if not SHARED_DATASETS.is_dir():
        pytest.skip(f"real data not found at {SHARED_DATASETS} (see README: 'Published numbers')")
    return SHARED_DATASETS


def chromium_path() -> str | None:
    path = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
    return path if shutil.which(path) or Path(path).exists() else None


@pytest.fixture
def builds_run_at_once(monkeypatch):
    """Study builds queue their job when the upload's row commits; a test inside one transaction
    never commits, so its job would never run. This runs it (eager Celery) when it is queued, as
    the eager default does right after the commit of an upload request. Tests of the commit
    itself are transactional instead (tests/hardening/test_hostile_bundles.py)."""
    from tasks import build_services
    from tasks.jobs import study_build_job

    monkeypatch.setattr(build_services, "_queue", lambda build: study_build_job.delay(build.pk))


# --- browser fixtures: Debian chromium driven by Playwright against pytest-django's live server ---
# ``browser_page`` is a fresh page (1366×800, a laptop) whose relative URLs resolve against the
# live server; ``screenshot(page, name)`` saves ``artifacts/screenshots/<name>.png`` (git-ignored).
# Tests skip cleanly when chromium is absent. Playwright's own browsers are never downloaded.
# One Playwright instance serves the whole session: a second sync_playwright() in the same
# thread fails, so every browser test uses these fixtures.

SCREENSHOTS = REPO_ROOT / "artifacts" / "screenshots"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


@pytest.fixture(scope="session")
def _live_server_one_request_at_a_time(request):
    """On SQLite the live server's requests share the test's in-memory database connection (its
    shared cache locks whole tables), so two requests at once (a dashboard's 10 s poll beside a
    form POST, on a busy machine) fail with "database table is locked": serve one request at a
    time, as Django's non-threaded server does (it closes every connection, so the browser's
    parallel requests queue). On PostgreSQL each request has its own connection and stays threaded."""
    if not request.config.pluginmanager.hasplugin("django"):
        return
    from django.conf import settings
    from django.core.servers.basehttp import WSGIServer
    from django.test.testcases import LiveServerThread

    if settings.DATABASES["default"]["ENGINE"] != "django.db.backends.sqlite3":
        return

    class SerialWSGIServer(WSGIServer):
        def __init__(self, *args, connections_override=None, **kwargs):
            super().__init__(*args, **kwargs)

    LiveServerThread.server_class = SerialWSGIServer


@pytest.fixture(scope="session")
def chromium_browser(_live_server_one_request_at_a_time):
    path = chromium_path()
    if path is None:
        pytest.skip("chromium not found (install Debian's chromium: apt-get install -y chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    # Playwright's sync API runs an event loop in this thread; the ORM calls tests make beside it are safe.
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def browser_page(chromium_browser, live_server):
    context = chromium_browser.new_context(viewport={"width": 1366, "height": 800}, base_url=live_server.url)
    context.set_default_timeout(20_000)  # CI machines are small and busy
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture
def screenshot():
    """``screenshot(page, name, full_page=True) -> Path``."""

    def save(page, name: str, *, full_page: bool = True) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=full_page)
        return path

    return save


def wait_until(page, expression: str, timeout_s: float = 20.0) -> None:
    """Poll a JS expression with page.evaluate: wait_for_function evals its predicate in the page,
    which the Content-Security-Policy (script-src 'self', no 'unsafe-eval') refuses."""
    import time

    deadline = time.monotonic() + timeout_s
    while not page.evaluate(expression):
        assert time.monotonic() < deadline, f"timed out waiting for {expression}"
        page.wait_for_timeout(50)


def browser_login(page, username: str, password: str = "pw-for-tests") -> None:
    """Log ``username`` in through the login page (the factories' users have this password)."""
    page.goto("/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_url("**/")


def all_at_once(callables) -> list[Exception]:
    """Run each callable in its own thread, released together by a barrier (concurrency tests on
    PostgreSQL); each thread closes its database connection. Returns what they raised."""
    import threading

    from django.db import connection

    barrier = threading.Barrier(len(callables))
    errors: list[Exception] = []

    def work(call):
        try:
            barrier.wait()
            call()
        except Exception as exc:  # collected for the test to assert on
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(c,)) for c in callables]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors
