"""Monitor (issue 14, step 5): one navigation on every researcher page, the dashboard's rater card
shares the raters page's rows, one label per rater, a readable ETA, and owners told once when the
study is complete or its α falls below threshold."""

from datetime import timedelta
from pathlib import Path

import pytest
from django.core import mail

from analysis.models import StudyNotice
from analysis.notices import study_notices_check
from raters.models import Rater, RaterStanding
from raters.quality import rater_rows
from tasks.durations import readable_duration
from tasks.templatetags.research_nav import study_links
from tasks.models import Rating
from tests.factories import make_instance, make_item, make_study, make_user

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


@pytest.mark.parametrize("seconds, text", [
    (0, "less than a minute"), (59, "less than a minute"), (60, "about 1 min"), (45 * 60, "about 45 min"),
    (3 * 3600 + 20 * 60, "about 3 h 20 min"), (3 * 3600 + 20 * 60 + 29, "about 3 h 20 min"), (2 * 3600, "about 2 h"),
    (26 * 3600 + 40 * 60, "about 1 day 3 h"), (3 * 86400 + 23 * 3600 + 50 * 60, "about 4 days"),
])
def test_durations_read_like_people_say_them(seconds, text):
    assert readable_duration(timedelta(seconds=seconds)) == text


def test_every_researcher_page_of_a_study_includes_the_navigation():
    researcher_pages = [*TEMPLATES.glob("research/*.html"), *TEMPLATES.glob("raters/*.html"),
                        *TEMPLATES.glob("analysis/*.html")]
    not_of_a_study = {"study_new.html", "study_build.html", "_problems.html", "_nav.html", "qualification.html",
                      "stopping_method.html"}  # the method of the stopping panel: the README's, no study
    missing = [p.name for p in researcher_pages if p.name not in not_of_a_study and not p.name.startswith("_")
               and "study_nav study" not in p.read_text()]  # _partials are included in pages
    assert not missing, f"researcher pages without {{% study_nav %}}: {missing}"


@pytest.fixture
def owned_study(db, client):
    owner = make_user(email="owner@example.org")
    study = make_study(raters_per_item=2)
    study.owners.add(owner)
    client.force_login(owner)
    return study


def _rate_all(study, values_by_rater: dict[str, list[dict]]) -> list[Rater]:
    raters = []
    items = list(study.items.order_by("pk"))
    for pid, values in values_by_rater.items():
        rater = Rater.objects.create(platform=Rater.Platform.PROLIFIC, external_id=pid)
        raters.append(rater)
        for item, value in zip(items, values):
            Rating.objects.create(study=study, rater=rater, item=item, values=value, time_on_item_ms=400)
    return raters


@pytest.mark.django_db
def test_pages_show_one_navigation_with_the_study_pages(owned_study, client):
    make_item(owned_study)
    slug = owned_study.slug
    for url in (f"/research/{slug}/", f"/research/{slug}/leaderboard/", f"/studies/{slug}/raters/",
                f"/studies/{slug}/raters/gold-candidates/", f"/studies/{slug}/judges/"):
        html = client.get(url).content.decode()
        assert html.count('data-testid="study-nav"') == 1, url
        export = study_links(slug)[-2]
        assert export[0] == "export" and export[2] == f"/studies/{slug}/exports/"
        for target in (f"/research/{slug}/", f"/research/{slug}/items/", f"/research/{slug}/preview/",
                       f"/studies/{slug}/raters/", f"/studies/{slug}/raters/gold-candidates/",
                       f"/studies/{slug}/judges/", f"/research/{slug}/leaderboard/", export[2]):
            assert f'href="{target}"' in html, (url, target)
        assert 'aria-current="page"' in html, url


@pytest.mark.django_db
def test_dashboard_rater_card_matches_the_raters_page(owned_study, client):
    for _ in range(12):
        make_item(owned_study, instance=make_instance(owned_study))
    steady = [{"SC": 1.0 if i % 2 else 0.0, "PQ": 0.5} for i in range(12)]
    raters = _rate_all(owned_study, {"PID-A": steady, "PID-B": steady, "PID-FAST": [{"SC": 1.0, "PQ": 1.0}] * 12})
    RaterStanding.objects.create(study=owned_study, rater=raters[1], state=RaterStanding.State.APPROVED, reason="ok")
    rows = {row.rater.pk: row for row in rater_rows(owned_study)}
    html = client.get(f"/research/{owned_study.slug}/").content.decode()
    page = client.get(f"/studies/{owned_study.slug}/raters/").content.decode()
    for rater in raters:
        label = str(rater)
        assert label == f"prolific:{rater.external_id}"  # the crowd id, on both pages
        assert f"<code>{label}</code>" in html and label in page
        row = rows[rater.pk]
        assert f'standing-{row.state}">{row.state.capitalize()}' in html
        for flag in row.flags:
            assert flag.label in html
    assert rows[raters[2].pk].flags, "the 400 ms, straight-lining rater is flagged on the raters page"
    assert "rater" + str(raters[0].pk) not in html  # no second, internal label


@pytest.mark.django_db
def test_dashboard_eta_is_a_readable_duration(owned_study, client):
    for _ in range(40):
        make_item(owned_study, instance=make_instance(owned_study))
    _rate_all(owned_study, {"P1": [{"SC": 1.0, "PQ": 1.0}] * 10})
    html = client.get(f"/research/{owned_study.slug}/").content.decode()
    assert 'data-testid="eta"' in html
    eta = html.split('data-testid="eta"')[1].split(">", 1)[1].split("<", 1)[0]
    assert eta.startswith("about ") or eta == "less than a minute", eta
    assert ":" not in eta  # not 3:20:00.123456


@pytest.mark.django_db
def test_owners_are_emailed_once_when_the_study_is_complete(owned_study, client, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    other_owner = make_user(email="second@example.org")
    owned_study.owners.add(other_owner, make_user(email=""))
    for _ in range(3):
        make_item(owned_study, instance=make_instance(owned_study))
    _rate_all(owned_study, {"P1": [{"SC": 1.0, "PQ": 1.0}] * 3})
    assert study_notices_check(owned_study) == [] and not mail.outbox  # half done
    _rate_all(owned_study, {"P2": [{"SC": 1.0, "PQ": 1.0}] * 3})
    created = study_notices_check(owned_study)
    assert [n.kind for n in created] == [StudyNotice.Kind.COMPLETE]
    assert len(mail.outbox) == 1
    assert sorted(mail.outbox[0].to) == ["owner@example.org", "second@example.org"]
    assert "All 3 items" in mail.outbox[0].body and f"/research/{owned_study.slug}/" in mail.outbox[0].body
    assert study_notices_check(owned_study) == [] and len(mail.outbox) == 1  # once per event
    html = client.get(f"/research/{owned_study.slug}/").content.decode()
    assert 'data-testid="notice-complete"' in html and "emailed to 2 owners" in html
    assert len(mail.outbox) == 1


@pytest.mark.django_db
def test_owners_are_told_once_when_alpha_falls_below_threshold(owned_study, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    owned_study.settings = {"agreement_threshold": 0.5}
    owned_study.save()
    for _ in range(12):
        make_item(owned_study, instance=make_instance(owned_study))
    opposite = [0.0, 1.0] * 6
    _rate_all(owned_study, {"P1": [{"SC": v, "PQ": 1.0 - v} for v in opposite],
                            "P2": [{"SC": 1.0 - v, "PQ": v} for v in opposite]})
    created = study_notices_check(owned_study)
    low = sorted(n.key for n in created if n.kind == StudyNotice.Kind.ALPHA_LOW)
    assert "SC" in low and "PQ" in low
    subjects = [m.subject for m in mail.outbox]
    assert subjects.count(f"[{owned_study.slug}] Agreement below threshold") == len(low)
    from django.core.cache import cache

    cache.clear()  # past the throttle: α is judged again, and nothing is sent twice
    sent = len(mail.outbox)
    study_notices_check(owned_study)
    assert len(mail.outbox) == sent


@pytest.mark.django_db(transaction=True)
def test_the_submit_path_checks_after_a_session_finishes(settings):
    """A rater's last screen (through the rating page) completes the study: the owner is emailed."""
    from django.test import Client

    from tests.factories import crowd_enter

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    owner = make_user(email="owner@example.org")
    study = make_study(raters_per_item=1, units_per_session=2)
    study.owners.add(owner)
    items = [make_item(study, instance=make_instance(study)) for _ in range(2)]
    client = Client()
    url = crowd_enter(client, study, "P-LAST")
    for _ in items:
        page = client.get(url)
        assert page.status_code == 200, page.status_code
        form = page.content.decode()
        token = form.split('name="shown" value="')[1].split('"')[0] if 'name="shown"' in form else ""
        response = client.post(url, {"u0-SC": "1", "u0-PQ": "1", "shown": token})
        url = response.get("Location", url)
    assert Rating.objects.filter(study=study).count() == 2
    assert [n.kind for n in StudyNotice.objects.filter(study=study)] == ["complete"]
    assert len(mail.outbox) == 1


@pytest.mark.django_db
def test_alpha_is_never_judged_inside_a_raters_request(owned_study, settings, monkeypatch):
    """Eager mode (no worker): the job after a session runs in the rater's request, so it checks
    completion only; with a worker it judges α too."""
    from analysis import notices

    calls = []
    monkeypatch.setattr(notices, "_alpha_low", lambda study: calls.append(study.pk) or [])
    make_item(owned_study)
    settings.CELERY_TASK_ALWAYS_EAGER = True
    notices.study_notices_run(study_id=owned_study.pk)
    assert calls == []
    settings.CELERY_TASK_ALWAYS_EAGER = False
    notices.study_notices_run(study_id=owned_study.pk)
    assert calls == [owned_study.pk]
    assert notices.study_notices_run(study_id=10**9) is None
