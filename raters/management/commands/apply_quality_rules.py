from django.core.management.base import BaseCommand, CommandError

from raters.services import study_rules_apply
from tasks.models import Study


class Command(BaseCommand):
    help = "Run a study's rater-quality rules (gold accuracy, attention checks, behaviour flags) over every rater."

    def add_arguments(self, parser):
        parser.add_argument("slug", help="Study slug")

    def handle(self, *args, slug: str, **options):
        study = Study.objects.filter(slug=slug).first()
        if study is None:
            raise CommandError(f"No study with slug {slug!r}")
        taken = study_rules_apply(study=study)
        for rater_id, reasons in sorted(taken.items()):
            for reason in reasons:
                self.stdout.write(f"rater {rater_id}: {reason}")
        self.stdout.write(self.style.SUCCESS(f"{study.slug}: rules acted on {len(taken)} rater(s)"))
