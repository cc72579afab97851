"""The Prolific decisions list: one row per Prolific participant, from the study's screening.

Decisions follow the raters page: an approved rater is approved; a rejected or blocked one
(by a person or a rule) is rejected with the recorded reason. A pending rater who finished a
session without a flag is approved too (nobody found anything against them, and Prolific
auto-approves after its review period anyway). Everyone else is left to ``review``: a paused
rater, a pending one with flags, or one who never finished (Prolific shows them as returned or
timed out; they are not approved by this list).

Bonus: the study's reward on Prolific pays one session (``units_per_session`` screens). A rater
who took more sessions on the done page ("Rate more") did more paid work; the bonus pays the
ratings beyond one session at the study's pay per hour and seconds per screen (measured, or the
estimate: ``raters.costs.study_cost``). Only approved rows get a bonus; without a pay
per hour the bonus is 0.

The CSV is safe to open in a spreadsheet: text cells starting with ``= + - @`` (or tab / CR) get
a leading quote (analysis.science.exports.escape_cell, the export's rule).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from decimal import Decimal

from django.db.models import Count

from analysis.science.exports import _csv_text
from raters.costs import study_cost
from raters.models import Rater, RaterAction, RaterStanding
from raters.quality import rater_rows
from tasks.models import Participation, Rating, Study

APPROVE, REJECT, REVIEW = "APPROVE", "REJECT", "REVIEW"
COLUMNS = ["participant_id", "session_id", "decision", "reason", "bonus", "ratings", "flags", "standing"]


@dataclass(frozen=True)
class PayoutRow:
    participant_id: str
    session_id: str
    decision: str
    reason: str
    bonus: Decimal
    ratings: int
    flags: str
    standing: str

    def cells(self) -> list:
        return [_csv_text(self.participant_id), _csv_text(self.session_id), self.decision, _csv_text(self.reason),
                f"{self.bonus:.2f}", self.ratings, _csv_text(self.flags), self.standing]


def _last_reason(study: Study, rater_id: int) -> str:
    action = RaterAction.objects.filter(study=study, rater_id=rater_id).first()  # newest first
    return action.reason if action else ""


def prolific_decisions(study: Study) -> list[PayoutRow]:
    """One row per Prolific participant of the study, in participant id order."""
    participations = {p.rater_id: p for p in Participation.objects.filter(
        study=study, rater__platform=Rater.Platform.PROLIFIC).select_related("rater")}
    if not participations:
        return []
    rows = {row.rater.pk: row for row in rater_rows(study) if row.rater.pk in participations}
    rated = dict(Rating.objects.filter(study=study, rater_id__in=list(participations)).values("rater_id")
                 .annotate(n=Count("id")).values_list("rater_id", "n"))
    pay_per_unit = study_cost(study).pay_per_unit or Decimal("0")
    # ratings in one paid session: an EvalMi screen holds a trial of several images
    per_screen = study.protocol_settings.get("images_per_trial", 1) if study.protocol == "evalmi" else 1
    result = []
    for rater_id, participation in participations.items():
        row = rows.get(rater_id)
        state = row.state if row is not None else RaterStanding.State.PENDING
        flags = "; ".join(f.label for f in row.flags) if row is not None else ""
        ratings = rated.get(rater_id, 0)
        if state == RaterStanding.State.APPROVED:
            decision, reason = APPROVE, _last_reason(study, rater_id) or "Approved"
        elif state in (RaterStanding.State.REJECTED, RaterStanding.State.BLOCKED):
            decision, reason = REJECT, _last_reason(study, rater_id) or f"{state.capitalize()} by screening"
        elif state == RaterStanding.State.PAUSED:
            decision, reason = REVIEW, "Paused for review: decide on the raters page"
        elif participation.completed_at is None:
            decision, reason = REVIEW, "Did not finish a session"
        elif flags:
            decision, reason = REVIEW, f"Flagged ({flags}): decide on the raters page"
        else:
            decision, reason = APPROVE, "Completed; no screening rule flagged them"
        extra = max(ratings - study.units_per_session * per_screen, 0)
        bonus = (pay_per_unit * extra).quantize(Decimal("0.01")) if decision == APPROVE else Decimal("0.00")
        result.append(PayoutRow(
            participant_id=participation.rater.external_id, session_id=str(participation.crowd.get("SESSION_ID", "")),
            decision=decision, reason=reason, bonus=bonus, ratings=ratings, flags=flags, standing=state))
    return sorted(result, key=lambda r: r.participant_id)


def prolific_csv(rows: list[PayoutRow]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow(row.cells())
    return buffer.getvalue()
