"""URLs under /research/: the researcher pages (wiring only)."""

from django.urls import path

from analysis import release_views
from tasks import configure_views
from tasks import lifecycle_views
from analysis import research_views as views

urlpatterns = [
    path("new/", views.study_new, name="research-study-new"),
    path("new/<int:build_id>/", views.study_build, name="research-study-build"),
    path("new/sample/<slug:protocol>/<slug:task_type>.zip", lifecycle_views.sample_bundle_download,
         name="research-sample-bundle"),
    path("<slug:slug>/", views.study_dashboard, name="research-study"),
    path("<slug:slug>/leaderboard/", views.study_leaderboard, name="research-leaderboard"),
    path("<slug:slug>/plots/<str:name>.svg", views.study_plot, name="research-plot"),
    path("<slug:slug>/export.zip", views.study_export, name="research-export"),
    path("<slug:slug>/settings/", views.study_settings, name="research-study-settings"),
    path("<slug:slug>/configure/", configure_views.study_configure_page, name="research-study-configure"),
    path("<slug:slug>/configure/examples/", configure_views.study_examples, name="research-study-examples"),
    path("<slug:slug>/configure/attention/", configure_views.study_attention, name="research-study-attention"),
    path("<slug:slug>/launch/", configure_views.study_launch, name="research-study-launch"),
    path("<slug:slug>/export/", configure_views.study_export_page, name="research-study-export-page"),
    path("<slug:slug>/items/", lifecycle_views.study_items, name="research-study-items"),
    path("<slug:slug>/preview/", lifecycle_views.study_preview, name="research-study-preview"),
    path("<slug:slug>/preview/phone/", lifecycle_views.study_phone_preview, name="research-study-phone-preview"),
    path("<slug:slug>/release/", release_views.study_release, name="research-release"),
    path("<slug:slug>/release/<int:release_id>.zip", release_views.study_release_download,
         name="research-release-download"),
    path("<slug:slug>/<str:action>/", views.study_action, name="research-study-action"),
]
