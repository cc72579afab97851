"""The form of "Plan from another study or published MOS" on a study's settings page.

Every field is bounded; a source is named as ``study:<slug>`` (a finished study this researcher
can see) or ``mos:<name>`` (one of the operator's ``PUBLISHED_MOS_SOURCES``); anything else is
refused with a message, never looked up.
"""

from __future__ import annotations

from django import forms
from django.core.validators import MaxValueValidator, MinValueValidator

from analysis import planning_sources_page as sources
from analysis.science.planning_sources import components_from_mos
from tasks.models import Study


def _bounded(label: str, low: float, high: float, help_text: str = "") -> forms.FloatField:
    return forms.FloatField(label=label, required=False, help_text=help_text,
                            validators=[MinValueValidator(low), MaxValueValidator(high)],
                            widget=forms.NumberInput(attrs={"step": "any", "min": low, "max": high}))


class PlanningSourceForm(forms.Form):
    source = forms.ChoiceField(label="Plan from")
    dimension = forms.CharField(label="Dimension", max_length=40, required=False,
                                help_text="Empty: the source's first dimension.")
    halfwidth = _bounded("Item CI half-width", 1e-3, 100.0, "In the source's units, 95 %.")
    gap = _bounded("Model gap to separate", 1e-3, 100.0, "5 % level, 80 % power.")
    alpha_width = _bounded("α CI width", 1e-3, 2.0, "Krippendorff's α, 95 % CI.")
    noise_sd = _bounded("Rater noise (published MOS)", 1e-3, 1000.0,
                        "One rating's spread around its item; empty: the operator's value.")
    raters_per_item = _bounded("Raters per item in the sheet", 1.0, 1000.0, "Published MOS; empty: the operator's value.")

    def __init__(self, *args, user, study: Study, **kwargs):
        super().__init__(*args, **kwargs)
        self.studies = {s.slug: s for s in sources.finished_studies(user, study)[:50]}
        self.published = sources.published_sources()
        choices = [(f"{sources.STUDY}:{slug}", f"Finished study: {s.title}") for slug, s in self.studies.items()]
        choices += [(f"{sources.MOS}:{name}", f"Published MOS: {name}{'' if p.present else ' (file missing)'}")
                    for name, p in self.published.items()]
        self.fields["source"].choices = choices

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        if not any(data.get(k) for k in ("halfwidth", "gap", "alpha_width")):
            raise forms.ValidationError("Give at least one target: an item CI half-width, a model gap or an α CI width.")
        kind, _, key = data["source"].partition(":")
        dim = (data.get("dimension") or "").strip()
        try:
            if kind == sources.STUDY:
                study = self.studies[key]
                dims = sources.study_dimensions(study)
                data["dimension"] = dim or dims[0]
                if data["dimension"] not in dims:
                    self.add_error("dimension", f"“{study.title}” has no dimension “{dim}”; it has {', '.join(dims)}.")
                    return data
                data["components"] = sources.components_of_study(study, data["dimension"])
                data["units"] = "points of the source study's scale"
                if data.get("halfwidth") and not sources.rater_noise(data["components"]) > 0:
                    # zero or undefined: raters_per_item would refuse it (a server error)
                    self.add_error("halfwidth", f"“{study.title}” shows no rater noise on {data['dimension']} (its "
                                                "raters never disagreed, or no item has two ratings): it cannot size "
                                                "raters per item. Leave the half-width empty or plan from another source.")
            else:
                source = self.published[key]
                sheet = sources.mos_sheet(source)
                dims = sources.mos_dimensions(sheet)
                if not dims:
                    raise forms.ValidationError(f"“{source.name}” has no numeric score column.")
                data["dimension"] = dim or dims[0]
                if data["dimension"] not in dims:
                    self.add_error("dimension", f"“{source.name}” has no column “{dim}”; it has {', '.join(dims)}.")
                    return data
                data["components"] = components_from_mos(
                    sheet, data["dimension"], noise_sd=data.get("noise_sd") or source.noise_sd,
                    raters_per_item=data.get("raters_per_item") or source.raters_per_item,
                    source=f"the published MOS “{source.name}”")
                data["units"] = "points of the sheet's MOS scale"
        except sources.SourceUnavailable as exc:
            raise forms.ValidationError(str(exc)) from exc
        return data
