from django import forms
from django.contrib import admin

from analysis.models import Judge, JudgeRun, JudgeScore


class JudgeForm(forms.ModelForm):
    class Meta:
        model = Judge
        fields = "__all__"

    def clean(self):
        # the same schema as the API and the CLI: no URLs the operator has not allowed, no keys
        from analysis.judge_services import JudgeRunError, judge_params_check

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
        from analysis.judge_services import judge_run_cancel

        for run in queryset:
            judge_run_cancel(run=run)
        self.message_user(request, f"Asked {queryset.count()} runs to stop")

    @admin.action(description="Resume selected runs (retry failed units)")
    def resume_runs(self, request, queryset):
        from django.contrib import messages

        from analysis.judge_services import JudgeRunError, judge_run_resume

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
