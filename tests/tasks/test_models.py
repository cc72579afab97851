import pytest
from django.core.exceptions import ValidationError

from tasks.images import ImageRejected, store_image
from tasks.models import GoldAnswer, Rating, StoredImage, Study
from tests.factories import make_comparison, make_instance, make_item, make_rater, make_study, png_bytes

pytestmark = pytest.mark.django_db


def test_a_content_hash_dedupes_an_image_uploaded_twice():
    data = png_bytes(color=(1, 2, 3))
    first = store_image(data)
    second = store_image(data)
    assert first.pk == second.pk
    assert StoredImage.objects.count() == 1
    assert (first.width, first.height, first.format) == (32, 32, "PNG")


def test_store_image_rejects_bytes_that_are_not_an_image():
    with pytest.raises(ImageRejected, match="upload.png: not a readable image"):
        store_image(b"definitely not a png", name="upload.png")
    assert StoredImage.objects.count() == 0


def test_store_image_rejects_a_truncated_image():
    data = png_bytes(size=(256, 256))
    with pytest.raises(ImageRejected, match="not a readable image"):
        store_image(data[: len(data) // 2], name="cut.png")
    assert StoredImage.objects.count() == 0


def test_study_settings_are_validated_per_protocol():
    study = Study(slug="s", title="S", protocol="evalmi", task_type="counting", settings={"likert_max": 0})
    with pytest.raises(ValidationError, match="Likert range"):
        study.full_clean()
    study.settings = {"likert_min": 1, "likert_max": 7}
    study.full_clean()
    assert study.settings["qa"] is True  # defaults filled in


def test_imagenhub_studies_need_one_of_the_seven_tasks():
    study = Study(slug="s", title="S", protocol="imagenhub", task_type="video")
    with pytest.raises(ValidationError, match="ImagenHub studies need one of"):
        study.full_clean()


def test_a_rating_is_validated_against_its_studys_protocol():
    item = make_item(make_study(protocol="imagenhub"))
    rating = Rating(study=item.study, rater=make_rater(), item=item, values={"SC": 0.3, "PQ": 1})
    with pytest.raises(ValidationError, match="must be one of 0 / 0.5 / 1"):
        rating.full_clean()


def test_an_evalmi_rating_needs_answers_for_the_instances_sub_questions():
    study = make_study(protocol="evalmi", task_type="counting")
    instance = make_instance(study, question="Are there two circles?", sub_questions=["Are they red?"])
    item = make_item(study, instance=instance)
    rating = Rating(study=study, rater=make_rater(), item=item, values={"perception": 4, "correspondence": 2}, answers={"q1": "yes"})
    with pytest.raises(ValidationError, match="question q2 needs a yes/no answer"):
        rating.full_clean()
    rating.answers = {"q1": "yes", "q2": "no"}
    rating.full_clean()


def test_a_pairwise_rating_must_name_a_comparison():
    study = make_study(protocol="pairwise")
    comparison = make_comparison(study)
    rating = Rating(study=study, rater=make_rater(), item=comparison.item_a, values={"preference": "A"})
    with pytest.raises(ValidationError, match="Pairwise ratings belong to a comparison"):
        rating.full_clean()


def test_gold_answer_matches_within_tolerance_and_answers_exactly():
    gold = GoldAnswer(item=make_item(), values={"SC": 1, "PQ": 0.5}, answers={"q1": "yes"}, tolerance=0.5)
    assert gold.matches({"SC": 0.5, "PQ": 1}, {"q1": "yes"})
    assert not gold.matches({"SC": 0, "PQ": 0.5}, {"q1": "yes"})
    assert not gold.matches({"SC": 1, "PQ": 0.5}, {"q1": "no"})
