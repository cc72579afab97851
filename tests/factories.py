"""Plain test factories: ``make_x(**overrides)`` returns a saved object with sensible defaults."""

from __future__ import annotations

import io
import itertools

from django.contrib.auth import get_user_model
from PIL import Image

from raters.models import Rater
from tasks.images import store_image
from tasks.models import Comparison, GenModel, Instance, Item, Study

_counter = itertools.count(1)


def png_bytes(color=(200, 30, 30), size=(32, 32)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="PNG")
    return buffer.getvalue()


def make_user(username: str | None = None, *, password: str = "pw-for-tests", **fields):
    username = username or f"user{next(_counter)}"
    user = get_user_model().objects.create_user(username=username, password=password, **fields)
    return user


def make_rater(*, user=None, platform: str = Rater.Platform.LOCAL, external_id: str = "", **fields) -> Rater:
    if user is None and platform == Rater.Platform.LOCAL:
        user = make_user()
    return Rater.objects.create(user=user, platform=platform, external_id=external_id, **fields)


def make_study(**fields) -> Study:
    n = next(_counter)
    defaults = {
        "slug": f"study-{n}",
        "title": f"Study {n}",
        "protocol": "imagenhub",
        "task_type": "text_to_image",
        "state": Study.State.OPEN,
    }
    defaults.update(fields)
    study = Study(**defaults)
    study.full_clean()
    study.save()
    return study


def make_instance(study: Study, **fields) -> Instance:
    n = next(_counter)
    defaults = {"key": f"sample_{n}", "prompt": "two red circles left of a blue square", "position": n}
    defaults.update(fields)
    return Instance.objects.create(study=study, **defaults)


def make_item(study: Study | None = None, *, instance: Instance | None = None, model: str = "ModelA", with_image: bool = True, **fields) -> Item:
    study = study or (instance.study if instance else make_study())
    instance = instance or make_instance(study)
    gen_model, _ = GenModel.objects.get_or_create(study=study, name=model)
    image = store_image(png_bytes(color=(next(_counter) % 255, 40, 90))) if with_image else None
    return Item.objects.create(study=study, instance=instance, gen_model=gen_model, image=image, **fields)


def make_comparison(study: Study, **fields) -> Comparison:
    instance = make_instance(study)
    a = make_item(study, instance=instance, model="ModelA")
    b = make_item(study, instance=instance, model="ModelB")
    return Comparison.objects.create(study=study, item_a=a, item_b=b, **fields)


def make_gold(item: Item, *, values: dict | None = None, answers: dict | None = None, tolerance: float = 0.0):
    from tasks.models import GoldAnswer

    return GoldAnswer.objects.create(item=item, values=values or {"SC": 1.0, "PQ": 1.0}, answers=answers or {}, tolerance=tolerance)


def make_attention_check(item: Item, *, instruction: str = "Please choose 0.5 for SC on this image",
                         expected: dict | None = None, after_items: int = 0):
    from raters.models import AttentionCheck

    return AttentionCheck.objects.create(
        study=item.study, item=item, instruction=instruction, expected_values=expected or {"SC": 0.5},
        after_items=after_items,
    )


def crowd_enter(client, study: Study, pid: str = "P1") -> str:
    """A Prolific worker who entered ``study``, consented and read the instructions (Django test
    client); returns the URL of their first screen."""
    client.get(f"/s/{study.slug}/start?PROLIFIC_PID={pid}")
    client.post(f"/s/{study.slug}/consent", {"agree": "yes"})
    client.post(f"/s/{study.slug}/instructions")
    response = client.get(f"/s/{study.slug}/rate")
    assert response.status_code == 302, response.status_code
    return response.url
