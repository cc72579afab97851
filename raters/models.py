from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from tasks.models import Assignment, Rating


class RaterQuerySet(models.QuerySet):
    def excluded_from_analysis(self, study) -> "RaterQuerySet":
        """Raters whose ratings of ``study`` are left out of analysis by default.

        Blocked raters (site-wide) and raters rejected or blocked in this study. Their ratings
        are kept in the database; reports may show them with ``include_excluded``.
        """
        return self.filter(
            models.Q(state=Rater.State.BLOCKED)
            | models.Q(
                standings__study=study,
                standings__state__in=[RaterStanding.State.REJECTED, RaterStanding.State.BLOCKED],
            )
        ).distinct()

    def with_work_in(self, study) -> "RaterQuerySet":
        """Raters with an assignment or a rating in ``study``: the raters its researchers see and
        decide about (the rater list, a rater's page, a decision). Anyone else is none of their business."""
        return self.filter(
            models.Q(pk__in=Assignment.objects.filter(study=study).values("rater_id"))
            | models.Q(pk__in=Rating.objects.filter(study=study).values("rater_id"))
        )


class Rater(models.Model):
    """A person who rates: a site user, a crowd worker known only by platform id, or an imported source.

    Crowd raters have no password; the (platform, external_id) pair brings the same worker back to
    the same Rater. Imported raters (e.g. ``rater1`` of an ImagenHub TSV) use platform ``import``.
    """

    class Platform(models.TextChoices):
        LOCAL = "local", "Invited (login)"
        PROLIFIC = "prolific", "Prolific"
        MTURK = "mturk", "Amazon Mechanical Turk"
        IMPORT = "import", "Imported ratings"

    class State(models.TextChoices):
        ACTIVE = "active", "Active"
        PAUSED = "paused", "Paused"
        BLOCKED = "blocked", "Blocked"

    user = models.OneToOneField(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="rater")
    platform = models.CharField(max_length=16, choices=Platform.choices, default=Platform.LOCAL)
    external_id = models.CharField(max_length=200, blank=True, help_text="Crowd worker id or imported rater name")
    state = models.CharField(max_length=16, choices=State.choices, default=State.ACTIVE)
    state_reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = RaterQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["platform", "external_id"],
                condition=~models.Q(external_id=""),
                name="rater_unique_platform_external_id",
            ),
        ]

    def __str__(self) -> str:
        if self.user_id:
            return self.user.get_username()
        return f"{self.platform}:{self.external_id}"

    @property
    def can_rate(self) -> bool:
        return self.state == self.State.ACTIVE


# ---------------------------------------------------------------- quality

class Decision(models.TextChoices):
    """What a researcher or a rule did about a rater in one study."""

    APPROVE = "approve", "Approve"
    PAUSE = "pause", "Pause"
    REJECT = "reject", "Reject"
    BLOCK = "block", "Block"
    REACTIVATE = "reactivate", "Reactivate"




class QualityPolicy(models.Model):
    """How one study screens its raters: qualification, thresholds for flags, and automatic rules.

    Scores are compared on a 0-1 scale (0 = the scale's minimum, 1 = its maximum), so one policy
    reads the same for ImagenHub's 0/0.5/1 and a 1-5 Likert. The hidden-gold share lives in the
    study's protocol settings (``gold_share``). A study without a policy row uses these defaults.
    """

    class Action(models.TextChoices):
        NONE = "", "Only flag"
        PAUSE = "pause", "Pause"
        REJECT = "reject", "Reject"
        BLOCK = "block", "Block"

    study = models.OneToOneField("tasks.Study", on_delete=models.CASCADE, related_name="quality_policy")

    qualification_required = models.BooleanField(default=False)
    qualification_size = models.PositiveSmallIntegerField(default=10, help_text="Gold items in one attempt")
    qualification_pass_share = models.FloatField(default=0.8, help_text="Share of correct answers to pass (0-1)")
    qualification_max_attempts = models.PositiveSmallIntegerField(default=1)
    qualification_items = models.ManyToManyField(
        "tasks.Item",
        blank=True,
        related_name="+",
        help_text="Gold items for the test; empty = the study's first gold items",
    )

    min_median_time_ms = models.PositiveIntegerField(default=2000, help_text="Too fast below this median per item")
    straightline_max_std = models.FloatField(default=0.05, help_text="Straight-lining at or below this sd (0-1 scale)")
    straightline_min_items = models.PositiveSmallIntegerField(default=10)
    min_consensus_r = models.FloatField(default=0.3, help_text="Pearson r with the leave-one-out consensus")
    consensus_min_items = models.PositiveSmallIntegerField(default=10)
    use_bt500 = models.BooleanField(default=True, help_text="Flag raters rejected by ITU-R BT.500 screening")

    gold_min_accuracy = models.FloatField(default=0.7)
    gold_min_items = models.PositiveSmallIntegerField(default=10, help_text="Judge gold accuracy only after this many")
    gold_action = models.CharField(max_length=8, choices=Action.choices, default=Action.PAUSE, blank=True)
    attention_max_failures = models.PositiveSmallIntegerField(
        default=2, help_text="Failed attention checks before the action (Prolific: two in longer studies)"
    )
    attention_action = models.CharField(max_length=8, choices=Action.choices, default=Action.REJECT, blank=True)
    behaviour_action = models.CharField(
        max_length=8, choices=Action.choices, default=Action.NONE, blank=True,
        help_text="Action for behaviour flags (too fast, straight-lining, consensus, BT.500)",
    )
    behaviour_min_flags = models.PositiveSmallIntegerField(default=2, help_text="Behaviour flags needed for the action")
    rules_after_session = models.BooleanField(
        default=True, help_text="Run every rule (a background job) when a rater finishes a session of screens"
    )
    rules_every_ratings = models.PositiveIntegerField(
        default=50, help_text="Also run every rule after this many new ratings in the study; 0 = never"
    )

    class Meta:
        verbose_name_plural = "quality policies"

    def __str__(self) -> str:
        return f"Quality policy of {self.study}"

    def clean(self) -> None:
        for name in ("qualification_pass_share", "gold_min_accuracy", "straightline_max_std"):
            value = getattr(self, name)
            if not 0 <= value <= 1:
                raise ValidationError({name: "Must be between 0 and 1"})
        if not -1 <= self.min_consensus_r <= 1:
            raise ValidationError({"min_consensus_r": "A correlation lies between -1 and 1"})
        if self.qualification_required and self.qualification_size < 1:
            raise ValidationError({"qualification_size": "A qualification test needs at least one gold item"})
        if self.qualification_required and self.qualification_max_attempts < 1:
            raise ValidationError({"qualification_max_attempts": "Allow at least one attempt"})

    @classmethod
    def for_study(cls, study) -> "QualityPolicy":
        """The study's policy, or an unsaved one with the defaults (reading never writes)."""
        try:
            return study.quality_policy
        except cls.DoesNotExist:
            return cls(study=study)


class QualityRulesSchedule(models.Model):
    """When a study's rules last ran automatically, and what is due.

    ``ratings_since_run`` counts ratings recorded since the last run was queued; ``queued`` is set
    while a run waits for a worker, so a burst of triggers queues one job, not one per rating.
    """

    study = models.OneToOneField("tasks.Study", on_delete=models.CASCADE, related_name="quality_rules_schedule")
    ratings_since_run = models.PositiveIntegerField(default=0)
    queued = models.BooleanField(default=False)
    queued_at = models.DateTimeField(null=True, blank=True)
    runs = models.PositiveIntegerField(default=0)
    last_run_at = models.DateTimeField(null=True, blank=True)
    last_run_actions = models.PositiveIntegerField(default=0, help_text="Raters the last run acted on")

    def __str__(self) -> str:
        return f"Rule schedule of {self.study}"


class RaterStanding(models.Model):
    """A rater's standing in one study; absent = pending (nobody decided yet)."""

    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        APPROVED = "approved", "Approved"
        PAUSED = "paused", "Paused"
        REJECTED = "rejected", "Rejected"
        BLOCKED = "blocked", "Blocked"

    study = models.ForeignKey("tasks.Study", on_delete=models.CASCADE, related_name="rater_standings")
    rater = models.ForeignKey(Rater, on_delete=models.CASCADE, related_name="standings")
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    reason = models.TextField(blank=True)
    automatic = models.BooleanField(default=False, help_text="Set by a rule, not a person")
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["study", "rater"], name="standing_unique_study_rater")]

    def __str__(self) -> str:
        return f"{self.rater} in {self.study}: {self.state}"

    @classmethod
    def of(cls, *, rater: Rater, study) -> "RaterStanding":
        """The rater's standing in the study; an unsaved pending one when nobody decided yet."""
        standing = cls.objects.filter(study=study, rater=rater).first()
        return standing or cls(study=study, rater=rater)

    @property
    def excludes_from_analysis(self) -> bool:
        return self.state in (self.State.REJECTED, self.State.BLOCKED)

    @property
    def may_continue(self) -> bool:
        return self.state in (self.State.PENDING, self.State.APPROVED)


class RaterAction(models.Model):
    """Audit trail: every decision about a rater, by a person or a rule, with its reason."""

    study = models.ForeignKey("tasks.Study", on_delete=models.CASCADE, related_name="rater_actions")
    rater = models.ForeignKey(Rater, on_delete=models.CASCADE, related_name="actions")
    decision = models.CharField(max_length=16, choices=Decision.choices)
    reason = models.TextField()
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    automatic = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        who = "rule" if self.automatic else (self.actor or "someone")
        return f"{self.get_decision_display()} {self.rater} by {who}: {self.reason}"


class QualificationAttempt(models.Model):
    """One try at a study's qualification test. Answers are kept apart from Ratings (not analysed)."""

    study = models.ForeignKey("tasks.Study", on_delete=models.CASCADE, related_name="qualification_attempts")
    rater = models.ForeignKey(Rater, on_delete=models.CASCADE, related_name="qualification_attempts")
    number = models.PositiveSmallIntegerField(default=1)
    items = models.JSONField(default=list, help_text="Item ids of this attempt, in the order shown")
    passed = models.BooleanField(null=True, help_text="None while unfinished")
    correct = models.PositiveSmallIntegerField(default=0)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["study", "rater", "number"]
        constraints = [
            models.UniqueConstraint(fields=["study", "rater", "number"], name="qualification_unique_attempt"),
        ]

    @property
    def total(self) -> int:
        return len(self.items)

    @property
    def is_finished(self) -> bool:
        return self.finished_at is not None


class QualificationAnswer(models.Model):
    attempt = models.ForeignKey(QualificationAttempt, on_delete=models.CASCADE, related_name="answers")
    item = models.ForeignKey("tasks.Item", on_delete=models.CASCADE, related_name="+")
    values = models.JSONField()
    answers = models.JSONField(default=dict, blank=True)
    checklist = models.JSONField(default=dict, blank=True, help_text="Checklist mode: the marks the values came from")
    correct = models.BooleanField()
    time_on_item_ms = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["attempt", "id"]
        constraints = [models.UniqueConstraint(fields=["attempt", "item"], name="qualification_unique_answer")]


class AttentionCheck(models.Model):
    """An instructed-response item: the rater is told what to answer ("choose 0.5 for SC").

    The item is a study item reserved for the check; ratings on it are excluded from analysis
    (see ``raters.quality.analysis_item_filter``). ``expected_values`` holds the instructed answer;
    dimensions not named are free.
    """

    study = models.ForeignKey("tasks.Study", on_delete=models.CASCADE, related_name="attention_checks")
    item = models.OneToOneField("tasks.Item", on_delete=models.CASCADE, related_name="attention_check")
    instruction = models.CharField(max_length=300, help_text="Shown on the item, e.g. 'Please choose 0.5 for SC'")
    expected_values = models.JSONField(default=dict)
    expected_answers = models.JSONField(default=dict, blank=True)
    after_items = models.PositiveIntegerField(default=5, help_text="Shown after this many completed items")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study", "after_items", "id"]

    def __str__(self) -> str:
        return self.instruction

    def clean(self) -> None:
        if self.item_id and self.study_id and self.item.study_id != self.study_id:
            raise ValidationError("The attention-check item must belong to the study")
        if not self.expected_values and not self.expected_answers:
            raise ValidationError("Say what the instructed answer is")

    def is_passed_by(self, values: dict, answers: dict | None = None) -> bool:
        for dim, expected in self.expected_values.items():
            given = values.get(dim)
            if isinstance(expected, str) or isinstance(given, str):
                if given != expected:
                    return False
            elif given is None or abs(float(given) - float(expected)) > 1e-9:
                return False
        return all((answers or {}).get(k) == v for k, v in self.expected_answers.items())


class AttentionResult(models.Model):
    """The first answer a rater gave to an attention check (later edits do not repair a failure)."""

    attention_check = models.ForeignKey(AttentionCheck, on_delete=models.CASCADE, related_name="results")
    rater = models.ForeignKey(Rater, on_delete=models.CASCADE, related_name="attention_results")
    passed = models.BooleanField()
    values = models.JSONField(default=dict)
    answers = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["attention_check", "rater"], name="attention_unique_result")]
