"""Judge runner concurrency: 1,000 judged items against a fake MLLM with 200 ms latency.

    .venv/bin/python -m bench.judge_runner [--items 1000] [--concurrency 32] [--latency 0.2]

The fake OpenAI-compatible server (tests/judge_server.py, model ``fake-slow``) runs in its own
process so its work does not share this process's GIL. A VIEScore judge with
``params.concurrency`` threads runs through the normal path (judge_run_start → Celery job, eager).
Ideal time = calls × latency / concurrency; target: achieved rate ≥ 90% of ideal. A second run
of the same judge must be served from the cache: 0 calls.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from bench.common import NOISE_NOTE, ROOT, Timer, django_setup, scratch_database, verdict

SERVER = """
import sys, time
from tests.judge_server import FakeJudgeServer
with FakeJudgeServer(slow_seconds=float(sys.argv[1])) as server:
    print(server.base_url, flush=True)
    sys.stdin.read()  # until the parent closes the pipe
    print(server.requests, flush=True)
"""


def build_items(count: int):
    import io

    from PIL import Image

    from tasks.images import store_image
    from tasks.models import GenModel, Instance, Item, Study

    study = Study(slug="bench-judges", title="Judge bench", protocol="imagenhub", task_type="text_to_image",
                  state=Study.State.CLOSED)
    study.full_clean()
    study.save()
    models = [GenModel.objects.create(study=study, name=f"Model{i}") for i in range(4)]
    instances = Instance.objects.bulk_create(
        Instance(study=study, key=f"sample_{i:04d}", prompt=f"{i % 7 + 1} red cubes on a table", position=i)
        for i in range(count // len(models))
    )
    items = []
    for n, (instance, model) in enumerate((i, m) for i in instances for m in models):
        buffer = io.BytesIO()  # distinct bytes per item: no accidental cache hits inside a run
        Image.new("RGB", (24, 24), (n % 256, (n // 256) % 256, 90)).save(buffer, format="PNG")
        items.append(Item(study=study, instance=instance, gen_model=model, image=store_image(buffer.getvalue())))
    Item.objects.bulk_create(items)
    return study


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.2)
    args = parser.parse_args()
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(args.latency)], cwd=ROOT, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        base_url = server.stdout.readline().strip()
        with scratch_database() as url:
            django_setup(url, JUDGE_API_BASE=base_url, JUDGE_MODEL="fake-slow")  # the operator's endpoint "default"
            from django.db import connections

            from analysis.judge_services import judge_create, judge_run_start
            from analysis.models import JudgeScore

            study = build_items(args.items)
            judge = judge_create(name="VIEScore bench", kind="viescore", params={
                "endpoint": "default", "model": "fake-slow", "concurrency": args.concurrency,
                "timeout_seconds": 30, "backoff_seconds": 0.05,
            })
            with Timer() as first:
                run = judge_run_start(judge=judge, study=study)
            run.refresh_from_db()
            with Timer() as second:
                rerun = judge_run_start(judge=judge, study=study)
            rerun.refresh_from_db()
            duplicates = JudgeScore.objects.filter(run=run).count() - len(
                set(JudgeScore.objects.filter(run=run).values_list("item_id", "dimension"))
            )
            connections.close_all()
    finally:
        server.stdin.close()
        served = int(server.stdout.readline() or 0)
        server.wait(timeout=30)
    ideal = run.calls * args.latency / args.concurrency
    efficiency = ideal / first.seconds
    print(f"run 1: {run.done}/{run.total} items done, {run.failed} failed, {run.calls} calls in {first.seconds:.1f} s; "
          f"ideal {ideal:.1f} s ({args.concurrency} × {args.latency * 1000:.0f} ms) → {efficiency:.0%} of ideal "
          f"(target ≥ 90%: {verdict(efficiency >= 0.9)})")
    print(f"run 2 (same judge, same items): {rerun.done}/{rerun.total} done, {rerun.calls} calls in "
          f"{second.seconds:.1f} s (target 0 calls: {verdict(rerun.calls == 0)}); server saw {served} requests in all")
    print(f"duplicate (item, dimension) scores in run 1: {duplicates}")
    print(NOISE_NOTE)
    ok = efficiency >= 0.9 and rerun.calls == 0 and run.done == run.total and duplicates == 0 and served == run.calls
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
