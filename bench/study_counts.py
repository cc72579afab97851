"""The research API's study list and detail at EvalMi scale: item and rating counts per study.

    .venv/bin/python -m bench.study_counts [--repeat 7] [--keep-db bench_evalmi_keep] [--old]

Loads the synthetic EvalMi ratings (50,400 items, 806,400 ratings; bench.evalmi_scale) plus a
small second study, then times ``GET /api/studies/`` and ``GET /api/studies/<slug>/`` through
Django's test client as an admin (everything but HTTP): best and median of ``--repeat`` runs.
Target: under 100 ms each. ``--old`` also times the counting the API used before (one join of
items and ratings, COUNT DISTINCT of each) under a 20 s statement timeout, to show why it went.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from bench.analysis_scale import _load_or_reuse, kept_database
from bench.common import NOISE_NOTE, django_setup, scratch_database, verdict

TARGET_MS = 100.0
OLD_TIMEOUT_MS = 20_000


def _second_study() -> None:
    """A 200-item study with 3 ratings per item next to the big one, so the list has two rows."""
    from django.contrib.auth import get_user_model

    from bench.evalmi_scale import SLUG
    from raters.models import Rater
    from tasks.models import GenModel, Instance, Item, Rating, Study

    if Study.objects.filter(slug="bench-counts-small").exists():
        return
    big = Study.objects.get(slug=SLUG)
    small = Study.objects.create(slug="bench-counts-small", title="small", protocol=big.protocol,
                                 task_type=big.task_type, state=big.state, settings=big.settings)
    model = GenModel.objects.create(study=small, name="m")
    items = [Item.objects.create(study=small, gen_model=model,
                                 instance=Instance.objects.create(study=small, key=f"k{n}", prompt="p", position=n))
             for n in range(200)]
    raters = [Rater.objects.create(user=get_user_model().objects.create_user(f"bench-counts-{n}")) for n in range(3)]
    Rating.objects.bulk_create(Rating(study=small, item=item, rater=rater, values={"perception": 3})
                               for item in items for rater in raters)


def _time(client, url: str, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, response.status_code, response.content[:300])
    return times


def _old_counting_ms() -> str:
    from django.db import OperationalError, connection, transaction
    from django.db.models import Count

    from tasks.models import Study

    started = time.perf_counter()
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"SET LOCAL statement_timeout = {OLD_TIMEOUT_MS}")
            list(Study.objects.annotate(i=Count("items", distinct=True), r=Count("ratings", distinct=True))
                 .values_list("slug", "i", "r"))
    except OperationalError:
        return f"> {OLD_TIMEOUT_MS / 1000:.0f} s (cancelled by statement_timeout)"
    return f"{(time.perf_counter() - started) * 1000:.0f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--keep-db", metavar="NAME", help="load into database NAME once and reuse it later")
    parser.add_argument("--old", action="store_true", help="also time the former join-and-count-distinct query")
    args = parser.parse_args()
    with (kept_database(args.keep_db) if args.keep_db else scratch_database()) as url:
        django_setup(url)
        study, n_rows, _, _ = _load_or_reuse()
        _second_study()
        from django.contrib.auth import get_user_model
        from django.db import connection, connections
        from django.test import Client

        with connection.cursor() as cursor:
            cursor.execute("ANALYZE tasks_rating")
            cursor.execute("ANALYZE tasks_item")
        admin, _ = get_user_model().objects.get_or_create(username="bench-counts-admin", defaults={"is_staff": True})
        client = Client(HTTP_HOST="localhost")
        client.force_login(admin)
        body = client.get(f"/api/studies/{study.slug}/").json()
        assert body["ratings"] == n_rows, body
        print(f"study {study.slug}: {body['items']:,} items, {body['ratings']:,} ratings; plus bench-counts-small")
        ok = True
        for url in ("/api/studies/", f"/api/studies/{study.slug}/"):
            times = _time(client, url, args.repeat)
            best, median = min(times), statistics.median(times)
            ok &= median < TARGET_MS
            print(f"GET {url}: best {best:.1f} ms, median {median:.1f} ms of {args.repeat} "
                  f"(target < {TARGET_MS:.0f} ms: {verdict(median < TARGET_MS)})")
        if args.old:
            print(f"the former counting (one join, COUNT DISTINCT): {_old_counting_ms()}")
        connections.close_all()
    print(NOISE_NOTE)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
