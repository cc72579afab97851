"""Admin of the analysis app: judges, their runs and scores, and the judge actions on studies.

The study admin is the tasks app's; analysis registers its subclass in its place, which adds the
"start judge run" actions and deletes through analysis.study_deletion (a study's rows are in
every app), so tasks never imports analysis.
"""

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import quote
from django.db import transaction
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import capfirst

from analysis.judge_services import (RUNNABLE_KINDS, JudgeRunError, judge_params_check, judge_run_cancel,
                                     judge_run_resume, judge_run_start)
from analysis.models import Judge, JudgeRun, JudgeScore
from analysis.study_deletion import study_delete, study_delete_counts, study_delete_refusal
from tasks.admin import StudyAdmin
from tasks.models import Study


class JudgeForm(forms.ModelForm):
    class Meta:
        model = Judge
        fields = "__all__"

    def clean(self):
        # the same schema as the API and the CLI: no URLs the operator has not allowed, no keys
        data = super().clean()
        if data.get("kind") and data.get("kind") != Judge.Kind.IMPORTED and isinstance(data.get("params"), dict):
            try:
                judge_params_check(data["kind"], data["params"])
            except JudgeRunError as exc:
                raise forms.ValidationError({"params": str(exc)}) from None
        return data


@admin.register(Judge)
class JudgeAdmin(admin.ModelAdmin):
    form = JudgeForm
    list_display = ["name", "owner", "kind", "version", "lower_is_better", "created_at"]
    list_filter = ["kind", ("owner", admin.EmptyFieldListFilter)]
    search_fields = ["name", "owner__username"]
    raw_id_fields = ["owner"]  # empty owner = shared: staff make a judge shared on purpose, here


@admin.register(JudgeRun)
class JudgeRunAdmin(admin.ModelAdmin):
    list_display = ["id", "judge", "study", "source", "state", "done", "failed", "total", "created_at"]
    list_filter = ["state", "source", "judge"]
    search_fields = ["judge__name", "study__slug"]
    list_select_related = ["judge", "study"]
    actions = ["cancel_runs", "resume_runs"]

    @admin.action(description="Cancel selected runs")
    def cancel_runs(self, request, queryset):
        for run in queryset:
            judge_run_cancel(run=run)
        self.message_user(request, f"Asked {queryset.count()} runs to stop")

    @admin.action(description="Resume selected runs (retry failed units)")
    def resume_runs(self, request, queryset):
        for run in queryset:
            try:
                judge_run_resume(run=run)
            except JudgeRunError as exc:
                self.message_user(request, str(exc), messages.WARNING)
            else:
                self.message_user(request, f"Run {run.pk} queued again")


@admin.register(JudgeScore)
class JudgeScoreAdmin(admin.ModelAdmin):
    list_display = ["id", "run", "item", "dimension", "value", "parse_status", "latency_ms"]
    list_filter = ["parse_status", "dimension", "run__judge"]
    raw_id_fields = ["item", "run"]


def _judge_action(judge_id: int, judge_name: str):
    """An admin action that starts one judge on each selected study (via the judges service)."""

    def start(modeladmin, request, queryset):
        judge = Judge.objects.get(pk=judge_id)
        for study in queryset:
            try:
                run = judge_run_start(judge=judge, study=study)
            except JudgeRunError as exc:
                modeladmin.message_user(request, f"Not started on {study.slug}: {exc}", level=messages.ERROR)
            else:
                modeladmin.message_user(request, f"Judge run {run.pk} queued on {study.slug} ({run.total} units)")

    start.__name__ = f"start_judge_{judge_id}"
    return start, start.__name__, f"Start judge run: {judge_name}"


admin.site.unregister(Study)


@admin.register(Study)
class StudyWithAnalysisAdmin(StudyAdmin):
    """The tasks app's study admin plus one "start judge run" action per runnable judge, and a
    delete that reaches every app's rows (analysis.study_deletion)."""

    # Deleting: Django's own collector lists (and then deletes) every related row in Python, which
    # at EvalMi scale is 806,400 ratings on the confirmation page and a rating-id list PostgreSQL
    # refuses. The page shows counts instead and the service deletes with set-based statements.

    def get_deleted_objects(self, objs, request):
        """The confirmation page's summary: each study, then the rows going with them as counts.

        As Django's: a model registered here whose rows would go needs the user's delete
        permission (``perms_needed``); nothing is protected (images are not deleted).
        """
        studies = list(objs)
        if not studies:
            return [], {}, set(), []
        counts = study_delete_counts(studies=studies)
        perms_needed = set()
        for model in counts:
            model_admin = self.admin_site.get_model_admin(model) if self.admin_site.is_registered(model) else None
            if model_admin is not None and not model_admin.has_delete_permission(request):
                perms_needed.add(model._meta.verbose_name)
        links = [
            format_html('{}: <a href="{}">{}</a>', capfirst(Study._meta.verbose_name),
                        reverse(f"{self.admin_site.name}:tasks_study_change", args=[quote(study.pk)]), study)
            for study in studies
        ]
        related = [f"{n:,} {model._meta.verbose_name if n == 1 else model._meta.verbose_name_plural}"
                   for model, n in counts.items() if model is not Study]
        to_delete = links + (["and with them:", related] if related else [])
        model_count = {model._meta.verbose_name_plural: f"{n:,}" for model, n in counts.items()}
        # Django's "protected" list: the page then refuses, and so does its POST
        refused = [reason for study in studies if (reason := study_delete_refusal(study))]
        return to_delete, model_count, perms_needed, refused

    def delete_model(self, request, obj):
        study_delete(study=obj)

    @transaction.atomic
    def delete_queryset(self, request, queryset):
        for study in queryset:
            study_delete(study=study)

    def get_actions(self, request):
        actions = super().get_actions(request)
        for judge_id, name in Judge.objects.filter(kind__in=RUNNABLE_KINDS).values_list("id", "name")[:50]:
            action = _judge_action(judge_id, name)
            actions[action[1]] = action
        return actions
