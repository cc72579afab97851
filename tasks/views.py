from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from tasks.models import Study


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """Researchers see the studies they own or collaborate on (staff see all); raters see the studies open to them."""
    owned = Study.objects.visible_to(request.user)
    open_studies = Study.objects.filter(state=Study.State.OPEN)
    return render(request, "home.html", {"owned_studies": owned, "open_studies": open_studies})
