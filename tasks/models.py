"""Studies, what is rated in them, who rates what, and the ratings themselves."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from django.conf import settings as django_settings
from django.core.exceptions import ValidationError
from django.db import models
from django.shortcuts import get_object_or_404
from django.db.models.functions import Now
from django.utils import timezone

from analysis.science import protocols
from analysis.science.protocols.task_types import applicable_settings
from tasks.constraints import CompositeForeignKey


class StoredImage(models.Model):
    """An image file kept once per content hash: the same bytes uploaded twice are one row."""

    sha256 = models.CharField(max_length=64, unique=True)
    file = models.ImageField(upload_to="images/%Y/%m/")
    width = models.PositiveIntegerField()
    height = models.PositiveIntegerField()
    format = models.CharField(max_length=16)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.sha256[:12]} {self.width}×{self.height} {self.format}"


class StudyQuerySet(models.QuerySet):
    def visible_to(self, user) -> "StudyQuerySet":
        """Studies a researcher may see and run: all for staff, otherwise the ones they own or
        collaborate on. The one access rule of the research side: pages, API, raters pages,
        judges, images and previews all ask this (``Study.is_visible_to`` for one study)."""
        if not user.is_authenticated:
            return self.none()
        if user.is_staff:
            return self
        return self.filter(
            models.Q(pk__in=Study.owners.through.objects.filter(user_id=user.pk).values("study_id"))
            | models.Q(pk__in=Study.collaborators.through.objects.filter(user_id=user.pk).values("study_id"))
        )

    def visible_or_404(self, user, slug: str) -> "Study":
        """The study ``slug`` if ``user`` may see it (:meth:`visible_to`), else Http404, also when it
        exists: a stranger learns nothing. The one study-access helper of every research page and
        API view, whichever app serves it."""
        return get_object_or_404(self.visible_to(user), slug=slug)


class Study(models.Model):
    class Protocol(models.TextChoices):
        IMAGENHUB = protocols.IMAGENHUB, "ImagenHub (SC / PQ)"
        EVALMI = protocols.EVALMI, "EvalMi (Likert + yes/no)"
        PAIRWISE = protocols.PAIRWISE, "Pairwise comparison"

    class AssignmentMode(models.TextChoices):
        WHOLE_SET = "whole_set", "Whole set per rater (as ImagenHub)"
        BALANCED = "balanced", "Balanced overlap (raters per item)"
        ADAPTIVE = "adaptive", "Adaptive: least certain units of unsettled models first (raters per item = cap)"

    class State(models.TextChoices):
        DRAFT = "draft", "Draft"
        OPEN = "open", "Open"
        CLOSED = "closed", "Closed"

    class RaterSampling(models.TextChoices):
        SAMPLED = "sampled", "Sampled (a crowd): intervals resample items and raters"
        FIXED = "fixed", "Fixed (experts): intervals resample items only"

    slug = models.SlugField(max_length=100, unique=True)
    title = models.CharField(max_length=200)
    protocol = models.CharField(max_length=16, choices=Protocol.choices)
    task_type = models.CharField(
        max_length=64,
        help_text="One of the seven ImagenHub tasks, or an EvalMi task dimension (e.g. counting, colour)",
    )
    instructions = models.TextField(blank=True)
    raters_per_item = models.PositiveSmallIntegerField(default=3)
    assignment_mode = models.CharField(max_length=16, choices=AssignmentMode.choices, default=AssignmentMode.BALANCED)
    state = models.CharField(max_length=16, choices=State.choices, default=State.DRAFT)
    rater_sampling = models.CharField(
        max_length=8, choices=RaterSampling.choices, default=RaterSampling.SAMPLED,
        help_text="Are the raters a sample of a crowd (intervals include the raters' luck) or the fixed panel "
                  "whose verdict defines quality (intervals over items only)?",
    )
    units_per_session = models.PositiveSmallIntegerField(
        default=10,
        help_text="Screens a rater gets per session in balanced mode (items, EvalMi trials or comparisons)",
    )
    settings = models.JSONField(default=dict, blank=True, help_text="Protocol settings, validated per protocol")
    # Adaptive assignment (tasks.assignment.adaptive; unused in the other modes). A unit's cap is
    # raters_per_item, the quota every mode's claims honour.
    adaptive_target_halfwidth = models.FloatField(
        null=True, blank=True,
        help_text="Adaptive: a unit stops when its 95 % CI half-width reaches this (rating-scale points; "
                  "empty = no item target, units stop at their cap or when their model is settled)")
    adaptive_alpha = models.FloatField(
        default=0.05, help_text="Adaptive: error rate of the anytime-valid verdicts on model pairs")
    adaptive_margin = models.FloatField(
        default=0.0, help_text="Adaptive: two models within this many rating-scale points are declared tied")
    adaptive_min_ratings = models.PositiveSmallIntegerField(
        default=1, help_text="Adaptive burn-in: ratings every unit gets before the allocation ranks it")
    completion_code = models.CharField(max_length=64, blank=True, help_text="Shown to crowd raters when they finish")
    completion_url = models.URLField(blank=True, help_text="Where crowd raters are sent when they finish (Prolific)")
    # The other ways a crowd rater leaves a study, each with the code and link their platform
    # expects (Prolific has one code per outcome): empty = no code for that outcome.
    screened_out_code = models.CharField(max_length=64, blank=True, help_text="Rater rejected by screening")
    screened_out_url = models.URLField(blank=True)
    qualification_failed_code = models.CharField(max_length=64, blank=True, help_text="Rater failed the qualification")
    qualification_failed_url = models.URLField(blank=True)
    closed_code = models.CharField(
        max_length=64, blank=True, help_text="Rater still working when the study closed, or no work left for them")
    closed_url = models.URLField(blank=True)
    consent_text = models.TextField(blank=True, help_text="Shown on the consent page; empty = the site's standard text")
    estimated_minutes = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Estimated duration of one session, shown on the consent page")
    pay_per_hour = models.DecimalField(max_digits=7, decimal_places=2, null=True, blank=True,
                                       help_text="Pay per hour of work, in pay_currency")
    pay_currency = models.CharField(max_length=3, default="GBP", blank=True)
    contact = models.CharField(max_length=200, blank=True, help_text="Who raters contact with questions (shown on consent)")
    seconds_per_unit_estimate = models.PositiveIntegerField(
        null=True, blank=True, help_text="Estimated seconds per screen until ratings measure it (cost estimate)")
    owners = models.ManyToManyField(django_settings.AUTH_USER_MODEL, blank=True, related_name="owned_studies")
    collaborators = models.ManyToManyField(
        django_settings.AUTH_USER_MODEL, blank=True, related_name="collaborating_studies",
        help_text="Other researchers who may see and run the study (not change who collaborates)")
    # The protocol version new ratings are cast under (tasks.provenance keeps it current), held on
    # the study so that the submit path, which has the study loaded, records it without a query.
    current_protocol_version = models.ForeignKey(
        "tasks.ProtocolVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        db_constraint=False, editable=False,
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = StudyQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "studies"
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    @property
    def protocol_def(self) -> protocols.Protocol:
        return protocols.get_protocol(self.protocol)

    @property
    def protocol_settings(self) -> dict:
        """Settings with the protocol's defaults filled in."""
        return self.protocol_def.clean_settings(self.settings)

    def clean(self) -> None:
        try:
            self.settings = protocols.get_protocol(self.protocol).clean_settings(self.settings)
        except protocols.ProtocolError as exc:
            raise ValidationError({"settings": str(exc)}) from None
        # settings of another task are not stored
        self.settings = applicable_settings(self.protocol, self.task_type, self.settings)
        required = self.protocol_def.required_task_types
        if required is not None and self.task_type not in required:
            raise ValidationError({"task_type": f"{self.protocol_def.title} studies need one of: {', '.join(required)}"})
        if self.raters_per_item < 1:
            raise ValidationError({"raters_per_item": "At least one rater per item is needed"})
        if not 0 < self.adaptive_alpha < 0.5:
            raise ValidationError({"adaptive_alpha": "Between 0 and 0.5 (0.05 is usual)"})
        if self.adaptive_margin < 0:
            raise ValidationError({"adaptive_margin": "Zero or more"})
        if self.adaptive_target_halfwidth is not None and self.adaptive_target_halfwidth <= 0:
            raise ValidationError({"adaptive_target_halfwidth": "More than zero, or empty for none"})

    @property
    def task_label(self) -> str:
        return protocols.IMAGENHUB_TASKS.get(self.task_type, self.task_type.replace("_", " "))

    @property
    def is_open(self) -> bool:
        return self.state == self.State.OPEN

    def is_visible_to(self, user) -> bool:
        """Whether ``user`` may see and run this study (see ``StudyQuerySet.visible_to``)."""
        return Study.objects.visible_to(user).filter(pk=self.pk).exists()


class AllocationRound(models.Model):
    """One recomputation of an adaptive study's priority list (tasks.assignment.adaptive), kept
    for audit and replay: what the estimates saw, the units chosen in order with their reason
    codes and claim limits, how many units fell under each reason, and the model-pair verdicts."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="allocation_rounds")
    created_at = models.DateTimeField(auto_now_add=True)
    trigger = models.CharField(max_length=16, help_text="first, ratings, time or exhausted")
    ratings_seen = models.PositiveIntegerField(help_text="Ratings behind the estimates")
    last_rating_id = models.BigIntegerField(default=0, help_text="Newest rating seen: staleness is counted from it")
    units = models.JSONField(default=list, help_text="[unit id, reason code, claim limit] best first")
    truncated = models.BooleanField(default=False, help_text="More units were eligible than the list holds")
    reasons = models.JSONField(default=dict, help_text="Reason → units, over all of the study's units")
    verdicts = models.JSONField(default=list, help_text="Adjacent model pairs: difference, interval, verdict")
    parameters = models.JSONField(default=dict, help_text="Settings and seed the round used (for replay)")

    class Meta:
        ordering = ["study", "-id"]
        indexes = [models.Index(fields=["study", "-id"], name="allocation_round_latest")]

    def __str__(self) -> str:
        return f"{self.study.slug} round {self.pk}"


class GenModel(models.Model):
    """A generator under evaluation, named as the study names it (e.g. ``MagicBrush``)."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="gen_models")
    name = models.CharField(max_length=100)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["study", "name"], name="genmodel_unique_name")]

    def __str__(self) -> str:
        return self.name


class Instance(models.Model):
    """What all models' outputs for one input share: prompt, condition images, questions."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="instances")
    key = models.CharField(max_length=200, help_text="Sample id, e.g. the uid of an ImagenHub sample")
    prompt = models.TextField(blank=True, help_text="Prompt, instruction or description the models received")
    alt_prompt = models.TextField(
        blank=True, help_text="The other prompt form for editing (instruction vs description)"
    )
    task_tag = models.CharField(max_length=100, blank=True, help_text="EvalMi task dimension, e.g. counting")
    question = models.TextField(blank=True, help_text="The yes/no task question (EvalMi)")
    sub_questions = models.JSONField(default=list, blank=True, help_text="Yes/no sub-questions of complex prompts")
    facts = models.JSONField(default=dict, blank=True, help_text="Generator ground truth (demo) or metadata")
    position = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["study", "position", "key"]
        constraints = [models.UniqueConstraint(fields=["study", "key"], name="instance_unique_key")]

    def __str__(self) -> str:
        return f"{self.study.slug}/{self.key}"


class ConditionImage(models.Model):
    """An input image of an instance: source, mask, control, or one image of a subject set."""

    class Role(models.TextChoices):
        SOURCE = "source", "Source image"
        MASK = "mask", "Mask"
        CONTROL = "control", "Control image"
        SUBJECT_1 = "subject_1", "Subject set 1"
        SUBJECT_2 = "subject_2", "Subject set 2"

    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="condition_images")
    role = models.CharField(max_length=16, choices=Role.choices)
    image = models.ForeignKey(StoredImage, on_delete=models.PROTECT, related_name="+")
    token = models.CharField(max_length=32, blank=True, help_text="Subject token in the prompt, e.g. [V]")
    position = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["instance", "role", "position"]
        constraints = [
            models.UniqueConstraint(fields=["instance", "role", "position"], name="condition_unique_slot"),
        ]


# Units carry a random rank, drawn once: a session claim reads free units in rank order from a
# random start through an index (tasks.assignment._free_by_rank) instead of shuffling the pool.
RANK_RANGE = 2**31 - 1


def random_rank() -> int:
    return random.randrange(RANK_RANGE)


class ItemQuerySet(models.QuerySet):
    def for_study(self, study: Study) -> "ItemQuerySet":
        return self.filter(study=study).select_related("instance", "gen_model", "image")


class Item(models.Model):
    """One output image of one model for one instance: the unit that is rated."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="items")
    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="items")
    gen_model = models.ForeignKey(GenModel, on_delete=models.CASCADE, related_name="items")
    image = models.ForeignKey(StoredImage, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    output_path = models.CharField(max_length=500, blank=True, help_text="The output's path in the bundle it came from")
    ground_truth = models.JSONField(
        default=dict, blank=True, help_text="Known truth for generated data (demo); never shown to raters"
    )
    claims = models.PositiveIntegerField(
        default=0, help_text="Live assignments (leased or done); never above the study's raters per item"
    )
    rank = models.IntegerField(default=random_rank, help_text="Random, fixed: the order in which claims meet units")

    objects = ItemQuerySet.as_manager()

    class Meta:
        ordering = ["study", "instance__position", "gen_model__name"]
        constraints = [
            models.UniqueConstraint(fields=["instance", "gen_model"], name="item_unique_output"),
            # the key of Rating's (item, study) foreign key
            models.UniqueConstraint(fields=["id", "study"], name="item_unique_id_study"),
        ]
        indexes = [models.Index(fields=["study", "claims", "rank"], name="item_free_by_rank")]

    def __str__(self) -> str:
        return f"{self.instance.key} · {self.gen_model.name}"


class Comparison(models.Model):
    """Two outputs of the same instance, the unit of a pairwise study."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="comparisons")
    item_a = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    item_b = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    claims = models.PositiveIntegerField(
        default=0, help_text="Live assignments (leased or done); never above the study's raters per item"
    )
    rank = models.IntegerField(default=random_rank, help_text="Random, fixed: the order in which claims meet units")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["item_a", "item_b"], name="comparison_unique_pair"),
            # the key of Rating's (comparison, study) foreign key
            models.UniqueConstraint(fields=["id", "study"], name="comparison_unique_id_study"),
        ]
        indexes = [models.Index(fields=["study", "claims", "rank"], name="comparison_free_by_rank")]

    def clean(self) -> None:
        if self.item_a_id == self.item_b_id:
            raise ValidationError("A comparison needs two different outputs")
        if self.item_a.instance_id != self.item_b.instance_id:
            raise ValidationError("Both outputs of a comparison must come from the same instance")

    def __str__(self) -> str:
        return f"{self.item_a} vs {self.item_b.gen_model.name}"


class Assignment(models.Model):
    """A rater's claim on one unit (an item, or a comparison in pairwise studies)."""

    class State(models.TextChoices):
        LEASED = "leased", "Leased"
        DONE = "done", "Done"
        EXPIRED = "expired", "Expired"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="assignments")
    rater = models.ForeignKey("raters.Rater", on_delete=models.CASCADE, related_name="assignments")
    item = models.ForeignKey(Item, null=True, blank=True, on_delete=models.CASCADE, related_name="assignments")
    comparison = models.ForeignKey(
        Comparison, null=True, blank=True, on_delete=models.CASCADE, related_name="assignments"
    )
    state = models.CharField(max_length=16, choices=State.choices, default=State.LEASED)
    position = models.PositiveIntegerField(default=0, help_text="Order in this rater's queue (seeded shuffle)")
    slot = models.PositiveSmallIntegerField(
        default=0, help_text="Place on the screen when several units share a position (EvalMi trial)"
    )
    presentation = models.JSONField(
        default=dict, blank=True, help_text="How the unit is shown, fixed at claim time (pairwise sides)"
    )
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    # Not stored: when the screen the rater answers was rendered, set in memory from the form's
    # signed stamp (tasks.rating_context.shown_from) or by screen_shown; time on item counts from it.
    shown_at: datetime | None = None

    class Meta:
        ordering = ["rater", "position", "slot"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(item__isnull=False, comparison__isnull=True)
                | models.Q(item__isnull=True, comparison__isnull=False),
                name="assignment_one_unit",
            ),
            models.UniqueConstraint(fields=["rater", "item"], name="assignment_unique_rater_item"),
            models.UniqueConstraint(fields=["rater", "comparison"], name="assignment_unique_rater_comparison"),
        ]
        indexes = [
            # The lease sweep (tasks.assignment.assignments_expire) reads only leased rows of one
            # study: 1 ms instead of a scan of the study's assignments (49 ms at 806K, bench.assignment_scale).
            models.Index(fields=["study", "lease_expires_at"], condition=models.Q(state="leased"),
                         name="assignment_leased_expiry"),
        ]

    def is_expired(self, now=None) -> bool:
        now = now or timezone.now()
        return self.state == self.State.LEASED and self.lease_expires_at is not None and self.lease_expires_at < now


class Participation(models.Model):
    """One rater taking part in one study: consent, the seed of their order, crowd ids, completion.

    ``crowd`` keeps the platform parameters the rater arrived with (Prolific STUDY_ID and
    SESSION_ID; MTurk assignmentId, hitId and turkSubmitTo) for the completion step.
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="participations")
    rater = models.ForeignKey("raters.Rater", on_delete=models.CASCADE, related_name="participations")
    seed = models.BigIntegerField(help_text="Seeds this rater's randomised order; recorded for reproduction")
    batches = models.PositiveIntegerField(default=0, help_text="Sessions of units claimed so far")
    crowd = models.JSONField(default=dict, blank=True)
    consented_at = models.DateTimeField(null=True, blank=True)
    instructions_seen_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["study", "rater"], name="participation_unique_rater")]

    def __str__(self) -> str:
        return f"{self.rater} in {self.study.slug}"


class Rating(models.Model):
    """One rater's judgement of one unit. Edits keep the previous versions in RatingRevision.

    ``values``: dimension → number (ImagenHub SC/PQ in {0, 0.5, 1}; EvalMi Likert) or
    ``{"preference": "A"|"B"|"tie"|"both_bad"}`` for pairwise, where A = comparison.item_a.
    ``answers``: yes/no question key (``q1`` task question, ``q2``… sub-questions) → "yes"/"no".
    """

    class Source(models.TextChoices):
        UI = "ui", "Rating interface"
        API = "api", "API"
        IMPORT = "import", "Imported"

    # No single-column indexes on study, rater, comparison: (study, item), the unique (rater, item)
    # and the partial indexes below serve those lookups, and every index slows bulk imports.
    # study, item and comparison are checked by the database through the two composite keys in
    # Meta (the unit exists and belongs to the rating's own study), not by a key each: one key
    # check less per row (2.2 s less server time for 806K imported rows). Django still cascades
    # deletes along these fields (on_delete runs in the ORM).
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="ratings", db_index=False,
                              db_constraint=False)
    rater = models.ForeignKey("raters.Rater", on_delete=models.CASCADE, related_name="ratings", db_index=False)
    item = models.ForeignKey(Item, null=True, blank=True, on_delete=models.CASCADE, related_name="ratings",
                             db_constraint=False)
    comparison = models.ForeignKey(Comparison, null=True, blank=True, on_delete=models.CASCADE, related_name="ratings",
                                   db_index=False, db_constraint=False)
    values = models.JSONField()
    # Database defaults as well: bulk imports (analysis.sql.fast_insert) leave these columns
    # out of COPY and the database fills them (0.75 s less server time for 806K rows).
    answers = models.JSONField(default=dict, db_default={}, blank=True)
    checklist = models.JSONField(
        default=dict, db_default={}, blank=True,
        help_text="ImagenHub checklist mode: the marks SC and PQ were derived from",
    )
    presentation = models.JSONField(
        default=dict, db_default={}, blank=True, help_text="How the unit was shown, e.g. which output was on the left"
    )
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.UI)
    source_detail = models.CharField(max_length=300, blank=True, help_text="File, tool or paper the rating came from")
    time_on_item_ms = models.PositiveIntegerField(null=True, blank=True, help_text="Server-side render → submit")
    # What the rater was shown when the rating was cast (scale, instructions, examples, screen
    # layout, gold set, quality policy); NULL for imported ratings and ratings older than tracking.
    # No index and no key check: read per study, never looked up alone (as study above).
    protocol_version = models.ForeignKey(
        "tasks.ProtocolVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="ratings",
        db_index=False, db_constraint=False,
    )
    created_at = models.DateTimeField(auto_now_add=True, db_default=Now())
    updated_at = models.DateTimeField(auto_now=True, db_default=Now())

    class Meta:
        constraints = [
            CompositeForeignKey(fields=["item", "study"], to_fields=["id", "study"],
                                name="rating_item_of_study",
                                violation_error_message="The item does not belong to the rating's study."),
            CompositeForeignKey(fields=["comparison", "study"], to_fields=["id", "study"],
                                name="rating_comparison_of_study",
                                violation_error_message="The comparison does not belong to the rating's study."),
            models.CheckConstraint(
                condition=models.Q(item__isnull=False, comparison__isnull=True)
                | models.Q(item__isnull=True, comparison__isnull=False),
                name="rating_one_unit",
            ),
            models.UniqueConstraint(fields=["rater", "item"], name="rating_unique_rater_item"),
            # partial: item ratings (comparison NULL) never collide, so they need no entry
            models.UniqueConstraint(fields=["rater", "comparison"], condition=models.Q(comparison__isnull=False),
                                    name="rating_unique_rater_comparison"),
        ]
        indexes = [
            models.Index(fields=["study", "item"]),
            models.Index(fields=["comparison"], condition=models.Q(comparison__isnull=False),
                         name="rating_comparison_idx"),
            # the ratings that carry yes/no answers (EvalMi QA): the report reads only those
            models.Index(fields=["study"], condition=~models.Q(answers={}), name="rating_answered_study_idx"),
        ]

    def clean(self) -> None:
        study = self.study
        sub_count = len(self.item.instance.sub_questions) if self.item_id else 0
        try:
            self.values, self.answers = study.protocol_def.clean_rating(
                study.protocol_settings, self.values, self.answers, sub_question_count=sub_count
            )
        except protocols.ProtocolError as exc:
            raise ValidationError(str(exc)) from None
        rates_comparisons = study.protocol_def.unit_kind == protocols.COMPARISON
        if rates_comparisons and not self.comparison_id:
            raise ValidationError("Pairwise ratings belong to a comparison")
        if not rates_comparisons and not self.item_id:
            raise ValidationError("This protocol rates single items")


class RatingRevision(models.Model):
    """A previous version of a rating, kept when the rater changes their mind."""

    rating = models.ForeignKey(Rating, on_delete=models.CASCADE, related_name="revisions")
    values = models.JSONField()
    answers = models.JSONField(default=dict, blank=True)
    checklist = models.JSONField(default=dict, blank=True)
    time_on_item_ms = models.PositiveIntegerField(null=True, blank=True)
    replaced_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["rating", "replaced_at"]


class GoldAnswer(models.Model):
    """The expected rating of an item used for qualification or hidden gold.

    ``tolerance`` is the allowed absolute difference per dimension (0 = exact); yes/no answers
    are always exact. Never rendered to raters.
    """

    item = models.OneToOneField(Item, on_delete=models.CASCADE, related_name="gold")
    values = models.JSONField(default=dict, blank=True)
    answers = models.JSONField(default=dict, blank=True)
    tolerance = models.FloatField(default=0.0)
    note = models.TextField(blank=True, help_text="Why this is the right answer (for researchers)")
    created_at = models.DateTimeField(auto_now_add=True)

    def matches(self, values: dict, answers: dict | None = None) -> bool:
        for dim, expected in self.values.items():
            given = values.get(dim)
            if isinstance(expected, str) or isinstance(given, str):
                if given != expected:
                    return False
            elif given is None or abs(float(given) - float(expected)) > self.tolerance + 1e-9:
                return False
        for key, expected in self.answers.items():
            if (answers or {}).get(key) != expected:
                return False
        return True


class ComparisonGold(models.Model):
    """The expected preference of a comparison used as hidden gold in a pairwise study.

    ``preference`` is in the protocol's terms, independent of which side each output is shown on:
    ``A`` (``comparison.item_a`` is better), ``B``, ``tie`` or ``both_bad`` (only where the study
    allows it). Ratings store the preference in the same terms (the screen's left/right is mapped
    back through ``Assignment.presentation``), so a rater who saw the outputs swapped is scored
    on what they meant. Never rendered to raters.
    """

    comparison = models.OneToOneField(Comparison, on_delete=models.CASCADE, related_name="gold")
    preference = models.CharField(max_length=16, choices=[(c, c) for c in protocols.PAIRWISE_CHOICES])
    note = models.TextField(blank=True, help_text="Why this is the right answer (for researchers)")
    created_at = models.DateTimeField(auto_now_add=True)

    def clean(self) -> None:
        if not self.comparison_id:  # reported as a missing field
            return
        study = self.comparison.study
        if study.protocol_def.unit_kind != protocols.COMPARISON:
            raise ValidationError("Gold comparisons belong to pairwise studies")
        allowed = study.protocol_def.choices(study.protocol_settings)
        if self.preference not in allowed:
            raise ValidationError({"preference": f"This study takes one of {', '.join(allowed)}, got {self.preference!r}"})

    def matches(self, values: dict) -> bool:
        """Whether a rating's values (``{"preference": ...}``, in A/B terms) give the expected preference."""
        return values.get("preference") == self.preference

    def expected_side(self, presentation: dict) -> str:
        """The expected answer as the rater saw the screen: ``left``, ``right``, ``tie`` or ``both_bad``."""
        return protocols.pairwise_side(self.preference, presentation.get("left", "A"))

    def __str__(self) -> str:
        return f"gold {self.preference} for {self.comparison}"


class StudyBuild(models.Model):
    """A bundle upload being turned into a draft study by a background job (tasks.jobs.study_build_job).

    The upload is stored first, so a build of thousands of images never runs inside the request;
    the job checks it, stores its images, then creates the study in one transaction. ``done`` of
    ``total`` counts images in the current ``stage``. ``problems`` (a failed build) are
    ``{"file", "line", "message"}`` dicts as tasks.builder.Problem.as_dict gives them. The
    uploaded zip is deleted when the build ends, whatever the outcome.
    """

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    class Stage(models.TextChoices):
        WAITING = "waiting", "Waiting for a worker"
        CHECKING = "checking", "Checking images"
        STORING = "storing", "Storing images"
        CREATING = "creating", "Creating the study"
        FINISHED = "finished", "Finished"

    owner = models.ForeignKey(django_settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                              related_name="study_builds")
    slug = models.SlugField(max_length=100, help_text="Slug of the study to create")
    spec = models.JSONField(default=dict, help_text="The study fields (tasks.builder.StudySpec) next to the bundle")
    upload = models.FileField(upload_to="builds/", blank=True, help_text="The zip; deleted when the build ends")
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    stage = models.CharField(max_length=16, choices=Stage.choices, default=Stage.WAITING)
    done = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    problems = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True, help_text="An unexpected failure (not a problem of the bundle)")
    study = models.ForeignKey(Study, null=True, blank=True, on_delete=models.CASCADE, related_name="+",
                              help_text="The study built; deleting it deletes its build's record")
    task_id = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="Last progress write by a worker")
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["slug"], condition=models.Q(state__in=["queued", "running"]),
                                name="studybuild_active_slug")]

    def __str__(self) -> str:
        return f"build of {self.slug} ({self.state})"

    # A running build whose worker wrote no progress for this long is taken to be dead (killed, or
    # its machine went down): a job delivered again may claim it, and its slug is free again.
    STALE_AFTER = timedelta(minutes=15)

    @property
    def is_active(self) -> bool:
        return self.state in (self.State.QUEUED, self.State.RUNNING)

    @property
    def is_stale(self) -> bool:
        return (self.state == self.State.RUNNING and self.heartbeat_at is not None
                and self.heartbeat_at < timezone.now() - self.STALE_AFTER)

    @property
    def percent(self) -> int:
        return int(100 * self.done / self.total) if self.total else 0

    @property
    def image_folder(self) -> str:
        """Folder (under the images' upload path) of the image files this build writes: removed
        on failure, and found by prune_images if a killed worker left it behind."""
        return f"build-{self.pk}"


class WorkedExample(models.Model):
    """An example on the instructions page: an image, and what the right rating is and why.

    The image is stored like every other (once per content hash) and served through the
    access-checked ``/img/`` route to the study's raters.
    """

    CAPTION_MAX = 2000

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="worked_examples")
    image = models.ForeignKey(StoredImage, on_delete=models.PROTECT, related_name="+")
    caption = models.TextField(max_length=CAPTION_MAX, help_text="The rating this image deserves, and why")
    position = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study", "position", "id"]

    def __str__(self) -> str:
        return f"example {self.position} of {self.study_id}"


class ScreenReport(models.Model):
    """A rater's note about one screen: an image that did not load or looks broken, or a comment.

    Kept apart from ratings (a report is not an answer and never enters analysis) and sent by its
    own request, so it does not touch the submit path that gold and ordinary screens share. One
    per rater and screen: a second report replaces the first.
    """

    COMMENT_MAX = 1000

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="screen_reports")
    rater = models.ForeignKey("raters.Rater", on_delete=models.CASCADE, related_name="screen_reports")
    position = models.PositiveIntegerField(help_text="The screen's place in the rater's queue")
    items = models.JSONField(default=list, blank=True, help_text="Ids of the screen's items (both sides of a pair)")
    broken_image = models.BooleanField(default=False)
    comment = models.TextField(blank=True, max_length=COMMENT_MAX)
    created_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["rater", "study", "position"], name="screen_report_once")]

    def __str__(self) -> str:
        return f"report by rater {self.rater_id} on screen {self.position} of {self.study_id}"


class ProtocolVersion(models.Model):
    """The protocol as raters met it: scale, instructions, worked examples, screen layout version,
    gold set and quality policy, with a content hash of all of them (tasks.provenance).

    A new row is made whenever any part changes while ratings can be cast; ratings point at the
    version current when they were submitted, so a release can say which text each vote saw.
    ``content`` holds the full text of every part (JSON), ``number`` counts versions per study.
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="protocol_versions")
    number = models.PositiveIntegerField()
    content_hash = models.CharField(max_length=64)
    content = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study", "number"]
        constraints = [
            models.UniqueConstraint(fields=["study", "content_hash"], name="protocol_version_unique_hash"),
            models.UniqueConstraint(fields=["study", "number"], name="protocol_version_unique_number"),
        ]

    def __str__(self) -> str:
        return f"{self.study_id} v{self.number} ({self.content_hash[:12]})"
