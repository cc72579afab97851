"""A study released as a dataset package: loads with `datasets` and pandas, carries its card,
protocol versions and reporting card, and reproduces its report from the package alone."""

import json
import os
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from django.core.management import call_command

from analysis.release import compare_reports, read_release, scrub_text, write_release
from analysis.release_input import Pseudonyms, study_release_input
from analysis.report import build_report
from tasks.models import Comparison, ConditionImage, Rating, ScreenReport, Study
from tasks.services import rating_submit
from tasks.images import store_image
from tests.factories import (make_comparison, make_gold, make_instance, make_item, make_rater, make_study,
                             png_bytes)
from tests.research.test_exports import VOTES

pytestmark = pytest.mark.django_db


def _imagenhub_study() -> tuple[Study, dict]:
    study = make_study(task_type="text_guided_editing", instructions="Rate SC and PQ. Ask me at help@example.org")
    instances = [make_instance(study, key=f"uid_{n}") for n in range(3)]
    for instance in instances:
        ConditionImage.objects.create(instance=instance, role="source", image=store_image(png_bytes((9, 9, 9))))
    items = {(n, m): make_item(study, instance=instances[n], model=m) for n in range(3) for m in ("Alpha", "Beta")}
    raters = {name: make_rater(platform="prolific", external_id=f"PROLIFIC-{name}-5f00aa") for name in ("r1", "r2", "r3")}
    for (rater, n, model), (sc, pq_) in VOTES.items():
        rating_submit(rater=raters[rater], item=items[(n, model)], values={"SC": sc, "PQ": pq_},
                      require_assignment=False, time_on_item_ms=4000 + 100 * n)
    return study, raters


def test_scrub_rule_replaces_emails_urls_phones_and_long_digit_runs():
    text = "mail me: a.b+c@uni.example.com, see https://x.org/p?q=1 or www.site.com; call +44 20 7946 0958; id 123456789"
    assert scrub_text(text) == "mail me: [email], see [url] or [url]; call [phone]; id [number]"
    assert scrub_text("rated 3 of 5, took 12 s") == "rated 3 of 5, took 12 s"
