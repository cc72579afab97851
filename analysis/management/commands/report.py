import json

from django.core.management.base import BaseCommand, CommandError

from analysis.science.correlation import KENDALL_VARIANTS
from analysis.release_services import reports_by_version, version_mix
from analysis.report import build_report
from analysis.science.report import JUDGE_ITEMS
from analysis.science.viescore_conventions import CONVENTIONS
from tasks.models import Study


def _fmt(value, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


class Command(BaseCommand):
    help = "Print a study's analysis report: a readable table, or the full JSON document with --json."

    def add_arguments(self, parser):
        parser.add_argument("study", help="Study slug")
        parser.add_argument("--json", action="store_true", help="Print the JSON document (schema in the README)")
        parser.add_argument("--include-excluded", action="store_true", help="Keep blocked raters in the analysis")
        parser.add_argument("--no-judges", action="store_true", help="Skip judge-vs-human correlations")
        parser.add_argument("--n-boot", type=int, default=1000,
                            help="Bootstrap replicates for the agreement and pairwise CIs (0 = no CIs; default 1000)")
        parser.add_argument("--seed", type=int, default=0, help="Seed of the bootstrap (default 0)")
        parser.add_argument("--judge-items", choices=JUDGE_ITEMS, default="per_dimension",
                            help="Compare a judge on every item it scored per dimension (default), or only on "
                                 "items it scored on all its dimensions (all_aspects, VIEScore's convention)")
        parser.add_argument("--kendall", choices=KENDALL_VARIANTS, default="b",
                            help="Kendall's tau-b (default) or tau-a (EvalMi-50K's convention) for judges")
        parser.add_argument("--conventions", choices=CONVENTIONS, default="default",
                            help="viescore: VIEScore's own analysis (tanh(mean r), items with both aspects, "
                                 "truncated fractional sub-scores) so its published tables reproduce")
        parser.add_argument("--by-version", action="store_true",
                            help="One report per protocol version the ratings were cast under")

    def handle(self, *args, study, json: bool, include_excluded: bool, no_judges: bool, n_boot: int, seed: int,
               judge_items: str = "per_dimension", kendall: str = "b", conventions: str = "default", **options):
        found = Study.objects.filter(slug=study).first()
        if found is None:
            raise CommandError(f"no study with slug {study!r}")
        if n_boot < 0:
            raise CommandError("--n-boot must be 0 or more")
        options_ = dict(include_excluded=include_excluded, judges=not no_judges, n_boot=n_boot, seed=seed,
                        judge_items=judge_items, kendall=kendall, conventions=conventions)
        if options.get("by_version"):
            reports = reports_by_version(found, **options_)
            if json:
                self.stdout.write(_dumps({str(number): r for number, r in reports.items()}))
                return
            for number, report in reports.items():
                self.stdout.write(f"== protocol version {number} ==\n{render_text(report)}")
            return
        report = build_report(found, **options_)
        if json:
            self.stdout.write(_dumps(report))
            return
        self.stdout.write(render_text(report))
        mix = version_mix(found)
        if mix["mixed"]:
            used = ", ".join(f"v{v['number']} ({v['votes']} ratings)" for v in mix["versions"] if v["votes"])
            self.stdout.write(f"NOTE: this study mixes protocol versions: {used}; split with --by-version.")


def _dumps(report: dict) -> str:
    return json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False)


def render_text(report: dict) -> str:
    lines = [f"{report['study']} ({report['protocol']}, {report['task_type']}) — human source: {report['human_source']}"]
    level = report["study_level"]
    lines.append("  ".join(f"{k}: {level[k]}" for k in ("models", "items", "raters", "ratings", "comparisons") if k in level))
    if report.get("rater_sampling") == "fixed":
        lines.append("95% intervals resample items only (the raters are a fixed panel)")
    else:
        lines.append("95% intervals resample items and raters (the raters are a sampled crowd; see --json "
                     "'intervals' for each)")
    models = report["models"]
    if report["protocol"] == "pairwise":
        lines.append(f"{'model':<24}{'n':>6}{'win rate':>10}{'95% CI':>16}{'BT':>8}{'95% CI':>18}{'both bad':>10}")
        for name, m in models.items():
            wr_ci = m["win_rate_ci95"] or [None, None]
            bt_ci = m["bt_ci95"] or [None, None]
            lines.append(f"{name:<24}{m['comparisons']:>6}{_fmt(m['win_rate']):>10}"
                         f"{_fmt(wr_ci[0]) + '–' + _fmt(wr_ci[1]):>16}{_fmt(m['bt_score']):>8}"
                         f"{_fmt(bt_ci[0]) + '–' + _fmt(bt_ci[1]):>18}{_fmt(m['both_bad_rate']):>10}")
    elif models:
        dims = list(next(iter(models.values()))["dimensions"])
        digits = 2
        header = f"{'model':<22}{'items':>6}{'raters':>7}" + "".join(f"{d[:12] + ' mean±std':>23}" for d in dims)
        header += "".join(f"{d[:4] + ' α ord':>11}" for d in dims) + f"{'QA':>8}"
        lines.append(header)
        for name, m in models.items():
            row = f"{name[:21]:<22}{m['items']:>6}{m['raters'] if m['raters'] is not None else '—':>7}"
            for d in dims:
                block = m["dimensions"][d]
                row += f"{_fmt(block['mean'], digits) + '±' + _fmt(block['std_between_raters'], digits):>23}"
            for d in dims:
                row += f"{_fmt(m['dimensions'][d]['alpha'].get('ordinal')):>11}"
            qa = m.get("qa_accuracy")
            row += f"{'—' if qa is None else f'{100 * qa:.2f}%':>8}"
            lines.append(row)
    for judge, dims in report["judges"].items():
        parts = []
        for dim, v in dims.items():
            if dim == "qa":  # yes/no answers: agreement with the human majority, not a correlation
                parts.append(f"yes/no agrees with the human majority {_fmt(v['agreement'], 3)} "
                             f"(Cohen's kappa {_fmt(v['cohen_kappa'], 3)}, n={v['n']})")
            else:
                parts.append(f"{dim} SRCC {_fmt(v['spearman_fisher_mean'], 3)} "
                             f"(Fisher-z mean over {v['models']} models, n={v['n']})")
        lines.append(f"judge {judge}: " + ", ".join(parts))
    for c in (report.get("judge_comparisons") or {}).get("comparisons", []):
        if c["difference"] is None:
            continue
        ci = f" [{_fmt(c['ci95'][0], 3)}, {_fmt(c['ci95'][1], 3)}]" if c.get("ci95") else ""
        lines.append(f"{c['human_dimension']} SRCC {c['first']['judge']} - {c['second']['judge']}: "
                     f"{c['difference']:+.3f}{ci}, Holm p {_fmt(c['p_holm'], 3)}"
                     f"{' (real)' if c['real'] else ''}")
    if report["reasons"]:
        lines.append(f"{len(report['reasons'])} undefined value(s); first: {report['reasons'][0]} (see --json)")
    return "\n".join(lines)
