from django.contrib import admin

from raters.models import Rater


@admin.register(Rater)
class RaterAdmin(admin.ModelAdmin):
    list_display = ["__str__", "platform", "external_id", "state", "created_at"]
    list_filter = ["platform", "state"]
    search_fields = ["external_id", "user__username"]
    raw_id_fields = ["user"]
