from django.core.management.base import BaseCommand, CommandError

from analysis.importers import ImportFailed, long_ratings_import
from analysis.science import protocols


class Command(BaseCommand):
    help = (
        "Import human ratings collected elsewhere from a long-format CSV or Parquet file: one rating per "
        "row with columns study, item, model, rater, dimension, value (optional prompt). Existing studies "
        "keep their protocol; new ones need --protocol and --task-type. Idempotent."
    )

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--protocol", choices=[protocols.IMAGENHUB, protocols.EVALMI], default="",
                            help="Protocol of studies the file creates")
        parser.add_argument("--task-type", default="", help="Task type of studies the file creates")

    def handle(self, *args, path, protocol, task_type, **options):
        try:
            summary = long_ratings_import(path=path, protocol=protocol, task_type=task_type)
        except ImportFailed as exc:
            raise CommandError(f"nothing imported: {exc}") from exc
        self.stdout.write(str(summary))
