"""The one study report: every page, the CLI (``manage.py report``), the API and exports use it.

The numbers are computed by :mod:`analysis.science.report` (no Django), from what it reads of a
study; this module is the site's side: it hands that computation a study read through
analysis.data (a released package, analysis.science.release.PackagedStudy, and a protocol
version's cut, analysis.release_services.StudyVersion, are read through it too).
"""

from __future__ import annotations

import pandas as pd

from analysis import data
from analysis.science import report as science_report


class StudySource:
    """A study as the report reads it (analysis.science.report.ReportSource), through analysis.data."""

    def __init__(self, study) -> None:
        self.study = study
        self._items: pd.DataFrame | None = None  # one read per report: the ratings frame and the leaderboard

    @property
    def slug(self) -> str:
        return self.study.slug

    @property
    def title(self) -> str:
        return self.study.title

    @property
    def protocol(self) -> str:
        return self.study.protocol

    @property
    def task_type(self) -> str:
        return self.study.task_type

    @property
    def rater_sampling(self) -> str:
        return self.study.rater_sampling

    @property
    def protocol_settings(self) -> dict:
        return self.study.protocol_settings

    def excluded_raters(self) -> dict:
        return data.excluded_raters(self.study)

    def ratings_frame(self, *, include_excluded: bool = False) -> pd.DataFrame:
        if getattr(self.study, "is_packaged", False):  # a package's frames come whole from it
            return data.ratings_frame(self.study, include_excluded=include_excluded)
        return data.ratings_frame(self.study, include_excluded=include_excluded, items=self.item_table())

    def answers_frame(self, *, include_excluded: bool = False) -> pd.DataFrame:
        return data.answers_frame(self.study, include_excluded=include_excluded)

    def comparisons_frame(self, *, include_excluded: bool = False) -> pd.DataFrame:
        return data.comparisons_frame(self.study, include_excluded=include_excluded)

    def judge_scores_frame(self) -> pd.DataFrame:
        return data.judge_scores_frame(self.study)

    def judge_sub_scores_frame(self) -> pd.DataFrame:
        return data.judge_sub_scores_frame(self.study)

    def item_table(self) -> pd.DataFrame:
        if self._items is None:
            self._items = data.item_table(self.study)
        return self._items.copy()


def build_report(study, **options) -> dict:
    """The study report as a JSON-ready dict: :func:`analysis.science.report.build_report` (its
    options and schema) over the study's data."""
    return science_report.build_report(StudySource(study), **options)


def human_item_scores(study, *, include_excluded: bool = False) -> pd.DataFrame:
    """The per-item human scores the report correlates judges with
    (:func:`analysis.science.report.human_item_scores`)."""
    return science_report.human_item_scores(StudySource(study), include_excluded=include_excluded)
