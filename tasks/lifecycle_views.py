"""Researcher pages around building and checking a study: sample bundles, the study's items with
their conditions, and a preview of its rating screens as a rater sees them.

The preview records nothing: its screens are built from unsaved Assignment objects (as the
qualification test's are, ``tasks.rating_context.display_screen``), a submit is checked exactly
as a rater's would be (``parse_entries``) and then only moves on; no Rater, Participation,
Assignment or Rating row is written, and the screen's problem report is not offered.
"""

from __future__ import annotations

from django.conf import settings
from django.core.paginator import Paginator
from django.db.models import Exists, OuterRef, Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import urlencode
from django.views.decorators.clickjacking import xframe_options_sameorigin

from analysis.science import protocols
from tasks.assignment import Screen
from tasks.builder_forms import PROTOCOL_LABELS
from tasks.models import Assignment, Comparison, ConditionImage, GenModel, Item, Study
from tasks.rating_context import parse_entries, picture, screen_view, selections_from
from tasks.research_access import researcher_required
from tasks.sample_bundles import sample_bundle
from analysis.science.protocols.task_types import TASK_TYPES

ITEMS_PER_PAGE = 24
MAX_QUERY_LENGTH = 200
PHONE_WIDTH = 390  # px: an iPhone 12-15 in portrait, the width the phone preview frames


def sample_links() -> list[tuple[str, str, list[tuple[str, str, str]]]]:
    return [
        (protocol, PROTOCOL_LABELS[protocol],
         [(task, label, reverse("research-sample-bundle", args=[protocol, task])) for task, label in tasks.items()])
        for protocol, tasks in TASK_TYPES.items()
    ]


@researcher_required
def sample_bundle_download(request: HttpRequest, protocol: str, task_type: str) -> HttpResponse:
    """A zip that builds as it is: manifest.csv with the task's columns and small images."""
    if task_type not in TASK_TYPES.get(protocol, {}):
        raise Http404("No sample for this protocol and task")
    response = HttpResponse(sample_bundle(protocol, task_type), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="sample-{protocol}-{task_type}.zip"'
    return response


# ------------------------------------------------------------------ items


@researcher_required
def study_items(request: HttpRequest, slug: str) -> HttpResponse:
    """The study's items with their prompt and condition images, filtered and paginated."""
    study = Study.objects.visible_or_404(request.user, slug)
    items = (Item.objects.filter(study=study).select_related("instance", "gen_model", "image")
             .prefetch_related("instance__condition_images__image"))
    models = list(GenModel.objects.filter(study=study).order_by("name").values_list("name", flat=True))
    roles = sorted(set(ConditionImage.objects.filter(instance__study=study).values_list("role", flat=True)))
    query = request.GET.get("q", "")[:MAX_QUERY_LENGTH].replace("\x00", "")
    model = request.GET.get("model", "")
    role = request.GET.get("condition", "")
    if query:
        items = items.filter(Q(instance__key__icontains=query) | Q(instance__prompt__icontains=query)
                             | Q(instance__task_tag__icontains=query))
    if model in models:
        items = items.filter(gen_model__name=model)
    if role in roles:
        items = items.filter(Exists(ConditionImage.objects.filter(instance=OuterRef("instance"), role=role)))
    elif role == "none":
        items = items.filter(~Exists(ConditionImage.objects.filter(instance=OuterRef("instance"))))
    page = Paginator(items, ITEMS_PER_PAGE).get_page(request.GET.get("page"))
    rows = []
    for item in page.object_list:
        conditions = [(c.get_role_display(), c.token, picture(c.image, 160, f"{c.role} of {item.instance.key}"))
                      for c in item.instance.condition_images.all()]
        rows.append({"item": item, "output": picture(item.image, 160, f"{item.gen_model.name} on {item.instance.key}"),
                     "conditions": conditions})
    keep = {k: v for k, v in {"q": query, "model": model if model in models else "",
                              "condition": role if role in roles or role == "none" else ""}.items() if v}
    return render(request, "research/items.html", {
        "study": study, "page": page, "rows": rows, "models": models, "roles": roles, "q": query,
        "model": keep.get("model", ""), "condition": keep.get("condition", ""), "keep": urlencode(keep),
        "total": page.paginator.count,
    })


# ------------------------------------------------------------------ preview


def _preview_units(study: Study) -> list[list]:
    """The study's screens in build order: one item (ImagenHub), up to ``images_per_trial`` items
    of one instance (EvalMi), one comparison (pairwise)."""
    if study.protocol_def.screen_kind == protocols.COMPARISON:
        return [[c] for c in Comparison.objects.filter(study=study).select_related(
            "item_a__image", "item_b__image", "item_a__instance", "item_a__gen_model").order_by("pk")[:MAX_SCREENS]]
    items = list(Item.objects.filter(study=study).select_related("instance", "gen_model", "image")[:MAX_SCREENS * 6])
    if study.protocol_def.screen_kind != protocols.TRIAL:
        return [[item] for item in items[:MAX_SCREENS]]
    per_trial = study.protocol_def.images_per_screen(study.protocol_settings)
    screens: dict[int, list] = {}
    for item in items:
        trial = screens.setdefault(item.instance_id, [])
        if len(trial) < per_trial:
            trial.append(item)
    return list(screens.values())[:MAX_SCREENS]


MAX_SCREENS = 50  # a preview shows the first screens; the items page browses them all


def preview_screen(study: Study, number: int) -> Screen | None:
    """Screen ``number`` (1-based) of the preview, from unsaved assignments; None past the end."""
    screens = _preview_units(study)
    if not 1 <= number <= len(screens):
        return None
    assignments = []
    for slot, unit in enumerate(screens[number - 1]):
        if isinstance(unit, Comparison):
            assignments.append(Assignment(pk=unit.pk, study=study, comparison=unit, position=number - 1, slot=slot,
                                          presentation={"left": "A"}))
        else:
            assignments.append(Assignment(pk=unit.pk, study=study, item=unit, position=number - 1, slot=slot))
    return Screen(study=study, position=number - 1, number=number, total=len(screens), assignments=assignments)


def _number(raw: str) -> int:
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 6 else 1


def _frameable_by_this_site(response: HttpResponse) -> HttpResponse:
    """The phone preview frames the preview: this site (only) may, here. The site's policy is kept
    otherwise (``security.ContentSecurityPolicyMiddleware`` leaves a response's own header alone)."""
    policy = getattr(settings, "CONTENT_SECURITY_POLICY", "")
    if policy:
        header = ("Content-Security-Policy-Report-Only" if getattr(settings, "CONTENT_SECURITY_POLICY_REPORT_ONLY", False)
                  else "Content-Security-Policy")
        response[header] = policy.replace("frame-ancestors 'none'", "frame-ancestors 'self'")
    return response


@xframe_options_sameorigin
@researcher_required
def study_preview(request: HttpRequest, slug: str) -> HttpResponse:
    """Screen ``?n=`` of the study as its raters see it; a submit is checked, never stored."""
    study = Study.objects.visible_or_404(request.user, slug)
    number = _number(request.GET.get("n", "1"))
    screen = preview_screen(study, number)
    if screen is None:
        if number == 1:
            return render(request, "rating/message.html", {
                "study": study, "title": "Nothing to preview", "text": "The study has no items yet."})
        return redirect(f"{reverse('research-study-preview', args=[study.slug])}?n=1")
    error = ""
    url = f"{reverse('research-study-preview', args=[study.slug])}?n={number}"
    if request.method == "POST":
        try:
            entries = parse_entries(screen, request.POST)
            for place, (entry, assignment) in enumerate(zip(entries, screen.assignments), start=1):
                unit = assignment.item or assignment.comparison.item_a
                try:  # the check a rater's submit gets (tasks.services), without storing anything
                    study.protocol_def.clean_answer(
                        study.protocol_settings, study.task_type, entry["values"], entry.get("answers"),
                        entry.get("checklist"), sub_question_count=len(unit.instance.sub_questions or []),
                        checklist_required=True)
                except protocols.ProtocolError as exc:
                    raise protocols.ProtocolError(f"Image {place}: {exc}" if len(entries) > 1 else str(exc)) from None
        except protocols.ProtocolError as exc:
            error = str(exc)[:1].upper() + str(exc)[1:]
        else:
            following = number + 1 if number < screen.total else 1
            if not request.htmx:
                return redirect(f"{reverse('research-study-preview', args=[study.slug])}?n={following}")
            number, screen = following, preview_screen(study, following)  # htmx swaps the next screen in
            url = f"{reverse('research-study-preview', args=[study.slug])}?n={number}"
    view = screen_view(screen, {}, [])
    if error:
        selections_from(view, request.POST)
    context = {
        "study": study, "view": view, "screen": screen, "error": error, "shown": "",
        "percent": round(100 * (number - 1) / screen.total),
        "back_url": f"{reverse('research-study-preview', args=[study.slug])}?n={number - 1}" if number > 1 else "",
        "unit_url": url, "preview": True,
        "banner": format_html("Preview of {} study {}: this is what raters see. Nothing you do here is recorded. "
                              '<a href="{}" target="_top">Back to the study</a>', study.get_state_display().lower(),
                              study.slug, reverse("research-study", args=[study.slug])),
    }
    if request.htmx:  # the rater's screen swaps #unit (htmx swaps 2xx answers only)
        response = render(request, "rating/screen.html#unit", context)
        response["HX-Push-Url"] = url
    else:
        response = render(request, "rating/screen.html", context, status=422 if error else 200)
    return _frameable_by_this_site(response)


@researcher_required
def study_phone_preview(request: HttpRequest, slug: str) -> HttpResponse:
    """The preview inside a phone-width frame (390 px), with the screen's number to step through."""
    study = Study.objects.visible_or_404(request.user, slug)
    number = _number(request.GET.get("n", "1"))
    return render(request, "research/phone_preview.html", {
        "study": study, "number": number, "width": PHONE_WIDTH,
        "src": f"{reverse('research-study-preview', args=[study.slug])}?n={number}",
    })
