"""``GET /api/studies/<slug>/stopping/[?dimension=<dim>]``: the dashboard's stopping and cost panel
as JSON (the study's owners, collaborators and staff; everyone else 404). Same numbers as the page
(:func:`analysis.stopping_panel.panel`); ``dimension`` (default: the primary one) must be one of
the study's (else 400)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from analysis.stopping_panel import UnknownDimension, panel
from tasks.api import RESEARCH_PERMISSIONS
from tasks.models import Study


class _Model(serializers.Serializer):
    model = serializers.CharField()
    estimate = serializers.FloatField(allow_null=True)
    std = serializers.FloatField(allow_null=True)
    ratings = serializers.IntegerField()


class _Pair(serializers.Serializer):
    upper = serializers.CharField(help_text="the model ranked higher")
    lower = serializers.CharField()
    diff = serializers.FloatField()
    low = serializers.FloatField(allow_null=True, help_text="anytime-valid 95 % interval of the gap")
    high = serializers.FloatField(allow_null=True)
    ratings = serializers.IntegerField()
    verdict = serializers.ChoiceField(choices=["separated", "tied", "open"])
    extra_ratings = serializers.FloatField(allow_null=True, help_text="null: never settles at this gap")
    cost = serializers.CharField(allow_null=True, help_text="exact decimal, the study's currency")
    hours = serializers.FloatField(allow_null=True)


class StoppingOutput(serializers.Serializer):
    method = serializers.CharField()
    dimension = serializers.CharField(allow_null=True, help_text="the dimension ranked on (null: pairwise)")
    dimensions = serializers.ListField(child=serializers.CharField(), help_text="the study's, for ?dimension=")
    primary = serializers.CharField(allow_null=True, help_text="the default dimension")
    models = _Model(many=True)
    pairs = _Pair(many=True)
    separated = serializers.IntegerField()
    tied = serializers.IntegerField()
    open = serializers.IntegerField()
    extra_ratings = serializers.FloatField(allow_null=True)
    cost = serializers.CharField(allow_null=True)
    currency = serializers.CharField()
    pay_per_rating = serializers.CharField(allow_null=True)
    seconds_per_rating = serializers.FloatField(allow_null=True)
    ratings_per_hour = serializers.FloatField(allow_null=True)
    hours = serializers.FloatField(allow_null=True)
    remaining_ratings = serializers.IntegerField()
    stop = serializers.BooleanField()
    reason = serializers.CharField()
    n_opt = serializers.FloatField()
    margin = serializers.FloatField()
    alpha = serializers.FloatField()
    anytime = serializers.BooleanField()
    method_note = serializers.CharField()
    note = serializers.CharField(allow_null=True)


class StudyStopping(APIView):
    """Model pairs separated / tied / open (anytime-valid confidence sequences), the ratings, cost
    and time to settle the open ones, and a stop recommendation."""

    permission_classes = RESEARCH_PERMISSIONS

    @extend_schema(responses={200: StoppingOutput}, parameters=[OpenApiParameter(
        "dimension", str, description="rank on this dimension of the study (default: its primary one)")])
    def get(self, request: Request, slug: str) -> Response:
        study = Study.objects.visible_or_404(request.user, slug)
        try:
            return Response(panel(study, dimension=request.query_params.get("dimension")).as_dict())
        except UnknownDimension as exc:
            return Response({"dimension": [str(exc)]}, status=400)
