from django.core.management.base import BaseCommand, CommandError

from analysis.importers import ImportFailed, evalmi_import


class Command(BaseCommand):
    help = (
        "Import EvalMi-50K's published MOS and QA answers as the human reference of an EvalMi study "
        "(prompts, task questions, sub-questions and task tags included). Idempotent."
    )

    def add_arguments(self, parser):
        parser.add_argument("mos", help="AIGI2025_MOS_yn.xlsx")
        parser.add_argument("--questions", required=True, help="question.xlsx")
        parser.add_argument("--tasks", required=True, help="prompt_tasks.jsonl")
        parser.add_argument("--study", required=True, help="Study slug to create or fill")

    def handle(self, *args, mos, questions, tasks, study, **options):
        try:
            summary = evalmi_import(mos_path=mos, questions_path=questions, tasks_path=tasks, study_slug=study)
        except ImportFailed as exc:
            raise CommandError(f"nothing imported: {exc}") from exc
        self.stdout.write(str(summary))
