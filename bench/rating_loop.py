"""Rating loop under load: gunicorn + PostgreSQL, simulated raters vs a bare Django JSON view.

    .venv/bin/python -m bench.rating_loop [--seconds 12] [--rounds 3] [--workers 4] [--items 2000]

Each simulated rater enters through a Prolific link, consents, reads the instructions and gets its
first session claimed (not in the measured loop; the claim latency of all raters arriving at once is
printed separately), then loops "next item + submit": GET its screen, POST the SC/PQ answers, follow the redirect to the
next screen, ask for another session (POST /more) when one ends. Closed loop (no think time) at
16 / 64 / 200 raters gives throughput at saturation; the same number of clients hammers
``/bench/bare`` (bench/urls.py: middleware + one SELECT) for the ratio. Bare and rating phases
alternate ``--rounds`` times per level, so a change in the machine's load falls on both sides. Latency at 64 raters is
also measured paced (each rater waits ``--think`` seconds, default 4, between requests: about 8 s
per rated image, faster than people rate with a prompt to read), because in a closed loop with no think time p95 is only queueing:
64 clients / throughput.

Afterwards: no item has more live assignments or ratings than its quota, and no (rater, item)
pair was rated twice.

Two crowd scenarios instead of the loop (``--scenario``):

    .venv/bin/python -m bench.rating_loop --scenario crowd1000 [--raters 1000] [--screen-every 5] [--seconds 60]
    .venv/bin/python -m bench.rating_loop --scenario arrival200 [--raters 200]

``crowd1000``: 1,000 raters at human pace, arriving over the first ``--screen-every`` × 4 seconds,
each showing one screen about every ``--screen-every`` seconds (two pauses around each submit);
screen and submit p95 < 100 ms with no error. ``arrival200``: 200 raters open the study link
within one second; from the link to their first rating screen (start, consent, instructions,
the session claim, the screen) p95 < 2 s, no error.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field

from bench.common import NOISE_NOTE, bench_env, django_setup, percentile, scratch_database, verdict
from bench.loadgen import Client, wait_for_server

HOST = "127.0.0.1"
SLUG = "bench-loop"
RATERS_PER_ITEM = 3
_CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
_FIELD = re.compile(r'name="(u\d+)-SC"')
_SHOWN = re.compile(r'name="shown" value="([^"]*)"')
_H1 = re.compile(r"<h1[^>]*>(.*?)</h1>", re.S)


@dataclass
class Stats:
    latencies: list[float] = field(default_factory=list)
    by_kind: dict[str, list[float]] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    ratings: int = 0
    finished_raters: int = 0

    def add(self, kind: str, seconds: float) -> None:
        self.latencies.append(seconds)
        self.by_kind.setdefault(kind, []).append(seconds)

    def error(self, what: str) -> None:
        self.errors[what] = self.errors.get(what, 0) + 1


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def build_study(items: int) -> None:
    """One open ImagenHub study with ``items`` outputs (5 models) sharing one stored image."""
    from tasks.images import store_image
    from tasks.models import GenModel, Instance, Item, Study
    from tests.factories import png_bytes

    study = Study(slug=SLUG, title="Bench loop", protocol="imagenhub", task_type="text_to_image",
                  state=Study.State.OPEN, raters_per_item=RATERS_PER_ITEM, units_per_session=10)
    study.full_clean()
    study.save()
    models = [GenModel.objects.create(study=study, name=f"Model{i}") for i in range(5)]
    image = store_image(png_bytes(size=(512, 512)))
    instances = Instance.objects.bulk_create(
        Instance(study=study, key=f"sample_{i:05d}", prompt=f"a red cube left of blue sphere number {i}", position=i)
        for i in range(items // len(models))
    )
    Item.objects.bulk_create(
        Item(study=study, instance=instance, gen_model=model, image=image) for instance in instances for model in models
    )


async def enter(client: Client, rater: str, stats: Stats) -> bool:
    """Prolific entry → consent → instructions. Returns False when the server refused."""
    r = await client.request("GET", f"/s/{SLUG}/start?PROLIFIC_PID={rater}&STUDY_ID=bench&SESSION_ID={rater}")
    for step in ("consent", "instructions"):
        page = await client.request("GET", f"/s/{SLUG}/{step}")
        token = _CSRF.search(page.text)
        if page.status != 200 or not token:
            stats.error(f"{step} page {page.status}")
            return False
        r = await client.request("POST", f"/s/{SLUG}/{step}", {"csrfmiddlewaretoken": token.group(1), "agree": "yes"})
        if r.status != 302:
            stats.error(f"{step} POST {r.status}")
            return False
    # The first session claim (10 conditional UPDATEs, one commit each) happens on arrival; it is
    # timed on its own so the loop below measures the steady next-screen + submit cycle.
    r = await client.request("GET", f"/s/{SLUG}/rate")
    stats.add("claim", r.seconds)
    return r.status == 302


async def rate_loop(client: Client, stats: Stats, deadline: float, think: float, rng: random.Random) -> None:
    """next screen + submit until the deadline or until the study has nothing left for this rater."""
    path = f"/s/{SLUG}/rate"

    async def pause():
        if think:
            await asyncio.sleep(rng.uniform(0.5 * think, 1.5 * think))

    while time.monotonic() < deadline:
        if path.endswith("/done"):
            location = path
        else:
            r = await client.request("GET", path)
            stats.add("next", r.seconds)
            location = r.header("location") if r.status == 302 else ""
        if location:
            if location.endswith("/done"):  # session finished: the completion page, then ask for more
                await pause()
                page = await client.request("GET", location)
                stats.add("done", page.seconds)
                token = _CSRF.search(page.text) or _CSRF.search((await client.request("GET", f"/s/{SLUG}/consent")).text)
                more = await client.request("POST", f"/s/{SLUG}/more", {"csrfmiddlewaretoken": token.group(1)})
                stats.add("more", more.seconds)
                if more.status != 302:
                    stats.finished_raters += 1
                    return
                path = more.header("location")
                continue
            path = location
            continue
        if r.status != 200:
            stats.error(f"GET screen {r.status}")
            return
        token, fields = _CSRF.search(r.text), list(dict.fromkeys(_FIELD.findall(r.text)))
        if not token or not fields:
            # e.g. the rater-quality rules paused this rater (random answers in no time): a message page
            heading = _H1.search(r.text)
            stats.error(f"page without a rating form: {heading.group(1).strip() if heading else path}")
            return
        shown = _SHOWN.search(r.text)
        form = {"csrfmiddlewaretoken": token.group(1), "shown": shown.group(1) if shown else ""}
        for prefix in fields:
            form[f"{prefix}-SC"] = rng.choice(["0", "0.5", "1"])
            form[f"{prefix}-PQ"] = rng.choice(["0", "0.5", "1"])
        await pause()
        posted = await client.request("POST", path, form)
        stats.add("submit", posted.seconds)
        if posted.status != 302:
            stats.error(f"POST screen {posted.status}")
            return
        stats.ratings += len(fields)
        path = posted.header("location")
        await pause()


async def run_raters(port: int, names: list[str], seconds: float, think: float,
                     meter: CpuMeter | None = None) -> tuple[Stats, float]:
    stats = Stats()
    clients = [Client(HOST, port) for _ in names]
    arrivals = Stats()
    entered = await asyncio.gather(*(enter(c, n, arrivals) for c, n in zip(clients, names)))
    if not all(entered):
        raise RuntimeError(f"raters could not enter the study: {arrivals.errors}")
    stats.by_kind["claim"] = arrivals.by_kind.get("claim", [])
    if meter:
        meter.start()
    start = time.monotonic()
    deadline = start + seconds

    async def rater(client: Client, name: str) -> None:
        rng = random.Random(name)
        if think:  # paced raters arrive spread over the first two pauses, as people do
            await asyncio.sleep(rng.uniform(0, 2 * think))
        await rate_loop(client, stats, deadline, think, rng)

    await asyncio.gather(*(rater(c, n) for c, n in zip(clients, names)))
    if meter:
        meter.stop(len(stats.latencies))
    return stats, time.monotonic() - start


async def run_crowd(port: int, names: list[str], seconds: float, screen_every: float) -> tuple[Stats, float]:
    """Raters at human pace: each arrives at a random moment in the first 4 × ``screen_every``
    seconds, enters, then rates one screen about every ``screen_every`` seconds until the end."""
    stats, arrivals = Stats(), Stats()
    start = time.monotonic()
    deadline = start + seconds

    async def rater(name: str) -> None:
        rng = random.Random(name)
        await asyncio.sleep(rng.uniform(0, 4 * screen_every))
        client = Client(HOST, port)
        if await enter(client, name, arrivals):
            await rate_loop(client, stats, deadline, screen_every / 2, rng)

    await asyncio.gather(*(rater(n) for n in names))
    for what, n in arrivals.errors.items():
        stats.errors[f"entry: {what}"] = n
    stats.by_kind["claim"] = arrivals.by_kind.get("claim", [])
    return stats, time.monotonic() - start


async def run_arrival(port: int, names: list[str], within: float = 1.0) -> Stats:
    """Raters opening the link within ``within`` seconds: time from the link to the first screen."""
    stats = Stats()

    async def rater(name: str) -> None:
        rng = random.Random(name)
        await asyncio.sleep(rng.uniform(0, within))
        client = Client(HOST, port)
        began = time.monotonic()
        if not await enter(client, name, stats):
            return
        screen = await client.request("GET", (await client.request("GET", f"/s/{SLUG}/rate")).header("location"))
        if screen.status != 200 or not _FIELD.search(screen.text):
            stats.error(f"first screen {screen.status}")
            return
        stats.add("first screen", time.monotonic() - began)

    await asyncio.gather(*(rater(n) for n in names))
    return stats


def crowd_scenarios(args, port: int) -> bool:
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    if args.scenario == "crowd1000":
        names = [f"crowd{i:05d}" for i in range(args.raters)]
        stats, took = asyncio.run(run_crowd(port, names, args.seconds, args.screen_every))
        p95 = {k: percentile(v, 95) * 1000 for k, v in stats.by_kind.items()}
        worst = max(p95.get("next", 0), p95.get("submit", 0))
        print(f"{args.raters} raters, a screen every ~{args.screen_every:g} s each, {took:.0f} s "
              f"(load average before {load}, after {' '.join(open('/proc/loadavg').read().split()[:3])}): "
              f"{len(stats.latencies) / took:.0f} req/s, {stats.ratings} ratings; p95 screen {p95.get('next', 0):.1f} ms, "
              f"submit {p95.get('submit', 0):.1f} ms, session claim on arrival {p95.get('claim', 0):.1f} ms, "
              f"p50 all {percentile(stats.latencies, 50) * 1000:.1f} ms; errors {dict(stats.errors) or 0}")
        ok = worst < 100 and not stats.errors
        print(f"screen and submit p95 < 100 ms with 0 errors: {verdict(ok)}")
        return ok
    names = [f"arrive{i:05d}" for i in range(args.raters)]
    stats = asyncio.run(run_arrival(port, names))
    first = stats.by_kind.get("first screen", [])
    p95 = percentile(first, 95) if first else float("inf")
    print(f"{args.raters} raters opening the link within 1 s (load average before {load}, after "
          f"{' '.join(open('/proc/loadavg').read().split()[:3])}): first screen p50 "
          f"{percentile(first, 50) if first else float('nan'):.2f} s, p95 {p95:.2f} s, max {max(first, default=0):.2f} s; "
          f"session claim p95 {percentile(stats.by_kind.get('claim', [0.0]), 95) * 1000:.0f} ms; "
          f"{len(first)} reached a screen; errors {dict(stats.errors) or 0}")
    ok = p95 < 2 and not stats.errors and len(first) == args.raters
    print(f"first screen p95 < 2 s with 0 errors: {verdict(ok)}")
    return ok


async def run_bare(port: int, clients: int, seconds: float, meter: CpuMeter | None = None) -> tuple[Stats, float]:
    stats = Stats()
    if meter:
        meter.start()
    start = time.monotonic()
    deadline = start + seconds

    async def loop():
        client = Client(HOST, port)
        while time.monotonic() < deadline:
            r = await client.request("GET", "/bench/bare")
            if r.status != 200:
                stats.error(f"bare {r.status}")
                return
            stats.add("bare", r.seconds)

    await asyncio.gather(*(loop() for _ in range(clients)))
    if meter:
        meter.stop(len(stats.latencies))
    return stats, time.monotonic() - start


class CpuMeter:
    """CPU seconds per request spent by each side of the benchmark, read from /proc: the gunicorn
    master and workers, the PostgreSQL backends serving the benchmark's database (not PostgreSQL's
    shared helpers), the Celery worker, and this load generator. Unlike
    requests/s these barely move with other work on shared cores, so they show what the ratio
    would be on a machine of our own (``cpu ratio`` = bare CPU per request / rating CPU per request)."""

    GROUPS = ("server", "database", "worker", "loadgen")
    _BACKEND = re.compile(r"^postgres: (?:[^:]+: )?\S+ (\S+) \S+\(\d+\)")  # "postgres: [cluster: ]user db host(port)"

    def __init__(self, server_pid: int, worker_pid: int | None, database: str):
        self.server_pid, self.worker_pid, self.database = server_pid, worker_pid, database
        self.totals = dict.fromkeys(self.GROUPS, 0.0)
        self.requests = 0
        self._started: dict[str, float] = {}
        self._tick = os.sysconf("SC_CLK_TCK")

    def _cpu(self, pid: int) -> float:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / self._tick
        except (OSError, IndexError, ValueError):
            return 0.0

    def _tree(self, root: int) -> list[int]:
        children = []
        try:
            with open(f"/proc/{root}/task/{root}/children") as f:
                children = [int(x) for x in f.read().split()]
        except OSError:
            pass
        return [root] + [pid for child in children for pid in self._tree(child)]

    def _database_pids(self) -> list[int]:
        pids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    title = f.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if not title.startswith("postgres: "):
                continue
            backend = self._BACKEND.match(title)
            # Only the benchmark's own backends: PostgreSQL's shared helpers (WAL writer,
            # checkpointer, autovacuum) also work for every other database on the machine.
            if backend is not None and backend.group(1) == self.database:
                pids.append(int(entry))
        return pids

    def _read(self) -> dict[str, float]:
        return {
            "server": sum(self._cpu(pid) for pid in self._tree(self.server_pid)),
            "database": sum(self._cpu(pid) for pid in self._database_pids()),
            "worker": sum(self._cpu(pid) for pid in self._tree(self.worker_pid)) if self.worker_pid else 0.0,
            "loadgen": time.process_time(),
        }

    def start(self) -> None:
        self._started = self._read()

    def stop(self, requests: int) -> None:
        now = self._read()
        for group in self.GROUPS:
            self.totals[group] += max(0.0, now[group] - self._started.get(group, now[group]))
        self.requests += requests

    def per_request_ms(self) -> dict[str, float]:
        return {group: 1000 * total / max(1, self.requests) for group, total in self.totals.items()}

    def total_ms(self) -> float:
        return sum(self.per_request_ms().values())

    def describe(self) -> str:
        parts = self.per_request_ms()
        return f"{self.total_ms():.2f} ms (" + ", ".join(f"{g} {parts[g]:.2f}" for g in self.GROUPS) + ")"


def integrity_check() -> tuple[int, int, int, int]:
    """(items over quota by claims, items over quota by live assignments/ratings, duplicate pairs, ratings)."""
    from django.db.models import Count, Q

    from tasks.models import Assignment, Item, Rating

    over_claims = Item.objects.filter(study__slug=SLUG, claims__gt=RATERS_PER_ITEM).count()
    live = Q(assignments__state__in=[Assignment.State.LEASED, Assignment.State.DONE])
    over_live = (
        Item.objects.filter(study__slug=SLUG, gold__isnull=True)
        .annotate(live=Count("assignments", filter=live, distinct=True), rated=Count("ratings", distinct=True))
        .filter(Q(live__gt=RATERS_PER_ITEM) | Q(rated__gt=RATERS_PER_ITEM))
        .count()
    )
    duplicates = (
        Rating.objects.filter(study__slug=SLUG).values("rater_id", "item_id").annotate(n=Count("id")).filter(n__gt=1).count()
    )
    return over_claims, over_live, duplicates, Rating.objects.filter(study__slug=SLUG).count()


def start_gunicorn(env: dict, port: int, workers: int) -> subprocess.Popen:
    return subprocess.Popen(
        [os.path.join(sys.prefix, "bin", "gunicorn"), "annotation_site.wsgi", "--bind", f"{HOST}:{port}",
         "--workers", str(workers), "--worker-class", "sync", "--backlog", "2048", "--log-level", "warning",
         "--timeout", "60"],
        env=env, stdout=subprocess.DEVNULL, stderr=sys.stderr, start_new_session=True,
    )


def start_celery_worker(env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [os.path.join(sys.prefix, "bin", "celery"), "-A", "annotation_site", "worker", "--pool", "solo",
         "-Q", env["BENCH_CELERY_QUEUE"], "--loglevel", "WARNING", "--without-gossip", "--without-mingle",
         "--without-heartbeat"],
        env=env, stdout=subprocess.DEVNULL, stderr=sys.stderr, start_new_session=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=12.0, help="measured seconds per side and level (split into --rounds)")
    parser.add_argument("--workers", type=int, default=4, help="gunicorn sync workers")
    parser.add_argument("--items", type=int, default=12000,
                        help="ImagenHub items (x3 raters each): enough that every round's raters find work")
    parser.add_argument("--think", type=float, default=4.0, help="mean pause (s) between a paced rater's requests")
    parser.add_argument("--levels", default="16,64,200")
    parser.add_argument("--rounds", type=int, default=3,
                        help="alternate bare and rating phases this many times per level (seconds split among them)")
    parser.add_argument("--broker", default=os.environ.get("BENCH_BROKER", "redis://127.0.0.1:6379/9"),
                        help="Celery broker for the rater-quality jobs ('' = eager: jobs run inside requests)")
    parser.add_argument("--scenario", choices=("loop", "crowd1000", "arrival200"), default="loop",
                        help="the throughput loop (default) or one of the crowd scenarios (see the module doc)")
    parser.add_argument("--raters", type=int, help="crowd scenarios: raters (default 1000 / 200)")
    parser.add_argument("--screen-every", type=float, default=5.0, help="crowd1000: seconds per screen per rater")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    if args.scenario != "loop":
        args.raters = args.raters or (1000 if args.scenario == "crowd1000" else 200)

    with scratch_database() as url:
        django_setup(url, static=True)
        build_study(args.items)
        from django.db import connections

        connections.close_all()
        port = free_port()
        extra = {"CELERY_BROKER_URL": args.broker, "BENCH_CELERY_QUEUE": f"bench-{os.getpid()}"} if args.broker else {}
        env = bench_env(url, **extra)
        worker = start_celery_worker(env) if args.broker else None
        server = start_gunicorn(env, port, args.workers)
        results, ok = [], True
        try:
            asyncio.run(wait_for_server(HOST, port))
            if args.scenario != "loop":
                print(f"gunicorn {args.workers} sync workers, PostgreSQL, {args.items} items × {RATERS_PER_ITEM} raters")
                return 0 if crowd_scenarios(args, port) else 1
            print(f"gunicorn {args.workers} sync workers on {HOST}:{port}, PostgreSQL {url.rsplit('/', 1)[1]}, "
                  f"Celery {'worker on ' + args.broker if args.broker else 'eager (jobs inside requests)'}, "
                  f"{args.items} items × {RATERS_PER_ITEM} raters each; {args.seconds:.0f} s per phase")
            print(f"{'raters':>6} {'bare req/s':>10} {'rating req/s':>12} {'ratio':>6} {'ratings/s':>9} "
                  f"{'p50 ms':>7} {'p95 ms':>7} {'bare p95':>8} errors")
            batch = 0
            for level in levels:
                # Bare and rating phases alternate (``--rounds``) so that a change in the machine's
                # load (other processes on shared cores) falls on both sides of the ratio.
                bare, loop, bare_s, loop_s, round_ratios = Stats(), Stats(), 0.0, 0.0, []
                database = url.rsplit("/", 1)[1]
                bare_cpu = CpuMeter(server.pid, worker.pid if worker else None, database)
                loop_cpu = CpuMeter(server.pid, worker.pid if worker else None, database)
                for _ in range(args.rounds):
                    names = [f"bench{batch}x{i:04d}" for i in range(level)]
                    batch += 1
                    bare_part, part_s = asyncio.run(run_bare(port, level, args.seconds / args.rounds, bare_cpu))
                    loop_part, part_loop_s = asyncio.run(run_raters(port, names, args.seconds / args.rounds, think=0.0,
                                                                    meter=loop_cpu))
                    bare_s, loop_s = bare_s + part_s, loop_s + part_loop_s
                    round_ratios.append((len(loop_part.latencies) / part_loop_s) / (len(bare_part.latencies) / part_s))
                    for total, part in ((bare, bare_part), (loop, loop_part)):
                        total.latencies += part.latencies
                        for kind, values in part.by_kind.items():
                            total.by_kind.setdefault(kind, []).extend(values)
                        for what, n in part.errors.items():
                            total.errors[what] = total.errors.get(what, 0) + n
                        total.ratings += part.ratings
                bare_rate, loop_rate = len(bare.latencies) / bare_s, len(loop.latencies) / loop_s
                ratio = loop_rate / bare_rate
                p50, p95 = percentile(loop.latencies, 50) * 1000, percentile(loop.latencies, 95) * 1000
                results.append((level, ratio, p95))
                claims = loop.by_kind.get("claim") or [0.0]
                print(f"{level:>6} {bare_rate:>10.0f} {loop_rate:>12.0f} {ratio:>6.2f} {loop.ratings / loop_s:>9.1f} "
                      f"{p50:>7.1f} {p95:>7.1f} {percentile(bare.latencies, 95) * 1000:>8.1f} "
                      f"{dict(loop.errors) or '-'}{' bare:' + str(bare.errors) if bare.errors else ''}  "
                      f"(rounds {' '.join(f'{r:.2f}' for r in round_ratios)}; "
                      f"arrival claims of {level} raters at once: p95 {percentile(claims, 95) * 1000:.0f} ms)")
                print(f"{'':>6} CPU per request: bare {bare_cpu.describe()}; rating {loop_cpu.describe()}; "
                      f"cpu ratio {bare_cpu.total_ms() / loop_cpu.total_ms():.2f}")
                ok &= not loop.errors and not bare.errors
            names = [f"paced{i:04d}" for i in range(64)]
            paced, paced_s = asyncio.run(run_raters(port, names, max(2 * args.seconds, 20.0), think=args.think))
            by_kind = {k: percentile(v, 95) * 1000 for k, v in paced.by_kind.items()}
            paced_p95 = percentile(paced.latencies, 95) * 1000
            print(f"paced 64 raters (think {args.think:.2f} s mean): {len(paced.latencies) / paced_s:.0f} req/s, "
                  f"p50 {percentile(paced.latencies, 50) * 1000:.1f} ms, p95 {paced_p95:.1f} ms "
                  f"(next {by_kind.get('next', 0):.1f}, submit {by_kind.get('submit', 0):.1f}), "
                  f"errors {dict(paced.errors) or '-'}")
        finally:
            for process in (server, worker):
                if process is not None:
                    os.killpg(process.pid, signal.SIGTERM)
                    process.wait(timeout=60)
        over_claims, over_live, duplicates, ratings = integrity_check()
        connections.close_all()
    at64 = [r for r in results if r[0] == 64]
    print()
    if at64:
        print(f"throughput ratio at 64 raters: {at64[0][1]:.2f}× bare (target ≥ 0.5): {verdict(at64[0][1] >= 0.5)}")
    print(f"p95 at 64 paced raters: {paced_p95:.1f} ms (target < 25 ms): {verdict(paced_p95 < 25)}")
    print(f"integrity over {ratings} ratings: items over quota (claims) {over_claims}, "
          f"(live assignments/ratings) {over_live}, (rater, item) rated twice {duplicates}")
    print(NOISE_NOTE)
    ok &= over_claims == 0 and over_live == 0 and duplicates == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
