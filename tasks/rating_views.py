"""The rater's path through a study: entry (login, Prolific, MTurk) → consent → instructions →
screens → completion. Screens swap in place with htmx; every link also works as a plain page.
"""

from __future__ import annotations

import re

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db.models import Exists, OuterRef, Q
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import http_date
from django.views.decorators.http import require_http_methods, require_POST

from raters.gold import completion_allowed, qualification_status
from raters.models import QualificationAttempt, Rater
from tasks import crowd, outcomes
from tasks.assignment import (
    AssignmentUnavailable,
    Screen,
    assignment_batch_claim,
    assignment_next,
    next_position,
    participation_get_or_create,
    participation_of,
    screen_at,
    screen_place,
    screen_shown,
)
from tasks.derivatives import SIZES, derivative_ensure
from tasks.devices import refused_phone
from tasks.models import Assignment, ConditionImage, Item, Participation, Rating, StoredImage, Study, WorkedExample
from tasks.rating_context import (
    StaleScreen,
    parse_entries,
    rubric_context,
    screen_images,
    screen_view,
    selections_from,
    shown_from,
    shown_stamp,
)
from tasks.ratelimit import client_address, rate_limit_take
from tasks.services import RatingRejected, ReportRefused, screen_report, screen_submit

YEAR = 365 * 24 * 3600
SHA256 = re.compile(r"[0-9a-f]{64}")
POSITION_MAX = 2**31 - 1  # Assignment.position is a PositiveIntegerField


def _message(request: HttpRequest, study: Study | None, title: str, text: str, status: int = 200) -> HttpResponse:
    return render(request, "rating/message.html", {"study": study, "title": title, "text": text}, status=status)


def _get_participation_for_request(request: HttpRequest, slug: str) -> tuple[Study, Participation | None]:
    """The study and this browser's participation in it (crowd cookie or logged-in rater).

    One query when the participation exists: it comes with its rater, its study, the study's
    quality policy, which every screen reads, and the rater's standing in the study
    (``participation.standing``, which a submit checks).
    """
    rater_id = crowd.crowd_raters(request).get(slug)
    participation = None
    if rater_id is not None:
        participation = participation_of(slug=slug, rater_id=rater_id)
    elif request.user.is_authenticated:
        participation = participation_of(slug=slug, user_id=request.user.pk)
    if participation is not None:
        return participation.study, participation
    return get_object_or_404(Study, slug=slug), None


def _may_preview(request: HttpRequest, study: Study) -> bool:
    """Owners and staff see a study's rater pages in any state (to check a draft before publishing)."""
    user = request.user
    return user.is_authenticated and study.is_visible_to(user)


def _not_public(request: HttpRequest, study: Study) -> HttpResponse | None:
    """None when the study's rater pages may be shown to this request, else the refusal.

    Only open studies are public. A draft is a 404 (nobody but its owners and staff learns that
    it exists, nor its title or rubric); a closed study gets a neutral page naming neither. Costs
    a query only for a study that is not open.
    """
    if study.is_open or _may_preview(request, study):
        return None
    if study.state == Study.State.DRAFT:
        raise Http404("No such study")
    _, participation = _get_participation_for_request(request, study.slug)
    if participation is not None:  # closed while they were in it: their code and the way back
        if request.htmx:  # htmx swaps no 410: the whole page goes to the exit
            return HttpResponse(status=204, headers={"HX-Redirect": reverse("rating:next", args=[study.slug])})
        exit_ = outcomes.closed_exit(study=study, participation=participation)
        return _exit_page(request, None, exit_, status=410)  # a closed study's page names nothing of it
    return _message(request, None, "This study is closed", "It takes no more ratings. Thank you for your interest.",
                    status=410)


EXIT_TEXT = {
    outcomes.Outcome.COMPLETED: ("Thank you!", "The study has closed. Your ratings are saved and count."),
    outcomes.Outcome.SCREENED_OUT: ("Thank you", "Your participation in this study has ended."),
    outcomes.Outcome.QUALIFICATION_FAILED: (
        "Thank you", "Your answers did not reach the pass mark of the qualification test, so we cannot offer "
                     "you this study."),
    outcomes.Outcome.CLOSED: ("This study is closed", "It takes no more ratings, so there is no work for you."),
}


def _exit_page(request: HttpRequest, study: Study | None, exit_: outcomes.Exit, *, text: str = "",
               status: int = 200) -> HttpResponse:
    """A rater's last page: what happened, the outcome's code and the way back to their platform."""
    title, default = EXIT_TEXT[exit_.outcome]
    return render(request, "rating/exit.html", {"study": study, "title": title, "text": text or default,
                                                **exit_.as_context()}, status=status)


def _require(request: HttpRequest, slug: str) -> tuple[Study, Participation]:
    study, participation = _get_participation_for_request(request, slug)
    if study.state == Study.State.DRAFT and not _may_preview(request, study):
        raise Http404("No such study")  # before the participation check: a 403 would tell the slug exists
    if participation is None:
        raise PermissionDenied("Open the study from its start link first.")
    return study, participation


def _step_url(study: Study, participation: Participation) -> str:
    if participation.consented_at is None:
        return reverse("rating:consent", args=[study.slug])
    if participation.instructions_seen_at is None:
        return reverse("rating:instructions", args=[study.slug])
    return reverse("rating:next", args=[study.slug])


@require_http_methods(["GET"])
def start(request: HttpRequest, slug: str) -> HttpResponse:
    """Entry link. Prolific/MTurk parameters identify a crowd rater; otherwise a login is needed."""
    study = get_object_or_404(Study, slug=slug)
    if (refused := _not_public(request, study)) is not None:
        return refused
    try:
        entry = crowd.crowd_entry_from(request.GET)
    except crowd.CrowdParamsInvalid as exc:
        return _message(request, study, "This link does not work", str(exc), status=400)
    if entry is not None and entry.preview:
        return render(request, "rating/preview.html", {"study": study})
    if not study.is_open:
        return _message(request, study, "This study is not open",
                        f"“{study.title}” is {study.get_state_display().lower()} and takes no ratings now.")
    if entry is not None:
        return _crowd_start(request, study, entry)
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    rater, _ = Rater.objects.get_or_create(user=request.user, defaults={"platform": Rater.Platform.LOCAL})
    if not rater.can_rate:
        return _message(request, study, "You cannot rate in this study", "Your rater account is not active for rating.",
                        status=403)
    participation = participation_get_or_create(rater=rater, study=study)
    return redirect(_step_url(study, participation))


def _crowd_start(request: HttpRequest, study: Study, entry: crowd.CrowdEntry) -> HttpResponse:
    """A crowd link: a worker already taking part goes on (in the browser where they began, or in
    another one only with the same platform ids); a new one goes to the consent page, and nothing
    is stored until they consent (``consent``)."""
    rater = Rater.objects.filter(platform=entry.platform, external_id=entry.external_id).first()
    if rater is not None and not rater.can_rate:
        return _message(request, study, "You cannot rate in this study", "Your rater account is not active for rating.",
                        status=403)
    participation = Participation.objects.filter(rater=rater, study=study).first() if rater else None
    if participation is None:
        response = redirect("rating:consent", study.slug)
        crowd.crowd_entry_remember(response, slug=study.slug, entry=entry)
        return response
    this_browser = crowd.crowd_raters(request).get(study.slug) == rater.pk
    if not this_browser and not crowd.crowd_resume_allowed(participation.crowd, entry):
        return _message(request, study, "Go on where you started", crowd.STARTED_ELSEWHERE, status=403)
    if this_browser and entry.params:  # e.g. a new Prolific SESSION_ID for the same worker
        participation = participation_get_or_create(rater=rater, study=study,
                                                    crowd={**entry.params, "platform": entry.platform})
    response = redirect(_step_url(study, participation))
    crowd.crowd_rater_remember(request, response, slug=study.slug, rater_id=rater.pk)
    return response


@require_http_methods(["GET", "POST"])
def consent(request: HttpRequest, slug: str) -> HttpResponse:
    """Consent. A crowd worker who came by link (``_crowd_start``) becomes a rater here, on POST."""
    study, participation = _get_participation_for_request(request, slug)
    if (refused := _not_public(request, study)) is not None:
        return refused
    pending = crowd.crowd_entry_pending(request, slug=slug) if participation is None else None
    if participation is None and pending is None:
        raise PermissionDenied("Open the study from its start link first.")
    if refused_phone(request, study):  # before consent: nobody joins from a phone, nothing is stored
        return render(request, "rating/consent.html", {"study": study, "phone_refused": True}, status=403)
    if request.method == "POST":
        if request.POST.get("agree") != "yes":
            return render(request, "rating/consent.html", {"study": study, "error": "Tick the box to agree, or close this page to leave."}, status=422)
        if pending is not None:
            return _crowd_join(request, study, pending)
        if participation.consented_at is None:
            participation.consented_at = timezone.now()
            participation.save(update_fields=["consented_at"])
        return redirect(_step_url(study, participation))
    return render(request, "rating/consent.html", {"study": study})


def _crowd_join(request: HttpRequest, study: Study, entry: crowd.CrowdEntry) -> HttpResponse:
    if not study.is_open:
        return _message(request, study, "This study is not open",
                        f"“{study.title}” is {study.get_state_display().lower()} and takes no ratings now.")
    if not rate_limit_take(key=f"crowd-join:{client_address(request)}", window_seconds=3600,
                           limit=settings.CROWD_NEW_PARTICIPATIONS_PER_ADDRESS_HOUR):
        return _message(request, study, "Too many new participants",
                        "Too many people started this study from your network in the last hour. Please try again later.",
                        status=429)
    try:
        participation = crowd.crowd_participation_join(study=study, entry=entry)
    except crowd.CrowdEntryRefused as exc:
        return _message(request, study, "You cannot take part from here", str(exc), status=403)
    response = redirect(_step_url(study, participation))
    crowd.crowd_rater_remember(request, response, slug=study.slug, rater_id=participation.rater_id)
    crowd.crowd_entry_forget(response)
    return response


@require_http_methods(["GET", "POST"])
def instructions(request: HttpRequest, slug: str) -> HttpResponse:
    study, participation = _get_participation_for_request(request, slug)
    if (refused := _not_public(request, study)) is not None:
        return refused
    if participation is None:
        if crowd.crowd_entry_pending(request, slug=slug) is not None:  # came by link, not consented yet
            return redirect("rating:consent", study.slug)
        raise PermissionDenied("Open the study from its start link first.")
    if participation.consented_at is None:
        return redirect(_step_url(study, participation))
    if request.method == "POST":
        if participation.instructions_seen_at is None:
            participation.instructions_seen_at = timezone.now()
            participation.save(update_fields=["instructions_seen_at"])
        return redirect("rating:next", study.slug)
    return render(request, "rating/instructions.html", {
        "study": study, "examples": study.worked_examples.select_related("image"), **rubric_context(study)})


def rubric(request: HttpRequest, slug: str) -> HttpResponse:
    """The rubric alone: a dialog fragment for htmx, a page otherwise."""
    study = get_object_or_404(Study, slug=slug)
    if (refused := _not_public(request, study)) is not None:
        return refused
    template = "rating/rubric_page.html#rubric" if request.htmx else "rating/rubric_page.html"
    return render(request, template, {"study": study, **rubric_context(study)})


def _unit_url(study: Study, position: int) -> str:
    return reverse("rating:unit", args=[study.slug, position])


def next_screen(request: HttpRequest, slug: str) -> HttpResponse:
    study, participation = _require(request, slug)
    if (refused := _not_public(request, study)) is not None:
        return refused
    if participation.instructions_seen_at is None:
        return redirect(_step_url(study, participation))
    if qualification_status(rater=participation.rater, study=study).may_try:
        return redirect("raters:qualification", study.slug)
    try:
        screen = assignment_next(rater=participation.rater, study=study, participation=participation)
    except AssignmentUnavailable as exc:
        allowed, _ = completion_allowed(rater=participation.rater, study=study)
        if not allowed:  # screened out (or failed the test): their outcome's code and the way back
            outcome = outcomes.refusal_outcome(study=study, rater=participation.rater)
            return _exit_page(request, study, outcomes.exit_for(study=study, participation=participation,
                                                                 outcome=outcome), text=str(exc))
        return _message(request, study, "No rating right now", str(exc))
    if screen is None:
        if not Rating.objects.filter(rater=participation.rater, study=study).exists():
            # Nothing to rate and nothing rated (the study filled up before this rater's first
            # screen): say so here; the done page would send them back, round and round.
            exit_ = outcomes.exit_for(study=study, participation=participation, outcome=outcomes.Outcome.CLOSED)
            return _exit_page(request, study, exit_, text=(
                "Every image of this study has all the ratings it needs, so there is no work for you. "
                "Thank you for your interest; please return the task on your platform."))
        return redirect("rating:done", study.slug)
    return redirect(_unit_url(study, screen.position))


def _render_screen(request: HttpRequest, participation: Participation, screen: Screen, *, error: str = "",
                   post=None, status: int = 200) -> HttpResponse:
    study = screen.study
    rater = participation.rater
    if not screen.total:  # got without its place in the queue (a refused submit)
        screen_place(rater=rater, study=study, screen=screen)
    ratings = {}
    done = [a for a in screen.assignments if a.state == Assignment.State.DONE]
    if done:  # a revisit: pre-fill (only a done assignment has a rating; submitting marks it done)
        stored = Rating.objects.filter(rater=rater).filter(
            Q(item_id__in=[a.item_id for a in done if a.item_id])
            | Q(comparison_id__in=[a.comparison_id for a in done if a.comparison_id])
        )
        by_unit = {(r.item_id, r.comparison_id): r for r in stored}
        ratings = {a.pk: by_unit[(a.item_id, a.comparison_id)] for a in done if (a.item_id, a.comparison_id) in by_unit}
    following = screen.following_assignments
    if following is None and screen.following is not None:
        following = screen_at(rater=rater, study=study, position=screen.following, place=False).assignments
    preload = screen_images(Screen(study, screen.following, 0, 0, following)) if following else []
    view = screen_view(screen, ratings, preload)
    if post is not None:
        selections_from(view, post)
    back = screen.back
    now = timezone.now()
    screen_shown(rater=rater, screen=screen, now=now)
    context = {
        "study": study,
        "view": view,
        "screen": screen,
        "shown": shown_stamp(rater_id=rater.pk, position=screen.position, at=now,
                             units=[a.pk for a in screen.assignments]),
        "error": error,
        "percent": round(100 * (screen.number - 1) / screen.total),
        "back_url": _unit_url(study, back) if back is not None else "",
        "unit_url": _unit_url(study, screen.position),
    }
    template = "rating/screen.html#unit" if request.htmx else "rating/screen.html"
    response = render(request, template, context, status=status)
    if request.htmx:
        response["HX-Push-Url"] = context["unit_url"]
    return response


@require_POST
def unit_report(request: HttpRequest, slug: str, position: int) -> HttpResponse:
    """A rater's report on one of their screens (a broken image, a comment). Its own request, so
    the rating submit stays the same for every screen."""
    study, participation = _require(request, slug)
    if (refused := _not_public(request, study)) is not None:
        return refused
    screen = (screen_at(rater=participation.rater, study=study, position=position, place=False)
              if position <= POSITION_MAX else None)
    if screen is None:
        return _message(request, study, "Not your item", "This item is not assigned to you (any more).", status=403)
    context = {"study": study, "position": position, "sent": False, "error": "",
               "broken": request.POST.get("broken") == "yes", "comment": request.POST.get("comment", "")}
    try:
        screen_report(rater=participation.rater, screen=screen, broken_image=context["broken"],
                      comment=context["comment"])
    except ReportRefused as exc:
        context["error"] = str(exc)
    else:
        context["sent"] = True
    if request.htmx:
        return render(request, "rating/screen.html#report", context, status=200)
    if context["sent"]:
        return redirect(_unit_url(study, position))
    return _message(request, study, "Report not sent", context["error"], status=400)


def _final(participation: Participation, screen: Screen) -> bool:
    """Whether the screen was answered before the rater took their completion code."""
    finished = participation.completed_at
    return finished is not None and all(
        a.completed_at is not None and a.completed_at <= finished for a in screen.assignments)


@require_http_methods(["GET", "POST"])
def unit(request: HttpRequest, slug: str, position: int) -> HttpResponse:
    """One screen: GET shows it (pre-filled when revisited), POST stores its ratings and moves on."""
    study, participation = _require(request, slug)
    if (refused := _not_public(request, study)) is not None:
        return refused
    if participation.instructions_seen_at is None:
        return redirect(_step_url(study, participation))
    rater = participation.rater
    # A submit needs the screen's units only; its place in the queue is looked up if it is shown again.
    # A position past the column's range is nobody's screen (SQLite cannot even bind it: a 500).
    in_range = position <= POSITION_MAX
    screen = screen_at(rater=rater, study=study, position=position, place=request.method == "GET") if in_range else None
    if screen is None:
        if request.method == "POST":
            return _message(request, study, "Not your item", "This item is not assigned to you (any more).", status=403)
        return redirect("rating:next", study.slug)
    if _final(participation, screen):
        # Answers are final once the completion code was taken: what the platform paid for stays.
        if request.method == "POST":
            return _message(request, study, "Your answers are final",
                            "You finished this session and took the completion code, so its answers can no longer "
                            "change.", status=403)
        return redirect("rating:done", study.slug)
    if request.method == "GET":
        return _render_screen(request, participation, screen)
    # Time on item counts from the render this form came from (signed in the form, not stored);
    # screen_submit bounds it by the rater's previous submit too.
    try:
        shown = shown_from(request.POST, rater_id=rater.pk, position=screen.position, now=timezone.now(),
                           units=[a.pk for a in screen.assignments])
    except StaleScreen as exc:  # fields are named by place: the form's answers were for other units
        return _render_screen(request, participation, screen, error=str(exc), status=200 if request.htmx else 409)
    for assignment in screen.assignments:
        assignment.shown_at = shown
    try:
        screen_submit(rater=rater, screen=screen, entries=parse_entries(screen, request.POST),
                      standing=participation.standing)
    except RatingRejected as exc:
        if not completion_allowed(rater=rater, study=study)[0]:  # screened out meanwhile: to their exit
            if request.htmx:
                return HttpResponse(status=204, headers={"HX-Redirect": reverse("rating:next", args=[study.slug])})
            return redirect("rating:next", study.slug)
        # htmx swaps only 2xx responses: the refused screen comes back as 200 with the message.
        return _render_screen(request, participation, screen, error=str(exc), post=request.POST,
                              status=200 if request.htmx else 422)
    # Usually the next screen is already leased (the submit found it). Only at the end of a session
    # does the engine look further (the rater's own expired units, the first claim).
    upcoming_position = screen.next_leased
    if upcoming_position is not None:
        upcoming = screen_at(rater=rater, study=study, position=upcoming_position) if request.htmx else None
    else:
        try:
            upcoming = assignment_next(rater=rater, study=study, participation=participation, checked=True)
        except AssignmentUnavailable as exc:
            return _message(request, study, "No rating right now", str(exc))
        upcoming_position = upcoming.position if upcoming is not None else None
    if upcoming_position is None:
        if request.htmx:
            response = HttpResponse(status=204)
            response["HX-Redirect"] = reverse("rating:done", args=[study.slug])
            return response
        return redirect("rating:done", study.slug)
    if request.htmx and upcoming is not None:
        return _render_screen(request, participation, upcoming)
    return redirect(_unit_url(study, upcoming_position))


def done(request: HttpRequest, slug: str) -> HttpResponse:
    """Completion: the study's code, the way back to Prolific or the MTurk submit form."""
    study, participation = _require(request, slug)
    rater = participation.rater
    open_left = Assignment.objects.filter(rater=rater, study=study, state=Assignment.State.LEASED).exists()
    rated = Rating.objects.filter(rater=rater, study=study).count()
    if open_left or rated == 0:
        return redirect("rating:next", study.slug)
    allowed, why = completion_allowed(rater=rater, study=study)
    if not allowed:  # failed qualification, rejected or blocked: not the completion code, their outcome's
        outcome = outcomes.refusal_outcome(study=study, rater=rater)
        return _exit_page(request, study, outcomes.exit_for(study=study, participation=participation, outcome=outcome),
                          text=why)
    if participation.completed_at is None:
        participation.completed_at = timezone.now()
        participation.save(update_fields=["completed_at"])
    # Invited (logged-in) raters are not paid through a platform: they get no code (outcomes.exit_for).
    exit_ = outcomes.exit_for(study=study, participation=participation, outcome=outcomes.Outcome.COMPLETED)
    return render(request, "rating/done.html", {"study": study, "rated": rated, **exit_.as_context()})


@require_POST
def more(request: HttpRequest, slug: str) -> HttpResponse:
    """Another session of screens for a rater who wants to go on (only once the open one is done)."""
    study, participation = _require(request, slug)
    if (refused := _not_public(request, study)) is not None:
        return refused
    if next_position(rater=participation.rater, study=study) is not None:  # screens left: those first
        return redirect("rating:next", study.slug)
    try:
        claimed = assignment_batch_claim(rater=participation.rater, study=study, participation=participation)
    except AssignmentUnavailable as exc:
        return _message(request, study, "No rating right now", str(exc))
    if not claimed:
        return _message(request, study, "All done", "Every item has all the ratings it needs. Thank you!")
    first = next_position(rater=participation.rater, study=study)  # straight to the new session's first screen
    return redirect(_unit_url(study, first) if first is not None else reverse("rating:next", args=[study.slug]))


def _image_for_request(request: HttpRequest, sha256: str) -> StoredImage | None:
    """The stored image if this browser may see it, in one query; None otherwise.

    Staff see every image. Others see an image used (as an output or a condition image) in a
    study they own, or in a study where one of their raters (the crowd raters of this browser's
    session, or the logged-in user's rater) has an assignment or a qualification attempt.
    """
    images = StoredImage.objects.filter(sha256=sha256)
    user = request.user
    if user.is_authenticated and user.is_staff:
        return images.first()
    raters = Q(rater_id__in=list(crowd.crowd_raters(request).values()))
    if user.is_authenticated:
        raters |= Q(rater__user_id=user.pk)
    study = OuterRef("pk")
    allowed = Exists(Assignment.objects.filter(raters, study=study)) | Exists(
        QualificationAttempt.objects.filter(raters, study=study)
    )
    if user.is_authenticated:  # the researchers of the study (Study.objects.visible_to's rule)
        allowed |= Exists(Study.owners.through.objects.filter(study_id=study, user_id=user.pk))
        allowed |= Exists(Study.collaborators.through.objects.filter(study_id=study, user_id=user.pk))
    studies = Study.objects.filter(allowed).values("pk")
    image = OuterRef("pk")
    # Worked examples are shown on the instructions page, before any work is claimed: anyone who
    # takes part in the study (a participation, i.e. consented) may see them.
    taking_part = Study.objects.filter(allowed | Exists(Participation.objects.filter(raters, study=study))).values("pk")
    used = (Exists(Item.objects.filter(image_id=image, study_id__in=studies))
            | Exists(ConditionImage.objects.filter(image_id=image, instance__study_id__in=studies))
            | Exists(WorkedExample.objects.filter(image_id=image, study_id__in=taking_part)))
    return images.filter(used).first()


@require_http_methods(["GET", "HEAD"])
def image(request: HttpRequest, sha256: str, size: str) -> HttpResponse:
    """A stored image, resized (160/384/768 px WebP, rendered once) or full size, for those who may
    see it (see ``_image_for_request``); 404 for everyone else, as for an unknown hash.

    Content-addressed URLs never change meaning, so the browser may cache them for a year; only
    the browser (``private``): a shared cache must not hand them to people without access.
    """
    etag = f'"{sha256[:16]}-{size}"'
    if request.headers.get("If-None-Match") == etag:  # the browser already has it: nothing to reveal
        return HttpResponse(status=304, headers={"ETag": etag})
    if size != "full" and (not (size.isascii() and size.isdigit()) or int(size) not in SIZES):
        raise Http404("No such size")
    if not SHA256.fullmatch(sha256):  # before the database: PostgreSQL refuses a NUL in a query
        raise Http404("No such image")
    stored = _image_for_request(request, sha256)
    if stored is None:
        raise Http404("No such image")
    if size == "full":
        response = FileResponse(stored.file.open("rb"), content_type=f"image/{stored.format.lower()}")
    else:
        response = FileResponse(open(derivative_ensure(stored, int(size)), "rb"), content_type="image/webp")
    response["Cache-Control"] = f"private, max-age={YEAR}, immutable"
    response["ETag"] = etag
    response["Expires"] = http_date(timezone.now().timestamp() + YEAR)
    return response
