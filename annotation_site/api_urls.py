"""URLs under /api/: the research REST API and its OpenAPI schema and docs (wiring only)."""

from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView

from analysis import api as analysis_api
from analysis import export_api
from analysis import stopping_api  # noqa: I001 (apart from release_api: merges with the allocation API's import)
from analysis import release_api
from tasks import allocation_api
from tasks import api as task_api

urlpatterns = [
    path("studies/", task_api.StudyListCreate.as_view(), name="api-studies"),
    path("studies/<slug:slug>/", task_api.StudyDetail.as_view(), name="api-study"),
    path("study-builds/<int:build_id>/", task_api.StudyBuildDetail.as_view(), name="api-study-build"),
    path("studies/<slug:slug>/publish/", task_api.StudyAction.as_view(action="publish"), name="api-study-publish"),
    path("studies/<slug:slug>/close/", task_api.StudyAction.as_view(action="close"), name="api-study-close"),
    path("studies/<slug:slug>/clone/", task_api.StudyAction.as_view(action="clone"), name="api-study-clone"),
    path("studies/<slug:slug>/items/", task_api.StudyItems.as_view(), name="api-study-items"),
    path("studies/<slug:slug>/ratings/", task_api.StudyRatings.as_view(), name="api-study-ratings"),
    path("studies/<slug:slug>/allocation/", allocation_api.StudyAllocation.as_view(), name="api-study-allocation"),
    path("studies/<slug:slug>/results/", analysis_api.StudyResults.as_view(), name="api-study-results"),
    path("studies/<slug:slug>/export/", analysis_api.StudyExport.as_view(), name="api-study-export"),
    path("studies/<slug:slug>/exports/", export_api.StudyExports.as_view(), name="api-study-exports"),
    path("exports/<int:export_id>/", export_api.StudyExportDetail.as_view(), name="api-study-export-detail"),
    path("exports/<int:export_id>/download/", export_api.StudyExportDownload.as_view(), name="api-study-export-download"),
    path("studies/<slug:slug>/raters/<int:rater_id>/decision/", task_api.StudyRaterDecision.as_view(),
         name="api-study-rater-decision"),
    path("studies/<slug:slug>/prolific-decisions/", task_api.StudyProlificDecisions.as_view(),
         name="api-study-prolific-decisions"),
    path("studies/<slug:slug>/releases/", release_api.StudyReleases.as_view(), name="api-study-releases"),
    path("studies/<slug:slug>/releases/<int:release_id>/", release_api.StudyReleaseDetail.as_view(),
         name="api-study-release"),
    path("studies/<slug:slug>/releases/<int:release_id>/download/", release_api.StudyReleaseDownload.as_view(),
         name="api-study-release-download"),
    path("studies/<slug:slug>/stopping/", stopping_api.StudyStopping.as_view(), name="api-study-stopping"),
    path("judge-runs/", analysis_api.JudgeRunList.as_view(), name="api-judge-runs"),
    path("judge-runs/<int:pk>/", analysis_api.JudgeRunDetail.as_view(), name="api-judge-run"),
    path("judge-runs/<int:pk>/cancel/", analysis_api.JudgeRunAction.as_view(action="cancel"), name="api-judge-run-cancel"),
    path("judge-runs/<int:pk>/resume/", analysis_api.JudgeRunAction.as_view(action="resume"), name="api-judge-run-resume"),
    path("judge-endpoints/", analysis_api.JudgeEndpointList.as_view(), name="api-judge-endpoints"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves its start-up script as a file: the Content-Security-Policy allows no inline script.
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    path("redoc/", SpectacularRedocView.as_view(url_name="api-schema"), name="api-redoc"),
]
