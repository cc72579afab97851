"""``manage.py reproduce <package>``: rebuild a released study's report from the package alone."""

import json
import tempfile
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from analysis.science.release import compare_reports, open_package
from analysis.report import build_report


class Command(BaseCommand):
    help = ("Rebuild the report of a released dataset package (folder or zip) from its own tables, without "
            "the site's database, and compare it with the report.json it ships. Exits non-zero on any difference.")

    def add_arguments(self, parser):
        parser.add_argument("package", help="Package folder (with README.md and data/) or its zip")
        parser.add_argument("--protocol-version", dest="protocol_version", type=int, default=None,
                            help="Rebuild from the votes of one protocol version only (prints it; no comparison)")
        parser.add_argument("--json", action="store_true", help="Print the rebuilt report as JSON")

    def handle(self, *args, package: str, protocol_version: int | None, json: bool = False, **options):
        with tempfile.TemporaryDirectory() as scratch:
            try:
                study = open_package(Path(package), scratch, version=protocol_version)
            except ValueError as exc:
                raise CommandError(str(exc)) from None
            rebuilt = build_report(study)
            if json or protocol_version is not None:
                self.stdout.write(_dumps(rebuilt))
                if protocol_version is not None:
                    return
            shipped_path = study.folder / "report.json"
            if not shipped_path.exists():
                raise CommandError("the package has no report.json to compare with")
            shipped = _loads(shipped_path.read_text())
            differences = compare_reports(shipped, rebuilt)
            if differences:
                shown = "\n".join(f"  {d}" for d in differences[:50])
                more = f"\n  … {len(differences) - 50} more" if len(differences) > 50 else ""
                raise CommandError(f"the rebuilt report differs from report.json in {len(differences)} place(s):\n"
                                   f"{shown}{more}")
            self.stdout.write(f"reproduced: the report rebuilt from {package} matches its report.json "
                              f"({study.votes.shape[0]} votes, {len(rebuilt.get('models', {}))} models)")


def _dumps(report: dict) -> str:
    return json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False)


def _loads(text: str) -> dict:
    return json.loads(text)
