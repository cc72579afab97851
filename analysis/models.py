"""Automatic judges (MLLM judges, classical metrics) and their scores on study items.

Imported judge outputs (e.g. VIEScore's released GPT-4o scores) and judges run here are the same
rows downstream: a JudgeRun with ``source=import`` simply made no calls.
"""

from __future__ import annotations

import hashlib
import json

from django.db import models


class Judge(models.Model):
    class Kind(models.TextChoices):
        VIESCORE = "viescore", "VIEScore (MLLM)"
        GPT4V = "gpt4v", "GPT-4V evaluator (MLLM)"
        VICE = "vice", "ViCE (LLM + MLLM)"
        EVALMI = "evalmi", "EvalMi prompts (MLLM)"
        METRIC = "metric", "Classical metric"
        IMPORTED = "imported", "Imported scores"

    name = models.CharField(max_length=100, unique=True)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    params = models.JSONField(default=dict, blank=True, help_text="Model, endpoint, prompt options… (no API keys)")
    version = models.CharField(max_length=32, default="1")
    lower_is_better = models.BooleanField(default=False, help_text="True for distances such as LPIPS")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

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
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.judge.name} on {self.study.slug} ({self.state})"


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
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "item", "dimension"], name="judgescore_unique_per_run"),
        ]
        indexes = [models.Index(fields=["run", "dimension"])]
