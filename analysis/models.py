"""Automatic judges (MLLM judges, classical metrics) and their scores on study items.

Imported judge outputs (e.g. VIEScore's released GPT-4o scores) and judges run here are the same
rows downstream: a JudgeRun with ``source=import`` simply made no calls.
"""

from __future__ import annotations

import hashlib
import json
import os

from django.conf import settings
from django.core.files.storage import FileSystemStorage
from django.db import models
from django.utils import timezone
from django.utils.functional import cached_property


class Judge(models.Model):
    class Kind(models.TextChoices):
        VIESCORE = "viescore", "VIEScore (MLLM)"
        GPT4V = "gpt4v", "GPT-4V evaluator (MLLM)"
        VICE = "vice", "ViCE (LLM + MLLM)"
        EVALMI = "evalmi", "EvalMi prompts (MLLM)"
        METRIC = "metric", "Classical metric"
        EMBEDDING = "embedding", "CLIP / DINO embeddings (local checkpoint)"
        IMPORTED = "imported", "Imported scores"

    # A researcher's judge is theirs: names are per owner, so naming someone else's judge finds
    # nothing of theirs. No owner = shared, made on purpose by staff (admin, CLI, imports).
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                              related_name="judges", help_text="Empty: a shared judge every researcher may run")
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    params = models.JSONField(default=dict, blank=True, help_text="Endpoint name, model, prompt options… (no URLs of the operator, no keys)")
    version = models.CharField(max_length=32, default="1")
    lower_is_better = models.BooleanField(default=False, help_text="True for distances such as LPIPS")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="judge_name_unique_per_owner"),
            models.UniqueConstraint(fields=["name"], condition=models.Q(owner__isnull=True), name="judge_shared_name_unique"),
        ]

    @property
    def is_shared(self) -> bool:
        return self.owner_id is None

    def __str__(self) -> str:
        return self.name

    @property
    def config_hash(self) -> str:
        """Hash of what determines a judge's output: kind, version and parameters."""
        blob = json.dumps({"kind": self.kind, "version": self.version, "params": self.params}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()


class JudgeRun(models.Model):
    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    class Source(models.TextChoices):
        RUN = "run", "Run here"
        IMPORT = "import", "Imported"

    judge = models.ForeignKey(Judge, on_delete=models.CASCADE, related_name="runs")
    study = models.ForeignKey("tasks.Study", on_delete=models.CASCADE, related_name="judge_runs")
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.RUN)
    source_detail = models.CharField(max_length=300, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    cancel_requested = models.BooleanField(default=False)
    calls = models.PositiveIntegerField(default=0, help_text="HTTP requests sent to the endpoint, retries included")
    cached = models.PositiveIntegerField(default=0, help_text="Units answered from earlier runs' scores (no call)")
    config_hash = models.CharField(max_length=64, blank=True, help_text="Judge.config_hash when the run started")
    task_id = models.CharField(max_length=64, blank=True, help_text="Celery task id of the latest attempt")
    heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="Last progress write by a worker")
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.judge.name} on {self.study.slug} ({self.state})"

    @property
    def is_active(self) -> bool:
        return self.state in (self.State.QUEUED, self.State.RUNNING)

    def is_stalled(self, now=None, *, after_seconds: int = 600) -> bool:
        """Queued or running but with no progress write for ``after_seconds`` (a killed worker)."""
        if not self.is_active:
            return False
        last = self.heartbeat_at or self.started_at or self.created_at
        return last is not None and ((now or timezone.now()) - last).total_seconds() > after_seconds

    @property
    def can_resume(self) -> bool:
        """Cancelled or failed runs, and runs whose worker died, can be picked up again."""
        if self.source != self.Source.RUN:
            return False
        return self.state in (self.State.CANCELLED, self.State.FAILED) or self.is_stalled()

    @property
    def percent(self) -> int:
        return round(100 * (self.done + self.failed) / self.total) if self.total else 0


class JudgeScore(models.Model):
    class ParseStatus(models.TextChoices):
        OK = "ok", "Parsed"
        REFUSED = "refused", "Refused"
        FAILED = "failed", "Unparseable or failed"

    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="scores")
    item = models.ForeignKey("tasks.Item", on_delete=models.CASCADE, related_name="judge_scores")
    dimension = models.CharField(max_length=32, help_text="SC, PQ, O, perception, correspondence, qa, CLIP_Score…")
    value = models.FloatField(null=True, blank=True, help_text="Null when the judge refused or failed")
    sub_scores = models.JSONField(default=list, blank=True)
    rationale = models.TextField(blank=True)
    raw_response = models.TextField(blank=True)
    parse_status = models.CharField(max_length=16, choices=ParseStatus.choices, default=ParseStatus.OK)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    cache_key = models.CharField(max_length=64, blank=True, db_index=True, help_text="sha256(config, image, prompt)")
    details = models.JSONField(default=dict, blank=True, help_text="Judge-specific record, e.g. the ViCE transcript")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "item", "dimension"], name="judgescore_unique_per_run"),
        ]
        indexes = [models.Index(fields=["run", "dimension"])]


class JudgeVerdict(models.Model):
    """A pairwise judgement of one comparison, asked in both orders (GPT-4V evaluator, seed 002).

    ``first`` is the choice when A was shown first, ``second`` when B was shown first, both mapped
    back to the comparison's labels A / B / tie; ``final`` follows the paper's dual-sided rule.
    All three are blank when the judge refused or failed.
    """

    class Choice(models.TextChoices):
        A = "A", "A"
        B = "B", "B"
        TIE = "tie", "Tie"

    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="verdicts")
    comparison = models.ForeignKey("tasks.Comparison", on_delete=models.CASCADE, related_name="judge_verdicts")
    first = models.CharField(max_length=8, choices=Choice.choices, blank=True)
    second = models.CharField(max_length=8, choices=Choice.choices, blank=True)
    final = models.CharField(max_length=8, choices=Choice.choices, blank=True)
    parse_status = models.CharField(max_length=16, choices=JudgeScore.ParseStatus.choices, default=JudgeScore.ParseStatus.OK)
    rationale_first = models.TextField(blank=True)
    rationale_second = models.TextField(blank=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    cache_key = models.CharField(max_length=64, blank=True, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "comparison"], name="judgeverdict_unique_per_run"),
        ]


class _ExportStorage(FileSystemStorage):
    """Files under settings.EXPORTS_ROOT (read when used, so tests can point it elsewhere), with
    no URL: exports are handed out by a view that checks who asks."""

    @cached_property
    def base_location(self):
        return settings.EXPORTS_ROOT

    @cached_property
    def location(self):
        return os.path.abspath(self.base_location)

    def _clear_cached_properties(self, setting, **kwargs):
        super()._clear_cached_properties(setting, **kwargs)
        if setting == "EXPORTS_ROOT":
            self.__dict__.pop("base_location", None)
            self.__dict__.pop("location", None)

    def url(self, name):
        raise ValueError("exports have no public URL; use the export download view")


_export_storage = _ExportStorage()


def export_storage() -> FileSystemStorage:
    return _export_storage


class StudyExport(models.Model):
    """A study export built by a background job (analysis.jobs.study_export_job), so a large
    study's dataset is never written inside a web request; the page and the API watch its
    progress and download the file when it is ready.

    ``kind`` names the builder (analysis.export_services.EXPORT_KINDS; ``dataset`` is the MOS
    dataset zip). The file lives in a private storage outside MEDIA_ROOT (which development
    serves without a login) and is handed only to the researcher who asked for it, while they
    may still see the study.
    """

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Preparing"
        DONE = "done", "Ready"
        FAILED = "failed", "Failed"

    STALE_AFTER = timezone.timedelta(minutes=10)  # a running export with no progress for this long: its worker died

    study = models.ForeignKey("tasks.Study", on_delete=models.CASCADE, related_name="exports")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="study_exports")
    kind = models.CharField(max_length=32, default="dataset")
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    stage = models.CharField(max_length=64, blank=True, help_text="What the job is writing now")
    done = models.PositiveIntegerField(default=0, help_text="Votes written so far")
    total = models.PositiveIntegerField(default=0, help_text="Votes to write")
    file = models.FileField(storage=export_storage, upload_to="exports/", blank=True)
    size = models.PositiveBigIntegerField(default=0, help_text="Bytes of the finished file")
    error = models.TextField(blank=True)
    task_id = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.kind} export of {self.study_id} ({self.state})"

    @property
    def is_active(self) -> bool:
        return self.state in (self.State.QUEUED, self.State.RUNNING)

    @property
    def percent(self) -> int:
        return round(100 * self.done / self.total) if self.total else 0


class StudyNotice(models.Model):
    """Something the study's owners were told once: the study is complete, or α of a dimension fell
    below the study's threshold. The unique (study, kind, key) row is the record that it was sent:
    a second check finds it and sends nothing (analysis.notices)."""

    class Kind(models.TextChoices):
        COMPLETE = "complete", "Study complete"
        ALPHA_LOW = "alpha_low", "Agreement below threshold"

    study = models.ForeignKey("tasks.Study", on_delete=models.CASCADE, related_name="notices")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    key = models.CharField(max_length=64, blank=True, help_text="The dimension, for agreement notices")
    message = models.TextField()
    recipients = models.PositiveIntegerField(default=0, help_text="Owners the email went to")
    emailed = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [models.UniqueConstraint(fields=["study", "kind", "key"], name="study_notice_once")]

    def __str__(self) -> str:
        return f"{self.get_kind_display()}: {self.study_id}"


class DatasetRelease(models.Model):
    """A study released as a dataset package (analysis.science.release), built in the background.

    The zip is kept in the media storage under ``releases/``; ``card`` is its reporting card (what
    the study page shows without rebuilding), ``manifest`` its configs and row counts. A release
    with the payment list holds crowd ids in clear (``private/payment_list.csv``): the page says so.
    """

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    study = models.ForeignKey("tasks.Study", on_delete=models.CASCADE, related_name="releases")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="+")
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    license = models.CharField(max_length=32, default="cc-by-4.0")
    payment_list = models.BooleanField(default=False, help_text="Crowd ids in clear, for paying raters: never publish")
    pay_per_item = models.FloatField(null=True, blank=True, help_text="What a rater was paid per item (for pay per hour)")
    currency = models.CharField(max_length=8, blank=True)
    file = models.CharField(max_length=300, blank=True, help_text="Storage name of the zip")
    size = models.BigIntegerField(default=0)
    card = models.JSONField(default=dict, blank=True)
    manifest = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"release {self.pk} of {self.study_id} ({self.state})"

    @property
    def counts_text(self) -> str:
        """Rows per config, e.g. "items 6 · votes 18 · raters 3" (a template cannot loop over a
        dict that has a key named ``items``)."""
        return " · ".join(f"{name} {n}" for name, n in (self.manifest.get("counts") or {}).items())
