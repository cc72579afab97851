from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.template.response import TemplateResponse

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
from raters.services import DecisionRefused, rater_block


@admin.register(Rater)
class RaterAdmin(admin.ModelAdmin):
    list_display = ["__str__", "platform", "external_id", "state", "state_reason", "created_at"]
    list_filter = ["platform", "state"]
    search_fields = ["external_id", "user__username"]
    raw_id_fields = ["user"]
    actions = ["block_raters"]

    @admin.action(description="Block selected raters site-wide (asks for a reason)")
    def block_raters(self, request, queryset):
        """Asks for a reason, then blocks each rater through raters.services.rater_block (logged)."""
        reason = request.POST.get("reason", "").strip()
        if "apply" in request.POST and reason:
            for rater in queryset:
                try:
                    rater_block(rater=rater, actor=request.user,
                                reason=f"{reason} (from the admin, {request.user.get_username()})")
                except DecisionRefused as exc:
                    self.message_user(request, f"{rater}: {exc}", messages.ERROR)
                    continue
                self.log_change(request, rater, f"Blocked site-wide: {reason}")
                self.message_user(request, f"Blocked {rater} site-wide")
            return None
        return TemplateResponse(request, "admin/raters/rater/block_raters.html", {
            **self.admin_site.each_context(request),
            "title": "Block raters",
            "raters": list(queryset),
            "reason": reason,
            "error": "Give a reason: it is kept with the decision and shown in exports" if "apply" in request.POST else "",
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "opts": self.model._meta,
        })


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
