"""Browser fixtures: Debian chromium driven by Playwright against pytest-django's live server.

``browser_page`` is a fresh page (1366×800, a laptop) whose relative URLs resolve against the
live server; ``screenshot(page, name)`` saves ``artifacts/screenshots/<name>.png`` (git-ignored).
Tests skip cleanly when chromium is absent. Playwright's own browsers are never downloaded.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, chromium_path

SCREENSHOTS = REPO_ROOT / "artifacts" / "screenshots"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


@pytest.fixture(scope="session")
def chromium_browser():
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
    context.set_default_timeout(10_000)
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
