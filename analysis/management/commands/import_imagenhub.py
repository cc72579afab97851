from django.core.management.base import BaseCommand, CommandError

from analysis.importers import ImportFailed, imagenhub_import


class Command(BaseCommand):
    help = (
        "Import ImagenHub human ratings: DIR holds task folders <Task>/<Task>_raterN.tsv (or is one). "
        "One study per folder (slug = folder name), one imported rater per file. Idempotent."
    )

    def add_arguments(self, parser):
        parser.add_argument("directory")

    def handle(self, *args, directory, **options):
        try:
            summary = imagenhub_import(path=directory)
        except ImportFailed as exc:
            raise CommandError(f"nothing imported: {exc}") from exc
        self.stdout.write(str(summary))
