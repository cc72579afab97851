"""The judges side-by-side page: numbers from build_report, scatter, disagreements, run actions."""

from __future__ import annotations

import random

import pytest
from django.urls import reverse

from analysis.judge_services import judge_create, judge_run_start
from tasks.models import Rating
from tests.factories import make_comparison, make_instance, make_item, make_rater, make_study, make_user
from tests.judge_server import FakeJudgeServer

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def server():
    with FakeJudgeServer() as running:
        yield running


@pytest.fixture(autouse=True)
def operator_endpoint(settings, server):
    """The fake server is the operator's endpoint named ``default``; judges pick it by name."""
    settings.JUDGE_ENDPOINTS = server.endpoints()


@pytest.fixture
def researcher():
    return make_user("researcher-judges")


def rated_study(owner, *, models=("Alpha", "Beta"), instances=6, seed=3):
    rng = random.Random(seed)
    study = make_study(title="Judged study")
    study.owners.add(owner)
    raters = [make_rater() for _ in range(3)]
    for _ in range(instances):
        instance = make_instance(study)
        for model in models:
            item = make_item(study, instance=instance, model=model)
            for rater in raters:
                Rating.objects.create(study=study, rater=rater, item=item,
                                      values={"SC": rng.choice([0, 0.5, 1]), "PQ": rng.choice([0, 0.5, 1])})
    return study


def run_viescore(server, study, django_capture_on_commit_callbacks, **params):
    judge = judge_create(name="VIEScore", kind="viescore", params={"model": "fake-good", **params})
    with django_capture_on_commit_callbacks(execute=True):
        return judge_run_start(judge=judge, study=study)


def test_a_researcher_sees_human_numbers_and_judge_correlations_side_by_side(client, server, researcher, django_capture_on_commit_callbacks):
    study = rated_study(researcher)
    run_viescore(server, study, django_capture_on_commit_callbacks)
    client.force_login(researcher)
    response = client.get(reverse("judge_side_by_side", args=[study.slug]))
    assert response.status_code == 200
    html = response.content.decode()
    assert "SRCC / PLCC / KRCC" in html and "VIEScore" in html
    assert "Alpha" in html and "Beta" in html
    report = response.context["report"]
    cell = report["models"]["Alpha"]["judges"]["VIEScore"]["SC"]
    assert cell["n"] == 6
    assert response.context["disagreements"], "the disagreement browser lists items"
    first = response.context["disagreements"][0]
    assert len(first["votes"]) == 3 and first["score"].rationale
    # images through the access-checked route, never the media URL (served in DEBUG only, unchecked)
    image_url = reverse("rating:image", args=[first["item"].image.sha256, 384])
    assert f'src="{image_url}"' in html and "/media/" not in html
    assert client.get(image_url).status_code == 200


def test_the_scatter_is_an_svg_with_one_panel_per_model(client, server, researcher, django_capture_on_commit_callbacks):
    study = rated_study(researcher)
    run_viescore(server, study, django_capture_on_commit_callbacks)
    client.force_login(researcher)
    response = client.get(reverse("judge_scatter", args=[study.slug]), {"judge": "VIEScore", "dim": "O", "human": "O"})
    assert response.status_code == 200 and response["Content-Type"] == "image/svg+xml"
    svg = response.content.decode()
    assert svg.count("Alpha  (n=6") == 1 and svg.count("Beta  (n=6") == 1


def test_an_outsider_and_a_rater_get_404(client, researcher):
    study = rated_study(researcher, instances=1)
    client.force_login(make_user("outsider"))
    assert client.get(reverse("judge_side_by_side", args=[study.slug])).status_code == 404
    assert client.get(reverse("judge_scatter", args=[study.slug]), {"judge": "x", "dim": "SC", "human": "SC"}).status_code == 404


def test_an_anonymous_visitor_is_sent_to_log_in(client, researcher):
    study = rated_study(researcher, instances=1)
    response = client.get(reverse("judge_side_by_side", args=[study.slug]))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_a_researcher_cancels_a_queued_run_and_resumes_it(client, server, researcher, django_capture_on_commit_callbacks):
    study = rated_study(researcher, instances=2)
    judge = judge_create(name="VIEScore", kind="viescore", params={"model": "fake-good"})
    run = judge_run_start(judge=judge, study=study)  # not committed in the test: stays queued
    client.force_login(researcher)
    client.post(reverse("judge_run_cancel", args=[study.slug, run.pk]))
    run.refresh_from_db()
    assert run.state == "cancelled"
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("judge_run_resume", args=[study.slug, run.pk]))
    assert response.status_code == 302
    run.refresh_from_db()
    assert (run.state, run.done, run.total) == ("done", 4, 4)


def test_a_page_without_ratings_says_so(client, server, researcher):
    study = make_study()
    study.owners.add(researcher)
    make_item(study)
    client.force_login(researcher)
    html = client.get(reverse("judge_side_by_side", args=[study.slug])).content.decode()
    assert "No human ratings yet" in html and "No judge has run" in html


def test_a_pairwise_study_shows_agreement_with_the_33_percent_baseline(client, server, researcher, django_capture_on_commit_callbacks):
    study = make_study(protocol="pairwise")
    study.owners.add(researcher)
    comparison = make_comparison(study)
    for rater in [make_rater() for _ in range(3)]:
        Rating.objects.create(study=study, rater=rater, comparison=comparison, values={"preference": "A"})
    judge = judge_create(name="GPT-4V", kind="gpt4v", params={"model": "fake-good"})
    with django_capture_on_commit_callbacks(execute=True):
        judge_run_start(judge=judge, study=study)
    client.force_login(researcher)
    response = client.get(reverse("judge_side_by_side", args=[study.slug]))
    [block] = response.context["pairwise"]
    assert block["agreement"].n_pair == 1 and block["agreement"].n_orders == 1
    assert "33%" in response.content.decode()


def test_a_vice_run_on_an_editing_study_shows_both_answers_per_question(client, server, researcher, django_capture_on_commit_callbacks):
    from analysis.models import JudgeScore
    from tasks.images import store_image
    from tasks.models import ConditionImage
    from tests.factories import png_bytes

    study = make_study(title="Edited", task_type="text_guided_editing")
    study.owners.add(researcher)
    raters = [make_rater() for _ in range(2)]
    for shade in (30, 90, 150, 210):
        instance = make_instance(study, prompt="make it brighter")
        ConditionImage.objects.create(instance=instance, role="source", image=store_image(png_bytes(color=(20, 20, 20))))
        for model in ("Alpha", "Beta"):
            item = make_item(study, instance=instance, model=model, with_image=False)
            item.image = store_image(png_bytes(color=(shade, shade, shade) if model == "Alpha" else (25, 25, 25)))
            item.save(update_fields=["image"])
            for r, rater in enumerate(raters):
                Rating.objects.create(study=study, rater=rater, item=item, values={"SC": [0, 0.5, 1][(shade // 60 + r) % 3], "PQ": 1})
    judge = judge_create(name="ViCE edit", kind="vice", params={"model": "fake-good",
                                                                "vice_questions": 3, "vice_max_rounds": 0})
    with django_capture_on_commit_callbacks(execute=True):
        run = judge_run_start(judge=judge, study=study)
    run.refresh_from_db()
    assert (run.state, run.done, run.failed) == ("done", 8, 0)
    score = JudgeScore.objects.filter(run=run, item__gen_model__name="Beta").first()
    assert score.details["mode"] == "editing" and score.value == 0.0  # Beta left the source as it was
    client.force_login(researcher)
    html = client.get(reverse("judge_side_by_side", args=[study.slug]), {"judge": "ViCE edit", "dim": "SC"}).content.decode()
    assert "ViCE transcript" in html and "original: <em>" in html and "remove" in html


def test_the_page_names_the_operator_endpoints_without_their_urls(client, server, researcher):
    study = rated_study(researcher)
    client.force_login(researcher)
    html = client.get(reverse("judge_side_by_side", args=[study.slug])).content.decode()
    assert "<strong>default</strong> (fake-good," in html
    assert server.base_url not in html and "127.0.0.1" not in html


def test_a_pairwise_study_with_votes_but_no_judge_run_counts_the_votes_instead_of_saying_there_are_none(client, researcher):
    study = make_study(protocol="pairwise")
    study.owners.add(researcher)
    comparison = make_comparison(study)
    for rater in [make_rater() for _ in range(3)]:
        Rating.objects.create(study=study, rater=rater, comparison=comparison, values={"preference": "B"})
    client.force_login(researcher)
    html = client.get(reverse("judge_side_by_side", args=[study.slug])).content.decode()
    assert "No human ratings yet" not in html and "3 human votes so far" in html
