"""The raters page's Prolific decisions list: from the screening decisions, ready for Prolific, inert in spreadsheets."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest
from django.utils import timezone

from raters.payouts import APPROVE, REJECT, REVIEW, prolific_csv, prolific_decisions
from raters.services import rater_decide
from tasks.models import Participation, Rating
from tests.factories import make_item, make_rater, make_study, make_user

pytestmark = pytest.mark.django_db


def _participant(study, pid, *, rated=1, completed=True, session="S-"):
    rater = make_rater(platform="prolific", external_id=pid)
    Participation.objects.create(study=study, rater=rater, seed=1,
                                 crowd={"platform": "prolific", "SESSION_ID": session + pid},
                                 completed_at=timezone.now() if completed else None)
    for item in list(study.items.all())[:rated]:
        Rating.objects.create(study=study, rater=rater, item=item, values={"SC": 1, "PQ": 1}, time_on_item_ms=30_000)
    return rater


@pytest.fixture
def study():
    study = make_study(units_per_session=2, pay_per_hour=Decimal("12.00"), seconds_per_unit_estimate=30)
    for i in range(6):
        make_item(study, model=f"M{i % 3}")
    return study


def test_each_prolific_participant_gets_the_decision_of_their_screening(study):
    researcher = make_user("decider")
    approved = _participant(study, "PAPPROVED")
    rejected = _participant(study, "PREJECTED")
    _participant(study, "PPENDING")
    _participant(study, "PUNFINISHED", completed=False)
    rater_decide(study=study, rater=approved, decision="approve", reason="careful work", actor=researcher)
    rater_decide(study=study, rater=rejected, decision="reject", reason="failed 3 attention checks", actor=researcher)
    make_rater()  # an invited rater has no Prolific row
    rows = {r.participant_id: r for r in prolific_decisions(study)}
    assert set(rows) == {"PAPPROVED", "PREJECTED", "PPENDING", "PUNFINISHED"}
    assert (rows["PAPPROVED"].decision, rows["PAPPROVED"].reason) == (APPROVE, "careful work")
    assert (rows["PREJECTED"].decision, rows["PREJECTED"].reason) == (REJECT, "failed 3 attention checks")
    assert rows["PPENDING"].decision == APPROVE and rows["PUNFINISHED"].decision == REVIEW
    assert rows["PAPPROVED"].session_id == "S-PAPPROVED"


def test_the_bonus_pays_ratings_beyond_one_session_at_the_pay_per_hour(study):
    _participant(study, "PMORE", rated=5)  # 2 per session: 3 extra × 30 s × 12/h = 0.30
    _participant(study, "PONE", rated=2)
    rows = {r.participant_id: r for r in prolific_decisions(study)}
    assert rows["PMORE"].bonus == Decimal("0.30") and rows["PONE"].bonus == Decimal("0.00")


def test_a_rejected_participant_gets_no_bonus(study):
    rater = _participant(study, "PNOBONUS", rated=6)
    rater_decide(study=study, rater=rater, decision="reject", reason="straight-lining", actor=None)
    assert prolific_decisions(study)[0].bonus == Decimal("0.00")


def test_the_csv_is_inert_in_spreadsheets(study):
    rater = _participant(study, "PX")
    rater_decide(study=study, rater=rater, decision="reject", reason="=HYPERLINK(\"http://evil\")", actor=None)
    _participant(study, "PY", session="@SUM(A1)-")
    text = prolific_csv(prolific_decisions(study))
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == ["participant_id", "session_id", "decision", "reason", "bonus", "ratings", "flags", "standing"]
    assert rows[0]["reason"].startswith("'=") and rows[1]["session_id"].startswith("'@")
    for row in rows:
        for value in row.values():
            assert not value.startswith(("=", "+", "-", "@")), value


def test_the_raters_page_links_the_download_and_it_is_a_csv_file(study, client):
    owner = make_user("payer")
    study.owners.add(owner)
    _participant(study, "PDOWN")
    client.force_login(owner)
    assert b"prolific-decisions.csv" in client.get(f"/studies/{study.slug}/raters/").content
    response = client.get(f"/studies/{study.slug}/raters/prolific-decisions.csv")
    assert response["Content-Type"].startswith("text/csv") and "attachment" in response["Content-Disposition"]
    assert b"PDOWN" in response.content


def test_nobody_else_downloads_the_decisions(study, client):
    _participant(study, "PSECRET")
    client.force_login(make_user("stranger-pay"))
    assert client.get(f"/studies/{study.slug}/raters/prolific-decisions.csv").status_code == 404
