from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from annotation_site.security import login_rate_limited
from raters import urls as rater_urls
from tasks import rating_urls, views as task_views

admin.site.login = login_rate_limited(admin.site.login)  # before admin.site.urls builds its routes

urlpatterns = [
    path("", task_views.home, name="home"),
    path("accounts/login/", login_rate_limited(auth_views.LoginView.as_view()), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("research/", include("analysis.stopping_urls")),  # before the study routes' <slug>/<action>/
    path("", include("tasks.rating_urls")),
    path("", include((rater_urls.urlpatterns + rating_urls.qualification_urlpatterns, rater_urls.app_name))),
    path("api/", include("annotation_site.api_urls")),
    path("studies/<slug:slug>/judges/", include("analysis.judge_urls")),
    path("studies/<slug:slug>/exports/", include("analysis.export_urls")),
    path("research/", include("analysis.research_urls")),
]

handler500 = "annotation_site.errors.server_error"  # database outage → 503 "please try again"

if settings.DEBUG:
    from django.conf.urls.static import static

    urlpatterns += static(settings.MEDIA_URL, document_root=settings.MEDIA_ROOT)
