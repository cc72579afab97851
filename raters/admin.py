from django.contrib import admin

from raters.models import (
    AttentionCheck,
    AttentionResult,
    QualificationAnswer,
    QualificationAttempt,
    QualityPolicy,
    Rater,
    RaterAction,
    RaterStanding,
)


@admin.register(Rater)
class RaterAdmin(admin.ModelAdmin):
    list_display = ["__str__", "platform", "external_id", "state", "state_reason", "created_at"]
    list_filter = ["platform", "state"]
    search_fields = ["external_id", "user__username"]
    raw_id_fields = ["user"]
    actions = ["block_raters"]

    @admin.action(description="Block selected raters site-wide (logged in their latest study)")
    def block_raters(self, request, queryset):
        """Blocks go through rater_decide so each one is logged with a reason and an actor."""
        from django.contrib import messages

        from raters.services import rater_decide
        from tasks.models import Rating

        for rater in queryset:
            latest = Rating.objects.filter(rater=rater).order_by("-created_at").select_related("study").first()
            if latest is None:
                self.message_user(request, f"{rater}: no ratings, so no study to record the block in", messages.WARNING)
                continue
            rater_decide(study=latest.study, rater=rater, decision="block", actor=request.user,
                         reason=f"Blocked from the admin by {request.user.get_username()}")
            self.message_user(request, f"Blocked {rater}")


@admin.register(QualityPolicy)
class QualityPolicyAdmin(admin.ModelAdmin):
    list_display = ["study", "qualification_required", "gold_min_accuracy", "gold_action", "attention_action"]
    raw_id_fields = ["study"]
    filter_horizontal = ["qualification_items"]


@admin.register(RaterStanding)
class RaterStandingAdmin(admin.ModelAdmin):
    """Read-only here: decisions go through the rater page so they are logged with a reason."""

    list_display = ["rater", "study", "state", "automatic", "decided_by", "updated_at"]
    list_filter = ["state", "automatic", "study"]
    readonly_fields = ["study", "rater", "state", "reason", "automatic", "decided_by", "updated_at"]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(RaterAction)
class RaterActionAdmin(admin.ModelAdmin):
    list_display = ["created_at", "study", "rater", "decision", "automatic", "actor", "reason"]
    list_filter = ["decision", "automatic", "study"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


class QualificationAnswerInline(admin.TabularInline):
    model = QualificationAnswer
    extra = 0
    readonly_fields = ["item", "values", "answers", "correct", "time_on_item_ms"]


@admin.register(QualificationAttempt)
class QualificationAttemptAdmin(admin.ModelAdmin):
    list_display = ["rater", "study", "number", "passed", "correct", "started_at", "finished_at"]
    list_filter = ["passed", "study"]
    inlines = [QualificationAnswerInline]


@admin.register(AttentionCheck)
class AttentionCheckAdmin(admin.ModelAdmin):
    list_display = ["study", "item", "instruction", "after_items"]
    raw_id_fields = ["study", "item"]


@admin.register(AttentionResult)
class AttentionResultAdmin(admin.ModelAdmin):
    list_display = ["attention_check", "rater", "passed", "created_at"]
    list_filter = ["passed"]
