"""Background study exports through the API: start one, poll it, download it when ready.

The same services as the export page (analysis.export_services). Each researcher sees only the
exports they asked for, on studies they may still see; anything else is a 404.
"""

from __future__ import annotations

from django.http import FileResponse, Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from analysis.export_services import (EXPORT_KINDS, ExportError, export_for_download, exports_for,
                                      study_export_start)
from analysis.models import StudyExport
from tasks.api import RESEARCH_PERMISSIONS
from tasks.models import Study


class StudyExportOutput(serializers.ModelSerializer):
    study = serializers.CharField(source="study.slug")
    download = serializers.SerializerMethodField()

    class Meta:
        model = StudyExport
        fields = ["id", "study", "kind", "state", "stage", "done", "total", "size", "error", "created_at",
                  "finished_at", "download"]

    def get_download(self, export: StudyExport) -> str | None:
        if export.state != StudyExport.State.DONE:
            return None
        return reverse("api-study-export-download", args=[export.pk], request=self.context.get("request"))


class StudyExports(APIView):
    """GET: the exports of this study you asked for. POST ``{"kind": "dataset"}`` (the default):
    prepare one in the background (202); poll ``/api/exports/<id>/`` and download from its
    ``download`` link when ``state`` is ``done``. An export of yours under way is returned again."""

    permission_classes = RESEARCH_PERMISSIONS

    class ExportStartInput(serializers.Serializer):
        kind = serializers.ChoiceField(choices=sorted(EXPORT_KINDS), required=False, default="dataset")

    @extend_schema(responses={200: StudyExportOutput(many=True)})
    def get(self, request: Request, slug: str) -> Response:
        study = Study.objects.visible_or_404(request.user, slug)
        exports = exports_for(study=study, user=request.user)
        return Response(StudyExportOutput(exports, many=True, context={"request": request}).data)

    @extend_schema(request=ExportStartInput, responses={202: StudyExportOutput})
    def post(self, request: Request, slug: str) -> Response:
        study = Study.objects.visible_or_404(request.user, slug)
        given = self.ExportStartInput(data=request.data)
        given.is_valid(raise_exception=True)
        try:
            export = study_export_start(study=study, user=request.user, kind=given.validated_data["kind"])
        except ExportError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        export.refresh_from_db()
        return Response(StudyExportOutput(export, context={"request": request}).data, status=status.HTTP_202_ACCEPTED)


def _mine(user, pk: int) -> StudyExport:
    export = StudyExport.objects.select_related("study").filter(
        pk=pk, requested_by=user, study__in=Study.objects.visible_to(user)).first()
    if export is None:
        raise Http404("no such export")
    return export


class StudyExportDetail(APIView):
    permission_classes = RESEARCH_PERMISSIONS

    @extend_schema(responses={200: StudyExportOutput})
    def get(self, request: Request, export_id: int) -> Response:
        return Response(StudyExportOutput(_mine(request.user, export_id), context={"request": request}).data)


class StudyExportDownload(APIView):
    permission_classes = RESEARCH_PERMISSIONS

    @extend_schema(responses={(200, "application/zip"): OpenApiTypes.BINARY, 409: OpenApiTypes.OBJECT})
    def get(self, request: Request, export_id: int):
        export = _mine(request.user, export_id)
        ready = export_for_download(export_id=export.pk, user=request.user)
        if ready is None:
            return Response({"detail": f"export {export.pk} is {export.state}; download it when it is done"},
                            status=status.HTTP_409_CONFLICT)
        kind = EXPORT_KINDS[ready.kind]
        return FileResponse(ready.file.open("rb"), as_attachment=True, filename=kind.filename(ready.study),
                            content_type=kind.content_type)
