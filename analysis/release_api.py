"""REST API of dataset releases: list and request a study's releases, read one, download its zip.

Only the study's researchers (owners) and staff reach them; anyone else gets 404. A release is
built in the background (Celery); poll the release until ``state`` is ``done``.
"""

from __future__ import annotations

from analysis.models import export_storage
from django.http import FileResponse, Http404
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from analysis.models import DatasetRelease
from analysis.science.release import LICENSES
from analysis.release_services import ReleaseRefused, release_request
from tasks.api import RESEARCH_PERMISSIONS
from tasks.models import Study


class ReleaseOutput(serializers.ModelSerializer):
    study = serializers.CharField(source="study.slug")

    class Meta:
        model = DatasetRelease
        fields = ["id", "study", "state", "license", "payment_list", "pay_per_item", "currency", "size", "manifest",
                  "card", "error", "created_at", "finished_at"]


_REFUSED = inline_serializer("ReleaseRefused", {"detail": serializers.CharField()})


class StudyReleases(APIView):
    """GET: the study's releases, newest first. POST: build a new one (202; poll it)."""

    permission_classes = RESEARCH_PERMISSIONS

    class RequestInput(serializers.Serializer):
        license = serializers.ChoiceField(choices=LICENSES, default="cc-by-4.0")
        payment_list = serializers.BooleanField(default=False, help_text="Crowd ids in clear: never publish")
        pay_per_item = serializers.FloatField(required=False, allow_null=True, min_value=0, max_value=10_000)
        currency = serializers.RegexField(r"^[A-Za-z]{0,8}$", required=False, default="", allow_blank=True)

    @extend_schema(responses={200: ReleaseOutput(many=True)})
    def get(self, request: Request, slug: str) -> Response:
        study = Study.objects.visible_or_404(request.user, slug)
        releases = DatasetRelease.objects.filter(study=study).select_related("study")[:100]
        return Response(ReleaseOutput(releases, many=True).data)

    @extend_schema(request=RequestInput, responses={202: ReleaseOutput, 409: _REFUSED})
    def post(self, request: Request, slug: str) -> Response:
        study = Study.objects.visible_or_404(request.user, slug)
        given = self.RequestInput(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        try:
            release = release_request(study=study, user=request.user, license=data["license"],
                                      payment_list=data["payment_list"], pay_per_item=data.get("pay_per_item"),
                                      currency=data.get("currency") or "")
        except ReleaseRefused as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(ReleaseOutput(release).data, status=status.HTTP_202_ACCEPTED)


def _release(request: Request, slug: str, release_id: int) -> DatasetRelease:
    study = Study.objects.visible_or_404(request.user, slug)
    return get_object_or_404(DatasetRelease.objects.select_related("study"), pk=release_id, study=study)


class StudyReleaseDetail(APIView):
    permission_classes = RESEARCH_PERMISSIONS

    @extend_schema(responses={200: ReleaseOutput})
    def get(self, request: Request, slug: str, release_id: int) -> Response:
        release = _release(request, slug, release_id)
        release.refresh_from_db()
        return Response(ReleaseOutput(release).data)


class StudyReleaseDownload(APIView):
    permission_classes = RESEARCH_PERMISSIONS

    @extend_schema(responses={(200, "application/zip"): OpenApiTypes.BINARY})
    def get(self, request: Request, slug: str, release_id: int) -> FileResponse:
        release = _release(request, slug, release_id)
        if release.state != DatasetRelease.State.DONE or not release.file or not export_storage().exists(release.file):
            raise Http404("the release is not built")
        return FileResponse(export_storage().open(release.file, "rb"), as_attachment=True,
                            filename=f"{release.study.slug}-release-{release.pk}.zip", content_type="application/zip")
