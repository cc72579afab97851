"""Uploaded images are reachable only through the access-checked ``/img/`` route in production."""

import subprocess
import sys

SCRIPT = """
import django
django.setup()
from django.urls import Resolver404, resolve
try:
    match = resolve("/media/images/ab/abcdef.png")
except Resolver404:
    print("not served")
else:
    print("served by", match.func.__module__)
"""


def _media_route_with(debug: str) -> str:
    env = {"DEBUG": debug, "SECRET_KEY": "test-only-key", "PATH": "/usr/bin:/bin",
           "DJANGO_SETTINGS_MODULE": "annotation_site.settings"}
    result = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_media_files_are_not_served_when_debug_is_off():
    assert _media_route_with("false") == "not served"


def test_media_files_are_served_by_the_development_helper_only_when_debug_is_on():
    assert _media_route_with("true") == "served by django.views.static"
