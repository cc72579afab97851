"""REST API for researchers and admins: studies, their items and ratings, and study actions.

Thin DRF views over tasks.builder and tasks.study_services (the same calls the pages make).
Raters and other logged-in users without a researcher role get 403; a researcher asking for a
study they do not own gets 404 (its existence is not revealed).
"""

from __future__ import annotations

from django.db.models import Count, IntegerField, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import generics, serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from raters.costs import study_cost
from raters.models import Rater
from raters.payouts import prolific_decisions
from raters.services import DecisionRefused, rater_decide
from tasks.build_services import study_build_start
from tasks.builder import BundleInvalid, StudySpec, json_loads_checked
from tasks.configure_forms import StudyConfigureForm, form_data_for_patch, patch_problems
from tasks.configure_services import ConfigurationRefused, editable_fields, study_configuration, study_configure
from tasks.crowd import launch_links
from tasks.models import Item, Rating, Study, StudyBuild
from tasks.study_services import StudyActionRefused, study_clone, study_close, study_publish, user_is_researcher


class IsResearcher(BasePermission):
    message = "Only researchers and admins may use the research API."

    def has_permission(self, request, view) -> bool:
        return user_is_researcher(request.user)


RESEARCH_PERMISSIONS = [IsAuthenticated, IsResearcher]


def get_study_for_user(user, slug: str) -> Study:
    """The study if this user may see it (owner or staff), else 404."""
    return get_object_or_404(Study.objects.visible_to(user), slug=slug)


class StudyOutput(serializers.ModelSerializer):
    owners = serializers.SlugRelatedField(many=True, read_only=True, slug_field="username")
    items = serializers.IntegerField(source="item_count", read_only=True)
    ratings = serializers.IntegerField(source="rating_count", read_only=True)

    class Meta:
        model = Study
        fields = [
            "slug", "title", "protocol", "task_type", "state", "instructions", "raters_per_item",
            "assignment_mode", "rater_sampling", "settings", "owners", "items", "ratings", "created_at",
        ]


def _count_per_study(model) -> Coalesce:
    """COUNT(*) of ``model`` rows of the outer study, as a correlated subquery (0 when none)."""
    counted = (
        model.objects.filter(study=OuterRef("pk")).order_by().values("study").annotate(n=Count("*")).values("n")
    )
    return Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))


def _annotated(queryset):
    # Items and ratings are counted apart: joining both to the study and counting DISTINCT walks
    # items x ratings rows (17.5 s for two 5,000-item studies); each subquery is one index-only count.
    return queryset.annotate(
        item_count=_count_per_study(Item), rating_count=_count_per_study(Rating)
    ).prefetch_related("owners")


class StudyBuildOutput(serializers.ModelSerializer):
    study = serializers.SlugRelatedField(read_only=True, slug_field="slug")
    url = serializers.SerializerMethodField()

    class Meta:
        model = StudyBuild
        fields = ["id", "url", "slug", "state", "stage", "done", "total", "problems", "error", "study",
                  "created_at", "started_at", "finished_at"]

    def get_url(self, build) -> str:
        return reverse("api-study-build", args=[build.pk])


class StudyBuildDetail(APIView):
    """A study build started by ``POST /api/studies/``: its progress, then its study or its problems."""

    permission_classes = RESEARCH_PERMISSIONS

    @extend_schema(responses=StudyBuildOutput)
    def get(self, request: Request, build_id: int) -> Response:
        builds = StudyBuild.objects.select_related("study")
        build = get_object_or_404(builds if request.user.is_staff else builds.filter(owner=request.user), pk=build_id)
        return Response(StudyBuildOutput(build).data)


class StudyListCreate(APIView):
    """List the studies you may see; create a draft study from a zip bundle."""

    permission_classes = RESEARCH_PERMISSIONS
    parser_classes = [MultiPartParser, FormParser]

    class Input(serializers.Serializer):
        bundle = serializers.FileField(help_text="Zip with images and manifest.csv or manifest.jsonl")
        slug = serializers.SlugField(max_length=100)
        title = serializers.CharField(max_length=200)
        protocol = serializers.ChoiceField(choices=Study.Protocol.choices)
        task_type = serializers.CharField(max_length=64)
        instructions = serializers.CharField(required=False, allow_blank=True, default="")
        raters_per_item = serializers.IntegerField(min_value=1, max_value=100, default=3)
        assignment_mode = serializers.ChoiceField(choices=Study.AssignmentMode.choices, default="balanced")
        rater_sampling = serializers.ChoiceField(choices=Study.RaterSampling.choices, default="sampled")
        settings = serializers.CharField(required=False, allow_blank=True, default="{}", help_text="JSON object")

        def validate_settings(self, value: str) -> dict:
            try:
                parsed = json_loads_checked(value or "{}")
            except ValueError as exc:
                raise serializers.ValidationError(str(exc)) from None
            if not isinstance(parsed, dict):
                raise serializers.ValidationError("must be a JSON object")
            return parsed

    @extend_schema(responses=StudyOutput(many=True))
    def get(self, request: Request) -> Response:
        paginator = generics.GenericAPIView.pagination_class()
        queryset = _annotated(Study.objects.visible_to(request.user)).order_by("slug")
        page = paginator.paginate_queryset(queryset, request, view=self)
        return paginator.get_paginated_response(StudyOutput(page, many=True).data)

    @extend_schema(request=Input, responses={201: StudyOutput, 202: StudyBuildOutput, 400: StudyBuildOutput})
    def post(self, request: Request) -> Response:
        """The build runs in a job. In eager mode it has finished when this continues: 201 with the
        study, or 400 with every problem. With a worker: 202 and the build to poll (Location)."""
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        fields = dict(data.validated_data)
        bundle = fields.pop("bundle")
        try:
            build = study_build_start(upload=bundle, spec=StudySpec(**fields), owner=request.user)
        except BundleInvalid as exc:
            return Response({"problems": [p.as_dict() for p in exc.problems]}, status=status.HTTP_400_BAD_REQUEST)
        build.refresh_from_db()
        if build.state == StudyBuild.State.DONE:
            return Response(StudyOutput(_annotated(Study.objects.filter(pk=build.study_id)).get()).data, status=201)
        code = {StudyBuild.State.FAILED: 500 if build.error else 400}.get(build.state, status.HTTP_202_ACCEPTED)
        return Response(StudyBuildOutput(build, context={"request": request}).data, status=code,
                        headers={"Location": reverse("api-study-build", args=[build.pk])})


class StudyDetail(APIView):
    """GET the study with its configuration, what may change now and its cost estimate; PATCH
    its configuration (the configure page's form and service: tasks.configure_forms, tasks.configure_services)."""

    permission_classes = RESEARCH_PERMISSIONS

    def _output(self, study: Study) -> dict:
        data = dict(StudyOutput(_annotated(Study.objects.filter(pk=study.pk)).get()).data)
        configuration = study_configuration(study)
        if configuration["pay_per_hour"] is not None:
            configuration["pay_per_hour"] = str(configuration["pay_per_hour"])
        start = self.request.build_absolute_uri(reverse("rating:start", args=[study.slug]))
        data.update(configuration=configuration, editable=sorted(editable_fields(study)),
                    cost=study_cost(study).as_dict(), links=launch_links(start))
        return data

    @extend_schema(responses=StudyOutput)
    def get(self, request: Request, slug: str) -> Response:
        return Response(self._output(get_study_for_user(request.user, slug)))

    @extend_schema(request=inline_serializer("StudyConfigurationPatch", {"completion_code": serializers.CharField()}),
                   responses={200: StudyOutput, 400: inline_serializer("ConfigurationErrors", {
                       "errors": serializers.DictField()}), 409: inline_serializer("ConfigurationLocked", {
                           "errors": serializers.DictField()})})
    def patch(self, request: Request, slug: str) -> Response:
        """Change configuration fields (names as in ``configuration``). Refused as a whole: 400 for
        a bad value, 409 for a field the study's state does not let change (see ``editable``)."""
        study = get_study_for_user(request.user, slug)
        problems = patch_problems(request.data)
        if problems:
            return Response({"errors": problems}, status=status.HTTP_400_BAD_REQUEST)
        form = StudyConfigureForm(data=form_data_for_patch(study, request.data), study=study)
        if not form.is_valid():
            return Response({"errors": {k: " ".join(v) for k, v in form.errors.items()}},
                            status=status.HTTP_400_BAD_REQUEST)
        try:
            study = study_configure(study=study, changes={k: form.cleaned_data[k] for k in request.data},
                                    actor=request.user)
        except ConfigurationRefused as exc:
            return Response({"errors": exc.errors},
                            status=status.HTTP_409_CONFLICT if exc.conflict else status.HTTP_400_BAD_REQUEST)
        return Response(self._output(study))


class StudyAction(APIView):
    """POST publish / close / clone. Clone accepts an optional new ``slug`` and ``title``."""

    permission_classes = RESEARCH_PERMISSIONS
    action = ""

    class CloneInput(serializers.Serializer):
        slug = serializers.SlugField(max_length=100, required=False)
        title = serializers.CharField(max_length=200, required=False)

    @extend_schema(request=CloneInput, responses={200: StudyOutput, 201: StudyOutput, 409: inline_serializer(
        "ActionRefused", {"detail": serializers.CharField()})})
    def post(self, request: Request, slug: str) -> Response:
        study = get_study_for_user(request.user, slug)
        try:
            if self.action == "publish":
                result, code = study_publish(study=study), 200
            elif self.action == "close":
                result, code = study_close(study=study), 200
            else:
                data = self.CloneInput(data=request.data)
                data.is_valid(raise_exception=True)
                result, code = study_clone(study=study, owner=request.user, **data.validated_data), 201
        except StudyActionRefused as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(StudyOutput(_annotated(Study.objects.filter(pk=result.pk)).get()).data, status=code)


class ItemOutput(serializers.ModelSerializer):
    instance = serializers.CharField(source="instance.key")
    model = serializers.CharField(source="gen_model.name")
    prompt = serializers.CharField(source="instance.prompt")
    image_url = serializers.SerializerMethodField()
    ratings = serializers.IntegerField(source="rating_count")

    class Meta:
        model = Item
        fields = ["id", "instance", "model", "prompt", "image_url", "ratings"]

    def get_image_url(self, item) -> str | None:
        """The full-size image through the access-checked ``/img/`` route (never the media URL)."""
        return reverse("rating:image", args=[item.image.sha256, "full"]) if item.image_id else None


class StudyItems(generics.ListAPIView):
    permission_classes = RESEARCH_PERMISSIONS
    serializer_class = ItemOutput

    def get_queryset(self):
        study = get_study_for_user(self.request.user, self.kwargs["slug"])
        return Item.objects.for_study(study).annotate(rating_count=Count("ratings")).order_by("id")


class RatingOutput(serializers.ModelSerializer):
    rater = serializers.SerializerMethodField()

    class Meta:
        model = Rating
        fields = ["id", "rater", "item", "comparison", "values", "answers", "source", "time_on_item_ms",
                  "created_at", "updated_at"]

    def get_rater(self, rating) -> str:
        return f"rater{rating.rater_id}"  # pseudonymous, as in the exports


class StudyRatings(generics.ListAPIView):
    """Every rating of the study (researchers and admins only), oldest first."""

    permission_classes = RESEARCH_PERMISSIONS
    serializer_class = RatingOutput

    def get_queryset(self):
        study = get_study_for_user(self.request.user, self.kwargs["slug"])
        return Rating.objects.filter(study=study).order_by("id")


class StudyProlificDecisions(APIView):
    """The raters page's Prolific decisions as JSON: one row per Prolific participant (raters.payouts)."""

    permission_classes = RESEARCH_PERMISSIONS

    @extend_schema(responses=inline_serializer("ProlificDecision", {
        "participant_id": serializers.CharField(), "session_id": serializers.CharField(),
        "decision": serializers.CharField(), "reason": serializers.CharField(), "bonus": serializers.CharField(),
        "ratings": serializers.IntegerField(), "flags": serializers.CharField(), "standing": serializers.CharField(),
    }, many=True))
    def get(self, request: Request, slug: str) -> Response:
        study = get_study_for_user(request.user, slug)
        return Response([{"participant_id": r.participant_id, "session_id": r.session_id, "decision": r.decision,
                          "reason": r.reason, "bonus": f"{r.bonus:.2f}", "ratings": r.ratings, "flags": r.flags,
                          "standing": r.standing} for r in prolific_decisions(study)])


class RaterDecisionInput(serializers.Serializer):
    decision = serializers.CharField(max_length=16)
    reason = serializers.CharField(max_length=2000)


class StudyRaterDecision(APIView):
    """POST a decision about a rater in this study (approve, pause, reject, reactivate; block is
    staff's), with its reason: the raters page's form. Only a rater with work in the study: anyone
    else is a 404, as on the page."""

    permission_classes = RESEARCH_PERMISSIONS

    @extend_schema(request=RaterDecisionInput, responses={200: inline_serializer("RaterStanding", {
        "rater": serializers.IntegerField(), "standing": serializers.CharField(), "reason": serializers.CharField()})})
    def post(self, request: Request, slug: str, rater_id: int) -> Response:
        study = get_study_for_user(request.user, slug)
        rater = get_object_or_404(Rater.objects.with_work_in(study), pk=rater_id)
        data = RaterDecisionInput(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            standing = rater_decide(study=study, rater=rater, decision=data.validated_data["decision"],
                                    reason=data.validated_data["reason"], actor=request.user)
        except DecisionRefused as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        return Response({"rater": rater.pk, "standing": standing.state, "reason": standing.reason})
