import json

from django.core.management.base import BaseCommand, CommandError

from analysis.judge_services import JudgeRunError, judge_create, judge_run_start
from analysis.models import Judge, JudgeRun
from tasks.models import Study


class Command(BaseCommand):
    help = (
        "Run a judge on every item of a study (Celery job; runs inline in eager mode). "
        "The judge is created on first use from --kind and --param key=value options; the endpoint and "
        "model come from --param base_url=... model=... or JUDGE_API_BASE / JUDGE_MODEL, the key from "
        "JUDGE_API_KEY. Re-running reuses cached scores and makes no repeat calls."
    )

    def add_arguments(self, parser):
        parser.add_argument("study", help="Study slug")
        parser.add_argument("--judge", required=True, help="Judge name")
        parser.add_argument("--kind", choices=[k for k in Judge.Kind.values if k != Judge.Kind.IMPORTED])
        parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                            help="Judge parameter; VALUE is parsed as JSON when possible (concurrency=4, concat_images=true)")
        parser.add_argument("--judge-version", dest="judge_version", default="1")

    def handle(self, *args, study, judge, kind, param, judge_version, **options):
        try:
            target = Study.objects.get(slug=study)
        except Study.DoesNotExist:
            raise CommandError(f"no study with slug {study!r}") from None
        params = {}
        for pair in param:
            key, sep, raw = pair.partition("=")
            if not sep or not key:
                raise CommandError(f"--param needs KEY=VALUE, got {pair!r}")
            try:
                params[key] = json.loads(raw)
            except json.JSONDecodeError:
                params[key] = raw
        existing = Judge.objects.filter(name=judge).first()
        try:
            if existing and not kind and not params:
                the_judge = existing
            else:
                if not kind:
                    raise CommandError(f"judge {judge!r} does not exist yet: give --kind (and --param options)")
                the_judge = judge_create(name=judge, kind=kind, params=params, version=judge_version)
            run = judge_run_start(judge=the_judge, study=target)
        except JudgeRunError as exc:
            raise CommandError(str(exc)) from None
        run = JudgeRun.objects.get(pk=run.pk)
        self.stdout.write(
            f"run {run.pk}: {the_judge.name} on {target.slug}: {run.state}, {run.done}/{run.total} units, "
            f"{run.failed} failed or refused, {run.calls} requests, {run.cached} from cache"
        )
