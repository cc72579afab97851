from django.urls import path

from analysis import judge_views

urlpatterns = [
    path("", judge_views.side_by_side, name="judge_side_by_side"),
    path("scatter.svg", judge_views.scatter_svg, name="judge_scatter"),
    path("runs/start/", judge_views.run_start, name="judge_run_start"),
    path("runs/<int:run_id>/cancel/", judge_views.run_cancel, name="judge_run_cancel"),
    path("runs/<int:run_id>/resume/", judge_views.run_resume, name="judge_run_resume"),
]
