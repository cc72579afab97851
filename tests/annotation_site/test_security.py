"""Production settings pass Django's deploy checks; pages carry a CSP their templates obey; logins are rate limited."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.cache import cache
from django.test import override_settings

from tests.factories import make_user

ROOT = Path(__file__).resolve().parents[2]


def _documented_production_environment() -> dict[str, str]:
    """The sh block of the README's "Security" section, placeholders filled in."""
    section = ROOT.joinpath("README.md").read_text().split("## Security", 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    env = dict(line.split("=", 1) for line in block.splitlines() if line.strip())
    assert env["SECRET_KEY"].startswith("<")
    env["SECRET_KEY"] = "k7Qw-documented-production-test-key-3f9Zr0pLxVbN2mTq8sYc1dHe5uJ"
    return env


def test_check_deploy_reports_nothing_with_the_documented_production_environment(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
           **_documented_production_environment()}
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout and "WARNINGS" not in result.stderr


def test_production_defaults_can_be_turned_off_from_the_environment_and_bad_values_stop_start_up(tmp_path):
    script = "from django.conf import settings as s; print(s.SECURE_SSL_REDIRECT, s.SESSION_COOKIE_SECURE, s.SECURE_PROXY_SSL_HEADER)"
    base = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "annotation_site.settings",
            **_documented_production_environment()}
    run = lambda **extra: subprocess.run([sys.executable, "-c", "import django; django.setup(); " + script],  # noqa: E731
                                         cwd=ROOT, env={**base, **extra}, capture_output=True, text=True, timeout=60)
    assert run().stdout.split() == ["True", "True", "None"]
    assert run(SECURE_SSL_REDIRECT="false", SECURE_PROXY_SSL_HEADER="true").stdout.split() == [
        "False", "True", "('HTTP_X_FORWARDED_PROTO',", "'https')"]
    bad = run(SECURE_HSTS_SECONDS="a year")
    assert bad.returncode != 0 and "SECURE_HSTS_SECONDS='a year' is not an integer" in bad.stderr
    bad = run(CACHE_URL="memcached://x")
    assert bad.returncode != 0 and "only redis://" in bad.stderr


@pytest.mark.django_db
def test_every_page_carries_a_content_security_policy_without_inline_script(client):
    response = client.get("/accounts/login/")
    policy = response["Content-Security-Policy"]
    script_src = re.search(r"script-src ([^;]*)", policy).group(1).split()
    assert script_src == ["'self'"] and "frame-ancestors 'none'" in policy


def test_no_template_has_an_inline_script_or_event_handler_attribute():
    """The policy allows scripts from files only: an inline one would silently stop working."""
    offenders = []
    for template in (ROOT / "templates").rglob("*.html"):
        text = template.read_text()
        for match in re.finditer(r"<script(?![^>]*\bsrc=)[^>]*>|\son[a-z]+\s*=", text):
            offenders.append(f"{template.relative_to(ROOT)}: {match.group(0).strip()}")
    assert offenders == []


@pytest.fixture
def fresh_counters():
    cache.clear()
    yield
    cache.clear()


@pytest.mark.django_db
@override_settings(LOGIN_RATE_LIMIT_PER_USERNAME=3, LOGIN_RATE_LIMIT_PER_IP=100, LOGIN_RATE_LIMIT_WINDOW=600)
def test_a_username_gets_a_429_after_too_many_login_attempts_even_from_many_addresses(client, fresh_counters):
    make_user("researcher", password="right-password")
    for n in range(3):
        response = client.post("/accounts/login/", {"username": "researcher", "password": f"guess{n}"},
                               REMOTE_ADDR=f"10.0.0.{n}")
        assert response.status_code == 200  # the form again, with its error
    refused = client.post("/accounts/login/", {"username": "Researcher ", "password": "right-password"},
                          REMOTE_ADDR="10.0.0.99")
    assert refused.status_code == 429 and refused["Retry-After"] == "600"
    assert "Too many login attempts" in refused.content.decode()
    assert "_auth_user_id" not in client.session, "the right password does not get through the limit"
    assert client.get("/accounts/login/").status_code == 200, "the form itself is never limited"
    other = client.post("/accounts/login/", {"username": "someone-else", "password": "x"}, REMOTE_ADDR="10.0.0.99")
    assert other.status_code == 200


@pytest.mark.django_db
@override_settings(LOGIN_RATE_LIMIT_PER_IP=2, LOGIN_RATE_LIMIT_PER_USERNAME=100)
def test_one_address_trying_many_usernames_is_limited_on_the_admin_login_too(client, fresh_counters):
    for name in ("a", "b"):
        assert client.post("/accounts/login/", {"username": name, "password": "x"}, REMOTE_ADDR="10.1.1.1").status_code == 200
    assert client.post("/admin/login/", {"username": "c", "password": "x"}, REMOTE_ADDR="10.1.1.1").status_code == 429
    assert client.post("/admin/login/", {"username": "c", "password": "x"}, REMOTE_ADDR="10.1.1.2").status_code == 200


@pytest.mark.django_db
@override_settings(LOGIN_RATE_LIMIT_PER_IP=1, LOGIN_RATE_LIMIT_PER_USERNAME=0, RATE_LIMIT_PROXY_COUNT=1)
def test_behind_a_proxy_the_client_is_the_address_the_proxy_saw_not_one_the_client_claims(client, fresh_counters):
    post = lambda forwarded: client.post("/accounts/login/", {"username": "u", "password": "x"},  # noqa: E731
                                         REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR=forwarded)
    assert post("203.0.113.7").status_code == 200
    assert post("1.2.3.4, 203.0.113.7").status_code == 429, "a forged left-hand entry changes nothing"
    assert post("198.51.100.2").status_code == 200


@pytest.mark.django_db
@override_settings(LOGIN_RATE_LIMIT_PER_USERNAME=1, LOGIN_RATE_LIMIT_PER_IP=0)
def test_hostile_usernames_are_counted_without_breaking_the_cache(client, fresh_counters):
    name = "x\x00" + "ü" * 5000 + "\ud800"[:0] + " spaces and:colons"
    assert client.post("/accounts/login/", {"username": name, "password": "x"}).status_code == 200
    assert client.post("/accounts/login/", {"username": name, "password": "x"}).status_code == 429
