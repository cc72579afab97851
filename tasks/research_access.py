"""Who may open the researcher pages (which study a researcher may see is
``Study.objects.visible_or_404``, on the models floor).

Shared by the researcher pages of every app (tasks' configure and lifecycle pages, analysis'
result, release and export pages), so it lives in the lowest app that has studies.
"""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from tasks.study_services import user_is_researcher


def researcher_required(view):
    @login_required
    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs):
        if not user_is_researcher(request.user):
            raise PermissionDenied("Research pages are for researchers and admins.")
        return view(request, *args, **kwargs)

    return wrapper
