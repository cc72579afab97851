"""Every rating records the protocol version it was cast under (tasks.provenance)."""

import pytest

from raters.models import QualityPolicy
from tasks import provenance
from tasks.models import Assignment, ProtocolVersion, Study
from tasks.services import rating_submit
from tasks.study_services import study_clone, study_publish
from tests.factories import make_attention_check, make_gold, make_item, make_rater, make_study

pytestmark = pytest.mark.django_db


def _rate(study, item, values=None):
    rater = make_rater()
    Assignment.objects.create(study=study, rater=rater, item=item)
    study.refresh_from_db()
    item.study = study  # the submit path reads the study it loaded, as a request does
    return rating_submit(rater=rater, item=item, values=values or {"SC": 1, "PQ": 0.5})


def test_a_rating_records_the_version_current_when_it_was_cast_and_an_edit_of_the_text_makes_a_new_one():
    study = make_study(instructions="Rate each image on its own.")
    item = make_item(study)
    first = _rate(study, item)
    assert first.protocol_version is not None and first.protocol_version.number == 1
    assert first.protocol_version.content["instructions"] == "Rate each image on its own."

    study.instructions = "Rate each image on its own. Ignore watermarks."
    study.save()
    second = _rate(study, make_item(study, model="ModelB"))
    assert second.protocol_version.number == 2
    assert second.protocol_version.content_hash != first.protocol_version.content_hash
    assert "Ignore watermarks" in second.protocol_version.content["instructions"]

    study.instructions = "Rate each image on its own."  # back to the first text: the first version again
    study.save()
    assert _rate(study, make_item(study, model="ModelC")).protocol_version_id == first.protocol_version_id
    assert ProtocolVersion.objects.filter(study=study).count() == 2


def test_gold_attention_and_quality_policy_changes_make_new_versions_with_their_full_text():
    study = make_study()
    item, gold_item, check_item = make_item(study), make_item(study, model="G"), make_item(study, model="A")
    hashes = [study.current_protocol_version.content_hash]
    make_gold(gold_item, values={"SC": 1, "PQ": 1})
    study.refresh_from_db()
    hashes.append(study.current_protocol_version.content_hash)
    assert study.current_protocol_version.content["gold_set"]["gold"][0]["item"] == gold_item.pk
    make_attention_check(check_item)
    study.refresh_from_db()
    hashes.append(study.current_protocol_version.content_hash)
    assert study.current_protocol_version.content["gold_set"]["attention_checks"][0]["instruction"]
    QualityPolicy.objects.create(study=study, gold_min_accuracy=0.9)
    study.refresh_from_db()
    hashes.append(study.current_protocol_version.content_hash)
    assert study.current_protocol_version.content["quality_policy"]["gold_min_accuracy"] == 0.9
    assert len(set(hashes)) == 4
    content = study.current_protocol_version.content
    assert content["screen_layout"] == provenance.screen_layout_version()
    assert "Semantic consistency" in content["worked_examples"]
    assert [d["key"] for d in content["scale"]["dimensions"]] == ["SC", "PQ"]
    assert _rate(study, item).protocol_version_id == study.current_protocol_version_id


def test_opening_a_study_hashes_what_it_opens_with_and_a_clone_gets_its_own_versions():
    study = make_study(state=Study.State.DRAFT)
    make_item(study)
    gold = make_gold(make_item(study, model="G"), values={"SC": 0, "PQ": 0})
    ProtocolVersion.objects.filter(study=study).delete()  # as if the gold came by a bulk write (no signal)
    Study.objects.filter(pk=study.pk).update(current_protocol_version=None)
    study.refresh_from_db()
    study_publish(study=study)
    study.refresh_from_db()
    assert study.current_protocol_version.content["gold_set"]["gold"][0]["item"] == gold.item_id
    clone = study_clone(study=study)
    assert clone.current_protocol_version.study_id == clone.pk
    # one version when the copy is made, one for its whole gold set (not one per gold item)
    assert ProtocolVersion.objects.filter(study=clone).count() == 2


def test_imported_ratings_record_no_version():
    study = make_study()
    item = make_item(study)
    rating = rating_submit(rater=make_rater(platform="import"), item=item, values={"SC": 1, "PQ": 1},
                           source="import", require_assignment=False)
    assert rating.protocol_version_id is None


def test_ratings_submitted_through_the_rating_screens_record_the_version(client):
    """The screens' submit (on PostgreSQL one statement for a screen's first answers) records it too."""
    from tasks.models import Rating
    from tests.tasks.test_rating_query_counts import _answer, _enter, _study

    study = _study()
    _enter(client, study, "versioned-rater")
    url = client.get(f"/s/{study.slug}/rate").url
    for _ in range(2):
        page = client.get(url)
        url = client.post(url, _answer(page.content.decode())).url
    study.refresh_from_db()
    versions = set(Rating.objects.filter(study=study).values_list("protocol_version_id", flat=True))
    assert versions == {study.current_protocol_version_id} and None not in versions
