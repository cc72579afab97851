from django.contrib import admin
from django.utils.html import format_html

from tasks.models import (
    Assignment,
    Comparison,
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


def _thumb(image, size: int = 96):
    if image is None or not image.file:
        return "—"
    return format_html('<img src="{}" style="max-width:{}px;max-height:{}px" alt="">', image.file.url, size, size)


@admin.register(Study)
class StudyAdmin(admin.ModelAdmin):
    list_display = ["slug", "title", "protocol", "task_type", "state", "raters_per_item", "assignment_mode"]
    list_filter = ["protocol", "state", "assignment_mode"]
    search_fields = ["slug", "title"]
    filter_horizontal = ["owners"]
    actions = ["open_studies", "close_studies"]

    @admin.action(description="Open selected studies for rating")
    def open_studies(self, request, queryset):
        updated = queryset.update(state=Study.State.OPEN)
        self.message_user(request, f"Opened {updated} studies")

    @admin.action(description="Close selected studies")
    def close_studies(self, request, queryset):
        updated = queryset.update(state=Study.State.CLOSED)
        self.message_user(request, f"Closed {updated} studies")


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


@admin.register(Comparison)
class ComparisonAdmin(admin.ModelAdmin):
    list_display = ["id", "study", "item_a", "item_b"]
    list_filter = ["study"]
    raw_id_fields = ["item_a", "item_b"]


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
    list_filter = ["study", "source"]
    raw_id_fields = ["rater", "item", "comparison"]
    inlines = [RatingRevisionInline]


@admin.register(GoldAnswer)
class GoldAnswerAdmin(admin.ModelAdmin):
    list_display = ["item", "values", "answers", "tolerance"]
    list_filter = ["item__study"]
    raw_id_fields = ["item"]
