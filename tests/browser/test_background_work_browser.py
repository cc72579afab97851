"""A researcher starts an offline metric judge from the judges page, watches it run and sees its
scores; a run that cannot work is refused with the reason; a large export is prepared in the
background and downloaded when ready. Screenshots go to docs/screenshots/.

The Celery job runs in a thread standing in for the worker of ``make run``; it waits on an event
the test sets once it has seen the progress, so the page is caught mid-run on any machine.
"""

from __future__ import annotations

import io
import queue
import random
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest
from django.db import connection, transaction
from django.urls import reverse
from PIL import Image

from analysis import export_services, judge_services
from analysis.jobs import run_judge_job, study_export_job
from analysis.models import JudgeRun, StudyExport
from tasks.images import store_image
from tasks.models import Rating
from tests.conftest import browser_login, wait_until
from tests.factories import make_instance, make_item, make_rater, make_study, make_user

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def shot(page, name: str, *, full_page: bool = True) -> None:
    DOCS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(DOCS / f"{name}.png"), full_page=full_page)


def noisy_png(amplitude: float, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    base = np.tile(np.linspace(40, 210, 64), (64, 1))[..., None].repeat(3, axis=2)
    pixels = np.clip(base + rng.normal(0, amplitude, base.shape), 0, 255).astype("uint8")
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def rated_noisy_study(owner):
    """Two models, eight prompts; raters give lower PQ to noisier images."""
    rng = random.Random(5)
    study = make_study(slug="noisy-t2i", title="Noisy text-to-image")
    study.owners.add(owner)
    raters = [make_rater() for _ in range(3)]
    for n in range(8):
        instance = make_instance(study, key=f"prompt_{n}")
        for model, base in (("Crisp", 4.0), ("Grainy", 30.0)):
            amplitude = base + 3 * n
            item = make_item(study, instance=instance, model=model)
            item.image = store_image(noisy_png(amplitude, seed=n * 10 + int(base)))
            item.save()
            for rater in raters:
                pq = 1.0 if amplitude < 15 else (0.5 if amplitude < 35 or rng.random() < 0.3 else 0.0)
                Rating.objects.create(study=study, rater=rater, item=item,
                                      values={"SC": rng.choice([0.5, 1.0]), "PQ": pq})
    return study


def background(job, go: threading.Event):
    """A _queue stand-in and a one-thread worker: after the commit the job's id goes on a queue,
    which the worker thread takes in order (as a solo Celery worker would) once ``go`` is set."""
    messages: queue.Queue = queue.Queue()

    def work():
        try:
            assert go.wait(timeout=60), "the test never let the worker go"
            while True:
                try:
                    pk = messages.get(timeout=5)
                except queue.Empty:
                    return
                job.apply(args=[pk])
        finally:
            connection.close()

    threading.Thread(target=work, daemon=True).start()

    def queue_job(obj) -> None:
        transaction.on_commit(lambda: messages.put(obj.pk))

    return queue_job


def test_a_researcher_starts_an_offline_metric_run_from_the_page_and_sees_its_scores(browser_page, monkeypatch):
    page = browser_page
    researcher = make_user("judge-starter", password="pw-for-tests")
    study = rated_noisy_study(researcher)
    go = threading.Event()
    monkeypatch.setattr(judge_services, "_queue", background(run_judge_job, go))
    errors = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    browser_login(page, "judge-starter")
    page.goto(reverse("judge_side_by_side", args=[study.slug]))
    assert page.locator("fieldset[data-for-kinds='metric']").is_visible()
    page.select_option("select[name=kind]", "viescore")  # the static script shows the endpoint fieldset
    assert not page.locator("fieldset[data-for-kinds='metric']").is_visible()
    page.select_option("select[name=kind]", "metric")
    page.check("input[name=metrics][value=sharpness]")
    page.check("input[name=metrics][value=noise]")
    page.locator("#judge-start").scroll_into_view_if_needed()
    shot(page, "judges-start-run-form")

    # SSIM needs source images; a text-to-image study has none: refused, with the reason
    page.uncheck("input[name=metrics][value=sharpness]")
    page.uncheck("input[name=metrics][value=noise]")
    page.check("input[name=metrics][value=SSIM]")
    page.click("#judge-start button[type=submit]")
    refused = page.locator("[data-testid=run-refused]")
    assert "SSIM: this metric compares each output with its source image" in refused.inner_text()
    refused.scroll_into_view_if_needed()
    shot(page, "judges-run-refused")
    assert not JudgeRun.objects.exists()

    page.uncheck("input[name=metrics][value=SSIM]")
    page.check("input[name=metrics][value=sharpness]")
    page.check("input[name=metrics][value=noise]")
    page.click("#judge-start button[type=submit]")
    page.wait_for_url("**#judge-runs")
    assert page.locator("#judge-runs[data-watching]").count() == 1  # polling while the run is under way
    assert "0 / 16" in page.locator("#judge-runs").inner_text()
    shot(page, "judges-run-in-progress")

    # cancelled while queued, then resumed: queued again, its job runs once the worker goes
    page.click("#judge-runs button:has-text('Cancel')")
    page.wait_for_selector("#judge-runs .run-cancelled")
    page.click("#judge-runs button:has-text('Resume')")
    page.wait_for_selector("#judge-runs .run-queued")
    assert page.locator("#judge-runs[data-watching]").count() == 1

    go.set()  # the worker starts; the polled partial reloads the page once the run is done
    # selectors, not page.evaluate: the reload destroys the context an evaluate would run in
    page.wait_for_selector("table.compact th:has-text('metrics sharpness noise')", timeout=60_000)  # after the reload
    page.wait_for_load_state("load")
    run = JudgeRun.objects.get(study=study)
    assert (run.state, run.done, run.total) == ("done", 16, 16)
    assert "16 / 16" in page.locator("#judge-runs").inner_text()
    table = page.locator("table.compact").first.inner_text()
    assert "metrics sharpness noise" in table and "Crisp" in table and "Grainy" in table
    page.evaluate("window.scrollTo(0, 0)")
    page.set_viewport_size({"width": 1366, "height": 1100})
    shot(page, "judges-run-done-scores", full_page=False)  # the runs table and the scores, not the long item list
    assert not [e for e in errors if "Content Security Policy" in e], errors


def test_a_large_export_is_prepared_in_the_background_and_downloaded(browser_page, monkeypatch, settings):
    page = browser_page
    researcher = make_user("exporter-b", password="pw-for-tests")
    study = rated_noisy_study(researcher)
    settings.EXPORT_INLINE_MAX_VOTES = 10  # this study (48 votes) counts as large
    go = threading.Event()
    monkeypatch.setattr(export_services, "_queue", background(study_export_job, go))
    browser_login(page, "exporter-b")
    page.goto(reverse("research-study", args=[study.slug]))
    page.click("text=Export dataset (.zip)")
    page.wait_for_url(f"**{reverse('study-exports', args=[study.slug])}")
    assert page.locator("text=Download now").count() == 0
    page.click("button:has-text('Prepare the export')")
    page.wait_for_selector("#exports[data-watching]")
    assert "waiting for the worker" in page.locator("#exports").inner_text()
    shot(page, "export-preparing")
    go.set()
    wait_until(page, "document.querySelector('#exports a.button') !== null", timeout_s=60)
    shot(page, "export-ready")
    with page.expect_download() as download:
        page.click("#exports a.button")
    path = download.value.path()
    assert download.value.suggested_filename == "noisy-t2i-ratings.zip"
    with zipfile.ZipFile(path) as archive:
        assert "votes.csv" in archive.namelist() and "README.md" in archive.namelist()
    assert StudyExport.objects.get(study=study).state == "done"
