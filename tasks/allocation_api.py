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
        limit, before = request.query_params.get("limit", "20"), request.query_params.get("before", "")
        # ASCII digits only, and a round id within the key's range: int() would take "١٢" or " 5",
        # and an id past 2**63 reaches the database as an overflow (a 500), not a 400
        if not (limit.isascii() and limit.isdigit() and len(limit) <= 6) or not (
                before == "" or (before.isascii() and before.isdigit() and len(before) <= 18)):
            return Response({"detail": "limit and before are whole numbers (before: a round id)."}, status=400)
        limit, before = min(ROUNDS_MAX, max(1, int(limit))), (int(before) if before else None)
        return Response({"mode": study.assignment_mode, "rounds": rounds(study, limit=limit, before=before)})
