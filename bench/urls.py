"""The product URLs plus ``/bench/bare``: a bare Django JSON view with one database query."""

from django.http import HttpRequest, JsonResponse
from django.urls import path

from annotation_site.urls import urlpatterns as site_urlpatterns
from tasks.models import Study


def bare(request: HttpRequest) -> JsonResponse:
    """Same stack as the rating views (middleware, ORM, PostgreSQL), minimal work: one SELECT."""
    row = Study.objects.values("id", "slug").order_by("id").first()
    return JsonResponse({"ok": True, "study": row})


urlpatterns = [path("bench/bare", bare, name="bench-bare"), *site_urlpatterns]
