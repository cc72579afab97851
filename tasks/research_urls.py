"""URLs under /research/: the researcher pages (wiring only)."""

from django.urls import path

from analysis import release_views
from tasks import research_views as views

urlpatterns = [
    path("new/", views.study_new, name="research-study-new"),
    path("new/<int:build_id>/", views.study_build, name="research-study-build"),
    path("<slug:slug>/", views.study_dashboard, name="research-study"),
    path("<slug:slug>/leaderboard/", views.study_leaderboard, name="research-leaderboard"),
    path("<slug:slug>/plots/<str:name>.svg", views.study_plot, name="research-plot"),
    path("<slug:slug>/export.zip", views.study_export, name="research-export"),
    path("<slug:slug>/settings/", views.study_settings, name="research-study-settings"),
    path("<slug:slug>/release/", release_views.study_release, name="research-release"),
    path("<slug:slug>/release/<int:release_id>.zip", release_views.study_release_download,
         name="research-release-download"),
    path("<slug:slug>/<str:action>/", views.study_action, name="research-study-action"),
]
