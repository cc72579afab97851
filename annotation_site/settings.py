"""Settings for the annotation site, read from the environment (see README "Configuration").

Defaults give a working development site on a fresh clone: SQLite in the repo, Celery eager.
"""

import os
from pathlib import Path

from annotation_site.env import EnvError, database_config, envbool, envint, envlist, envstr
from annotation_site.env import celery_filesystem_options, envnetworks, judge_endpoints

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = envbool("DEBUG", True)
SECRET_KEY = envstr("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise EnvError("SECRET_KEY must be set when DEBUG is off")
    SECRET_KEY = "dev-only-insecure-key-do-not-use-in-production"

ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "template_partials",
    "raters",
    "tasks",
    "analysis",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "annotation_site.security.ContentSecurityPolicyMiddleware",
]

ROOT_URLCONF = "annotation_site.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "annotation_site.wsgi.application"

DATABASES = {"default": database_config(envstr("DATABASE_URL"), default_sqlite_path=str(BASE_DIR / "db.sqlite3"),
                                         prepare_threshold=envstr("DATABASE_PREPARE_THRESHOLD"))}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # Concurrent raters on the embedded default: wait for the write lock instead of failing.
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 20
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(envstr("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STATICFILES_DIRS = [BASE_DIR / "static"]
MEDIA_URL = "media/"
MEDIA_ROOT = Path(envstr("MEDIA_ROOT", str(BASE_DIR / "media")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if not DEBUG
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
# Uploaded bundles are checked image by image; Pillow's own bomb guard is set in tasks.images.
# Study exports built in the background: outside MEDIA_ROOT (served without a login in DEBUG),
# handed out only by the export download view.
EXPORTS_ROOT = Path(envstr("EXPORTS_ROOT", str(BASE_DIR / "var" / "exports")))
# A study with more votes than this is exported by a background job (page and API), never inside a request.
EXPORT_INLINE_MAX_VOTES = envint("EXPORT_INLINE_MAX_VOTES", 20_000, minimum=0)
DATA_UPLOAD_MAX_MEMORY_SIZE = envint("DATA_UPLOAD_MAX_MEMORY_SIZE", 10 * 1024 * 1024, minimum=1024)

# Automatic rater-quality rules run at most this often per study (a due run waits out the rest).
QUALITY_RULES_MIN_INTERVAL_SECONDS = envint("QUALITY_RULES_MIN_INTERVAL_SECONDS", 30, minimum=0)

# Rating: a rater's unrated units return to the pool after this long without a request from them.
ASSIGNMENT_LEASE_SECONDS = envint("ASSIGNMENT_LEASE_SECONDS", 30 * 60, minimum=60)
# Crowd hoarding guards (tasks.assignment, tasks.crowd): a rater who has not submitted anything
# holds a short lease; such raters together may lease at most this share of a study's open units;
# one address may start at most this many new crowd participations an hour.
ASSIGNMENT_FIRST_LEASE_SECONDS = envint("ASSIGNMENT_FIRST_LEASE_SECONDS", 10 * 60, minimum=60)
CROWD_NEWCOMER_SHARE_PERCENT = envint("CROWD_NEWCOMER_SHARE_PERCENT", 50, minimum=1)
CROWD_NEW_PARTICIPATIONS_PER_ADDRESS_HOUR = envint("CROWD_NEW_PARTICIPATIONS_PER_ADDRESS_HOUR", 60, minimum=1)

# Production hardening (README "Security"): on by default when DEBUG is off; each one can be
# turned off from the environment, e.g. behind a proxy that already redirects to HTTPS.
SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", not DEBUG)
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 0 if DEBUG else 31_536_000, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", False)
SESSION_COOKIE_SECURE = envbool("SESSION_COOKIE_SECURE", not DEBUG)  # the crowd-rater cookie follows it
CSRF_COOKIE_SECURE = envbool("CSRF_COOKIE_SECURE", not DEBUG)
# Only behind a proxy that sets X-Forwarded-Proto itself (and strips the client's): else a client
# could claim HTTPS.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if envbool("SECURE_PROXY_SSL_HEADER", False) else None
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Scripts only from our own static files (no inline script, no eval). Styles may be inline: the
# API docs (Swagger UI, ReDoc) set styles at run time, and a style cannot run script. The MTurk
# completion form posts to MTurk.
CONTENT_SECURITY_POLICY = envstr(
    "CONTENT_SECURITY_POLICY",
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
    "font-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'self'; frame-ancestors 'none'; "
    "form-action 'self' https://www.mturk.com https://workersandbox.mturk.com",
)
if CONTENT_SECURITY_POLICY.strip().lower() == "off":
    CONTENT_SECURITY_POLICY = ""
CONTENT_SECURITY_POLICY_REPORT_ONLY = envbool("CONTENT_SECURITY_POLICY_REPORT_ONLY", False)
# Login attempts (POSTs to the login pages, the admin's included) per window, per client IP and
# per username; counted in the cache below. 0 turns a limit off.
LOGIN_RATE_LIMIT_WINDOW = envint("LOGIN_RATE_LIMIT_WINDOW", 15 * 60, minimum=1)
LOGIN_RATE_LIMIT_PER_IP = envint("LOGIN_RATE_LIMIT_PER_IP", 50, minimum=0)
LOGIN_RATE_LIMIT_PER_USERNAME = envint("LOGIN_RATE_LIMIT_PER_USERNAME", 10, minimum=0)
RATE_LIMIT_PROXY_COUNT = envint("RATE_LIMIT_PROXY_COUNT", 0, minimum=0)  # reverse proxies adding X-Forwarded-For
# One cache for every worker process (rate-limit counters): redis://… ; unset: per-process memory.
CACHE_URL = envstr("CACHE_URL")
if CACHE_URL:
    if not CACHE_URL.startswith(("redis://", "rediss://")):
        raise EnvError(f"CACHE_URL={CACHE_URL!r}: only redis:// or rediss:// is supported")
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL}}

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# Celery: no broker configured means eager mode (jobs run inside the request that queues them):
# tests and a bare `manage.py runserver`. `make run` sets CELERY_BROKER_URL=filesystem://, the
# embedded broker (files under CELERY_FILESYSTEM_DIR, no server), and starts a worker beside the
# web server (`manage.py runsite`). Production: redis://… and workers of their own.
CELERY_BROKER_URL = envstr("CELERY_BROKER_URL")
CELERY_RESULT_BACKEND = envstr("CELERY_RESULT_BACKEND")
CELERY_TASK_ALWAYS_EAGER = CELERY_BROKER_URL is None
if CELERY_BROKER_URL is not None and CELERY_BROKER_URL.rstrip("/") == "filesystem:":
    CELERY_BROKER_TRANSPORT_OPTIONS = celery_filesystem_options(
        envstr("CELERY_FILESYSTEM_DIR", str(BASE_DIR / "var" / "celery")))
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_TIME_LIMIT = envint("CELERY_TASK_TIME_LIMIT", 3600, minimum=1)
CELERY_TASK_SOFT_TIME_LIMIT = envint("CELERY_TASK_SOFT_TIME_LIMIT", 3300, minimum=1)
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1

# Threads of the BLAS library (OpenBLAS, under numpy and scipy) per process. The report already
# runs its parts in threads of its own and the site scales by processes (web and Celery workers):
# BLAS threads on top oversubscribe the cores and spin (EvalMi-scale report on 2 cores: 5.0-5.3
# CPU-s with OpenBLAS's default, 4.2-4.3 with 1). Applied when the analysis app loads to the BLAS
# libraries loaded by then, and through OPENBLAS_NUM_THREADS (unless set) to those loaded later.
BLAS_THREADS = envint("BLAS_THREADS", 1, minimum=1)
os.environ.setdefault("OPENBLAS_NUM_THREADS", str(BLAS_THREADS))

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # JSON bodies bounded in size and depth, NUL-free: hostile ones are 400s, not 500s
    "DEFAULT_PARSER_CLASSES": [
        "tasks.api_parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 100,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Annotation site API",
    "DESCRIPTION": "Studies, items, ratings, reports and judge runs for human evaluation of image generation.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI and ReDoc assets come from drf-spectacular-sidecar (served locally, no CDN).
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Judge runs and dataset releases both have a "state": name each set of choices.
    "ENUM_NAME_OVERRIDES": {"ReleaseStateEnum": "analysis.models.DatasetRelease.State"},
}
# MLLM judge endpoints belong to the operator; researchers pick one by name (README "Configuration").
JUDGE_ENDPOINTS = judge_endpoints()
# Off by default: researcher-given base URLs (public addresses only, never with the operator's keys).
JUDGE_ALLOW_RESEARCHER_URLS = envbool("JUDGE_ALLOW_RESEARCHER_URLS", False)
JUDGE_RESEARCHER_URL_NETWORKS = envnetworks("JUDGE_RESEARCHER_URL_NETWORKS")
# Embedding judges a researcher creates may only load checkpoints under these directories.
JUDGE_CHECKPOINT_DIRS = envlist("JUDGE_CHECKPOINT_DIRS", [])

# Research dashboards colour agreement (Krippendorff's alpha) below this value as too low.
AGREEMENT_THRESHOLD = float(envstr("AGREEMENT_THRESHOLD", "0.4"))

# Published MOS sheets researchers may plan from (settings page): name -> a file on this server
# (read, never fetched). A missing file is shown as such. EVALMI_MOS_PATH points at EvalMi-50K's.
PUBLISHED_MOS_SOURCES = {
    "EvalMi-50K": {"path": envstr("EVALMI_MOS_PATH", str(BASE_DIR.parent / "shared" / "datasets" / "evalmi"
                                                        / "AIGI2025_MOS_yn.xlsx")),
                   "noise_sd": 10.0, "raters_per_item": 15.0},
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": envstr("LOG_LEVEL", "INFO")},
}
