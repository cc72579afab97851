"""How a rater leaves a study, and what they take back to their platform.

Four outcomes, each with its own code and link on the study (Prolific gives every outcome its own
completion code): completed, screened out, failed the qualification, and closed (the study closed
while they worked, or no work was left for them). Crowd raters get the outcome's code and the way
back (Prolific's completion link, or MTurk's submit form); invited raters (logged in) need no
code and get none. Nothing here names the study's slug: raters know the study by its title.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import TextChoices
from django.utils import timezone

from raters.gold import completion_allowed, qualification_status
from raters.models import Rater
from tasks import crowd
from tasks.models import Participation, Rating, Study


class Outcome(TextChoices):
    COMPLETED = "completed", "Completed"
    SCREENED_OUT = "screened_out", "Screened out"
    QUALIFICATION_FAILED = "qualification_failed", "Failed the qualification"
    CLOSED = "closed", "Returned / study closed"


# Study fields of each outcome: (code, url). COMPLETED keeps the original two fields.
OUTCOME_FIELDS = {
    Outcome.COMPLETED: ("completion_code", "completion_url"),
    Outcome.SCREENED_OUT: ("screened_out_code", "screened_out_url"),
    Outcome.QUALIFICATION_FAILED: ("qualification_failed_code", "qualification_failed_url"),
    Outcome.CLOSED: ("closed_code", "closed_url"),
}


def outcome_code(study: Study, outcome: Outcome) -> tuple[str, str]:
    """(code, url) the study gives for ``outcome``; empty strings where it has none."""
    code_field, url_field = OUTCOME_FIELDS[outcome]
    return getattr(study, code_field), getattr(study, url_field)


@dataclass(frozen=True)
class Exit:
    """What the rater's last page shows: the code (maybe none) and the way back."""

    outcome: Outcome
    platform: str
    code: str = ""
    return_url: str = ""  # Prolific: the outcome's link, or Prolific's completion link with the code
    mturk_action: str = ""  # MTurk: where the submit form posts
    mturk_assignment: str = ""

    def as_context(self) -> dict:
        return {"outcome": self.outcome.value, "platform": self.platform, "code": self.code,
                "return_url": self.return_url, "mturk_action": self.mturk_action,
                "mturk_assignment": self.mturk_assignment}


def exit_for(*, study: Study, participation: Participation, outcome: Outcome) -> Exit:
    """The rater's way out for ``outcome``, on their platform."""
    platform = participation.crowd.get("platform", participation.rater.platform)
    if platform == Rater.Platform.LOCAL:  # invited raters are not paid through a platform
        return Exit(outcome=outcome, platform=platform)
    code, url = outcome_code(study, outcome)
    if platform == Rater.Platform.PROLIFIC:
        return_url = url or (crowd.prolific_return_url("", code) if code else "")
        return Exit(outcome=outcome, platform=platform, code=code, return_url=return_url)
    if platform == Rater.Platform.MTURK and participation.crowd.get("assignmentId"):
        return Exit(outcome=outcome, platform=platform, code=code,
                    mturk_action=crowd.mturk_submit_url(participation.crowd),
                    mturk_assignment=participation.crowd["assignmentId"])
    return Exit(outcome=outcome, platform=platform, code=code)


def closed_exit(*, study: Study, participation: Participation) -> Exit:
    """The way out of a study that closed while the rater was in it.

    A rater who rated something and is in good standing gets the completion code (they did paid
    work; their participation is marked complete, so its answers are final); one with nothing
    rated gets the study's closed code; a rater screened out or failing a required qualification
    gets that outcome's code. A completed outcome without a completion code falls back to the
    closed code, so a crowd rater is never left without one when the study has any.
    """
    rater = participation.rater
    if not Rating.objects.filter(rater=rater, study=study).exists():
        status = qualification_status(rater=rater, study=study)
        failed = status.required and not status.passed and status.attempts_used and not status.may_try
        outcome = Outcome.QUALIFICATION_FAILED if failed else Outcome.CLOSED
        return exit_for(study=study, participation=participation, outcome=outcome)
    allowed, _ = completion_allowed(rater=rater, study=study)
    if not allowed:
        return exit_for(study=study, participation=participation, outcome=refusal_outcome(study=study, rater=rater))
    if participation.completed_at is None:
        participation.completed_at = timezone.now()
        participation.save(update_fields=["completed_at"])
    done = exit_for(study=study, participation=participation, outcome=Outcome.COMPLETED)
    if not done.code and study.closed_code:
        closed = exit_for(study=study, participation=participation, outcome=Outcome.CLOSED)
        return Exit(outcome=Outcome.COMPLETED, platform=done.platform, code=closed.code,
                    return_url=closed.return_url, mturk_action=closed.mturk_action,
                    mturk_assignment=closed.mturk_assignment)
    return done


def refusal_outcome(*, study: Study, rater: Rater) -> Outcome:
    """Why a rater is refused the completion code: the qualification, else screening."""
    return Outcome.SCREENED_OUT if qualification_status(rater=rater, study=study).may_work \
        else Outcome.QUALIFICATION_FAILED
