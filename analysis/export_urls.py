from django.urls import path

from analysis import export_views

urlpatterns = [
    path("", export_views.export_page, name="study-exports"),
    path("start/", export_views.export_start, name="study-export-start"),
    path("<int:export_id>/download/", export_views.export_download, name="study-export-download"),
]
