"""The qualification test raters take before work, on the same rating screen as the work.

Its questions and scoring are the raters app's (``raters.gold``); this page renders them with the
rating flow's screen (``tasks.rating_context``) and sends a rater who failed back to their
platform (``tasks.outcomes``). Its URL keeps its name in the raters' namespace
(``raters:qualification``, see ``annotation_site.urls``).
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone

from raters import gold as gold_service
from raters.models import Rater
from tasks.crowd import crowd_raters
from tasks.models import Item, Participation, Study
from tasks.outcomes import Outcome, exit_for
from tasks.rating_context import display_screen, parse_entries, screen_view, selections_from


def current_rater(request: HttpRequest, slug: str) -> Rater | None:
    """The rater behind the request, as the rating flow finds them: the crowd rater this browser
    entered the study as (its signed ``crowd_raters`` cookie), else the logged-in user's rater."""
    rater_id = crowd_raters(request).get(slug)
    if rater_id is not None:
        return Rater.objects.filter(pk=rater_id).first()
    if request.user.is_authenticated:
        return Rater.objects.filter(user=request.user).first()
    return None


SHOWN_KEY = "qualification_shown"  # item id -> when it was rendered (time on item, server side)


def qualification(request: HttpRequest, slug: str) -> HttpResponse:
    """The qualification test, one gold item per screen, on the same rating screen as the work
    (keys, rubric, checklist mode). Expected answers never reach the page; answers are kept in
    QualificationAnswer, never as ratings."""
    study = get_object_or_404(Study, slug=slug, state__in=[Study.State.OPEN, Study.State.CLOSED])
    if study.state == Study.State.CLOSED:
        # Closed during the test: the rating flow gives a participant their code and the way back
        # (tasks.outcomes), anyone else its neutral closed page.
        if request.htmx:
            return HttpResponse(status=204, headers={"HX-Redirect": reverse("rating:next", args=[study.slug])})
        return redirect("rating:next", study.slug)
    rater = current_rater(request, slug)
    if rater is None:
        return redirect("rating:start", slug=study.slug)
    if not rater.can_rate:  # blocked or paused: no attempt, and so no access to the study's images
        return render(request, "rating/message.html", {
            "study": study, "title": "You cannot rate in this study",
            "text": "Your rater account is not active for rating.",
        }, status=403)
    if rater.user_id is not None and study.is_visible_to(rater.user):
        # An owner checking the page must not become one of their own raters: no attempt, no
        # answers, nothing that would count in screening or the rater list.
        return render(request, "rating/message.html", {
            "study": study, "title": "You own this study",
            "text": "The qualification test is taken by your raters; opening it as an owner records nothing. "
                    "Its questions are the study's gold items marked for the qualification.",
        }, status=403)
    status = gold_service.qualification_status(rater=rater, study=study)
    error = ""
    if request.method == "POST" and status.may_try:
        try:
            if request.POST.get("action") == "start":
                gold_service.qualification_start(rater=rater, study=study)
            elif status.open_attempt is not None:
                attempt = status.open_attempt
                item = gold_service.qualification_next_item(attempt)
                # Fields are named by place (u0-…), not by item: the form says which question it
                # answered, so an answer from a stale page (another tab went on) is not misfiled.
                if item is None or request.POST.get("question") != _question_tag(attempt):
                    raise gold_service.QualificationRefused("The page was out of date; here is the current question.")
                screen = display_screen(study=study, item=item, number=1, total=attempt.total)
                entry = parse_entries(screen, request.POST)[0]
                attempt = gold_service.qualification_answer(
                    attempt=attempt, item=item, values=entry["values"], answers=entry.get("answers"),
                    checklist=entry.get("checklist"), time_on_item_ms=_time_on_item(request, item),
                )
                if request.htmx and not attempt.is_finished:
                    return _qualification_screen(request, study, attempt)
        except gold_service.QualificationRefused as exc:
            error = str(exc)
        else:
            if request.htmx:  # finished (or a new attempt): the result page is a whole page
                response = HttpResponse(status=204)
                response["HX-Redirect"] = reverse("raters:qualification", args=[study.slug])
                return response
            return redirect("raters:qualification", slug=study.slug)
    elif status.may_try and status.attempts_used == 0:
        gold_service.qualification_start(rater=rater, study=study)
        status = gold_service.qualification_status(rater=rater, study=study)
    attempt = status.open_attempt
    if attempt is not None:
        return _qualification_screen(request, study, attempt, error=error, post=request.POST if error else None)
    context = {"study": study, "status": status, "error": error}
    if status.required and not status.passed and not status.may_try and status.attempts_used:
        context.update(_failed_exit(study, rater))
    return render(request, "raters/qualification.html", context, status=422 if error else 200)


def _failed_exit(study: Study, rater: Rater) -> dict:
    """The failed-qualification code and the way back to the rater's platform (tasks.outcomes)."""
    participation = Participation.objects.filter(study=study, rater=rater).select_related("rater").first()
    if participation is None:
        return {}
    return {"exit": exit_for(study=study, participation=participation, outcome=Outcome.QUALIFICATION_FAILED).as_context()}


def _qualification_screen(request: HttpRequest, study: Study, attempt, *, error: str = "", post=None) -> HttpResponse:
    """The attempt's next item on the rating screen (a full page, or the #unit fragment for htmx)."""
    item = gold_service.qualification_next_item(attempt)
    answered = attempt.answers.count()
    screen = display_screen(study=study, item=item, number=answered + 1, total=attempt.total)
    view = screen_view(screen, {}, [])
    if post is not None:
        selections_from(view, post)
    shown = dict(request.session.get(SHOWN_KEY, {}))
    shown[str(item.pk)] = timezone.now().timestamp()
    request.session[SHOWN_KEY] = shown
    url = reverse("raters:qualification", args=[study.slug])
    context = {
        "study": study,
        "view": view,
        "screen": screen,
        "error": error,
        "percent": round(100 * answered / attempt.total),
        "back_url": "",  # answers of a test are final
        "unit_url": url,
        "banner": f"Qualification test · question {answered + 1} of {attempt.total}. "
                  "Rate this image exactly as you will in the study.",
        "item": item,
        "question": _question_tag(attempt, answered),
    }
    template = "rating/screen.html#unit" if request.htmx else "rating/screen.html"
    status = (200 if request.htmx else 422) if error else 200  # htmx swaps only 2xx responses
    return render(request, template, context, status=status)


def _question_tag(attempt, answered: int | None = None) -> str:
    """Which question of which attempt a qualification form answers: ``<attempt>.<question>``.
    ``answered``: the attempt's answers so far, when the caller has counted them."""
    answered = attempt.answers.count() if answered is None else answered
    return f"{attempt.number}.{answered + 1}"


def _time_on_item(request: HttpRequest, item: Item) -> int | None:
    shown = request.session.get(SHOWN_KEY, {}).get(str(item.pk))
    if shown is None:
        return None
    return max(0, int((timezone.now().timestamp() - shown) * 1000))
