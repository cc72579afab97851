from django.contrib import admin, messages
from django.urls import reverse
from django.utils.html import format_html

from tasks.models import (
    Assignment,
    Comparison,
    ComparisonGold,
    ConditionImage,
    GenModel,
    GoldAnswer,
    Instance,
    Item,
    Rating,
    RatingRevision,
    StoredImage,
    Study,
)
from tasks.study_services import (
    StudyActionRefused,
    study_clone,
    study_close,
    study_publish,
)


def _thumb(image, size: int = 96):
    if image is None or not image.file:
        return "—"
    # the access-checked route (staff see every image), not the media URL that only DEBUG serves
    url = reverse("rating:image", args=[image.sha256, 160])
    return format_html('<img src="{}" style="max-width:{}px;max-height:{}px" alt="">', url, size, size)


@admin.register(Study)
class StudyAdmin(admin.ModelAdmin):
    list_display = ["slug", "title", "protocol", "task_type", "state", "raters_per_item", "assignment_mode", "created_at"]
    list_filter = ["protocol", "state", "assignment_mode", "task_type"]
    search_fields = ["slug", "title", "owners__username"]
    filter_horizontal = ["owners", "collaborators"]
    actions = ["open_studies", "close_studies", "clone_studies"]

    def _each(self, request, queryset, service, verb: str) -> None:
        for study in queryset:
            try:
                service(study=study)
            except StudyActionRefused as exc:
                self.message_user(request, str(exc), level=messages.WARNING)
            else:
                self.message_user(request, f"{verb} {study.slug}")

    @admin.action(description="Open selected studies for rating")
    def open_studies(self, request, queryset):
        self._each(request, queryset, study_publish, "Opened")

    @admin.action(description="Close selected studies")
    def close_studies(self, request, queryset):
        self._each(request, queryset, study_close, "Closed")

    @admin.action(description="Clone selected studies as drafts")
    def clone_studies(self, request, queryset):
        for study in queryset:
            clone = study_clone(study=study, owner=request.user)
            self.message_user(request, f"Cloned {study.slug} as {clone.slug}")


@admin.register(GenModel)
class GenModelAdmin(admin.ModelAdmin):
    list_display = ["name", "study"]
    list_filter = ["study"]
    search_fields = ["name"]


class ConditionImageInline(admin.TabularInline):
    model = ConditionImage
    extra = 0
    fields = ["role", "position", "token", "image", "preview"]
    readonly_fields = ["preview"]
    raw_id_fields = ["image"]

    @admin.display(description="Preview")
    def preview(self, obj):
        return _thumb(obj.image)


@admin.register(Instance)
class InstanceAdmin(admin.ModelAdmin):
    list_display = ["key", "study", "prompt", "task_tag"]
    list_filter = ["study"]
    search_fields = ["key", "prompt"]
    inlines = [ConditionImageInline]


@admin.register(Item)
class ItemAdmin(admin.ModelAdmin):
    list_display = ["preview", "instance", "gen_model", "study"]
    list_filter = ["study", "gen_model__name"]
    search_fields = ["instance__key", "instance__prompt", "gen_model__name"]
    raw_id_fields = ["instance", "gen_model", "image"]
    list_select_related = ["instance", "gen_model", "image", "study"]

    @admin.display(description="Output")
    def preview(self, obj):
        return _thumb(obj.image)


@admin.register(StoredImage)
class StoredImageAdmin(admin.ModelAdmin):
    list_display = ["preview", "sha256", "width", "height", "format", "created_at"]
    search_fields = ["sha256"]

    @admin.display(description="Image")
    def preview(self, obj):
        return _thumb(obj)


class ComparisonGoldInline(admin.StackedInline):
    """Make a comparison hidden gold from its own page (pairwise studies)."""

    model = ComparisonGold
    extra = 0
    max_num = 1


@admin.register(Comparison)
class ComparisonAdmin(admin.ModelAdmin):
    list_display = ["id", "study", "item_a", "item_b"]
    list_filter = ["study"]
    raw_id_fields = ["item_a", "item_b"]
    inlines = [ComparisonGoldInline]


@admin.register(Assignment)
class AssignmentAdmin(admin.ModelAdmin):
    list_display = ["id", "study", "rater", "item", "comparison", "state", "position", "lease_expires_at"]
    list_filter = ["study", "state"]
    raw_id_fields = ["rater", "item", "comparison"]


class RatingRevisionInline(admin.TabularInline):
    model = RatingRevision
    extra = 0
    readonly_fields = ["values", "answers", "time_on_item_ms", "replaced_at"]


@admin.register(Rating)
class RatingAdmin(admin.ModelAdmin):
    list_display = ["id", "study", "rater", "item", "comparison", "values", "source", "time_on_item_ms", "updated_at"]
    list_filter = ["study", "source", "created_at"]
    search_fields = ["item__instance__key", "rater__external_id", "rater__user__username"]
    raw_id_fields = ["rater", "item", "comparison"]
    list_select_related = ["study", "rater", "item", "comparison"]
    inlines = [RatingRevisionInline]


@admin.register(GoldAnswer)
class GoldAnswerAdmin(admin.ModelAdmin):
    list_display = ["item", "values", "answers", "tolerance"]
    list_filter = ["item__study"]
    raw_id_fields = ["item"]


@admin.register(ComparisonGold)
class ComparisonGoldAdmin(admin.ModelAdmin):
    """Hidden gold of pairwise studies: the expected preference (A = the comparison's item A)."""

    list_display = ["comparison", "preference", "note"]
    list_filter = ["comparison__study"]
    raw_id_fields = ["comparison"]
