"""Analysis at EvalMi scale: the full report on 806,400 rating rows (1.61M scores).

    .venv/bin/python -m bench.analysis_scale [--n-boot 1000] [--profile] [--repeat 3] [--keep-db bench_keep]

``--keep-db NAME`` loads the ratings into database NAME once and keeps it: later runs with the
same NAME skip the import (handy when iterating on the analysis; drop it with
``DROP DATABASE NAME``). Without it a scratch database is created and dropped.

Loads the synthetic ratings (bench.evalmi_scale; the import is timed too, see bench.import_speed),
then times reading them from PostgreSQL (analysis.data.ratings_frame, the data layer every
analysis goes through) and the whole study report (analysis.report.build_report: z-MOS with CIs,
agreement, human ceiling, screening). Targets: report ≤ 2× the read and under 20 s. Also checks
that the bad raters are the ones ITU-R screening rejects.
"""

from __future__ import annotations

import argparse
import contextlib
import sys

from bench import evalmi_scale
from bench.common import NOISE_NOTE, PG, Timer, _admin_connection, django_setup, scratch_database, verdict
from bench.import_speed import load


@contextlib.contextmanager
def kept_database(name: str):
    """Database NAME, created if missing and never dropped."""
    with _admin_connection() as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    yield f"{PG}/{name}"


def _load_or_reuse():
    """(study, number of rating rows, import seconds or None when reused, bad raters)."""
    from tasks.models import Rating, Study

    study = Study.objects.filter(slug=evalmi_scale.SLUG).first()
    if study is not None and Rating.objects.filter(study=study).exists():
        _, bad = evalmi_scale.synthesize(evalmi_scale.read_mos())
        print("reusing the ratings already in the kept database (no import)")
        return study, Rating.objects.filter(study=study).count(), None, bad
    study, rows, import_s, bad = load()
    return study, len(rows), import_s, bad


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--profile", action="store_true", help="cProfile build_report: top 30 by cumulative and top 25 by own time")
    parser.add_argument("--repeat", type=int, default=1,
                        help="time read and report this many times (alternating) and compare the best of each")
    parser.add_argument("--keep-db", metavar="NAME", help="load into database NAME once and reuse it later")
    args = parser.parse_args()
    with (kept_database(args.keep_db) if args.keep_db else scratch_database()) as url:
        django_setup(url)
        study, n_rows, import_s, bad = _load_or_reuse()
        from django.db import connection, connections

        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE tasks_rating") if connection.in_atomic_block is False else None
        from analysis import data
        from analysis.report import build_report

        reads, fulls = [], []
        for _ in range(args.repeat):  # read and report alternate, so both see the same load
            with Timer() as read:
                frame = data.ratings_frame(study)
            assert len(frame) == n_rows
            del frame
            if args.profile:
                import cProfile
                import pstats

                profiler = cProfile.Profile()
                profiler.enable()
            with Timer() as full:
                report = build_report(study, n_boot=args.n_boot)
            if args.profile:
                profiler.disable()
                pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
                pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
            reads.append(read.seconds)
            fulls.append(full.seconds)
        connections.close_all()
    if args.repeat > 1:
        print("reads  " + " ".join(f"{s:.2f}" for s in reads) + " s\nreports " + " ".join(f"{s:.2f}" for s in fulls)
              + " s (best of each below)")
    read.seconds, full.seconds = min(reads), min(fulls)
    ratio = full.seconds / read.seconds
    if import_s is not None:
        print(f"import {n_rows:,} rows: {import_s:.2f} s ({n_rows / import_s:,.0f} rows/s)")
    print(f"read ratings (analysis.data.ratings_frame): {read.seconds:.2f} s")
    print(f"build_report (n_boot={args.n_boot}): {full.seconds:.2f} s = {ratio:.2f}× the read "
          f"(target ≤ 2×: {verdict(ratio <= 2)}; < 20 s: {verdict(full.seconds < 20)})")
    screening = report["study_level"].get("screening", {})
    for dim in ("perception", "correspondence"):
        rejected = sorted(screening.get(dim, {}).get("rejected", []))
        print(f"screening {dim}: rejected {len(rejected)} raters; bad raters (by construction) {len(bad)}")
    for dim, block in ((report.get("subject_model") or {}).get("dimensions") or {}).items():
        flagged = [r for r, v in block["raters"].items() if v["inconsistent"]]
        print(f"subject model {dim}: {block['iterations']} iterations, {block['components']} connected groups, "
              f"{len(flagged)} raters flagged inconsistent (random raters by construction: {len(bad) // 2})")
    alpha = report["study_level"]["dimensions"]["perception"]["alpha"]
    print(f"study alpha (perception): {alpha}")
    print(NOISE_NOTE)
    return 0 if ratio <= 2 and full.seconds < 20 else 1


if __name__ == "__main__":
    sys.exit(main())
