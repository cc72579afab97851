"""Judge runs end to end: start → Celery (eager) → JudgeScores; cache, cancel, resume."""

from __future__ import annotations

import pytest

from analysis import judge_services
from analysis.judge_services import JudgeRunError, judge_create, judge_run_cancel, judge_run_resume, judge_run_start
from analysis.models import JudgeRun, JudgeScore, JudgeVerdict
from tasks.images import store_image
from tasks.models import ConditionImage
from tests.factories import make_comparison, make_instance, make_item, make_study, png_bytes
from tests.judge_server import FakeJudgeServer

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def server():
    with FakeJudgeServer(slow_seconds=0.5) as running:
        yield running


@pytest.fixture(autouse=True)
def operator_endpoint(settings, server):
    """The fake server is the operator's endpoint named ``default``; judges pick it by name."""
    settings.JUDGE_ENDPOINTS = server.endpoints()


@pytest.fixture
def run_now(django_capture_on_commit_callbacks):
    """Start a run and execute the queued Celery job (eager) as the commit would."""

    def start(judge, study):
        with django_capture_on_commit_callbacks(execute=True):
            run = judge_run_start(judge=judge, study=study)
        run.refresh_from_db()
        return run

    return start


def viescore(server, model="fake-good", name="VIEScore (fake)", **params):
    return judge_create(
        name=name, kind="viescore",
        params={"model": model, "backoff_seconds": 0.01, "timeout_seconds": 5, **params},
    )


def study_with_items(count=3, **fields):
    study = make_study(**fields)
    for i in range(count):
        make_item(study, model=f"Model{i % 2}")
    return study


def test_a_viescore_run_on_the_demo_study_lands_sc_pq_and_o_for_every_item(server, run_now):
    from tasks.demo import build_demo
    from tasks.models import Study

    build_demo(only=["demo-text-to-image"])
    study = Study.objects.get(slug="demo-text-to-image")
    server.reset()
    run = run_now(viescore(server), study)
    items = study.items.filter(image__isnull=False).count()
    assert (run.state, run.total, run.done, run.failed) == ("done", items, items, 0)
    assert JudgeScore.objects.filter(run=run).count() == 3 * items
    assert set(JudgeScore.objects.filter(run=run).values_list("dimension", flat=True)) == {"SC", "PQ", "O"}
    assert not JudgeScore.objects.filter(run=run, value__isnull=True).exists()
    assert run.calls == server.requests == 2 * items


def test_a_rerun_of_the_same_judge_makes_no_calls(server, run_now):
    study = study_with_items()
    judge = viescore(server)
    first = run_now(judge, study)
    server.reset()
    second = run_now(judge, study)
    assert server.requests == 0
    assert (second.state, second.done, second.cached, second.calls) == ("done", 3, 3, 0)
    def values(run):
        return sorted(JudgeScore.objects.filter(run=run).values_list("item_id", "dimension", "value"))
    assert values(first) == values(second)


def test_changing_the_judge_config_or_the_image_misses_the_cache(server, run_now):
    study = study_with_items(count=2)
    run_now(viescore(server), study)
    server.reset()
    run_now(viescore(server, name="VIEScore concat", concat_images=True), study)
    assert server.requests == 4
    item = study.items.first()
    item.image = store_image(png_bytes(color=(1, 2, 3)))
    item.save()
    server.reset()
    run_now(viescore(server), study)
    assert server.requests == 2  # only the changed item


def test_refusals_and_malformed_replies_are_stored_without_values_and_counted_failed(server, run_now):
    study = study_with_items(count=2)
    refused = run_now(viescore(server, model="fake-refuse", name="refuser"), study)
    broken = run_now(viescore(server, model="fake-malformed", name="broken"), study)
    assert (refused.done, refused.failed) == (2, 2)
    assert set(JudgeScore.objects.filter(run=refused).values_list("parse_status", flat=True)) == {"refused"}
    assert set(JudgeScore.objects.filter(run=broken).values_list("parse_status", flat=True)) == {"failed"}
    assert not JudgeScore.objects.filter(run__in=[refused, broken], value__isnull=False).exists()


def test_failed_units_are_not_cached_so_a_resume_asks_again(server, run_now, django_capture_on_commit_callbacks):
    study = study_with_items(count=2)
    judge = judge_create(name="flaky", kind="evalmi", params={"model": "fake-500", "max_retries": 0, "backoff_seconds": 0})
    run = run_now(judge, study)
    assert (run.state, run.failed) == ("done", 2)
    run.state = JudgeRun.State.FAILED
    run.save()
    server.reset()
    with django_capture_on_commit_callbacks(execute=True):
        judge_run_resume(run=run)
    run.refresh_from_db()
    assert server.requests == 4 and (run.done, run.failed) == (2, 2)
    assert JudgeScore.objects.filter(run=run).count() == 4  # perception + correspondence per item, no duplicates


def test_a_queued_run_can_be_cancelled_before_it_starts_and_resumed_later(server, django_capture_on_commit_callbacks):
    study = study_with_items(count=2)
    judge = viescore(server)
    run = judge_run_start(judge=judge, study=study)  # on_commit never fires: still queued
    judge_run_cancel(run=run)
    run.refresh_from_db()
    assert run.state == "cancelled" and run.done == 0
    with django_capture_on_commit_callbacks(execute=True):
        judge_run_resume(run=run)
    run.refresh_from_db()
    assert (run.state, run.done) == ("done", 2)


def test_cancelling_a_running_run_stops_it_after_the_units_in_flight(server, monkeypatch, run_now):
    study = study_with_items(count=6)
    judge = viescore(server, concurrency=1)
    original = judge_services._write
    def write_then_cancel(run, unit, rows, **kw):
        stored = original(run, unit, rows, **kw)
        JudgeRun.objects.filter(pk=run.pk).update(cancel_requested=True)
        return stored
    monkeypatch.setattr(judge_services, "_write", write_then_cancel)
    run = run_now(judge, study)
    assert run.state == "cancelled" and 1 <= run.done < 6
    monkeypatch.setattr(judge_services, "_write", original)
    JudgeRun.objects.filter(pk=run.pk).update(cancel_requested=False)


def test_a_worker_killed_mid_run_resumes_without_duplicates(server, run_now, monkeypatch):
    study = study_with_items(count=4)
    judge = viescore(server, concurrency=1)
    original = judge_services._write
    writes = []
    def die_after_two(run, unit, rows, **kw):
        if len(writes) == 2:
            raise SystemExit("worker killed")
        writes.append(unit)
        return original(run, unit, rows, **kw)
    monkeypatch.setattr(judge_services, "_write", die_after_two)
    with pytest.raises(SystemExit):
        run_now(judge, study)
    monkeypatch.setattr(judge_services, "_write", original)
    run = JudgeRun.objects.get(judge=judge)
    assert (run.state, run.done) == ("running", 2)
    server.reset()
    # the broker redelivers the unacknowledged job (acks_late)
    judge_services.judge_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert (run.state, run.done, run.total) == ("done", 4, 4)
    assert JudgeScore.objects.filter(run=run).count() == 12
    assert server.requests == 2 * 2  # the item in flight when killed and the last one, asked once each


def test_a_second_delivery_of_a_finished_run_does_nothing(server, run_now):
    study = study_with_items(count=1)
    run = run_now(viescore(server), study)
    server.reset()
    assert judge_services.judge_run_execute(run_id=run.pk) is None
    assert server.requests == 0


def test_a_judge_whose_endpoint_the_operator_removed_cannot_start(settings):
    judge = judge_create(name="nowhere", kind="viescore", params={"model": "fake-good"})
    settings.JUDGE_ENDPOINTS = {}
    with pytest.raises(JudgeRunError, match="no judge endpoint is configured"):
        judge_run_start(judge=judge, study=study_with_items(count=1))
    assert not JudgeRun.objects.exists()
    with pytest.raises(JudgeRunError, match="no judge endpoint is configured"):
        judge_create(name="nowhere either", kind="viescore", params={"model": "m"})


def test_judge_params_with_an_api_key_are_refused():
    with pytest.raises(JudgeRunError, match="params.api_key looks like a credential"):
        judge_create(name="leaky", kind="viescore", params={"api_key": "sk-1"})


def test_the_same_name_with_another_config_is_refused(server):
    viescore(server)
    with pytest.raises(JudgeRunError, match="another configuration"):
        viescore(server, model="fake-slow")


def test_gpt4v_on_a_pairwise_study_stores_dual_sided_verdicts(server, run_now):
    study = make_study(protocol="pairwise", task_type="text_to_image")
    comparison = make_comparison(study)
    judge = judge_create(name="gpt4v", kind="gpt4v", params={"model": "fake-good"})
    run = run_now(judge, study)
    assert (run.total, run.done, run.failed) == (3, 3, 0)  # two items graded alone + one comparison
    verdict = JudgeVerdict.objects.get(run=run, comparison=comparison)
    assert verdict.final in {"A", "B", "tie"} and verdict.first and verdict.second
    assert set(JudgeScore.objects.filter(run=run).values_list("dimension", flat=True)) == {"relevance", "clarity", "object_accuracy", "total"}


def test_the_metric_judge_measures_background_preservation_offline(run_now):
    study = make_study(task_type="mask_guided_editing")
    instance = make_instance(study)
    source = png_bytes(color=(120, 60, 30), size=(32, 32))
    ConditionImage.objects.create(instance=instance, role="source", image=store_image(source))
    item = make_item(study, instance=instance)
    item.image = store_image(source)
    item.save()
    judge = judge_create(name="bg-ssim", kind="metric", params={"metrics": ["bg_SSIM", "L1", "PSNR"]})
    run = run_now(judge, study)
    scores = dict(JudgeScore.objects.filter(run=run).values_list("dimension", "value"))
    assert scores["L1"] == 0 and scores["PSNR"] == 100.0  # identical: PSNR capped
    assert "bg_SSIM" not in scores  # no mask on this instance
    assert run.calls == 0


@pytest.mark.django_db(transaction=True)
def test_the_run_judge_command_runs_and_reruns_from_cache(server):
    from io import StringIO

    from django.core.management import call_command

    study = study_with_items(count=2)
    out = StringIO()
    args = [study.slug, "--judge", "cli-vie", "--kind", "viescore", "--endpoint", "default", "--param", "model=fake-good"]
    call_command("run_judge", *args, stdout=out)
    assert "done, 2/2 units, 0 failed or refused, 4 requests, 0 from cache" in out.getvalue()
    out = StringIO()
    call_command("run_judge", study.slug, "--judge", "cli-vie", stdout=out)
    assert "0 requests, 2 from cache" in out.getvalue()


def test_the_judges_page_compares_pairwise_verdicts_with_the_reports_humans_not_excluded_raters():
    """The human majority behind the judges page's pairwise agreement leaves out the votes of
    raters excluded from analysis, as the report does (raters.exclusion)."""
    from analysis.judge_views import _pairwise_block
    from analysis.models import Judge
    from raters.models import RaterStanding
    from tasks.models import Rating
    from tests.factories import make_rater

    study = make_study(protocol="pairwise", task_type="text_to_image")
    comparison = make_comparison(study)
    judge = Judge.objects.create(name="gpt4v-page", kind="gpt4v", params={"model": "fake-good"})
    run = JudgeRun.objects.create(judge=judge, study=study, state=JudgeRun.State.DONE)
    JudgeVerdict.objects.create(run=run, comparison=comparison, final="A", first="A", second="A")
    kept = make_rater()
    Rating.objects.create(study=study, rater=kept, comparison=comparison, values={"preference": "A"})
    for _ in range(2):  # two raters the study rejected, both for B
        rejected = make_rater()
        Rating.objects.create(study=study, rater=rejected, comparison=comparison, values={"preference": "B"})
        RaterStanding.objects.create(study=study, rater=rejected, state=RaterStanding.State.REJECTED, reason="fast")
    (block,) = _pairwise_block(study)
    assert (block["agreement"].n_pair, block["agreement"].pair_vs_human) == (1, 1.0)  # the kept rater's A, not B 2:1
