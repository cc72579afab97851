"""Reference images and phones (issue 14's display defects): the source of an edit at the output's
size with a flicker toggle, subjects large enough to judge identity, and studies that exclude phones
say so before consent and take no one from a phone."""

import io

import pytest
from django.test import Client

from raters.models import Rater
from tasks.builder import StudySpec, study_build_from_bundle
from tasks.devices import is_phone
from tasks.models import Participation, Study
from tasks.sample_bundles import sample_bundle

pytestmark = pytest.mark.django_db
IPHONE = ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
          "Version/17.0 Mobile/15E148 Safari/604.1")
ANDROID_PHONE = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Mobile Safari/537.36"
ANDROID_TABLET = "Mozilla/5.0 (Linux; Android 14; SM-X710) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36"
IPAD = "Mozilla/5.0 (iPad; CPU OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148"
LAPTOP = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36"


def _open(task: str, protocol: str = "imagenhub", **settings) -> Study:
    study = study_build_from_bundle(upload=io.BytesIO(sample_bundle(protocol, task)), spec=StudySpec(
        slug=f"ref-{task}".replace("_", "-"), title="Reference", protocol=protocol, task_type=task, settings=settings))
    Study.objects.filter(pk=study.pk).update(state=Study.State.OPEN, units_per_session=4)
    study.refresh_from_db()
    return study


def _screen(client: Client, study: Study) -> str:
    client.get(f"/s/{study.slug}/start?PROLIFIC_PID=P1")
    client.post(f"/s/{study.slug}/consent", {"agree": "yes"})
    client.post(f"/s/{study.slug}/instructions")
    return client.get(client.get(f"/s/{study.slug}/rate").url).content.decode()


@pytest.mark.parametrize("task", ["mask_guided_editing", "text_guided_editing", "subject_driven_editing"])
def test_an_edit_shows_its_source_at_the_outputs_size_with_a_flicker_toggle(task):
    html = _screen(Client(), _open(task))
    source_src = html.split('data-flicker')[1].split('data-src="')[1].split('"')[0]
    assert source_src.endswith("/768")  # the output's size, not 384
    assert 'Flicker source ↔ output <kbd>F</kbd>' in html
    figure = html.split('<figcaption class="section-label">Source image</figcaption>')[1].split("</figure>")[0]
    assert f'src="{source_src}"' in figure
    assert html.count('/768"') >= 2  # source and output at one size


@pytest.mark.parametrize("task", ["text_to_image", "subject_driven_generation", "control_guided_generation"])
def test_no_flicker_where_there_is_no_source(task):
    html = _screen(Client(), _open(task))
    assert "data-flicker" not in html
    assert "Z or Esc closes" in html  # the zoom key is told everywhere


def test_subject_photos_are_not_thumbnails():
    html = _screen(Client(), _open("subject_driven_generation"))
    subjects = html.split('<div class="subject-set">')[1].split("</div>")[0]
    assert "/384" in subjects and "/160" not in subjects


@pytest.mark.parametrize("agent, phone", [(IPHONE, True), (ANDROID_PHONE, True), (ANDROID_TABLET, False),
                                          (IPAD, False), (LAPTOP, False), ("", False)])
def test_phones_are_told_apart_from_tablets_and_laptops(rf, agent, phone):
    assert is_phone(rf.get("/", HTTP_USER_AGENT=agent)) is phone


def test_a_study_that_excludes_phones_says_so_before_consent_and_takes_no_one_from_a_phone():
    study = _open("text_to_image", exclude_phones=True)
    laptop = Client(HTTP_USER_AGENT=LAPTOP)
    laptop.get(f"/s/{study.slug}/start?PROLIFIC_PID=LAPTOP1")
    page = laptop.get(f"/s/{study.slug}/consent").content.decode()
    assert "Laptop, desktop or tablet only" in page and 'name="agree"' in page
    phone = Client(HTTP_USER_AGENT=IPHONE)
    phone.get(f"/s/{study.slug}/start?PROLIFIC_PID=PHONE1")
    page = phone.get(f"/s/{study.slug}/consent")
    assert page.status_code == 403
    assert "cannot be done on a phone" in page.content.decode() and 'name="agree"' not in page.content.decode()
    refused = phone.post(f"/s/{study.slug}/consent", {"agree": "yes"})
    assert refused.status_code == 403
    assert not Rater.objects.filter(external_id="PHONE1").exists()
    assert not Participation.objects.filter(rater__external_id="PHONE1").exists()
    preview = Client(HTTP_USER_AGENT=LAPTOP).get(f"/s/{study.slug}/start?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE"
                                                 "&hitId=H&turkSubmitTo=https://www.mturk.com")
    assert "Laptop, desktop or tablet only" in preview.content.decode()


def test_phones_are_welcome_unless_excluded():
    study = _open("text_to_image")
    phone = Client(HTTP_USER_AGENT=IPHONE)
    phone.get(f"/s/{study.slug}/start?PROLIFIC_PID=PHONE2")
    page = phone.get(f"/s/{study.slug}/consent").content.decode()
    assert "Laptop, desktop or tablet only" not in page and "cannot be done on a phone" not in page
    assert 'name="agree"' in page
    assert "exclude_phones" not in study.settings
