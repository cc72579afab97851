"""The judges page's "Start a run" form: a judge kind, the operator endpoint and model an MLLM
judge talks to, or the offline metrics (no endpoint). It only shapes the choice into the same
``(name, kind, params)`` the API takes; :func:`analysis.judge_services.judge_run_request`
checks the params against the kind's schema and whether the run can work on the study.
"""

from __future__ import annotations

from django import forms

from analysis.science import metrics
from analysis.science.judges import endpoints
from analysis.models import Judge

# What a researcher starts from the page; embedding judges need checkpoint paths on the
# operator's disk and are started through the API or the CLI.
PAGE_KINDS = (Judge.Kind.METRIC, Judge.Kind.VIESCORE, Judge.Kind.GPT4V, Judge.Kind.VICE, Judge.Kind.EVALMI)
METRIC_HELP = {
    "L1": "mean absolute difference to the source (editing)",
    "L2": "mean squared difference to the source (editing)",
    "PSNR": "peak signal-to-noise ratio against the source, dB (editing)",
    "SSIM": "structural similarity with the source (editing)",
    "bg_L1": "L1 outside the edit's mask (mask-guided editing)",
    "bg_L2": "L2 outside the edit's mask (mask-guided editing)",
    "bg_PSNR": "PSNR outside the edit's mask (mask-guided editing)",
    "bg_SSIM": "SSIM outside the edit's mask (mask-guided editing)",
    "sharpness": "variance of the Laplacian, no reference needed",
    "noise": "estimated noise sigma, no reference needed",
}


class JudgeRunForm(forms.Form):
    kind = forms.ChoiceField(label="Judge", choices=[(k.value, k.label) for k in PAGE_KINDS], initial=Judge.Kind.METRIC)
    metrics = forms.MultipleChoiceField(
        label="Metrics", required=False, widget=forms.CheckboxSelectMultiple,
        choices=[(m, f"{m} — {METRIC_HELP[m]}") for m in metrics.ALL_METRICS],
        help_text="None ticked: every metric that applies to the study's items.",
    )
    endpoint = forms.ChoiceField(label="Endpoint", required=False, choices=())
    model = forms.ChoiceField(label="Model", required=False, choices=())
    name = forms.CharField(label="Judge name", required=False, max_length=100,
                           help_text="Optional; the same name and settings reuse your judge and its cached answers.")

    def __init__(self, *args, endpoint_list: dict, **kwargs):
        super().__init__(*args, **kwargs)
        found = endpoint_list["endpoints"]
        self.fields["endpoint"].choices = [("", "—")] + [(e["name"], e["name"]) for e in found]
        models = dict.fromkeys(m for e in found for m in e["models"])
        self.fields["model"].choices = [("", "the endpoint's default")] + [(m, m) for m in models]
        self.has_endpoints = bool(found)

    def clean(self) -> dict:
        data = super().clean()
        kind = data.get("kind")
        if kind in endpoints.CHAT_KINDS and not data.get("endpoint"):
            self.add_error("endpoint", "an MLLM judge needs one of the operator's endpoints" if self.has_endpoints
                           else "the operator has configured no judge endpoint; run an offline metric instead")
        if kind == Judge.Kind.METRIC and (data.get("endpoint") or data.get("model")):
            data["endpoint"] = data["model"] = ""  # metrics run offline: the endpoint fields do not apply
        return data

    def judge_params(self) -> dict:
        """The params the API would take for this choice."""
        data = self.cleaned_data
        if data["kind"] == Judge.Kind.METRIC:
            return {"metrics": list(data["metrics"])} if data["metrics"] else {}
        params = {"endpoint": data["endpoint"]}
        if data["model"]:
            params["model"] = data["model"]
        return params

    def judge_name(self) -> str:
        """The name given, else one derived from the settings (so starting the same thing again
        reuses the same judge and its cache)."""
        data = self.cleaned_data
        if data["name"].strip():
            return data["name"].strip()
        if data["kind"] == Judge.Kind.METRIC:
            return ("metrics " + " ".join(data["metrics"]))[:100] if data["metrics"] else "metrics"
        return " ".join(p for p in (data["kind"], data["endpoint"], data["model"]) if p)[:100]
