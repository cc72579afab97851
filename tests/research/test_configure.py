"""Configuring a study without the admin: the service, the page and PATCH /api/studies/<slug>/."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from decimal import Decimal

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from raters.costs import study_cost
from raters.models import QualityPolicy
from tasks.configure_services import (
    EXAMPLE_MAX_BYTES,
    SAFE_WHILE_OPEN,
    ConfigurationRefused,
    study_configuration,
    study_configure,
    worked_example_add,
)
from analysis.export_services import sparse_layouts
from tasks.crowd import launch_links
from tasks.models import Rating, Study, WorkedExample
from tests.factories import make_item, make_rater, make_study, make_user, png_bytes

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner():
    user = make_user("owner-cfg")
    return user


@pytest.fixture
def draft(owner):
    study = make_study(slug="cfg-draft", title="Configured study", state=Study.State.DRAFT)
    study.owners.add(owner)
    for i in range(4):
        make_item(study, model=f"Model{i % 2}")
    return study


def _researcher(name: str):
    user = make_user(name)
    make_study(slug=f"own-{name}").owners.add(user)  # owning a study makes them a researcher
    return user


# ------------------------------------------------------------------ service


def test_a_draft_takes_every_setting_at_once(draft, owner):
    study_configure(study=draft, actor=owner, changes={
        "completion_code": "C1ABC", "completion_url": "https://app.prolific.com/submissions/complete?cc=C1ABC",
        "screened_out_code": "SCR1", "qualification_failed_code": "QF1", "closed_code": "CL1",
        "units_per_session": 7, "raters_per_item": 5, "assignment_mode": "whole_set",
        "consent_text": "We keep your ratings.", "estimated_minutes": 12, "pay_per_hour": Decimal("9.50"),
        "contact": "lab@example.org", "instructions": "Rate the image.", "gold_share": 0.1,
        "qualification_required": True, "qualification_size": 4, "attention_max_failures": 1,
        "behaviour_action": "pause",
    })
    draft.refresh_from_db()
    assert (draft.completion_code, draft.closed_code, draft.units_per_session, draft.raters_per_item) == \
        ("C1ABC", "CL1", 7, 5)
    assert draft.assignment_mode == "whole_set" and draft.settings["gold_share"] == 0.1
    policy = QualityPolicy.objects.get(study=draft)
    assert policy.qualification_required and policy.qualification_size == 4 and policy.behaviour_action == "pause"


def test_an_open_study_refuses_a_field_raters_have_seen_and_stores_nothing_of_the_change(draft, owner):
    Study.objects.filter(pk=draft.pk).update(state=Study.State.OPEN)
    draft.refresh_from_db()
    with pytest.raises(ConfigurationRefused) as refused:
        study_configure(study=draft, actor=owner, changes={"completion_code": "NEW1", "instructions": "Changed"})
    assert refused.value.conflict and "instructions" in refused.value.errors
    assert "draft" in refused.value.errors["instructions"]
    draft.refresh_from_db()
    assert draft.completion_code == "" and draft.instructions == ""  # the safe field was not stored either


def test_an_open_study_takes_safe_fields_and_more_raters_but_not_fewer(draft, owner):
    Study.objects.filter(pk=draft.pk).update(state=Study.State.OPEN, raters_per_item=3)
    draft.refresh_from_db()
    study_configure(study=draft, actor=owner, changes={"completion_code": "OPEN2", "raters_per_item": 4,
                                                       "min_median_time_ms": 900})
    draft.refresh_from_db()
    assert draft.completion_code == "OPEN2" and draft.raters_per_item == 4
    assert QualityPolicy.objects.get(study=draft).min_median_time_ms == 900
    with pytest.raises(ConfigurationRefused) as refused:
        study_configure(study=draft, actor=owner, changes={"raters_per_item": 2})
    assert "more raters" in refused.value.errors["raters_per_item"]


def test_the_whole_form_sent_back_unchanged_is_no_change_even_when_open(draft, owner):
    Study.objects.filter(pk=draft.pk).update(state=Study.State.OPEN)
    draft.refresh_from_db()
    study_configure(study=draft, actor=owner, changes=study_configuration(draft))  # no refusal


def test_the_safe_fields_are_named_and_exclude_what_raters_see():
    assert {"instructions", "consent_text", "assignment_mode", "gold_share", "qualification_required"}.isdisjoint(
        SAFE_WHILE_OPEN)
    assert {"completion_code", "closed_code", "pay_per_hour", "collaborators"} <= SAFE_WHILE_OPEN


def test_collaborators_must_be_researcher_accounts(draft, owner):
    make_user("just-a-rater")
    with pytest.raises(ConfigurationRefused) as refused:
        study_configure(study=draft, actor=owner, changes={"collaborators": ["just-a-rater", "nobody-here"]})
    message = refused.value.errors["collaborators"]
    assert "'just-a-rater' is not a researcher" in message and "nobody-here" in message
    assert not draft.collaborators.exists()


def test_a_collaborator_sees_and_runs_the_study_but_does_not_change_who_collaborates(draft, owner, client):
    colleague = _researcher("colleague")
    study_configure(study=draft, actor=owner, changes={"collaborators": ["colleague"]})
    assert draft.is_visible_to(colleague)
    client.force_login(colleague)
    assert client.get(f"/research/{draft.slug}/").status_code == 200
    assert client.get(f"/research/{draft.slug}/configure/").status_code == 200
    assert client.get(f"/studies/{draft.slug}/raters/").status_code == 200
    assert client.get(f"/studies/{draft.slug}/judges/").status_code == 200
    image = draft.items.first().image.sha256
    assert client.get(f"/img/{image}/160").status_code == 200
    with pytest.raises(ConfigurationRefused):
        study_configure(study=draft, actor=colleague, changes={"collaborators": []})
    study_configure(study=draft, actor=colleague, changes={"completion_code": "BYCOLLEAGUE"})
    assert Study.objects.get(pk=draft.pk).completion_code == "BYCOLLEAGUE"


def test_a_researcher_who_is_not_a_collaborator_still_gets_404_everywhere(draft, owner, client):
    colleague = _researcher("colleague2")
    outsider = _researcher("outsider2")
    study_configure(study=draft, actor=owner, changes={"collaborators": ["colleague2"]})
    client.force_login(outsider)
    for url in (f"/research/{draft.slug}/", f"/research/{draft.slug}/configure/", f"/research/{draft.slug}/launch/",
                f"/research/{draft.slug}/export/", f"/studies/{draft.slug}/raters/",
                f"/studies/{draft.slug}/raters/prolific-decisions.csv", f"/api/studies/{draft.slug}/"):
        assert client.get(url).status_code == 404, url
    assert client.post(f"/research/{draft.slug}/configure/", {"completion_code": "X"}).status_code == 404
    assert APIClient().patch(f"/api/studies/{draft.slug}/", {}, format="json").status_code in (401, 403)
    api = APIClient()
    api.force_authenticate(outsider)
    assert api.patch(f"/api/studies/{draft.slug}/", {"completion_code": "X"}, format="json").status_code == 404
    assert Study.objects.get(pk=draft.pk).completion_code == ""
    assert colleague.pk in draft.collaborators.values_list("pk", flat=True)


# ------------------------------------------------------------------ cost


def test_the_cost_is_units_times_raters_times_seconds_at_the_pay_per_hour(draft, owner):
    study_configure(study=draft, actor=owner, changes={"pay_per_hour": Decimal("12.00"),
                                                       "seconds_per_unit_estimate": 30, "raters_per_item": 3})
    cost = study_cost(Study.objects.get(pk=draft.pk))
    # 4 items × 3 raters × 30 s = 360 s = 0.1 h at 12.00/h
    assert (cost.ratings_needed, cost.total, cost.left, cost.measured) == (12, Decimal("1.20"), Decimal("1.20"), False)


def test_the_cost_counts_hidden_gold_screens_and_uses_measured_time_once_there_are_enough_ratings(draft, owner):
    study_configure(study=draft, actor=owner, changes={"pay_per_hour": Decimal("10"), "seconds_per_unit_estimate": 60,
                                                       "gold_share": 0.2, "raters_per_item": 10})
    items = list(draft.items.all())
    for n in range(20):  # 20 ratings of 18 s each: measured replaces the 60 s estimate
        Rating.objects.create(study=draft, rater=make_rater(), item=items[n % 4], values={"SC": 1, "PQ": 1},
                              time_on_item_ms=18_000)
    cost = study_cost(Study.objects.get(pk=draft.pk))
    assert cost.measured and cost.seconds_per_unit == 18.0
    # needed 40 ratings / 0.8 = 50 screens × 18 s = 0.25 h × 10 = 2.50; left (40-20)/0.8 = 25 screens = 1.25
    assert (cost.total, cost.left) == (Decimal("2.50"), Decimal("1.25"))


def test_without_pay_there_is_no_cost_but_the_counts_are_given(draft):
    cost = study_cost(draft)
    assert cost.total is None and cost.ratings_needed == 12


# ------------------------------------------------------------------ worked examples


def _upload(data: bytes, name: str = "example.png") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="image/png")


def test_a_worked_example_image_is_checked_by_pillow_and_size(draft):
    example = worked_example_add(study=draft, upload=_upload(png_bytes(size=(64, 64))), caption="SC 1: all there")
    assert example.image.width == 64
    with pytest.raises(ConfigurationRefused) as refused:
        worked_example_add(study=draft, upload=_upload(b"<svg onload=alert(1)>"), caption="x")
    assert "not a readable image" in refused.value.errors["image"]
    with pytest.raises(ConfigurationRefused) as refused:
        worked_example_add(study=draft, upload=_upload(b"\x89PNG" + b"0" * EXAMPLE_MAX_BYTES), caption="x")
    assert "MB" in refused.value.errors["image"]
    with pytest.raises(ConfigurationRefused):
        worked_example_add(study=draft, upload=_upload(png_bytes()), caption="   ")
    assert WorkedExample.objects.filter(study=draft).count() == 1


def test_examples_are_shown_to_the_studys_raters_and_hidden_from_everyone_else(draft, client):
    from tests.factories import crowd_enter

    example = worked_example_add(study=draft, upload=_upload(png_bytes(color=(1, 2, 3))), caption="Why: crisp")
    Study.objects.filter(pk=draft.pk).update(state=Study.State.OPEN)
    url = f"/img/{example.image.sha256}/full"
    assert client.get(url).status_code == 404  # nobody yet
    client.get(f"/s/{draft.slug}/start?PROLIFIC_PID=EX1")
    assert client.get(url).status_code == 404  # opened the link, not consented: not taking part
    client.post(f"/s/{draft.slug}/consent", {"agree": "yes"})
    assert client.get(url).status_code == 200  # on the instructions page, before any work
    crowd_enter(client, Study.objects.get(pk=draft.pk), pid="EX1")
    page = client.get(f"/s/{draft.slug}/instructions").content.decode()
    assert "Why: crisp" in page and example.image.sha256 in page


def test_an_open_study_takes_no_new_example(draft):
    Study.objects.filter(pk=draft.pk).update(state=Study.State.OPEN)
    with pytest.raises(ConfigurationRefused):
        worked_example_add(study=draft, upload=_upload(png_bytes()), caption="late")


def test_an_example_of_another_study_cannot_be_removed_through_your_own_draft(draft, owner, client):
    other = make_study(slug="cfg-other", state=Study.State.DRAFT)
    other.owners.add(make_user("other-owner"))
    theirs = worked_example_add(study=other, upload=_upload(png_bytes(color=(7, 7, 7))), caption="theirs")
    client.force_login(owner)
    page = client.post(f"/research/{draft.slug}/configure/examples/", {"remove": str(theirs.pk)}, follow=True)
    assert b"No such example" in page.content and WorkedExample.objects.filter(pk=theirs.pk).exists()


# ------------------------------------------------------------------ the page


def test_the_configure_page_saves_a_valid_form_and_says_so(draft, owner, client):
    client.force_login(owner)
    page = client.get(f"/research/{draft.slug}/configure/")
    assert page.status_code == 200 and b"Codes and links per outcome" in page.content
    form = {k: ("" if v is None else v) for k, v in page.context["form"].initial.items()}
    form.update(completion_code="PAGE1", closed_code="CLOSED1", pay_per_hour="8.25", seconds_per_unit_estimate="20",
                qualification_required="on", rules_after_session="on")
    response = client.post(f"/research/{draft.slug}/configure/", form)
    assert response.status_code == 302
    draft.refresh_from_db()
    assert (draft.completion_code, draft.closed_code, draft.pay_per_hour) == ("PAGE1", "CLOSED1", Decimal("8.25"))
    assert b"Estimated cost" in client.get(f"/research/{draft.slug}/configure/").content


def test_an_invalid_form_stores_nothing_and_marks_the_field(draft, owner, client):
    client.force_login(owner)
    form = {k: ("" if v is None else v) for k, v in
            client.get(f"/research/{draft.slug}/configure/").context["form"].initial.items()}
    form.update(completion_code="GOOD1", completion_url="javascript:alert(1)", gold_share="0.9")
    response = client.post(f"/research/{draft.slug}/configure/", form)
    assert response.status_code == 400 and b"Nothing was saved" in response.content
    assert set(response.context["form"].errors) >= {"completion_url", "gold_share"}
    assert Study.objects.get(pk=draft.pk).completion_code == ""


def test_an_open_study_shows_draft_only_fields_disabled_and_ignores_a_tampered_one(draft, owner, client):
    Study.objects.filter(pk=draft.pk).update(state=Study.State.OPEN)
    client.force_login(owner)
    page = client.get(f"/research/{draft.slug}/configure/")
    html = page.content.decode()
    assert 'data-testid="open-lock"' in html and "draft only" in html
    assert page.context["form"]["instructions"].field.disabled
    form = {k: ("" if v is None else v) for k, v in page.context["form"].initial.items()}
    form.update(completion_code="OPEN9", instructions="tampered", rules_after_session="on")
    assert client.post(f"/research/{draft.slug}/configure/", form).status_code == 302
    study = Study.objects.get(pk=draft.pk)
    assert study.completion_code == "OPEN9" and study.instructions == ""


def test_the_example_upload_route_adds_and_removes_in_a_draft(draft, owner, client):
    client.force_login(owner)
    url = f"/research/{draft.slug}/configure/examples/"
    client.post(url, {"image": _upload(png_bytes()), "caption": "PQ 1: no artefacts"})
    example = WorkedExample.objects.get(study=draft)
    response = client.post(url, {"image": _upload(b"not an image"), "caption": "x"}, follow=True)
    assert b"Example not saved" in response.content
    client.post(url, {"remove": "99999999"})
    assert WorkedExample.objects.filter(study=draft).count() == 1
    client.post(url, {"remove": str(example.pk)})
    assert not WorkedExample.objects.filter(study=draft).exists()


# ------------------------------------------------------------------ launch


def test_publishing_shows_the_prolific_mturk_and_invited_links(draft, owner, client):
    client.force_login(owner)
    response = client.post(f"/research/{draft.slug}/launch/")
    assert response.status_code == 302 and Study.objects.get(pk=draft.pk).state == Study.State.OPEN
    page = client.get(response.url)
    links = page.context["links"]
    start = f"http://testserver/s/{draft.slug}/start"
    assert links["prolific"] == (start + "?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}"
                                 "&SESSION_ID={{%SESSION_ID%}}")
    assert links["invited"] == start
    html = page.content.decode()
    assert 'data-copy="link-prolific"' in html and "js/copy.js" in html
    assert "&lt;ExternalQuestion" in html  # the XML shows as text


def test_the_prolific_link_carries_the_parameter_names_the_crowd_entry_reads():
    from django.http import QueryDict

    from tasks.crowd import crowd_entry_from

    query = launch_links("https://x.test/s/a/start")["prolific"].split("?", 1)[1]
    filled = query.replace("{{%PROLIFIC_PID%}}", "P1").replace("{{%STUDY_ID%}}", "S1").replace("{{%SESSION_ID%}}", "E1")
    entry = crowd_entry_from(QueryDict(filled))
    assert entry.external_id == "P1" and entry.params == {"STUDY_ID": "S1", "SESSION_ID": "E1"}


def test_the_mturk_question_is_well_formed_xml_with_the_url_escaped():
    url = "https://lab.example/s/a/start?x=1&y=<2>"
    question = launch_links(url)["mturk"]
    root = ET.fromstring(question)
    namespace = "{http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2006-07-14/ExternalQuestion.xsd}"
    assert root.tag == namespace + "ExternalQuestion"
    assert root.find(namespace + "ExternalURL").text == url
    assert "&amp;y=&lt;2&gt;" in question


def test_publishing_an_empty_study_is_refused_with_the_reason(owner, client):
    empty = make_study(slug="cfg-empty", state=Study.State.DRAFT)
    empty.owners.add(owner)
    client.force_login(owner)
    page = client.post(f"/research/{empty.slug}/launch/", follow=True)
    assert b"has no items" in page.content and Study.objects.get(pk=empty.pk).state == Study.State.DRAFT


def test_the_dashboards_publish_goes_to_the_links(draft, owner, client):
    client.force_login(owner)
    response = client.post(f"/research/{draft.slug}/publish/")
    assert response.url == f"/research/{draft.slug}/launch/"


# ------------------------------------------------------------------ export page


def test_the_export_page_warns_before_download_when_the_imagenhub_tsvs_are_sparse(draft, owner, client):
    client.force_login(owner)
    assert draft.assignment_mode == "balanced" and sparse_layouts(draft)
    page = client.get(f"/research/{draft.slug}/export/", follow=True).content.decode()
    assert 'data-testid="sparse-warning"' in page and f"/research/{draft.slug}/export.zip" in page
    Study.objects.filter(pk=draft.pk).update(assignment_mode="whole_set")
    assert 'data-testid="sparse-warning"' not in client.get(f"/research/{draft.slug}/export/", follow=True).content.decode()


def test_a_pairwise_study_has_no_tsv_warning():
    assert sparse_layouts(make_study(protocol="pairwise", task_type="pairwise")) == []


# ------------------------------------------------------------------ API


def _api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_the_api_reads_and_patches_the_configuration(draft, owner):
    api = _api(owner)
    body = api.get(f"/api/studies/{draft.slug}/").json()
    assert body["configuration"]["completion_code"] == "" and "instructions" in body["editable"]
    response = api.patch(f"/api/studies/{draft.slug}/", {
        "completion_code": "API1", "pay_per_hour": "10.00", "seconds_per_unit_estimate": 36,
        "qualification_required": True, "collaborators": []}, format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["configuration"]["completion_code"] == "API1"
    assert body["cost"]["total"] == "1.20"  # 12 ratings × 36 s = 0.12 h × 10
    assert QualityPolicy.objects.get(study=draft).qualification_required


def test_the_api_refuses_a_locked_field_of_an_open_study_with_409_and_stores_nothing(draft, owner):
    Study.objects.filter(pk=draft.pk).update(state=Study.State.OPEN)
    response = _api(owner).patch(f"/api/studies/{draft.slug}/",
                                 {"completion_code": "Z9", "assignment_mode": "whole_set"}, format="json")
    assert response.status_code == 409
    assert "draft" in response.json()["errors"]["assignment_mode"]
    assert Study.objects.get(pk=draft.pk).completion_code == ""


@pytest.mark.parametrize("body", [
    {"raters_per_item": 0}, {"raters_per_item": [3]}, {"completion_code": {"a": 1}}, {"completion_url": "ftp://x"},
    {"gold_share": "nan"}, {"pay_per_hour": "1e999"}, {"qualification_required": "yes"}, {"nope": 1},
    {"collaborators": "someone"}, {"completion_code": "a\x00b"}, {"consent_text": "x" * 30_000}, [1, 2],
])
def test_the_api_refuses_bad_values_with_400_and_stores_nothing(draft, owner, body):
    before = study_configuration(draft)
    response = _api(owner).patch(f"/api/studies/{draft.slug}/", body, format="json")
    assert response.status_code == 400, (body, response.status_code)
    assert {"errors", "detail"} & set(response.json())  # the JSON parser refuses NUL itself ("detail")
    assert study_configuration(Study.objects.get(pk=draft.pk)) == before


def test_a_rater_account_cannot_use_the_configuration_api(draft):
    rater = make_user("rater-api")
    assert _api(rater).patch(f"/api/studies/{draft.slug}/", {"completion_code": "R"}, format="json").status_code == 403


def test_two_examples_with_the_same_bytes_share_one_stored_image(draft):
    first = worked_example_add(study=draft, upload=_upload(png_bytes(color=(9, 9, 9))), caption="a")
    second = worked_example_add(study=draft, upload=_upload(png_bytes(color=(9, 9, 9)), name="b.png"), caption="b")
    assert first.image_id == second.image_id  # stored once per hash, like every image


# ------------------------------------------------------------------ attention checks


def test_attention_checks_are_set_aside_items_with_the_middle_answer_spaced_through_the_queue(draft, owner, client):
    from raters.models import AttentionCheck

    client.force_login(owner)
    client.post(f"/research/{draft.slug}/configure/attention/", {"count": "2", "spacing": "5"})
    checks = list(AttentionCheck.objects.filter(study=draft).order_by("after_items"))
    assert [c.after_items for c in checks] == [5, 10]
    assert all(c.expected_values == {"SC": 0.5} and "0.5" in c.instruction for c in checks)
    assert len({c.item_id for c in checks}) == 2
    assert b"Attention check: please choose 0.5" in client.get(f"/research/{draft.slug}/configure/").content
    client.post(f"/research/{draft.slug}/configure/attention/", {"count": "0", "spacing": "5"})
    assert not AttentionCheck.objects.filter(study=draft).exists()


def test_attention_checks_are_refused_with_a_reason_when_they_cannot_be_set(draft, owner, client):
    from raters.models import AttentionCheck
    from tasks.configure_services import attention_checks_set

    with pytest.raises(ConfigurationRefused) as refused:
        attention_checks_set(study=draft, count=5, spacing=3)  # 4 items only
    assert "Only 4 items" in refused.value.errors["count"]
    client.force_login(owner)
    page = client.post(f"/research/{draft.slug}/configure/attention/", {"count": "9" * 30, "spacing": "x"}, follow=True)
    assert b"Attention checks not changed" in page.content
    Study.objects.filter(pk=draft.pk).update(state=Study.State.OPEN)
    with pytest.raises(ConfigurationRefused):
        attention_checks_set(study=draft, count=1, spacing=3)
    pairs = make_study(protocol="pairwise", task_type="pairwise", state=Study.State.DRAFT)
    with pytest.raises(ConfigurationRefused):
        attention_checks_set(study=pairs, count=1, spacing=3)
    assert not AttentionCheck.objects.exists()


def test_the_api_alone_runs_configure_publish_close_and_the_prolific_decisions(draft, owner, client):
    from tests.factories import crowd_enter

    api = _api(owner)
    assert api.patch(f"/api/studies/{draft.slug}/", {"completion_code": "APIDONE", "closed_code": "APICLOSED",
                                                     "units_per_session": 2}, format="json").status_code == 200
    body = api.get(f"/api/studies/{draft.slug}/").json()
    assert "PROLIFIC_PID={{%PROLIFIC_PID%}}" in body["links"]["prolific"]
    assert api.post(f"/api/studies/{draft.slug}/publish/").json()["state"] == "open"
    url = crowd_enter(client, Study.objects.get(pk=draft.pk), pid="PAPI")
    fields = sorted(set(re.findall(r'name="(u\d+-[\w-]+)"', client.get(url).content.decode())))
    client.post(url, {name: "1" for name in fields})
    assert api.post(f"/api/studies/{draft.slug}/close/").json()["state"] == "closed"
    assert b"APIDONE" in client.get(f"/s/{draft.slug}/rate").content  # the in-flight rater's code
    rows = api.get(f"/api/studies/{draft.slug}/prolific-decisions/").json()
    assert [(r["participant_id"], r["session_id"]) for r in rows] == [("PAPI", "")]
    assert _api(_researcher("nosy")).get(f"/api/studies/{draft.slug}/prolific-decisions/").status_code == 404
