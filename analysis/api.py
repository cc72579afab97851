"""REST API for a study's analysis: the MOS dataset export and judge runs (researchers and admins)."""

from __future__ import annotations

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from analysis.export_input import study_export_input
from analysis.exports import iter_export_zip
from analysis.models import JudgeRun
from analysis.report import build_report
from tasks.api import RESEARCH_PERMISSIONS, get_study_for_user
from tasks.models import Study


def export_response(study: Study) -> StreamingHttpResponse:
    """The dataset zip, streamed chunk by chunk (shared by the page and the API)."""
    response = StreamingHttpResponse(iter_export_zip(study_export_input(study)), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-ratings.zip"'
    return response


class StudyExport(APIView):
    """The study's MOS dataset: a zip with CSV, JSONL, Parquet, the ImagenHub/EvalMi layouts and a datasheet."""

    permission_classes = RESEARCH_PERMISSIONS

    @extend_schema(responses={(200, "application/zip"): OpenApiTypes.BINARY})
    def get(self, request: Request, slug: str) -> StreamingHttpResponse:
        return export_response(get_study_for_user(request.user, slug))


class StudyResults(APIView):
    """The study report (analysis.report.build_report): per-model means, CIs, agreement, judges, reasons.

    ``?include_excluded=true`` keeps blocked raters in.
    """

    permission_classes = RESEARCH_PERMISSIONS

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, slug: str) -> Response:
        study = get_study_for_user(request.user, slug)
        include = request.query_params.get("include_excluded", "").lower() in ("1", "true", "yes")
        return Response(build_report(study, include_excluded=include))


class JudgeRunOutput(serializers.ModelSerializer):
    judge = serializers.CharField(source="judge.name")
    judge_kind = serializers.CharField(source="judge.kind")
    study = serializers.CharField(source="study.slug")

    class Meta:
        model = JudgeRun
        fields = ["id", "judge", "judge_kind", "study", "source", "state", "total", "done", "failed", "error",
                  "created_at", "started_at", "finished_at"]


def _visible_runs(user):
    return JudgeRun.objects.filter(study__in=Study.objects.visible_to(user)).select_related("judge", "study")


class JudgeRunList(generics.ListAPIView):
    """Judge runs on the studies you may see; filter with ``?study=<slug>`` and ``?state=running``."""

    permission_classes = RESEARCH_PERMISSIONS
    serializer_class = JudgeRunOutput

    def get_queryset(self):
        runs = _visible_runs(self.request.user).order_by("-created_at", "-id")
        if slug := self.request.query_params.get("study"):
            runs = runs.filter(study__slug=slug)
        if state := self.request.query_params.get("state"):
            runs = runs.filter(state=state)
        return runs


class JudgeRunDetail(generics.RetrieveAPIView):
    permission_classes = RESEARCH_PERMISSIONS
    serializer_class = JudgeRunOutput

    def get_queryset(self):
        return _visible_runs(self.request.user)
