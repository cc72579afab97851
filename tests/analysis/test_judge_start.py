"""Starting a judge run from the judges page and the API: what runs, what is refused and why.

A run that cannot give a usable score on the study is refused before anything is queued
(:func:`analysis.judge_services.judge_run_check`), with the same reason in the page and the API.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from analysis.judge_services import JudgeRunError, judge_create, judge_run_check, judge_run_start
from analysis.models import Judge, JudgeRun, JudgeScore
from tasks.images import store_image
from tasks.models import ConditionImage
from tests.factories import make_comparison, make_instance, make_item, make_study, make_user, png_bytes
from tests.judge_server import FakeJudgeServer

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def server():
    with FakeJudgeServer() as running:
        yield running


@pytest.fixture(autouse=True)
def operator_endpoint(settings, server):
    settings.JUDGE_ENDPOINTS = server.endpoints()


@pytest.fixture
def researcher():
    return make_user("researcher-start")


def owned_study(owner, **fields):
    study = make_study(**fields)
    study.owners.add(owner)
    return study


def editing_study(owner, *, items=2):
    study = owned_study(owner, task_type="text_guided_editing")
    for _ in range(items):
        instance = make_instance(study)
        ConditionImage.objects.create(instance=instance, role="source", image=store_image(png_bytes((10, 20, 30))))
        make_item(study, instance=instance)
    return study


def t2i_study(owner, *, items=3):
    study = owned_study(owner)
    for i in range(items):
        make_item(study, model=f"M{i % 2}")
    return study


# ------------------------------------------------------------------------------ service


def test_ssim_on_text_to_image_is_refused_naming_the_missing_source(researcher):
    study = t2i_study(researcher)
    judge = judge_create(name="ssim", kind="metric", params={"metrics": ["SSIM", "PSNR"]}, owner=researcher)
    with pytest.raises(JudgeRunError, match=r"SSIM, PSNR: these metrics compare each output with its source image.*text_to_image"):
        judge_run_start(judge=judge, study=study)
    assert not JudgeRun.objects.exists()


def test_no_reference_metrics_and_the_default_choice_run_on_text_to_image(researcher):
    study = t2i_study(researcher)
    for params in ({"metrics": ["sharpness", "noise"]}, {}):
        judge = judge_create(name=f"m{len(params)}", kind="metric", params=params, owner=researcher)
        judge_run_check(judge=judge, study=study)  # no error


def test_ssim_on_an_editing_study_with_sources_may_start(researcher):
    judge = judge_create(name="ssim", kind="metric", params={"metrics": ["SSIM"]}, owner=researcher)
    judge_run_check(judge=judge, study=editing_study(researcher))


def test_background_metrics_alone_need_a_mask_somewhere(researcher):
    judge = judge_create(name="bg", kind="metric", params={"metrics": ["bg_SSIM"]}, owner=researcher)
    with pytest.raises(JudgeRunError, match="outside the edit's mask.*no item .* has a source image with a mask"):
        judge_run_check(judge=judge, study=editing_study(researcher))


def test_a_single_image_judge_on_a_pairwise_study_is_refused_and_gpt4v_is_not(researcher, server):
    study = owned_study(researcher, protocol="pairwise", task_type="text_to_image")
    make_comparison(study)
    for kind in ("metric", "viescore", "evalmi"):
        judge = judge_create(name=f"pw-{kind}", kind=kind, params={} if kind == "metric" else {"endpoint": "default"},
                             owner=researcher)
        with pytest.raises(JudgeRunError, match="pairwise study.*only the GPT-4V evaluator"):
            judge_run_check(judge=judge, study=study)
    gpt4v = judge_create(name="pw-gpt4v", kind="gpt4v", params={"endpoint": "default"}, owner=researcher)
    judge_run_check(judge=gpt4v, study=study)


def test_viescore_on_subject_driven_items_without_a_subject_is_refused(researcher):
    study = owned_study(researcher, task_type="subject_driven_generation")
    make_item(study)
    judge = judge_create(name="vie", kind="viescore", params={"endpoint": "default"}, owner=researcher)
    with pytest.raises(JudgeRunError, match="subject_1 image"):
        judge_run_check(judge=judge, study=study)


# -------------------------------------------------------------------------------- page


def test_the_page_offers_the_operators_endpoints_and_the_offline_metrics(client, researcher):
    study = t2i_study(researcher)
    client.force_login(researcher)
    html = client.get(reverse("judge_side_by_side", args=[study.slug])).content.decode()
    assert 'action="/studies/%s/judges/runs/start/"' % study.slug in html
    assert '<option value="default">default</option>' in html
    assert 'value="SSIM"' in html and 'value="sharpness"' in html
    assert "http://127.0.0.1" not in html  # the endpoint's URL stays with the operator


def test_an_offline_metric_run_started_from_the_page_lands_scores(client, researcher, django_capture_on_commit_callbacks):
    study = t2i_study(researcher)
    client.force_login(researcher)
    url = reverse("judge_run_start", args=[study.slug])
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, {"kind": "metric", "metrics": ["sharpness", "noise"]})
    assert response.status_code == 302 and response.url.endswith("#judge-runs")
    run = JudgeRun.objects.get(study=study)
    assert (run.state, run.done, run.total, run.judge.owner, run.judge.name) == ("done", 3, 3, researcher,
                                                                                "metrics sharpness noise")
    assert set(JudgeScore.objects.filter(run=run).values_list("dimension", flat=True)) == {"sharpness", "noise"}
    page = client.get(reverse("judge_side_by_side", args=[study.slug])).content.decode()
    assert "Run %d of metrics sharpness noise started on 3 items." % run.pk in page


def test_an_mllm_run_from_the_page_uses_the_chosen_endpoint_and_model(client, researcher, server,
                                                                        django_capture_on_commit_callbacks):
    study = t2i_study(researcher, items=2)
    client.force_login(researcher)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("judge_run_start", args=[study.slug]),
                               {"kind": "viescore", "endpoint": "default", "model": "fake-good", "name": "my vie"})
    assert response.status_code == 302
    run = JudgeRun.objects.get(study=study)
    assert run.judge.params == {"endpoint": "default", "model": "fake-good"}
    assert (run.state, run.done, run.failed) == ("done", 2, 0)


def test_a_run_that_cannot_work_is_refused_in_the_page_with_the_reason(client, researcher):
    study = t2i_study(researcher)
    client.force_login(researcher)
    response = client.post(reverse("judge_run_start", args=[study.slug]), {"kind": "metric", "metrics": ["SSIM"]})
    assert response.status_code == 400
    html = response.content.decode()
    assert 'data-testid="run-refused"' in html and "SSIM: this metric compares each output with its source image" in html
    assert not JudgeRun.objects.exists() and not Judge.objects.filter(owner=researcher).exists()


def test_an_mllm_judge_without_an_endpoint_is_refused_by_the_form(client, researcher):
    study = t2i_study(researcher)
    client.force_login(researcher)
    response = client.post(reverse("judge_run_start", args=[study.slug]), {"kind": "viescore"})
    assert response.status_code == 400
    assert "an MLLM judge needs one of the operator" in response.content.decode()
    unknown = client.post(reverse("judge_run_start", args=[study.slug]), {"kind": "viescore", "endpoint": "evil"})
    assert unknown.status_code == 400 and not JudgeRun.objects.exists()


def test_others_cannot_start_a_run_on_the_study(client, researcher):
    study = t2i_study(researcher)
    client.force_login(make_user("outsider-start"))
    response = client.post(reverse("judge_run_start", args=[study.slug]), {"kind": "metric"})
    assert response.status_code == 404 and not JudgeRun.objects.exists()
    assert client.get(reverse("judge_run_start", args=[study.slug])).status_code == 405


def test_the_runs_partial_polls_while_a_run_is_active_and_reloads_the_page_when_it_ends(client, researcher):
    study = t2i_study(researcher)
    judge = judge_create(name="sharp", kind="metric", params={"metrics": ["sharpness"]}, owner=researcher)
    run = judge_run_start(judge=judge, study=study)  # the job waits for a commit that never comes: queued
    client.force_login(researcher)
    url = reverse("judge_side_by_side", args=[study.slug]) + "?fragment=runs&watching=1"
    polling = client.get(url, HTTP_HX_REQUEST="true")
    html = polling.content.decode()
    assert 'hx-trigger="every 2s"' in html and "HX-Refresh" not in polling.headers
    JudgeRun.objects.filter(pk=run.pk).update(state="done", done=3)
    finished = client.get(url, HTTP_HX_REQUEST="true")
    assert finished.headers["HX-Refresh"] == "true" and "hx-trigger" not in finished.content.decode()
    idle = client.get(reverse("judge_side_by_side", args=[study.slug]) + "?fragment=runs", HTTP_HX_REQUEST="true")
    assert "HX-Refresh" not in idle.headers  # a page that was not watching is not reloaded


# --------------------------------------------------------------------------------- API


def test_the_api_refuses_a_run_that_cannot_work_with_400_naming_the_reason(client, researcher):
    study = t2i_study(researcher)
    client.force_login(researcher)
    response = client.post(reverse("api-judge-runs"), {"study": study.slug, "judge": "ssim", "kind": "metric",
                                                       "params": {"metrics": ["SSIM"]}}, content_type="application/json")
    assert response.status_code == 400
    assert "SSIM: this metric compares each output with its source image" in response.json()["detail"]
    assert not JudgeRun.objects.exists() and not Judge.objects.filter(owner=researcher).exists()
