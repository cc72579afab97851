"""Page weight of the rating screens and the image-derivative cache.

    .venv/bin/python -m bench.page_weight

Builds the demo studies (every layout: the seven ImagenHub tasks, an EvalMi trial, pairwise) in
a scratch database with DEBUG off, enters each as a Prolific rater and fetches its first rating
screen through the full middleware stack. Weight = HTML + every stylesheet and script it links
(served by WhiteNoise), images excluded. Target: < 100 KB per screen.

Then requests every image derivative on the screen twice, counting Pillow decodes and encodes
(``PIL.Image.open`` / ``Image.save``): the second request must do no Pillow work and send the
same bytes; a conditional request with the ETag must get 304.
"""

from __future__ import annotations

import re
import sys
from contextlib import contextmanager
from urllib.parse import urlsplit

from bench.common import NOISE_NOTE, django_setup, scratch_database, verdict

LIMIT = 100 * 1024
_ASSET = re.compile(r'<(?:link[^>]+href|script[^>]+src)="(/static/[^"]+)"')
_IMAGE = re.compile(r'(?:src|srcset)="([^"]+)"')


@contextmanager
def pillow_counter():
    """Count PIL.Image.open and Image.save calls made while the block runs."""
    from PIL import Image

    counts = {"open": 0, "save": 0}
    original_open, original_save = Image.open, Image.Image.save

    def counting_open(*args, **kwargs):
        counts["open"] += 1
        return original_open(*args, **kwargs)

    def counting_save(self, *args, **kwargs):
        counts["save"] += 1
        return original_save(self, *args, **kwargs)

    Image.open, Image.Image.save = counting_open, counting_save
    try:
        yield counts
    finally:
        Image.open, Image.Image.save = original_open, original_save


def body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def image_urls(html: str) -> list[str]:
    urls = []
    for value in _IMAGE.findall(html):
        for part in value.split(","):
            url = part.strip().split(" ")[0]
            if url.startswith("/img/"):
                urls.append(url)
    return list(dict.fromkeys(urls))


def main() -> int:
    with scratch_database() as url:
        django_setup(url, static=True, ALLOWED_HOSTS="testserver,127.0.0.1")
        from django.db import connections
        from django.test import Client

        from tasks.demo import build_demo
        from tasks.models import Study

        build_demo()
        studies = list(Study.objects.filter(state=Study.State.OPEN).order_by("slug"))
        rows, ok, assets = [], True, {}
        derivative_checks = []
        for number, study in enumerate(studies):
            client = Client()
            client.get(f"/s/{study.slug}/start?PROLIFIC_PID=weight{number}&STUDY_ID=b&SESSION_ID=s{number}")
            client.post(f"/s/{study.slug}/consent", {"agree": "yes"})
            client.post(f"/s/{study.slug}/instructions", {})
            response = client.get(f"/s/{study.slug}/rate", follow=True)
            if response.status_code != 200 or "/rate/" not in response.request["PATH_INFO"]:
                print(f"{study.slug}: no rating screen ({response.status_code} {response.request['PATH_INFO']})")
                ok = False
                continue
            html = response.content.decode()
            asset_bytes = 0
            for asset in dict.fromkeys(_ASSET.findall(html)):
                if asset not in assets:
                    fetched = Client().get(urlsplit(asset).path)
                    assets[asset] = len(body(fetched)) if fetched.status_code == 200 else -1
                asset_bytes += max(assets[asset], 0)
                ok &= assets[asset] >= 0
            total = len(response.content) + asset_bytes
            ok &= total < LIMIT
            images = image_urls(html)
            rows.append((study.slug, len(response.content), asset_bytes, total, len(images)))
            for image in images:
                with pillow_counter() as first:
                    one = client.get(image)
                    first_bytes = body(one)
                with pillow_counter() as second:
                    two = client.get(image)
                    second_bytes = body(two)
                not_modified = client.get(image, HTTP_IF_NONE_MATCH=two["ETag"]).status_code
                derivative_checks.append((image, first["open"] + first["save"], second["open"] + second["save"],
                                          first_bytes == second_bytes and one.status_code == 200, not_modified))
        connections.close_all()
    print(f"{'screen':<36} {'HTML':>8} {'CSS+JS':>8} {'total':>8} images  (< {LIMIT // 1024} KB without images)")
    for slug, html_bytes, asset_bytes, total, images in rows:
        print(f"{slug:<36} {html_bytes / 1024:>6.1f}KB {asset_bytes / 1024:>6.1f}KB {total / 1024:>6.1f}KB "
              f"{images:>6}  {verdict(total < LIMIT)}")
    heaviest = max(r[3] for r in rows) if rows else 0
    resized = [c for c in derivative_checks if "/full" not in c[0]]
    cold = sum(1 for c in resized if c[1] > 0)
    warm_pillow = sum(c[2] for c in derivative_checks)
    same = all(c[3] for c in derivative_checks)
    revalidated = all(c[4] == 304 for c in derivative_checks)
    print(f"heaviest screen {heaviest / 1024:.1f} KB: {verdict(heaviest < LIMIT and bool(rows))}")
    print(f"image URLs on the screens: {len(derivative_checks)} ({len(resized)} resized derivatives, {cold} rendered "
          f"by Pillow on first request); Pillow calls on the second request: {warm_pillow} "
          f"({verdict(warm_pillow == 0)}); same bytes: {same}; If-None-Match → 304: {revalidated}")
    print(NOISE_NOTE)
    ok &= bool(rows) and warm_pillow == 0 and same and revalidated
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
