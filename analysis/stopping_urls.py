"""URLs of issue #17's researcher pages under /research/ (wiring only; included before the study
routes, whose ``<slug>/<action>/`` would take them)."""

from django.urls import path

from analysis import stopping_views

urlpatterns = [
    path("help/stopping/", stopping_views.stopping_method, name="research-stopping-method"),
    path("<slug:slug>/planning-sources/", stopping_views.study_planning_sources,
         name="research-study-planning-sources"),
]
