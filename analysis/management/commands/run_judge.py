import json

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from analysis.judge_services import JudgeRunError, judge_create, judge_run_start
from analysis.models import Judge, JudgeRun
from tasks.models import Study


class Command(BaseCommand):
    help = (
        "Run a judge on every item of a study (Celery job; runs inline in eager mode). "
        "The judge is created on first use from --kind, --endpoint and --param key=value options; MLLM judges "
        "send requests to the operator endpoint named by --endpoint (JUDGE_ENDPOINTS, or 'default' from "
        "JUDGE_API_BASE / JUDGE_MODEL / JUDGE_API_KEY). Judges made here are shared unless --owner names a user. "
        "Re-running reuses cached scores and makes no repeat calls."
    )

    def add_arguments(self, parser):
        parser.add_argument("study", help="Study slug")
        parser.add_argument("--judge", required=True, help="Judge name")
        parser.add_argument("--kind", choices=[k for k in Judge.Kind.values if k != Judge.Kind.IMPORTED])
        parser.add_argument("--endpoint", help="Operator endpoint name for MLLM judges (default: 'default')")
        parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                            help="Judge parameter; VALUE is parsed as JSON when possible (concurrency=4, concat_images=true)")
        parser.add_argument("--judge-version", dest="judge_version", default="1")
        parser.add_argument("--owner", help="Username whose judge this is (default: a shared judge)")

    def handle(self, *args, study, judge, kind, endpoint, param, judge_version, owner, **options):
        try:
            target = Study.objects.get(slug=study)
        except Study.DoesNotExist:
            raise CommandError(f"no study with slug {study!r}") from None
        user = None
        if owner:
            user = get_user_model().objects.filter(username=owner).first()
            if user is None:
                raise CommandError(f"no user named {owner!r}")
        params = {}
        for pair in param:
            key, sep, raw = pair.partition("=")
            if not sep or not key:
                raise CommandError(f"--param needs KEY=VALUE, got {pair!r}")
            try:
                params[key] = json.loads(raw)
            except json.JSONDecodeError:
                params[key] = raw
        if endpoint:
            params["endpoint"] = endpoint
        existing = Judge.objects.filter(name=judge, owner=user).first()
        try:
            if existing and not kind and not params:
                the_judge = existing
            else:
                if not kind:
                    raise CommandError(f"judge {judge!r} does not exist yet: give --kind (and --param options)")
                the_judge = judge_create(name=judge, kind=kind, params=params, version=judge_version, owner=user)
            run = judge_run_start(judge=the_judge, study=target)
        except JudgeRunError as exc:
            raise CommandError(str(exc)) from None
        run = JudgeRun.objects.get(pk=run.pk)
        self.stdout.write(
            f"run {run.pk}: {the_judge.name} on {target.slug}: {run.state}, {run.done}/{run.total} units, "
            f"{run.failed} failed or refused, {run.calls} requests, {run.cached} from cache"
            + (f" ({run.error})" if run.error else "")
        )
