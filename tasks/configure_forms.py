"""The configure form: one Django form that both the configure page and the API's PATCH validate
with (the API merges its JSON into the study's current values first)."""

from __future__ import annotations

import re
from decimal import Decimal

from django import forms
from django.core.validators import RegexValidator

from raters.models import QualityPolicy
from tasks.configure_services import (
    CONFIG_FIELDS,
    EXAMPLE_MAX_BYTES,
    SAFE_WHILE_OPEN,
    study_configuration,
)
from tasks.models import Study, WorkedExample

USERNAME = re.compile(r"^[\w.@+-]{1,150}$")
COLLABORATORS_MAX = 20
CURRENCIES = [("GBP", "GBP £"), ("USD", "USD $"), ("EUR", "EUR €")]
TEXT_MAX = 20_000

# Sections of the page: (title, intro, fields).
SECTIONS = [
    ("Codes and links per outcome",
     "What a crowd rater takes back to their platform. Prolific gives every outcome its own completion code; "
     "paste each here, and the link if Prolific gave you one (otherwise raters get Prolific's completion link "
     "with the code).",
     ["completion_code", "completion_url", "screened_out_code", "screened_out_url",
      "qualification_failed_code", "qualification_failed_url", "closed_code", "closed_url"]),
    ("Sessions and assignment", "",
     ["units_per_session", "raters_per_item", "assignment_mode"]),
    ("Adaptive assignment",
     "Only in adaptive mode: each claim takes the least certain units of the models whose place in the ranking "
     "is still open; a unit stops at its cap (raters per item), at the target half-width, or when its model is "
     "settled. Every recomputation is recorded (API: allocation/).",
     ["adaptive_target_halfwidth", "adaptive_alpha", "adaptive_margin", "adaptive_min_ratings"]),
    ("Consent, pay and contact", "Shown to raters on the consent page.",
     ["consent_text", "estimated_minutes", "pay_per_hour", "pay_currency", "contact", "seconds_per_unit_estimate"]),
    ("Instructions", "Shown before the first screen, above the rubric. Add worked examples with images below.",
     ["instructions"]),
    ("Quality policy",
     "Scores compare on a 0–1 scale (0 = the scale's minimum). Rules run by themselves as raters work.",
     ["qualification_required", "qualification_size", "qualification_pass_share", "qualification_max_attempts",
      "gold_share", "gold_min_accuracy", "gold_min_items", "gold_action",
      "attention_max_failures", "attention_action",
      "min_median_time_ms", "straightline_max_std", "min_consensus_r", "behaviour_min_flags", "behaviour_action",
      "rules_after_session", "rules_every_ratings"]),
    ("Collaborators", "Other researchers who may see and run this study. Only owners change this list.",
     ["collaborators"]),
]


def _code(label: str, help_text: str = "") -> forms.CharField:
    return forms.CharField(label=label, max_length=64, required=False, help_text=help_text,
                           validators=[RegexValidator(
                               r"^[A-Za-z0-9_\-]*$", "Letters, digits, - and _ only (as platforms issue codes).")])


def _url(label: str) -> forms.URLField:
    return forms.URLField(label=label, required=False, max_length=200, assume_scheme="https",
                          help_text="https link; empty = the platform's default")


ACTIONS = QualityPolicy.Action.choices
# short enough for the settings page's column at laptop width (the model's labels say more)
MODE_LABELS = {"whole_set": "Whole set per rater", "balanced": "Balanced overlap", "adaptive": "Adaptive"}


class StudyConfigureForm(forms.Form):
    completion_code = _code("Completed: code", "Shown to raters who finish")
    completion_url = _url("Completed: link")
    screened_out_code = _code("Screened out: code", "Raters rejected by screening")
    screened_out_url = _url("Screened out: link")
    qualification_failed_code = _code("Failed the qualification: code")
    qualification_failed_url = _url("Failed the qualification: link")
    closed_code = _code("Returned / closed: code", "Raters working when the study closes, or with no work left")
    closed_url = _url("Returned / closed: link")

    units_per_session = forms.IntegerField(label="Screens per session", min_value=1, max_value=1000,
                                           help_text="Balanced mode: screens a rater gets per session")
    raters_per_item = forms.IntegerField(label="Raters per item", min_value=1, max_value=100)
    assignment_mode = forms.ChoiceField(
        label="Assignment mode",
        choices=[(value, MODE_LABELS.get(value, label)) for value, label in Study.AssignmentMode.choices],
        help_text="Adaptive: the least certain units of unsettled models first; raters per item is each unit's cap")
    adaptive_target_halfwidth = forms.FloatField(
        label="Target item CI half-width", required=False, min_value=0.001, max_value=100,
        help_text="Rating-scale points (95 %); empty = no item target")
    adaptive_alpha = forms.FloatField(label="Verdict error rate (alpha)", min_value=0.001, max_value=0.2,
                                      help_text="Anytime-valid: holds however often the verdicts are read")
    adaptive_margin = forms.FloatField(label="Tie margin", min_value=0, max_value=100,
                                       help_text="Models closer than this (rating-scale points) are declared tied")
    adaptive_min_ratings = forms.IntegerField(label="Burn-in ratings per unit", min_value=0, max_value=100)

    consent_text = forms.CharField(label="Consent text", required=False, max_length=TEXT_MAX,
                                   widget=forms.Textarea(attrs={"rows": 5}),
                                   help_text="Empty = the site's standard consent text")
    estimated_minutes = forms.IntegerField(label="Estimated minutes per session", required=False, min_value=1,
                                           max_value=600)
    pay_per_hour = forms.DecimalField(label="Pay per hour", required=False, min_value=Decimal("0"),
                                      max_value=Decimal("10000"), max_digits=7, decimal_places=2)
    pay_currency = forms.ChoiceField(label="Currency", choices=CURRENCIES)
    contact = forms.CharField(label="Contact", required=False, max_length=200,
                              help_text="Whom raters write to, e.g. an e-mail address")
    seconds_per_unit_estimate = forms.IntegerField(
        label="Estimated seconds per screen", required=False, min_value=1, max_value=3600,
        help_text="For the cost estimate until 20 ratings measure it")

    instructions = forms.CharField(label="Instructions", required=False, max_length=TEXT_MAX,
                                   widget=forms.Textarea(attrs={"rows": 5}))

    qualification_required = forms.BooleanField(label="Qualification test before the work", required=False)
    qualification_size = forms.IntegerField(label="Test questions", min_value=1, max_value=100)
    qualification_pass_share = forms.FloatField(label="Share correct to pass", min_value=0, max_value=1)
    qualification_max_attempts = forms.IntegerField(label="Attempts allowed", min_value=1, max_value=10)
    gold_share = forms.FloatField(label="Hidden gold share", min_value=0, max_value=0.5,
                                  help_text="Share of screens that are hidden gold (0 = none, at most 0.5)")
    gold_min_accuracy = forms.FloatField(label="Gold: least accuracy", min_value=0, max_value=1)
    gold_min_items = forms.IntegerField(label="Gold: judged after", min_value=1, max_value=1000,
                                        help_text="gold answers")
    gold_action = forms.ChoiceField(label="Gold: action", choices=ACTIONS, required=False)
    attention_max_failures = forms.IntegerField(label="Attention checks: failures allowed", min_value=0,
                                                max_value=100, help_text="Action after more than this many")
    attention_action = forms.ChoiceField(label="Attention checks: action", choices=ACTIONS, required=False)
    min_median_time_ms = forms.IntegerField(label="Too fast below (ms, median per screen)", min_value=0,
                                            max_value=600_000)
    straightline_max_std = forms.FloatField(label="Straight-lining at or below sd", min_value=0, max_value=1)
    min_consensus_r = forms.FloatField(label="Least agreement with consensus (r)", min_value=-1, max_value=1)
    behaviour_min_flags = forms.IntegerField(label="Behaviour flags before the action", min_value=1, max_value=4)
    behaviour_action = forms.ChoiceField(label="Behaviour: action", choices=ACTIONS, required=False)
    rules_after_session = forms.BooleanField(label="Run the rules when a rater finishes a session", required=False)
    rules_every_ratings = forms.IntegerField(label="Also run them every N ratings", min_value=0, max_value=100_000,
                                             help_text="0 = never")

    collaborators = forms.CharField(required=False, max_length=4000,
                                    help_text="Usernames of researcher accounts, separated by commas")

    def __init__(self, *args, study: Study, lock: bool = False, **kwargs):
        """``lock``: fields that may not change in the study's state are shown disabled (the page);
        the API leaves them enabled so a change to one is refused with its reason."""
        super().__init__(*args, **kwargs)
        self.study = study
        self.safe = SAFE_WHILE_OPEN if study.state != Study.State.DRAFT else frozenset(CONFIG_FIELDS)
        for name, field in self.fields.items():
            if name not in self.safe:
                field.draft_only = True
                if lock:
                    field.disabled = True
        if lock and not self.initial:
            self.initial = initial_of(study)

    def clean_collaborators(self) -> list[str]:
        names = [n for n in re.split(r"[\s,]+", self.cleaned_data.get("collaborators") or "") if n]
        bad = [n for n in names if not USERNAME.match(n)]
        if bad:
            raise forms.ValidationError(f"Not a username: {bad[0][:40]!r}")
        if len(set(names)) > COLLABORATORS_MAX:
            raise forms.ValidationError(f"At most {COLLABORATORS_MAX} collaborators.")
        return sorted(set(names))

    def clean_gold_share(self) -> float:
        return float(self.cleaned_data["gold_share"])

    def sections(self) -> list[dict]:
        return [{"title": t, "intro": i, "fields": [self[n] for n in names]} for t, i, names in SECTIONS]

    @property
    def locked_labels(self) -> list[str]:
        return [str(self.fields[n].label or n) for n in self.fields if n not in self.safe]


def initial_of(study: Study) -> dict:
    """The study's configuration as form values."""
    values = study_configuration(study)
    values["collaborators"] = ", ".join(values["collaborators"])
    values["pay_currency"] = values["pay_currency"] or "GBP"
    return values


def form_data_for_patch(study: Study, patch: dict) -> dict:
    """The form's data for an API PATCH: the study's current values with the patch on top."""
    data = initial_of(study)
    for name, value in patch.items():
        data[name] = ", ".join(value) if name == "collaborators" and isinstance(value, list) else value
    return {k: ("" if v is None else v) for k, v in data.items()}


class WorkedExampleForm(forms.Form):
    # A plain file field: the size is checked before Pillow decodes anything (configure_services).
    image = forms.FileField(help_text=f"PNG, JPEG or WebP, at most {EXAMPLE_MAX_BYTES // (1024 * 1024)} MB")
    caption = forms.CharField(max_length=WorkedExample.CAPTION_MAX, widget=forms.Textarea(attrs={"rows": 2}),
                              help_text="The rating this image deserves, and why")


def patch_problems(patch) -> dict[str, str]:
    """Type problems of an API PATCH body before the form sees it: a JSON object of known fields,
    text fields as strings, numbers as numbers (or numeric strings), booleans as booleans,
    collaborators as a list of usernames. The form then checks ranges and formats."""
    if not isinstance(patch, dict):
        return {"__all__": "Send a JSON object of the fields to change."}
    problems = {}
    fields = StudyConfigureForm.base_fields
    for name, value in patch.items():
        field = fields.get(name) if isinstance(name, str) else None
        if field is None:
            problems[str(name)[:60]] = "Unknown field."
        elif name == "collaborators":
            if not (isinstance(value, list) and all(isinstance(v, str) for v in value) and len(value) <= 100):
                problems[name] = "A list of usernames."
        elif isinstance(field, forms.BooleanField):
            if not isinstance(value, bool):
                problems[name] = "true or false."
        elif isinstance(field, (forms.IntegerField, forms.FloatField, forms.DecimalField)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float, str))):
                problems[name] = "A number."
        elif value is not None and not isinstance(value, str):
            problems[name] = "A string."
    return problems
