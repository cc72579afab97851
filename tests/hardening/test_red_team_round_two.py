"""What a second red-team pass over the merged security work found, one test each."""

import pytest
from django.core.cache import cache
from django.test import Client, override_settings

from raters.models import QualificationAttempt, QualityPolicy
from tasks.models import Study
from tests.factories import crowd_enter, make_gold, make_item, make_rater, make_study, make_user

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("size", ["%C2%B2", "%E2%91%A0"])  # ² and ①: str.isdigit says yes, int() says no
def test_an_image_size_of_unicode_digits_is_a_404_not_a_server_error(client, size):
    item = make_item(make_study())
    assert client.get(f"/img/{item.image.sha256}/{size}").status_code == 404


def test_a_gold_candidate_id_of_unicode_digits_is_a_404_not_a_server_error(client):
    study = make_study()
    owner = make_user()
    study.owners.add(owner)
    client.force_login(owner)
    assert client.post(f"/studies/{study.slug}/raters/gold-candidates/", {"item": "²", "tolerance": "0"}).status_code == 404


def test_a_worker_who_enters_a_full_study_is_told_there_is_no_work_instead_of_looping(client):
    study = make_study(raters_per_item=1, units_per_session=1)
    make_item(study)
    crowd_enter(Client(), study, pid="FIRST")  # the only unit is claimed: the quota is full
    client.get(f"/s/{study.slug}/start?PROLIFIC_PID=LATE&STUDY_ID=S&SESSION_ID=X")
    client.post(f"/s/{study.slug}/consent", {"agree": "yes"})
    client.post(f"/s/{study.slug}/instructions")
    response = client.get(f"/s/{study.slug}/rate", follow=True)
    assert len(response.redirect_chain) < 3 and response.status_code == 200
    assert "no work for you" in response.content.decode()


@override_settings(LOGIN_RATE_LIMIT_PER_USERNAME=3, LOGIN_RATE_LIMIT_PER_IP=100, LOGIN_RATE_LIMIT_WINDOW=600)
def test_the_login_limit_counts_a_username_in_every_unicode_compatibility_form_as_one():
    cache.clear()
    make_user("victim", password="right-password")
    browser = Client()
    for n in range(3):
        browser.post("/accounts/login/", {"username": "victim", "password": f"guess{n}"}, REMOTE_ADDR=f"10.1.0.{n}")
    for variant in ("ｖｉｃｔｉｍ", "𝐯𝐢𝐜𝐭𝐢𝐦", "VICTIM"):  # all log in as victim through Django's NFKC form
        response = browser.post("/accounts/login/", {"username": variant, "password": "right-password"},
                                REMOTE_ADDR="10.1.0.99")
        assert response.status_code == 429, variant
    assert "_auth_user_id" not in browser.session
    cache.clear()


def test_a_blocked_rater_cannot_open_the_qualification_or_see_its_images(client):
    study = make_study(state=Study.State.OPEN)
    QualityPolicy.objects.create(study=study, qualification_required=True, qualification_size=1)
    gold_item = make_item(study)
    make_gold(gold_item, values={"SC": 1.0, "PQ": 1.0})
    user = make_user()
    make_rater(user=user, state="blocked")
    client.force_login(user)
    assert client.get(f"/studies/{study.slug}/qualification/").status_code == 403
    assert not QualificationAttempt.objects.exists()
    assert client.get(f"/img/{gold_item.image.sha256}/160").status_code == 404


def test_plots_draw_model_names_that_look_like_mathtext(client):
    from analysis.science import plots
    import pandas as pd

    table = pd.DataFrame({"model": ["$\\frac{$", "b"], "mean": [1.0, 2.0], "ci_low": [0.5, 1.5], "ci_high": [1.5, 2.5]})
    assert "<svg" in plots.mos_with_ci(table)
