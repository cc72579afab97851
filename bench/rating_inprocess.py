"""The rating loop's requests timed in one process (Django test client, PostgreSQL, DEBUG off).

    .venv/bin/python -m bench.rating_inprocess [--cycles 30] [--profile]

Four crowd raters enter an ImagenHub study and loop next screen + submit (and the completion page
and "more" at the end of each 10-screen session), as ``bench.rating_loop`` does over HTTP; each
request kind is timed (median wall ms, mean CPU ms of this process and of its PostgreSQL backend)
with its SQL statement count,
against the bare view of ``bench/urls.py``. No HTTP server or load generator shares the cores,
so this shows what the views themselves cost; ``--profile`` prints a CPU profile of the screen
and submit requests. Diagnostic: no target.
"""

from __future__ import annotations

import argparse
import cProfile
import collections
import os
import pstats
import random
import statistics
import time
from urllib.parse import urlencode

from bench.common import django_setup, scratch_database
from bench.rating_loop import _FIELD, _SHOWN, SLUG, build_study


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cycles", type=int, default=60, help="screens per rater (4 raters)")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    with scratch_database() as url:
        django_setup(url, static=True)
        build_study(2000)
        from django.conf import settings
        from django.db import connection
        from django.test import Client

        settings.ALLOWED_HOSTS.append("testserver")
        rng = random.Random(1)
        wall, cpu, statements, db_cpu = (collections.defaultdict(list) for _ in range(4))
        connection.ensure_connection()
        tick = os.sysconf("SC_CLK_TCK")

        def backend_cpu() -> float:
            """CPU seconds of this connection's PostgreSQL backend (ticks, so only sums are meaningful)."""
            with open(f"/proc/{connection.connection.info.backend_pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / tick
        profiles = {kind: cProfile.Profile(time.process_time) for kind in ("screen", "submit", "more")}
        profiling = {"on": False}

        def count(execute, sql, params, many, context):
            counter[0] += 1
            return execute(sql, params, many, context)

        counter = [0]

        def request(kind, client, method, path, data=None):
            # Statements are counted with an execute wrapper, not CaptureQueriesContext: that one
            # forces the debug cursor, whose SQL formatting would be timed and profiled too.
            profile = profiles.get(kind) if profiling["on"] else None
            counter[0] = 0
            with connection.execute_wrapper(count):
                if profile:
                    profile.enable()
                db_started = backend_cpu()
                started, cpu_started = time.perf_counter(), time.process_time()
                # Form-encoded, as browsers and bench.rating_loop post (the test client's default is multipart)
                response = (client.get(path) if method == "GET" else
                            client.post(path, urlencode(data or {}), content_type="application/x-www-form-urlencoded"))
                wall[kind].append(time.perf_counter() - started)
                cpu[kind].append(time.process_time() - cpu_started)
                db_cpu[kind].append(backend_cpu() - db_started)
                if profile:
                    profile.disable()
            statements[kind].append(counter[0])
            return response

        def cycle(client, state) -> None:
            path = state.get("path", f"/s/{SLUG}/rate")
            while True:
                if path.endswith("/done"):
                    request("done", client, "GET", path)
                    response = request("more", client, "POST", f"/s/{SLUG}/more")
                    if response.status_code != 302:
                        raise RuntimeError("the study ran out of items")
                    path = response["Location"]
                    continue
                response = request("next" if path.endswith("/rate") else "screen", client, "GET", path)
                if response.status_code == 302:
                    path = response["Location"]
                    continue
                break
            html = response.content.decode()
            fields = list(dict.fromkeys(_FIELD.findall(html)))
            form = {f"{prefix}-{dim}": rng.choice(["0", "0.5", "1"]) for prefix in fields for dim in ("SC", "PQ")}
            form["shown"] = _SHOWN.search(html).group(1)
            posted = request("submit", client, "POST", path, form)
            if posted.status_code != 302:
                raise RuntimeError(f"submit refused: {posted.status_code}")
            state["path"] = posted["Location"]

        clients = []
        for i in range(4):
            client = Client()
            client.get(f"/s/{SLUG}/start?PROLIFIC_PID=inprocess{i:04d}&STUDY_ID=bench&SESSION_ID=s{i}")
            for step in ("consent", "instructions"):
                client.post(f"/s/{SLUG}/{step}", {"agree": "yes"})
            clients.append(client)
        states = [{} for _ in clients]
        for _ in range(5):  # warm-up: templates, prepared statements
            for client, state in zip(clients, states):
                cycle(client, state)
        for store in (wall, cpu, statements, db_cpu):
            store.clear()
        for _ in range(args.cycles):
            for client, state in zip(clients, states):
                cycle(client, state)
        bare_client, bare = Client(), []
        for _ in range(400):
            started = time.perf_counter()
            bare_client.get("/bench/bare")
            bare.append(time.perf_counter() - started)
        print(f"{'request':8} {'n':>4} {'wall ms':>8} {'cpu ms':>7} {'db cpu':>7} {'SQL':>5}")
        for kind in wall:
            print(f"{kind:8} {len(wall[kind]):>4} {1000 * statistics.median(wall[kind]):>8.2f} "
                  f"{1000 * statistics.mean(cpu[kind]):>7.2f} {1000 * statistics.mean(db_cpu[kind]):>7.2f} "
                  f"{statistics.mean(statements[kind]):>5.1f}")
        print(f"{'bare':8} {len(bare):>4} {1000 * statistics.median(bare):>8.2f}")
        if args.profile:
            profiling["on"] = True
            for _ in range(args.cycles):
                for client, state in zip(clients, states):
                    cycle(client, state)
            for kind, profile in profiles.items():
                print(f"===== {kind} (CPU)")
                pstats.Stats(profile).sort_stats("cumulative").print_stats(40)
        connection.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
