from django.contrib import admin

from analysis.models import Judge, JudgeRun, JudgeScore


@admin.register(Judge)
class JudgeAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "version", "lower_is_better", "created_at"]
    list_filter = ["kind"]
    search_fields = ["name"]


@admin.register(JudgeRun)
class JudgeRunAdmin(admin.ModelAdmin):
    list_display = ["id", "judge", "study", "source", "state", "done", "failed", "total", "created_at"]
    list_filter = ["state", "source", "judge"]


@admin.register(JudgeScore)
class JudgeScoreAdmin(admin.ModelAdmin):
    list_display = ["id", "run", "item", "dimension", "value", "parse_status", "latency_ms"]
    list_filter = ["parse_status", "dimension", "run__judge"]
    raw_id_fields = ["item", "run"]
