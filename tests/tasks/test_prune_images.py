"""Images nothing uses any more (after a study was deleted) are pruned with their files and
resized copies; images in use, shared ones and fresh uploads stay."""

from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from tasks.derivatives import derivative_ensure, derivative_path
from tasks.images import images_prune, store_image
from tasks.models import ConditionImage, Item, StoredImage, Study
from analysis.study_deletion import study_delete
from tests.factories import make_instance, make_item, make_study, png_bytes

pytestmark = pytest.mark.django_db


def _age(*images, hours=48):
    StoredImage.objects.filter(pk__in=[i.pk for i in images]).update(created_at=timezone.now() - timedelta(hours=hours))


def test_images_of_a_deleted_study_go_with_their_files_and_the_others_stay():
    gone_study, kept_study = make_study(state=Study.State.CLOSED), make_study()
    only_gone = make_item(gone_study).image
    derivative_ensure(only_gone, 160)
    shared = store_image(png_bytes(color=(9, 9, 9)))
    _use(make_item(gone_study, model="Other", with_image=False), shared)
    condition = store_image(png_bytes(color=(8, 8, 8)))
    ConditionImage.objects.create(instance=make_instance(kept_study), role="control", image=condition)
    _use(make_item(kept_study, with_image=False), shared)  # the other study uses the shared image too
    fresh = store_image(png_bytes(color=(7, 7, 7)))  # just uploaded, not used yet
    _age(only_gone, shared, condition)
    files = {image.pk: Path(image.file.path) for image in (only_gone, shared, condition, fresh)}
    study_delete(study=gone_study)

    out = StringIO()
    call_command("prune_images", stdout=out)  # without --yes: counts only
    assert "Would delete 1 unused image" in out.getvalue() and StoredImage.objects.filter(pk=only_gone.pk).exists()

    assert images_prune(older_than=timedelta(hours=24))[0] == 1
    assert not StoredImage.objects.filter(pk=only_gone.pk).exists()
    assert not files[only_gone.pk].exists() and not derivative_path(only_gone, 160).exists()
    assert set(StoredImage.objects.values_list("pk", flat=True)) == {shared.pk, condition.pk, fresh.pk}
    assert all(files[pk].exists() for pk in (shared.pk, condition.pk, fresh.pk))

    out = StringIO()
    call_command("prune_images", "--older-than-hours", "0", "--yes", stdout=out)
    assert "Deleted 1 unused image" in out.getvalue()  # the fresh one, once no age protects it
    assert not StoredImage.objects.filter(pk=fresh.pk).exists() and not files[fresh.pk].exists()


def _use(item, image):
    Item.objects.filter(pk=item.pk).update(image=image)


def test_an_image_that_gains_a_use_while_pruning_is_kept(monkeypatch):
    """The rows are checked again inside each chunk's transaction: a use that arrived after the
    candidates were listed keeps the image."""
    import tasks.images as images

    study = make_study()
    orphan = store_image(png_bytes(color=(5, 5, 5)))
    _age(orphan)
    listed = images._unused_images

    calls = []

    def list_then_use(cutoff):
        calls.append(cutoff)
        if len(calls) > 1:  # the re-check inside the chunk's transaction
            return listed(cutoff)
        found = list(listed(cutoff).values_list("pk", flat=True))  # the candidates, as listed
        _use(make_item(study, with_image=False), orphan)  # then an upload reuses it by its hash
        return StoredImage.objects.filter(pk__in=found)

    monkeypatch.setattr(images, "_unused_images", list_then_use)
    assert images_prune(older_than=timedelta(hours=1)) == (0, 0)
    assert len(calls) == 2  # listed as unused, then found in use when re-checked
    assert StoredImage.objects.filter(pk=orphan.pk).exists() and Path(orphan.file.path).exists()
