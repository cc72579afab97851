"""``GET /api/studies/<slug>/allocation/``: an adaptive study's recorded allocation rounds
(tasks.assignment.adaptive), read-only, for its owners, collaborators and admins."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from tasks.api import RESEARCH_PERMISSIONS
from tasks.models import Study
from tasks.assignment.adaptive import rounds

ROUNDS_MAX = 200


class StudyAllocation(APIView):
    """The latest rounds, newest first (``limit``, default 20, at most 200; ``before``: a round id
    to page back from). Each: when and why it was computed, the ratings behind it, its settings and
    seed, the units chosen in order with their reason and claim limit, reason counts over every
    unit, and the verdicts on adjacent model pairs."""

    permission_classes = RESEARCH_PERMISSIONS

    @extend_schema(parameters=[OpenApiParameter("limit", int), OpenApiParameter("before", int)],
                   responses=inline_serializer("AllocationRounds", {
                       "mode": serializers.CharField(), "rounds": serializers.ListField(child=serializers.DictField())}))
    def get(self, request: Request, slug: str) -> Response:
        study = Study.objects.visible_or_404(request.user, slug)
        try:
            limit = min(ROUNDS_MAX, max(1, int(request.query_params.get("limit", 20))))
            before = request.query_params.get("before")
            before = int(before) if before not in (None, "") else None
        except ValueError:
            return Response({"detail": "limit and before are whole numbers."}, status=400)
        return Response({"mode": study.assignment_mode, "rounds": rounds(study, limit=limit, before=before)})
