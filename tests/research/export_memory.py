"""Peak memory of the dataset export on a synthetic 200K-rating EvalMi study (not a test: a measurement).

    .venv/bin/python -m tests.research.export_memory [--items 12600]

Builds the study in a scratch PostgreSQL database (bench.common; dropped afterwards) from the
first ``--items`` images of the EvalMi-50K MOS × 16 synthetic raters (bench.evalmi_scale), then
consumes the export zip twice under tracemalloc (Python allocations, numpy and pandas included):
once up to the first chunk (what a client waits for) and once to the end. The zip is discarded
chunk by chunk, as a streaming response does. Also reports build_report alone for comparison.
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc


def _measure(make_chunks, *, first_only: bool) -> tuple[float, float, int]:
    """(peak MiB, seconds, bytes) consuming the iterator from ``make_chunks()``."""
    tracemalloc.start()
    started = time.perf_counter()
    size = 0
    for chunk in make_chunks():
        size += len(chunk)
        if first_only and size:
            break
    seconds = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20, seconds, size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=12_600, help="EvalMi images to use (× 16 raters)")
    args = parser.parse_args()
    from bench.common import django_setup, scratch_database
    from bench import evalmi_scale

    with scratch_database() as url:
        django_setup(url)
        mos = evalmi_scale.read_mos().iloc[: args.items].reset_index(drop=True)
        long, _ = evalmi_scale.synthesize(mos)
        study, item_ids = evalmi_scale.build_study(mos)
        evalmi_scale.load_ratings(study, evalmi_scale.rating_rows(long, item_ids))
        from django.db import connections

        from analysis.export_input import study_export_input
        from analysis.science.exports import iter_export_zip
        from analysis.report import build_report

        print(f"study {study.slug}: {study.ratings.count():,} ratings, {study.items.count():,} items")
        peak, seconds, size = _measure(lambda: iter_export_zip(study_export_input(study)), first_only=True)
        print(f"export, up to the first chunk: peak {peak:.1f} MiB, {seconds:.1f} s ({size:,} bytes)")
        peak, seconds, size = _measure(lambda: iter_export_zip(study_export_input(study)), first_only=False)
        print(f"export, whole zip:             peak {peak:.1f} MiB, {seconds:.1f} s ({size / 2**20:.1f} MiB zip)")

        def without_report():
            data = study_export_input(study)
            data.report = None
            return iter_export_zip(data)

        peak, seconds, size = _measure(without_report, first_only=False)
        print(f"export without report.json:    peak {peak:.1f} MiB, {seconds:.1f} s")
        started = time.perf_counter()
        size = sum(len(chunk) for chunk in iter_export_zip(study_export_input(study)))
        print(f"export, whole zip, untraced:   {time.perf_counter() - started:.1f} s")
        peak, seconds, _ = _measure(lambda: [b"x" if build_report(study) else b""], first_only=False)
        print(f"build_report alone:            peak {peak:.1f} MiB, {seconds:.1f} s")
        connections.close_all()
    print("(tracemalloc slows Python down ~2x; times are for comparison only)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
