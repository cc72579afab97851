import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from raters.models import Rater
from tasks.demo import build_demo
from tasks.models import Comparison, ConditionImage, Item, StoredImage, Study

pytestmark = pytest.mark.django_db

FAST = ["demo-mask-guided-editing", "demo-pairwise", "demo-evalmi"]


def test_demo_build_creates_rateable_studies_with_images_and_ground_truth():
    summary = build_demo(only=FAST)
    assert sorted(summary.created_studies) == sorted(FAST)
    edit = Study.objects.get(slug="demo-mask-guided-editing")
    assert edit.is_open and edit.protocol == "imagenhub"
    assert set(ConditionImage.objects.filter(instance__study=edit).values_list("role", flat=True)) == {"source", "mask"}
    items = Item.objects.filter(study=edit)
    assert items.count() == 6 * 5
    assert all(item.image_id for item in items)
    truths = [item.ground_truth["sc"] for item in items]
    assert min(truths) < 1 and max(truths) == 1  # some models fail, some succeed
    evalmi = Study.objects.get(slug="demo-evalmi")
    assert all(instance.question for instance in evalmi.instances.all())
    # every pair of the 5 models of each instance becomes one comparison
    assert Comparison.objects.filter(study__slug="demo-pairwise").count() == 3 * 10
    # completion codes are whole (a cut code such as DEMO-MASK-GUIDE is refused by Prolific)
    assert edit.completion_code == "DEMO-MASK-GUIDED-EDITING"


def test_demo_build_is_idempotent():
    build_demo(only=FAST)
    counts = (Study.objects.count(), Item.objects.count(), StoredImage.objects.count(), Rater.objects.count())
    summary = build_demo(only=FAST)
    assert summary.created_studies == [] and sorted(summary.existing_studies) == sorted(FAST)
    assert (Study.objects.count(), Item.objects.count(), StoredImage.objects.count(), Rater.objects.count()) == counts


def test_demo_users_keep_their_passwords_on_a_second_run():
    build_demo(only=[])
    admin = get_user_model().objects.get(username="admin")
    admin.set_password("changed-by-owner")
    admin.save()
    build_demo(only=[])
    admin.refresh_from_db()
    assert admin.check_password("changed-by-owner") and admin.is_superuser


def test_build_demo_command_prints_the_logins(capsys):
    call_command("build_demo", "--only", "demo-pairwise")
    out = capsys.readouterr().out
    assert "Created 1 studies" in out
    assert "login admin" in out and "login rater" in out
