"""A dataset release at EvalMi scale: 806,400 votes, 50,400 items each with its image referenced.

    .venv/bin/python -m bench.release_scale [--tracemalloc] [--keep-db NAME]

Loads the synthetic EvalMi ratings (bench.evalmi_scale) into a scratch PostgreSQL database, gives
every item a stored image (24 small PNGs, one per model, referenced by the items: the release reads
each item's bytes from storage as it writes ``items.parquet``), then builds the release in a fresh
process (so its peak memory is the release's alone, not the import's; read from VmHWM): the ReleaseInput (numbers,
report), ``write_release`` (items and votes streamed in row groups) and the zip. Prints the time of
each phase, the peak resident memory of that process (``VmHWM``), the Arrow memory pool's peak,
and, with ``--tracemalloc``, the Python heap's peak (slower). For scale: the Arrow size of the votes
table read back whole, i.e. what holding the study's votes in memory would take.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, Timer, django_setup, scratch_database


def _attach_images(study) -> int:
    """One small PNG per model, referenced by every item of that model (one UPDATE per model)."""
    from io import BytesIO

    from PIL import Image

    from tasks.images import store_image
    from tasks.models import GenModel, Item

    for n, model in enumerate(GenModel.objects.filter(study=study).order_by("id")):
        buffer = BytesIO()
        Image.new("RGB", (64, 64), ((37 * n) % 256, 90, 160)).save(buffer, "PNG")
        image = store_image(buffer.getvalue())
        Item.objects.filter(study=study, gen_model=model).update(image=image)
    return Item.objects.filter(study=study, image__isnull=False).count()


def _peak_rss_kib() -> int:
    """This process's peak resident memory (VmHWM): ``ru_maxrss`` would not do, Linux carries it
    over ``exec`` from the parent that forked the child (the import's peak)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _release_phase(slug: str, use_tracemalloc: bool) -> dict:
    """Runs in the child process: build the release and measure it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if use_tracemalloc:
        import tracemalloc

        tracemalloc.start()
    from analysis.science.release import write_release, zip_folder
    from analysis.release_input import study_release_input
    from tasks.models import Study

    study = Study.objects.get(slug=slug)
    baseline = _peak_rss_kib()
    out: dict = {"rss_before_kib": baseline}
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "release"
        with Timer() as prepare:
            data = study_release_input(study)
        out["rss_peak_prepare_kib"] = _peak_rss_kib()
        out["rss_after_prepare_kib"] = _rss_kib()
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM: the write phase's own peak next
        profiler = None
        if os.environ.get("RELEASE_BENCH_PROFILE"):
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
        with Timer() as write:
            manifest = write_release(data, folder)
        if profiler is not None:
            import io
            import pstats

            profiler.disable()
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(35)
            print(text.getvalue(), file=sys.stderr)
        with Timer() as pack:
            zip_folder(folder, Path(scratch) / "release.zip")
        out.update({
            "prepare_s": prepare.seconds, "write_s": write.seconds, "zip_s": pack.seconds,
            "counts": manifest["counts"],
            "rss_peak_write_kib": _peak_rss_kib(),
            "load_average": os.getloadavg(),
            "arrow_pool_peak_bytes": pa.default_memory_pool().max_memory(),
            "files_bytes": {p.relative_to(folder).as_posix(): p.stat().st_size
                            for p in folder.rglob("*") if p.is_file() and p.suffix == ".parquet"},
            "zip_bytes": (Path(scratch) / "release.zip").stat().st_size,
        })
        if use_tracemalloc:
            import tracemalloc

            out["python_heap_peak_bytes"] = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        votes = pq.ParquetFile(folder / "data/votes.parquet")
        out["votes_row_groups"] = votes.num_row_groups
        out["items_row_groups"] = pq.ParquetFile(folder / "data/items.parquet").num_row_groups
        del data
        out["votes_arrow_bytes_if_held"] = pq.read_table(folder / "data/votes.parquet").nbytes
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tracemalloc", action="store_true", help="also trace the Python heap's peak (slower)")
    parser.add_argument("--profile", action="store_true", help="print a CPU profile of the write phase")
    parser.add_argument("--child", metavar="DATABASE_URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        django_setup(args.child, migrate=False, MEDIA_ROOT=os.environ["RELEASE_BENCH_MEDIA"])
        from bench import evalmi_scale

        print("RESULT " + json.dumps(_release_phase(evalmi_scale.SLUG, args.tracemalloc)))
        return 0
    with scratch_database() as url:
        django_setup(url)
        from django.conf import settings

        from bench import evalmi_scale
        from bench.import_speed import load

        study, rows, import_s, _ = load()
        print(f"imported {len(rows):,} ratings in {import_s:.1f} s")
        with Timer() as attach:
            n = _attach_images(study)
        print(f"{n:,} items reference an image ({attach.seconds:.1f} s)")
        del rows
        started = time.perf_counter()
        command = [sys.executable, "-m", "bench.release_scale", "--child", url,
                   *(["--tracemalloc"] if args.tracemalloc else [])]
        child = subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                               env={**os.environ, "RELEASE_BENCH_MEDIA": str(settings.MEDIA_ROOT),
                                    **({"RELEASE_BENCH_PROFILE": "1"} if args.profile else {})})
        if child.returncode:
            print(child.stdout[-4000:], child.stderr[-4000:])
            return 1
        if args.profile:
            print(child.stderr[-12000:])
        result = json.loads(next(line for line in child.stdout.splitlines() if line.startswith("RESULT "))[7:])
        total = time.perf_counter() - started
        mib = lambda n: n / (1 << 20)  # noqa: E731
        print(f"release of {result['counts']['votes']:,} votes, {result['counts']['items']:,} items with images, "
              f"{result['counts']['raters']} raters (child process, {total:.1f} s with start-up)")
        print(f"  prepare (numbers, report, raters) {result['prepare_s']:.1f} s; write {result['write_s']:.1f} s; "
              f"zip {result['zip_s']:.1f} s")
        print(f"  peak RSS: after Django start-up {mib(result['rss_before_kib'] * 1024):.0f} MiB; while preparing "
              f"(numbers, report) {mib(result['rss_peak_prepare_kib'] * 1024):.0f} MiB, "
              f"{mib(result['rss_after_prepare_kib'] * 1024):.0f} MiB held after it; while writing items and votes "
              f"{mib(result['rss_peak_write_kib'] * 1024):.0f} MiB; Arrow pool peak "
              f"{mib(result['arrow_pool_peak_bytes']):.1f} MiB"
              + (f"; Python heap peak {mib(result['python_heap_peak_bytes']):.0f} MiB"
                 if "python_heap_peak_bytes" in result else ""))
        print(f"  votes.parquet {mib(result['files_bytes']['data/votes.parquet']):.1f} MiB in "
              f"{result['votes_row_groups']} row groups; items.parquet "
              f"{mib(result['files_bytes']['data/items.parquet']):.1f} MiB in {result['items_row_groups']} row groups; "
              f"zip {mib(result['zip_bytes']):.1f} MiB")
        print(f"  the votes table held whole in Arrow would take {mib(result['votes_arrow_bytes_if_held']):.0f} MiB; "
              f"load average at the end {', '.join(f'{x:.1f}' for x in result['load_average'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
