from django.core.management.base import BaseCommand, CommandError

from analysis.importers import JUDGE_FORMATS, ImportFailed, judge_import


class Command(BaseCommand):
    help = (
        "Import judge scores for items of existing studies. viescore: DIR/<study-slug>/<Model>/{SC,PQ}.json; "
        "autometrics: DIR/<study-slug>/<Model>.json; csv: a file (or folder of files) with columns "
        "study, model, item, judge, dimension, value. Idempotent."
    )

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--format", dest="fmt", choices=JUDGE_FORMATS, required=True)
        parser.add_argument("--judge", default="", help="Judge name (required for viescore; prefix for autometrics)")

    def handle(self, *args, path, fmt, judge, **options):
        try:
            summary = judge_import(path=path, fmt=fmt, judge_name=judge)
        except ImportFailed as exc:
            raise CommandError(f"nothing imported: {exc}") from exc
        self.stdout.write(str(summary))
