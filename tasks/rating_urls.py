"""Rater-facing URLs: /s/<study-slug>/… for the rating flow, /img/… for images."""

from django.urls import path

from tasks import qualification_views, rating_views

app_name = "rating"

urlpatterns = [
    path("s/<slug:slug>/start", rating_views.start, name="start"),
    path("s/<slug:slug>/consent", rating_views.consent, name="consent"),
    path("s/<slug:slug>/instructions", rating_views.instructions, name="instructions"),
    path("s/<slug:slug>/rubric", rating_views.rubric, name="rubric"),
    path("s/<slug:slug>/rate", rating_views.next_screen, name="next"),
    path("s/<slug:slug>/rate/<int:position>", rating_views.unit, name="unit"),
    path("s/<slug:slug>/rate/<int:position>/report", rating_views.unit_report, name="unit_report"),
    path("s/<slug:slug>/more", rating_views.more, name="more"),
    path("s/<slug:slug>/done", rating_views.done, name="done"),
    path("img/<str:sha256>/<str:size>", rating_views.image, name="image"),
]

# The qualification test: a rating screen, named in the raters' namespace (raters:qualification)
# where annotation_site.urls includes it with raters.urls.
qualification_urlpatterns = [
    path("studies/<slug:slug>/qualification/", qualification_views.qualification, name="qualification"),
]
