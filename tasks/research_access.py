"""Who may open the researcher pages, and which study a researcher may see.

Shared by the researcher pages of every app (tasks' configure and lifecycle pages, analysis'
result, release and export pages), so it lives in the lowest app that has studies.
"""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.shortcuts import get_object_or_404

from tasks.models import Study
from tasks.study_services import user_is_researcher


def researcher_required(view):
    @login_required
    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs):
        if not user_is_researcher(request.user):
            raise PermissionDenied("Research pages are for researchers and admins.")
        return view(request, *args, **kwargs)

    return wrapper


def study_for_user(request: HttpRequest, slug: str) -> Study:
    """The study if this user may see it (owner, collaborator, staff), else 404."""
    return get_object_or_404(Study.objects.visible_to(request.user), slug=slug)
