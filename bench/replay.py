"""Replay a study with known truth through the real assignment engine: fixed (balanced) against
adaptive allocation at equal budgets (issue #17).

``python -m bench.replay [--prompts 40] [--models 12] [--raters 64] [--budgets 0.25 0.4]
[--fixed 4 8] [--bias-sd 0.3] [--noise 0.7] [--spammers 0.05] [--seed 0] [--repeats 1]
[--list-min N] [--focus uncertain|ranking|cheapest] [--sqlite]``

* truth: EvalMi-50K's perception MOS (``../shared/datasets/evalmi/AIGI2025_MOS_yn.xlsx``, 0-100
  mapped onto 1-5) for a seeded subset of models and prompts
  (:func:`analysis.science.simulation.load_evalmi_truth`);
* raters: :func:`analysis.science.simulation.simulate_raters` (bias, scale, noise, spammers, pace);
  each rating is :func:`analysis.science.simulation.rate` of the unit's true quality;
* the study is a real EvalMi study (one image per screen) in a scratch database; raters arrive in
  pace-weighted random order and do what the rating views do: ``assignment_batch_claim`` for a
  session, then ``screen_at`` + ``tasks.services.screen_submit`` screen by screen, until the
  budget is spent or nobody gets work;
* fixed: balanced mode with ``raters_per_item = k`` (every unit gets k ratings: EvalMi's design);
  adaptive: adaptive mode (cap ``--cap``, default the largest fixed k) at each share of the
  largest fixed design's ratings; it may stop early when every adjacent model pair is settled;
* metrics (:func:`analysis.science.simulation.study_metrics`): Kendall τ of the model ranking to
  the truth, the share of truly different adjacent pairs separated, the share of declared
  separations that are wrong (fixed: one fixed-level 95 % CI at the end; adaptive: the anytime
  verdicts it ran on), item RMSE of z-MOS and of the subject model, ratings used; from the
  dof-corrected subject model (``*_subject``) and z-MOS (``*_zmos``).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd

from bench.common import ROOT, django_setup, scratch_database

MOS = ROOT.parent / "shared" / "datasets" / "evalmi" / "AIGI2025_MOS_yn.xlsx"


def _truth(args):
    from analysis.science import simulation

    full = simulation.load_evalmi_truth(args.mos, "perception", prompts=args.prompts, seed=args.seed)
    return simulation.model_subset(full, args.models, seed=args.seed)


def _study(truth, *, slug: str, mode: str, cap: int, session: int):
    from tasks.models import GenModel, Instance, Item, Study

    study = Study.objects.create(slug=slug, title=slug, protocol="evalmi", task_type="counting", state="open",
                                 raters_per_item=cap, assignment_mode=mode, units_per_session=session,
                                 settings={"images_per_trial": 1, "qa": False})
    models = [GenModel.objects.create(study=study, name=name) for name in truth.models]
    instances = Instance.objects.bulk_create(
        [Instance(study=study, key=f"p{p}", prompt=f"prompt {p}", position=p) for p in range(truth.n_prompts)])
    items = Item.objects.bulk_create([Item(study=study, instance=instances[u % truth.n_prompts],
                                           gen_model=models[u // truth.n_prompts])
                                      for u in range(truth.n_units)])
    return study, {item.pk: u for u, item in enumerate(items)}


def _run(truth, raters, people, *, mode: str, cap: int, budget: int, seed: int, session: int) -> tuple:
    """Drive simulated raters through the engine; (study, unit code per item pk, seconds)."""
    from analysis.science import simulation
    from tasks.assignment import AssignmentUnavailable, assignment_batch_claim, next_position, screen_at
    from tasks.services import screen_submit

    import tasks.assignment as engine

    # Reproducible runs: the units' random ranks and the raters' order seeds come from seeded
    # generators here (the site draws them from random / secrets).
    random.seed(seed)
    engine.secrets = SimpleNamespace(randbits=random.Random(f"replay:{seed}").getrandbits)
    study, code = _study(truth, slug=f"replay-{mode}-{cap}-{budget}-{seed}", mode=mode, cap=cap, session=session)
    rng = np.random.default_rng(seed)
    weights = raters.pace / raters.pace.sum()
    active = np.ones(len(raters), bool)
    used = 0
    start = time.perf_counter()
    while used < budget and active.any():
        who = int(rng.choice(len(raters), p=np.where(active, weights, 0) / weights[active].sum()))
        rater = people[who]
        try:
            if not assignment_batch_claim(rater=rater, study=study):
                active[who] = False
                continue
        except AssignmentUnavailable:
            active[who] = False
            continue
        while used < budget and (position := next_position(rater=rater, study=study)) is not None:
            screen = screen_at(rater=rater, study=study, position=position, place=False)
            units = np.array([code[a.item_id] for a in screen.assignments])
            values = simulation.rate(truth.unit_quality[units], np.full(len(units), who), raters, rng)
            entries = [{"values": {"perception": int(v), "correspondence": int(v)}, "answers": {},
                        "presentation": {"position": screen.position, "slot": a.slot}}
                       for a, v in zip(screen.assignments, values)]
            screen_submit(rater=rater, screen=screen, entries=entries)
            used += len(entries)
    return study, code, time.perf_counter() - start


def _metrics(study, code, truth, raters, people, *, n_opt, design: str, budget: int, margin: float) -> dict:
    from analysis.science import simulation
    from tasks.models import AllocationRound, Rating

    index = {p.pk: k for k, p in enumerate(people)}
    rows = list(Rating.objects.filter(study=study).values_list("item_id", "rater_id", "values"))
    run = simulation.StudyRun(values=np.array([r[2]["perception"] for r in rows], float),
                              unit=np.array([code[r[0]] for r in rows]), rater=np.array([index[r[1]] for r in rows]),
                              design=design, budget=budget, n_opt=n_opt)
    row = simulation.study_metrics(run, truth, raters, margin=margin)
    row["rounds"] = AllocationRound.objects.filter(study=study).count()
    return row


COLUMNS = ["design", "budget", "ratings", "share_of_ratings", "tau_subject", "tau_zmos", "separated_subject",
           "separated_zmos", "wrong_subject", "wrong_zmos", "rmse_subject", "rmse_zmos", "rounds", "seconds"]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mos", default=str(MOS))
    parser.add_argument("--prompts", type=int, default=40)
    parser.add_argument("--models", type=int, default=12, help="a seeded subset of EvalMi-50K's 24 models")
    parser.add_argument("--raters", type=int, default=64)
    parser.add_argument("--fixed", type=int, nargs="+", default=[4, 8], help="raters per item of the fixed designs")
    parser.add_argument("--budgets", type=float, nargs="+", default=[0.25, 0.4],
                        help="adaptive budgets, as shares of the largest fixed design's ratings")
    parser.add_argument("--cap", type=int, default=None, help="adaptive per-unit cap (default: the largest fixed k)")
    parser.add_argument("--bias-sd", type=float, default=0.3)
    parser.add_argument("--noise", type=float, default=0.7)
    parser.add_argument("--spammers", type=float, default=0.05, help="share of raters answering at random")
    parser.add_argument("--margin", type=float, default=0.0)
    parser.add_argument("--session", type=int, default=10, help="screens per session")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=1,
                        help="studies per design (seeds seed, seed+1, ...): the table shows their means")
    parser.add_argument("--list-min", type=int, default=None,
                        help="adaptive: the smallest priority list per round (default: the engine's LIST_MIN)")
    parser.add_argument("--focus", default=None, choices=("uncertain", "ranking", "cheapest"),
                        help="adaptive: the allocation's focus (default: the engine's FOCUS)")
    parser.add_argument("--sqlite", action="store_true", help="a scratch SQLite file instead of PostgreSQL")
    args = parser.parse_args(argv)
    cap = args.cap or max(args.fixed)

    def body(url: str) -> None:
        django_setup(url)
        from analysis.science import simulation
        from raters.models import Rater
        from tasks.assignment import adaptive

        if args.list_min:
            adaptive.LIST_MIN = args.list_min
        if args.focus:
            adaptive.FOCUS = args.focus
        truth = _truth(args)
        reference = max(args.fixed) * truth.n_units
        rows = []
        for seed in range(args.seed, args.seed + args.repeats):
            raters = simulation.simulate_raters(args.raters, bias_sd=args.bias_sd, noise=args.noise,
                                                spammer_share=args.spammers, seed=seed)
            people = [Rater.objects.create(platform=Rater.Platform.PROLIFIC, external_id=f"sim-{seed}-{k}")
                      for k in range(args.raters)]
            for k in args.fixed:
                study, code, seconds = _run(truth, raters, people, mode="balanced", cap=k,
                                            budget=k * truth.n_units, seed=seed, session=args.session)
                rows.append({**_metrics(study, code, truth, raters, people, n_opt=None, design=f"fixed {k}/unit",
                                        budget=k * truth.n_units, margin=args.margin), "seconds": seconds})
                print(f"  seed {seed}, {rows[-1]['design']}: {rows[-1]['ratings']} ratings, tau "
                      f"{rows[-1]['tau_subject']:.3f} / {rows[-1]['tau_zmos']:.3f}, {seconds:.0f} s", flush=True)
            for share in args.budgets:
                budget = int(round(share * reference))
                study, code, seconds = _run(truth, raters, people, mode="adaptive", cap=cap, budget=budget,
                                            seed=seed, session=args.session)
                rows.append({**_metrics(study, code, truth, raters, people, n_opt=2 * truth.n_prompts * cap,
                                        design=f"adaptive {share:.0%}", budget=budget, margin=args.margin),
                             "seconds": seconds})
                print(f"  seed {seed}, {rows[-1]['design']}: {rows[-1]['ratings']} ratings, tau "
                      f"{rows[-1]['tau_subject']:.3f} / {rows[-1]['tau_zmos']:.3f}, {seconds:.0f} s", flush=True)
        table = pd.DataFrame(rows)
        table["share_of_ratings"] = table["ratings"] / reference
        keep = [c for c in COLUMNS if c in table.columns]
        table = table[keep].groupby("design", sort=False).mean(numeric_only=True).reset_index()
        print(f"\nEvalMi-50K perception truth: {truth.n_models} models x {truth.n_prompts} prompts "
              f"({truth.n_units} units), {args.raters} simulated raters (bias sd {args.bias_sd}, noise "
              f"{args.noise}, spammers {args.spammers:.0%}), seeds {args.seed}..{args.seed + args.repeats - 1} "
              f"(means), adaptive cap {cap}, "
              f"list of at least {adaptive.LIST_MIN} units per round, focus {adaptive.FOCUS!r}")
        with pd.option_context("display.width", 250, "display.max_columns", 30, "display.precision", 3):
            print(table[[c for c in COLUMNS if c in table.columns]].to_string(index=False))
        reference_row = table[table["design"] == f"fixed {max(args.fixed)}/unit"].iloc[0]
        for metric, against, label in (("tau_subject", "tau_zmos", "subject model vs fixed's z-MOS (EvalMi's estimator)"),
                                       ("tau_subject", "tau_subject", "subject model vs subject model"),
                                       ("tau_zmos", "tau_zmos", "z-MOS vs z-MOS")):
            goal = reference_row[against]
            fine = table[table["design"].str.startswith("adaptive") & (table[metric] >= goal - 1e-12)
                         & (table["wrong_subject"] <= 0.05)]
            print(f"adaptive reaches fixed {max(args.fixed)}/unit's tau ({label}: {goal:.3f}) with wrong "
                  "separations <= 5% at: "
                  + (f"{fine['share_of_ratings'].min():.0%} of its ratings" if len(fine) else "none of the budgets tried"))
        raters = simulation.simulate_raters(args.raters, bias_sd=args.bias_sd, noise=args.noise,
                                            spammer_share=args.spammers, seed=args.seed)
        noise = simulation.fitted_noise(simulation.run_fixed(truth, raters, max(args.fixed), seed=args.seed), truth,
                                        args.raters)
        bound = simulation.yardstick(truth, noise, args.budgets, per_unit=args.fixed, cap=cap)
        print(f"expected tau at per-rating noise {noise:.2f} (the subject model's on a pure-simulation fixed "
              f"{max(args.fixed)}/unit run), the best split knowing the true means: "
              + ", ".join(f"{k} {v:.3f}" for k, v in bound.items()))

    if args.sqlite:
        path = Path(os.environ.get("TMPDIR", "/tmp")) / f"replay_{os.getpid()}.sqlite3"
        try:
            body(f"sqlite:///{path}")
        finally:
            path.unlink(missing_ok=True)
    else:
        with scratch_database() as url:
            body(url)


if __name__ == "__main__":
    sys.exit(main())
