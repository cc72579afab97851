"""The rater-quality pages (researchers, admins) and the qualification page (raters)."""

import pytest
from django.urls import reverse

from raters.models import QualificationAnswer, QualityPolicy, RaterAction, RaterStanding
from tasks.models import GoldAnswer, Rating
from tests.factories import make_gold, make_item, make_rater, make_study, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def study_with_raters():
    researcher = make_user(username="researcher")
    study = make_study()
    study.owners.add(researcher)
    items = [make_item(study) for _ in range(12)]
    make_gold(items[2], values={"SC": 1.0, "PQ": 1.0})
    careful = make_rater(platform="prolific", external_id="careful")
    speeder = make_rater(platform="prolific", external_id="speeder")
    helper = make_rater(platform="prolific", external_id="helper")
    for k, item in enumerate(items):
        truth = [0.0, 0.5, 1.0][k % 3]
        Rating.objects.create(study=study, rater=careful, item=item, values={"SC": truth, "PQ": 1.0}, time_on_item_ms=6000)
        Rating.objects.create(study=study, rater=helper, item=item, values={"SC": truth, "PQ": 1.0}, time_on_item_ms=5000)
        Rating.objects.create(study=study, rater=speeder, item=item, values={"SC": 1.0, "PQ": 1.0}, time_on_item_ms=400)
    return study, researcher, careful, speeder


def test_a_researcher_sees_one_row_per_rater_with_their_numbers_and_flags(client, study_with_raters):
    study, researcher, careful, speeder = study_with_raters
    client.force_login(researcher)
    response = client.get(reverse("raters:list", args=[study.slug]))
    assert response.status_code == 200
    rows = {row.rater.external_id: row for row in response.context["rows"]}
    assert set(rows) == {"careful", "speeder", "helper"}
    assert rows["careful"].items_done == 12 and rows["careful"].median_time_ms == 6000
    assert (rows["careful"].gold_correct, rows["careful"].gold_total) == (1, 1)
    assert rows["careful"].flags == []
    assert {"too_fast", "straight_lining"} <= set(rows["speeder"].flag_codes)
    html = response.content.decode()
    assert "median 400 ms per item over 12 items, study minimum 2000 ms" in html


def test_the_list_sorts_and_filters(client, study_with_raters):
    study, researcher, careful, speeder = study_with_raters
    client.force_login(researcher)
    url = reverse("raters:list", args=[study.slug])
    by_time = client.get(url, {"sort": "time", "dir": "asc"}).context["rows"]
    assert [r.rater.external_id for r in by_time] == ["speeder", "helper", "careful"]
    by_time_desc = client.get(url, {"sort": "time", "dir": "desc"}).context["rows"]
    assert by_time_desc[0].rater == careful
    flagged = client.get(url, {"flag": "too_fast"}).context["rows"]
    assert [r.rater for r in flagged] == [speeder]
    clean = client.get(url, {"flag": "none"}).context["rows"]
    assert speeder not in [r.rater for r in clean]
    RaterStanding.objects.create(study=study, rater=speeder, state="rejected", reason="fast")
    assert [r.rater for r in client.get(url, {"state": "excluded"}).context["rows"]] == [speeder]
    assert client.get(url, {"sort": "nonsense"}).status_code == 200


@pytest.mark.parametrize("who", ["outsider", "rater"])
def test_people_who_do_not_own_the_study_get_a_404(client, study_with_raters, who):
    study, *_ = study_with_raters
    user = make_user()
    if who == "rater":
        make_rater(user=user)
    client.force_login(user)
    assert client.get(reverse("raters:list", args=[study.slug])).status_code == 404
    assert client.get(reverse("raters:gold_candidates", args=[study.slug])).status_code == 404


def test_an_admin_sees_any_study(client, study_with_raters):
    study, *_ = study_with_raters
    client.force_login(make_user(is_staff=True))
    assert client.get(reverse("raters:list", args=[study.slug])).status_code == 200


def test_the_detail_page_plots_the_distribution_and_lists_gold_answers(client, study_with_raters):
    study, researcher, careful, speeder = study_with_raters
    client.force_login(researcher)
    response = client.get(reverse("raters:detail", args=[study.slug, speeder.pk]))
    html = response.content.decode()
    assert response.status_code == 200
    assert "<svg" in html and "everyone else (n=24)" in html and "prolific:speeder (n=12)" in html
    assert response.context["gold_rows"][0]["correct"] is True
    assert "Too fast" in html


def test_a_decision_with_a_reason_is_saved_and_shown_in_the_history(client, study_with_raters):
    study, researcher, careful, speeder = study_with_raters
    client.force_login(researcher)
    url = reverse("raters:decide", args=[study.slug, speeder.pk])
    response = client.post(url, {"decision": "reject", "reason": "Rated 12 images in 5 seconds"}, follow=True)
    assert RaterStanding.objects.get(rater=speeder).state == "rejected"
    html = response.content.decode()
    assert "is now rejected in this study" in html and "Rated 12 images in 5 seconds" in html


def test_a_decision_without_a_reason_is_refused_with_a_message(client, study_with_raters):
    study, researcher, careful, speeder = study_with_raters
    client.force_login(researcher)
    response = client.post(reverse("raters:decide", args=[study.slug, speeder.pk]), {"decision": "block", "reason": ""}, follow=True)
    assert "Give a reason" in response.content.decode()
    assert not RaterAction.objects.exists()
    speeder.refresh_from_db()
    assert speeder.state == "active"


def test_applying_the_rules_acts_on_behaviour_flags_when_the_policy_says_so(client, study_with_raters):
    study, researcher, careful, speeder = study_with_raters
    QualityPolicy.objects.create(study=study, behaviour_action="pause", behaviour_min_flags=2)
    client.force_login(researcher)
    response = client.post(reverse("raters:rules_apply", args=[study.slug]), follow=True)
    assert "Rules acted on 1 rater." in response.content.decode()
    standing = RaterStanding.objects.get(rater=speeder)
    assert standing.state == "paused" and standing.automatic and "Too fast" in standing.reason
    assert not RaterStanding.objects.filter(rater=careful).exists()


def test_a_researcher_confirms_a_consensus_candidate_as_gold(client, study_with_raters):
    study, researcher, *_ = study_with_raters
    client.force_login(researcher)
    url = reverse("raters:gold_candidates", args=[study.slug])
    candidates = client.get(url).context["candidates"]
    # Items whose true SC is 1 were rated 1/1 by all three raters.
    assert len(candidates) == 3
    client.post(url, {"item": candidates[0].item.pk, "tolerance": "0"})
    assert GoldAnswer.objects.filter(item=candidates[0].item).exists()
    response = client.post(url, {"item": candidates[1].item.pk, "tolerance": "-1"}, follow=True)
    assert "tolerance cannot be negative" in response.content.decode()


def test_the_qualification_page_shows_the_item_but_never_the_expected_answer(client):
    study = make_study(task_type="text_to_image")
    QualityPolicy.objects.create(study=study, qualification_required=True, qualification_size=2, qualification_pass_share=1.0, qualification_max_attempts=2)
    gold_items = [make_item(study) for _ in range(2)]
    for item in gold_items:
        make_gold(item, values={"SC": 0.5, "PQ": 0.5}, tolerance=0.0).__class__.objects.filter(item=item).update(note="SECRET-NOTE")
    user = make_user()
    rater = make_rater(user=user)
    client.force_login(user)
    url = reverse("raters:qualification", args=[study.slug])
    response = client.get(url)
    html = response.content.decode()
    assert response.status_code == 200 and "question 1 of 2" in html
    assert "SECRET-NOTE" not in html and "tolerance" not in html.lower()
    for _ in range(2):
        question = client.get(url).context["question"]
        client.post(url, {"question": question, "u0-SC": "1", "u0-PQ": "1"})
    html = client.get(url).content.decode()
    assert "did not reach the pass mark" in html and "Try again" in html
    client.post(url, {"action": "start"})
    for _ in range(2):
        question = client.get(url).context["question"]
        client.post(url, {"question": question, "u0-SC": "0.5", "u0-PQ": "0.5"})
    assert "You passed the qualification test." in client.get(url).content.decode()
    assert rater.qualification_attempts.filter(passed=True).count() == 1


def test_the_qualification_uses_the_rating_screen_with_its_keys_and_stays_out_of_analysis(client):
    from raters.exclusion import analysis_ratings
    from tasks.models import Rating

    study = make_study(task_type="text_to_image")
    QualityPolicy.objects.create(study=study, qualification_required=True, qualification_size=1)
    item = make_item(study)
    make_gold(item, values={"SC": 1.0, "PQ": 1.0})
    user = make_user()
    make_rater(user=user)
    client.force_login(user)
    url = reverse("raters:qualification", args=[study.slug])
    html = client.get(url).content.decode()
    assert 'id="unit"' in html and 'data-key="3"' in html and "Rubric" in html  # the work screen, keys shown
    assert 'name="u0-SC"' in html and 'data-back' not in html  # no going back in a test
    response = client.post(url, {"question": "1.1", "u0-SC": "1"}, HTTP_HX_REQUEST="true")
    # Missing dimension: told on the screen (the htmx fragment renders no sub-template, so read the HTML), nothing stored.
    assert response.status_code == 200 and 'data-testid="error">' in response.content.decode()
    assert "PQ" in response.content.decode().split('data-testid="error">', 1)[1].split("</p>", 1)[0]
    assert not QualificationAnswer.objects.exists()
    response = client.post(url, {"question": "1.1", "u0-SC": "1", "u0-PQ": "1"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 204 and response["HX-Redirect"] == url
    answer = QualificationAnswer.objects.get()
    assert answer.correct and answer.time_on_item_ms is not None
    assert not Rating.objects.exists() and analysis_ratings(study).count() == 0
    assert "You passed the qualification test." in client.get(url).content.decode()


def test_a_checklist_study_qualifies_raters_with_the_checklist(client):
    study = make_study(task_type="text_to_image", settings={"checklist_mode": True})
    QualityPolicy.objects.create(study=study, qualification_required=True, qualification_size=1)
    item = make_item(study)
    make_gold(item, values={"SC": 0.5, "PQ": 1.0})
    user = make_user()
    make_rater(user=user)
    client.force_login(user)
    url = reverse("raters:qualification", args=[study.slug])
    html = client.get(url).content.decode()
    assert 'name="u0-c-objects"' in html and 'name="u0-SC"' not in html
    marks = {"c-prompt": "some", "c-objects": "recognizable", "c-artifacts": "none", "c-unusual": "none"}
    client.post(url, {"question": "1.1", **{f"u0-{k}": v for k, v in marks.items()}})
    answer = QualificationAnswer.objects.get()
    assert answer.values == {"SC": 0.5, "PQ": 1.0} and answer.checklist["prompt"] == "some" and answer.correct


def test_a_stale_qualification_page_is_refused_and_the_current_question_shown(client):
    study = make_study()
    QualityPolicy.objects.create(study=study, qualification_required=True, qualification_size=2)
    for _ in range(2):
        make_gold(make_item(study))
    user = make_user()
    make_rater(user=user)
    client.force_login(user)
    url = reverse("raters:qualification", args=[study.slug])
    current = client.get(url).context["item"]
    for stale in ({"question": "1.2"}, {"question": "2.1"}, {}):  # a later question, another attempt, none
        response = client.post(url, {**stale, "u0-SC": "1", "u0-PQ": "1"})
        assert response.status_code == 422 and "out of date" in response.content.decode()
        assert response.context["item"] == current
    assert not QualificationAnswer.objects.exists()


def test_an_owner_opening_the_qualification_is_not_enrolled_as_a_rater(client):
    from raters.models import QualificationAttempt

    study = make_study(task_type="text_to_image")
    QualityPolicy.objects.create(study=study, qualification_required=True, qualification_size=1)
    make_gold(make_item(study), values={"SC": 1.0, "PQ": 1.0})
    owner = make_user()
    study.owners.add(owner)
    rater = make_rater(user=owner)  # researchers may rate elsewhere: the row exists
    client.force_login(owner)
    url = reverse("raters:qualification", args=[study.slug])
    response = client.get(url)
    assert response.status_code == 403 and "You own this study" in response.content.decode()
    client.post(url, {"action": "start"})
    assert not QualificationAttempt.objects.filter(rater=rater).exists()


def test_a_researcher_cannot_decide_about_a_rater_with_no_work_in_their_study(client, study_with_raters):
    """Right route, wrong object: the study's own slug with the id of a rater of another study."""
    study, researcher, careful, speeder = study_with_raters
    elsewhere = make_study()
    stranger = make_rater(platform="prolific", external_id="stranger")
    Rating.objects.create(study=elsewhere, rater=stranger, item=make_item(elsewhere), values={"SC": 1.0, "PQ": 1.0})
    client.force_login(researcher)
    for decision in ("block", "reject", "pause"):
        response = client.post(reverse("raters:decide", args=[study.slug, stranger.pk]),
                               {"decision": decision, "reason": "Not mine to judge"})
        assert response.status_code == 404
    stranger.refresh_from_db()
    assert stranger.state == "active"
    assert not RaterStanding.objects.exists() and not RaterAction.objects.exists()


def test_a_study_owner_cannot_block_site_wide_but_an_admin_can(client, study_with_raters):
    study, researcher, careful, speeder = study_with_raters
    client.force_login(researcher)
    page = client.get(reverse("raters:detail", args=[study.slug, speeder.pk]))
    assert "block" not in dict(page.context["decisions"])
    url = reverse("raters:decide", args=[study.slug, speeder.pk])
    response = client.post(url, {"decision": "block", "reason": "Bot answers"}, follow=True)
    assert "Only an admin can block" in response.content.decode()
    speeder.refresh_from_db()
    assert speeder.state == "active" and not RaterAction.objects.exists()
    client.force_login(make_user(is_staff=True))
    client.post(url, {"decision": "block", "reason": "Bot answers"})
    speeder.refresh_from_db()
    assert speeder.state == "blocked"


def test_confirming_gold_with_a_malformed_item_or_tolerance_is_refused_and_stores_nothing(client, study_with_raters):
    study, researcher, *_ = study_with_raters
    client.force_login(researcher)
    url = reverse("raters:gold_candidates", args=[study.slug])
    candidate = client.get(url).context["candidates"][0].item
    for item in ("abc", "", "1e3", "-1", "9" * 30, "\x00"):
        assert client.post(url, {"item": item, "tolerance": "0"}).status_code == 404, item
    for tolerance in ("nan", "inf", "-inf", "zero"):
        response = client.post(url, {"item": candidate.pk, "tolerance": tolerance}, follow=True)
        assert "Tolerance must be a number" in response.content.decode(), tolerance
    assert not GoldAnswer.objects.filter(item=candidate).exists()
