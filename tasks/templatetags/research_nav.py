"""The researcher's study navigation (one partial on every researcher page) and readable durations."""

from __future__ import annotations

from datetime import timedelta

from django import template
from django.urls import NoReverseMatch, reverse

from tasks.durations import readable_duration

register = template.Library()

# (key, label, url names): the pages of one study, in the order of the lifecycle. The first name
# that exists is linked.
STUDY_PAGES = (
    ("dashboard", "Dashboard", ("research-study",)),
    ("configure", "Configure", ("research-study-configure",)),
    ("items", "Items", ("research-study-items",)),
    ("preview", "Preview", ("research-study-preview",)),
    ("raters", "Raters", ("raters:list",)),
    ("gold", "Gold candidates", ("raters:gold_candidates",)),
    ("judges", "Judges", ("judge_side_by_side",)),
    ("leaderboard", "Leaderboard", ("research-leaderboard",)),
    ("launch", "Launch", ("research-study-launch",)),
    ("export", "Export", ("study-exports",)),
    ("release", "Release", ("research-release",)),
)


def study_links(slug: str) -> list[tuple[str, str, str]]:
    links = []
    for key, label, names in STUDY_PAGES:
        for name in names:
            try:
                links.append((key, label, reverse(name, args=[slug])))
                break
            except NoReverseMatch:
                continue
    return links


@register.inclusion_tag("research/_nav.html")
def study_nav(study, active: str = "") -> dict:
    return {"study": study, "links": study_links(study.slug), "active": active}


@register.filter
def duration(value: timedelta | None) -> str:
    return readable_duration(value)
