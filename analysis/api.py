"""REST API for a study's analysis: the MOS dataset export and judge runs (researchers and admins).

Judge runs: list and start (``/api/judge-runs/``), read, cancel and resume one run. Only the
study's researchers (owners) and staff reach a study's runs; everyone else gets 404. Views are
thin: they call the same services as the judges page (``analysis.judge_services``).
"""

from __future__ import annotations

from django.http import StreamingHttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from analysis.export_input import study_export_input
from analysis.export_services import export_fits_in_a_request, study_vote_count
from analysis.science.exports import iter_export_zip
from analysis.judge_services import (RUNNABLE_KINDS, JudgeRunError, judge_endpoint_list, judge_run_cancel,
                                     judge_run_request, judge_run_resume)
from analysis.models import JudgeRun
from analysis.report import build_report
from tasks.api import RESEARCH_PERMISSIONS
from tasks.models import Study


def export_response(study: Study) -> StreamingHttpResponse:
    """The dataset zip, streamed chunk by chunk (shared by the page and the API)."""
    response = StreamingHttpResponse(iter_export_zip(study_export_input(study)), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-ratings.zip"'
    return response


class StudyExport(APIView):
    """The study's MOS dataset: a zip with CSV, JSONL, Parquet, the ImagenHub/EvalMi layouts and a datasheet."""

    permission_classes = RESEARCH_PERMISSIONS

    @extend_schema(responses={(200, "application/zip"): OpenApiTypes.BINARY, 409: OpenApiTypes.OBJECT})
    def get(self, request: Request, slug: str) -> StreamingHttpResponse:
        study = Study.objects.visible_or_404(request.user, slug)
        if not export_fits_in_a_request(study):  # never written inside a request: the background export
            return Response({"detail": f"{study.slug} has {study_vote_count(study)} votes, too many to export inside a "
                                       f"request; POST /api/studies/{study.slug}/exports/ and download it when ready"},
                            status=status.HTTP_409_CONFLICT)
        return export_response(study)


class StudyResults(APIView):
    """The study report (analysis.report.build_report): per-model means, CIs, agreement, judges, reasons.

    ``?include_excluded=true`` keeps blocked raters in; ``?conventions=viescore`` applies VIEScore's own
    analysis conventions (analysis.science.viescore_conventions; anything else is the default).
    """

    permission_classes = RESEARCH_PERMISSIONS

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, slug: str) -> Response:
        study = Study.objects.visible_or_404(request.user, slug)
        include = request.query_params.get("include_excluded", "").lower() in ("1", "true", "yes")
        conventions = "viescore" if request.query_params.get("conventions") == "viescore" else "default"
        return Response(build_report(study, include_excluded=include, conventions=conventions))


class JudgeRunOutput(serializers.ModelSerializer):
    judge = serializers.CharField(source="judge.name")
    judge_kind = serializers.CharField(source="judge.kind")
    study = serializers.CharField(source="study.slug")

    class Meta:
        model = JudgeRun
        fields = ["id", "judge", "judge_kind", "study", "source", "state", "total", "done", "failed", "error",
                  "calls", "cached", "cancel_requested", "created_at", "started_at", "finished_at"]


def _visible_runs(user):
    return JudgeRun.objects.filter(study__in=Study.objects.visible_to(user)).select_related("judge", "study")


_REFUSED = inline_serializer("JudgeRunRefused", {"detail": serializers.CharField()})


class JudgeRunList(generics.ListAPIView):
    """Judge runs on the studies you may see; filter with ``?study=<slug>`` and ``?state=running``.

    POST starts a run on a study you own: ``{"study": slug, "judge": name}`` runs your judge of
    that name (or a shared one); add ``kind`` (and ``params``, ``version``) to create your judge
    first, or reuse yours of that name with the same configuration. MLLM judges pick an operator
    endpoint by name (``params.endpoint``, see ``/api/judge-endpoints/``); URLs, keys and headers
    never go in params. ``shared: true`` (staff only) creates a judge every researcher may run.
    """

    permission_classes = RESEARCH_PERMISSIONS
    serializer_class = JudgeRunOutput

    class StartInput(serializers.Serializer):
        study = serializers.SlugField(max_length=100, help_text="Slug of a study you own")
        judge = serializers.CharField(max_length=100, help_text="Judge name")
        kind = serializers.ChoiceField(choices=sorted(RUNNABLE_KINDS), required=False,
                                       help_text="Create the judge with this kind (omit to run an existing judge)")
        params = serializers.DictField(required=False, default=dict,
                                       help_text="Judge parameters: endpoint, model, concurrency, metrics… (no URLs, no keys)")
        version = serializers.CharField(max_length=32, required=False, default="1")
        shared = serializers.BooleanField(required=False, default=False,
                                          help_text="Staff only: create a shared judge instead of your own")

    @extend_schema(request=StartInput, responses={201: JudgeRunOutput, 400: _REFUSED})
    def post(self, request: Request) -> Response:
        given = self.StartInput(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        study = Study.objects.visible_or_404(request.user, data["study"])
        try:
            run = judge_run_request(user=request.user, study=study, judge_name=data["judge"], kind=data.get("kind"),
                                    params=data["params"], version=data["version"], shared=data["shared"])
        except JudgeRunError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        return Response(JudgeRunOutput(run).data, status=status.HTTP_201_CREATED)

    class Filters(serializers.Serializer):
        # Checked before they reach the database: PostgreSQL refuses a NUL in a query (a 500).
        study = serializers.SlugField(max_length=100, required=False)
        state = serializers.ChoiceField(choices=JudgeRun.State.choices, required=False)

    @extend_schema(parameters=[Filters])
    def get(self, request: Request, *args, **kwargs) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        filters = self.Filters(data=self.request.query_params)
        filters.is_valid(raise_exception=True)  # 400 naming the parameter
        runs = _visible_runs(self.request.user).order_by("-created_at", "-id")
        if slug := filters.validated_data.get("study"):
            runs = runs.filter(study__slug=slug)
        if state := filters.validated_data.get("state"):
            runs = runs.filter(state=state)
        return runs


class JudgeRunDetail(generics.RetrieveAPIView):
    permission_classes = RESEARCH_PERMISSIONS
    serializer_class = JudgeRunOutput

    def get_queryset(self):
        return _visible_runs(self.request.user)


class JudgeRunAction(APIView):
    """POST cancel (a queued run stops at once, a running one after the items in flight) or resume
    (cancelled, failed or stalled runs; scored items are kept, failed ones asked again)."""

    permission_classes = RESEARCH_PERMISSIONS
    action = ""

    @extend_schema(request=None, responses={200: JudgeRunOutput, 409: _REFUSED})
    def post(self, request: Request, pk: int) -> Response:
        run = get_object_or_404(_visible_runs(request.user), pk=pk)
        try:
            run = judge_run_cancel(run=run) if self.action == "cancel" else judge_run_resume(run=run)
        except JudgeRunError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        run.refresh_from_db()
        return Response(JudgeRunOutput(run).data)


class JudgeEndpointList(APIView):
    """The operator's judge endpoints a researcher may name in ``params.endpoint``: name, models
    (the first is the default) and limits. URLs and key variables stay with the operator."""

    permission_classes = RESEARCH_PERMISSIONS

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request) -> Response:
        return Response(judge_endpoint_list())
