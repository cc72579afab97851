"""The builder page's form: study fields, a task-type select valid per protocol, and the protocol
settings as fields (each protocol's own, shown for it by static/js/builder.js; without
JavaScript all are shown, labelled by protocol, and only the chosen protocol's are read).

Settings that do not apply to the chosen protocol or task are never put in the study's settings
(analysis.science.protocols.task_types.applicable_settings drops the rest again when the study is saved).
"""

from __future__ import annotations

from django import forms

from analysis.science import protocols
from tasks.builder import text_problem
from tasks.models import Study
from analysis.science.protocols.task_types import TASK_ONLY_SETTINGS, TASK_TYPES, applicable_settings, task_type_problem

PROTOCOL_LABELS = dict(Study.Protocol.choices)
MAX_DESCRIPTION_MODELS = 200

# form field -> the protocol it belongs to (None: every protocol)
SETTING_FIELDS: dict[str, str | None] = {
    "gold_share": None,
    "agreement_threshold": None,
    "exclude_phones": None,
    "checklist_mode": protocols.IMAGENHUB,
    "description_models": protocols.IMAGENHUB,
    "likert_min": protocols.EVALMI,
    "likert_max": protocols.EVALMI,
    "qa": protocols.EVALMI,
    "images_per_trial": protocols.EVALMI,
    "allow_both_bad": protocols.PAIRWISE,
}


def task_type_choices() -> list[tuple[str, list[tuple[str, str]]]]:
    return [(PROTOCOL_LABELS[protocol], list(tasks.items())) for protocol, tasks in TASK_TYPES.items()]


class BundleForm(forms.Form):
    bundle = forms.FileField(help_text="A .zip with your images and manifest.csv or manifest.jsonl at its top level")
    slug = forms.SlugField(max_length=100, help_text="Short id used in links, e.g. tie-2025-t2i")
    title = forms.CharField(max_length=200)
    protocol = forms.ChoiceField(choices=Study.Protocol.choices)
    task_type = forms.ChoiceField(choices=task_type_choices, initial="text_to_image",
                                  help_text="The tasks of the chosen protocol")
    instructions = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)
    raters_per_item = forms.IntegerField(min_value=1, max_value=100, initial=3)
    assignment_mode = forms.ChoiceField(choices=Study.AssignmentMode.choices, initial=Study.AssignmentMode.BALANCED)
    rater_sampling = forms.ChoiceField(choices=Study.RaterSampling.choices, initial=Study.RaterSampling.SAMPLED,
                                       required=False, label="Raters are", help_text="Decides whether confidence "
                                       "intervals include the raters (a crowd) or only the items (a fixed expert panel)")

    # protocol settings
    gold_share = forms.FloatField(required=False, min_value=0, max_value=0.99, initial=0.0, label="Hidden gold share",
                                  help_text="Share of screens that are hidden gold items (0 = none)")
    agreement_threshold = forms.FloatField(required=False, min_value=0.01, max_value=1, label="Agreement threshold (α)",
                                           help_text="Empty = the site default; colours the dashboard and triggers "
                                                     "the low-agreement notice")
    exclude_phones = forms.BooleanField(required=False, label="Exclude phones",
                                        help_text="Raters on a phone are told before consent that this study needs "
                                                  "a larger screen, and cannot take part (also set the device filter "
                                                  "on Prolific or MTurk)")
    checklist_mode = forms.BooleanField(required=False, label="Checklist mode",
                                        help_text="Raters fill in ImagenHub's Table 9 checklist; SC and PQ derive from it")
    description_models = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 4}), label="Models given a description",
        initial="\n".join(protocols.DESCRIPTION_EDITORS),
        help_text="Text-guided editing only: one model name a line; raters see these models' alt_prompt "
                  "(a description of the wanted image) instead of the instruction")
    likert_min = forms.IntegerField(initial=1, min_value=-1000, max_value=1000, label="Likert minimum")
    likert_max = forms.IntegerField(initial=5, min_value=-1000, max_value=1000, label="Likert maximum")
    qa = forms.BooleanField(required=False, initial=True, label="Ask the yes/no task questions")
    images_per_trial = forms.IntegerField(initial=3, min_value=1, max_value=6, label="Images per trial")
    allow_both_bad = forms.BooleanField(required=False, initial=True, label="Offer “both bad”")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name, protocol in SETTING_FIELDS.items():
            attrs = self.fields[name].widget.attrs
            attrs["data-protocol"] = protocol or ""
            if name in TASK_ONLY_SETTINGS:
                attrs["data-tasks"] = " ".join(TASK_ONLY_SETTINGS[name])
            if protocol is not None:  # read only for its protocol: not required for the others
                self.fields[name].required = False
        self.fields["task_type"].widget.attrs["data-tasks-by-protocol"] = " ".join(
            f"{protocol}:{','.join(tasks)}" for protocol, tasks in TASK_TYPES.items())

    def protocol_fields(self):
        """(protocol or "", label, [(bound field, the tasks it is for or "")]) groups, for the fieldsets."""
        groups: dict[str | None, list] = {}
        for name, protocol in SETTING_FIELDS.items():
            groups.setdefault(protocol, []).append((self[name], " ".join(TASK_ONLY_SETTINGS.get(name, ()))))
        return [(protocol or "", PROTOCOL_LABELS.get(protocol, "Every protocol"), fields)
                for protocol, fields in groups.items()]

    def study_fields(self):
        return [self[name] for name in self.fields if name not in SETTING_FIELDS]

    def clean_description_models(self) -> list[str]:
        names = [line.strip() for line in (self.cleaned_data.get("description_models") or "").splitlines()]
        names = list(dict.fromkeys(name for name in names if name))
        if len(names) > MAX_DESCRIPTION_MODELS:
            raise forms.ValidationError(f"At most {MAX_DESCRIPTION_MODELS} model names")
        for name in names:
            problem = text_problem(name, max_length=100)
            if problem:
                raise forms.ValidationError(f"A model name {problem}")
        return names

    def clean(self) -> dict:
        data = super().clean()
        protocol, task_type = data.get("protocol"), data.get("task_type")
        if not protocol or not task_type:
            return data
        problem = task_type_problem(protocol, task_type)
        if problem:
            self.add_error("task_type", problem[0].upper() + problem[1:])
            return data
        settings = {}
        for name, owner in SETTING_FIELDS.items():
            if owner not in (None, protocol) or name in self.errors:
                continue
            value = data.get(name)
            checkbox = isinstance(self.fields[name], forms.BooleanField)
            if value is None or (not checkbox and name not in self.data):
                continue  # left out (or empty): the protocol's default
            if name == "exclude_phones" and not value:
                continue  # phones are welcome unless excluded: nothing to store
            settings[name] = value
        try:
            settings = protocols.get_protocol(protocol).clean_settings(settings)
        except protocols.ProtocolError as exc:
            self.add_error(None, f"Settings: {exc}")
            return data
        data["settings"] = applicable_settings(protocol, task_type, settings)
        return data

    def clean_rater_sampling(self) -> str:
        return self.cleaned_data.get("rater_sampling") or Study.RaterSampling.SAMPLED

    def spec_fields(self) -> dict:
        """The StudySpec keyword arguments (the bundle apart)."""
        data = self.cleaned_data
        return {name: data[name] for name in ("slug", "title", "protocol", "task_type", "instructions",
                                              "raters_per_item", "assignment_mode", "rater_sampling", "settings")}
