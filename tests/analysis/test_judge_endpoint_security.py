"""Hostile judge requests: endpoints and keys belong to the operator, judges to their owner.

A listener (a bare socket server in the test) stands for anything a researcher might point the
worker at: the site's own services, the cloud metadata address, another host on the private
network. It must receive nothing: no connection, no key, no image.
"""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.urls import reverse

from analysis.judge_services import JudgeRunError, judge_create, judge_run_start
from analysis.science.judges import endpoints
from analysis.science.judges.client import ChatClient, ChatError, ClientConfig
from analysis.science.judges.endpoints import EndpointError, Target, check_researcher_url, endpoints_from_environ
from analysis.models import Judge, JudgeRun, JudgeScore
from tasks.images import store_image
from tests.factories import make_item, make_study, make_user, png_bytes
from tests.judge_server import FakeJudgeServer

pytestmark = pytest.mark.django_db

OPERATOR_KEY = "sk-operator-key-never-leaves-4711"
SECRET = "django-secret-key-for-this-test-0815"


class Listener:
    """Accepts TCP connections on 127.0.0.1 and records whatever arrives."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.received = b""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.connections += 1
            conn.settimeout(0.5)
            try:
                self.received += conn.recv(65536)
                conn.sendall(b"HTTP/1.0 500 Nope\r\nContent-Length: 0\r\n\r\n")
            except OSError:
                pass
            conn.close()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


@pytest.fixture
def listener():
    with Listener() as running:
        yield running


@pytest.fixture(scope="module")
def server():
    with FakeJudgeServer() as running:
        yield running


@pytest.fixture(autouse=True)
def operator(settings, server, monkeypatch):
    """The operator's endpoint 'default' (the fake server, with a key) and secrets in the environment."""
    monkeypatch.setenv("JUDGE_API_KEY", OPERATOR_KEY)
    monkeypatch.setenv("SECRET_KEY", SECRET)
    settings.SECRET_KEY = SECRET
    settings.JUDGE_ENDPOINTS = server.endpoints(api_key_env="JUDGE_API_KEY")
    settings.JUDGE_ALLOW_RESEARCHER_URLS = False
    settings.JUDGE_RESEARCHER_URL_NETWORKS = []
    server.reset()


@pytest.fixture
def world():
    alice, bob = make_user("alice-researcher"), make_user("bob-researcher")
    staff = make_user("staff-member", is_staff=True)
    studies = {}
    for owner, slug in ((alice, "alice-study"), (bob, "bob-study")):
        study = make_study(slug=slug)
        study.owners.add(owner)
        for i in range(2):
            item = make_item(study, model=f"Model{i}")
            item.image = store_image(png_bytes(color=(60 + 100 * i, 60, 60)))  # the same images in both studies
            item.save()
        studies[slug] = study
    return {"alice": alice, "bob": bob, "staff": staff, **studies}


def start(client, user, body, capture=None):
    client.force_login(user)
    if capture is None:
        return client.post(reverse("api-judge-runs"), body, content_type="application/json")
    with capture(execute=True):
        return client.post(reverse("api-judge-runs"), body, content_type="application/json")


def assert_untouched(listener, server=None):
    assert listener.connections == 0 and listener.received == b""
    if server is not None:
        assert server.requests == 0


# ------------------------------------------------------------------- the red team's requests

def test_the_red_team_request_is_refused_and_the_listener_hears_nothing(client, world, listener, server):
    body = {"study": "alice-study", "judge": "exfil", "kind": "viescore",
            "params": {"base_url": f"http://127.0.0.1:{listener.port}/v1", "api_key_env": "SECRET_KEY", "model": "gpt-4o"}}
    response = start(client, world["alice"], body)
    assert response.status_code == 400 and "params.api_key_env" in response.json()["detail"]
    del body["params"]["api_key_env"]
    response = start(client, world["alice"], body)
    assert response.status_code == 400 and "params.base_url is not accepted" in response.json()["detail"]
    assert not Judge.objects.exists() and not JudgeRun.objects.exists()
    assert_untouched(listener, server)


HOSTILE_URLS = [
    ("file:///etc/passwd#", "http:// or https://"),
    ("gopher://127.0.0.1:{port}/_x", "http:// or https://"),
    ("ftp://127.0.0.1:{port}/", "http:// or https://"),
    ("http://user:pass@example.com/v1", "credentials"),
    ("http://:@example.com/v1", "credentials"),
    ("http://127.0.0.1:{port}/v1", "loopback"),
    ("http://127.0.0.1:{port}/v1#", "fragment"),
    ("http://[::1]:{port}/v1", "loopback"),
    ("http://[::ffff:127.0.0.1]:{port}/v1", "loopback"),
    ("http://169.254.169.254/latest/meta-data", "link-local"),
    ("http://10.1.2.3/v1", "private"),
    ("http://192.168.0.1/v1", "private"),
    ("http://0.0.0.0:{port}/v1", "unspecified"),
    ("http://2130706433:{port}/v1", "loopback"),
    ("http://0x7f.1:{port}/v1", "loopback"),
    ("http://localhost:{port}/v1", "loopback"),
    ("http://127.0.0.1:{port}\x00.example.com/v1", "NUL"),
    ("http://127.0.0.1:{port}/v1 ", "control characters"),
]


@pytest.mark.parametrize("url, reason", HOSTILE_URLS)
def test_researcher_urls_that_reach_inside_are_refused_before_any_run_exists(client, world, listener, settings, url,
                                                                            reason):
    settings.JUDGE_ALLOW_RESEARCHER_URLS = True
    body = {"study": "alice-study", "judge": "mine", "kind": "viescore",
            "params": {"base_url": url.format(port=listener.port), "model": "llava"}}
    response = start(client, world["alice"], body)
    assert response.status_code == 400, response.content
    assert reason in response.json()["detail"] and "base_url" in response.json()["detail"]
    assert not Judge.objects.exists() and not JudgeRun.objects.exists()
    assert_untouched(listener)


def test_an_allowed_researcher_url_gets_no_key_and_no_secret(client, world, server, settings,
                                                            django_capture_on_commit_callbacks):
    settings.JUDGE_ALLOW_RESEARCHER_URLS = True
    settings.JUDGE_RESEARCHER_URL_NETWORKS = ["127.0.0.1/32"]  # the operator lists the fake server's address
    body = {"study": "alice-study", "judge": "own endpoint", "kind": "viescore",
            "params": {"base_url": server.base_url, "model": "fake-good"}}
    response = start(client, world["alice"], body, django_capture_on_commit_callbacks)
    assert response.status_code == 201, response.content
    run = JudgeRun.objects.get(pk=response.json()["id"])
    assert (run.state, run.done, run.failed) == ("done", 2, 0)
    assert server.requests == 4
    seen = json.dumps(server.headers) + json.dumps(server.bodies)
    assert OPERATOR_KEY not in seen and SECRET not in seen
    assert not any(k.lower() == "authorization" for headers in server.headers for k in headers)


def test_the_operator_endpoint_sends_its_key_and_only_there(client, world, server, django_capture_on_commit_callbacks):
    body = {"study": "alice-study", "judge": "by name", "kind": "viescore", "params": {"model": "fake-good"}}
    response = start(client, world["alice"], body, django_capture_on_commit_callbacks)
    assert response.status_code == 201, response.content
    assert {h.get("Authorization") for h in server.headers} == {f"Bearer {OPERATOR_KEY}"}
    stored = json.dumps(Judge.objects.get(name="by name").params)
    assert OPERATOR_KEY not in stored and "JUDGE_API_KEY" not in stored


# ------------------------------------------------------------------------------- params

@pytest.mark.parametrize("params, named", [
    ({"api_key": "sk-1"}, "params.api_key"),
    ({"api_key_env": "SECRET_KEY"}, "params.api_key_env"),
    ({"headers": "Authorization: Bearer x"}, "params.headers"),
    ({"Authorization": "Bearer x"}, "params.Authorization"),
    ({"access_token": "x"}, "params.access_token"),
    ({"client_secret": "x"}, "params.client_secret"),
    ({"password": "x"}, "params.password"),
    ({"sneaky": 1}, "sneaky"),
    ({"role": "human_reference"}, "role"),
    ({"concurrency": "lots"}, "params.concurrency"),
    ({"concurrency": 0}, "params.concurrency"),
    ({"concurrency": 10_000}, "params.concurrency"),
    ({"concurrency": True}, "params.concurrency"),
    ({"max_tokens": -1}, "params.max_tokens"),
    ({"timeout_seconds": 1e9}, "params.timeout_seconds"),
    ({"max_retries": 1000}, "params.max_retries"),
    ({"temperature": "hot"}, "params.temperature"),
    ({"model": "x" * 5000}, "params.model"),
    ({"model": "fake\x00good"}, "params.model"),
    ({"model": "http://127.0.0.1/"}, "params.model must not hold a URL"),
    ({"llm_model": "fake-good"}, "llm_model"),  # only ViCE has an LLM
    ({"model": {"nested": {"deeper": [1]}}}, "params.model"),
    ({"endpoint": "../../etc"}, "no judge endpoint named"),
    ({"x" * 70: 1}, "parameter name"),
])
def test_bad_or_keylike_params_are_a_400_naming_the_key(client, world, params, named, server):
    body = {"study": "alice-study", "judge": "bad params", "kind": "viescore", "params": params}
    response = start(client, world["alice"], body)
    assert response.status_code == 400, response.content
    assert named in response.json()["detail"]
    assert not Judge.objects.exists() and not JudgeRun.objects.exists() and server.requests == 0


def test_max_tokens_and_the_documented_params_are_accepted(client, world):
    params = {"endpoint": "default", "model": "fake-good", "max_tokens": 300, "concurrency": 2, "temperature": 0.5,
              "timeout_seconds": 5, "max_retries": 1, "backoff_seconds": 0.01, "max_image_side": 256,
              "concat_images": True, "requests_per_minute": 600}
    response = start(client, world["alice"], {"study": "alice-study", "judge": "ok", "kind": "viescore", "params": params})
    assert response.status_code == 201, response.content


def test_deeply_nested_params_are_a_400_not_a_crash(client, world):
    deep = "[" * 50_000 + "]" * 50_000
    client.force_login(world["alice"])
    raw = '{"study": "alice-study", "judge": "deep", "kind": "viescore", "params": {"model": ' + deep + "}}"
    response = client.post(reverse("api-judge-runs"), raw, content_type="application/json")
    assert response.status_code == 400
    assert not Judge.objects.exists()


def test_offline_metric_and_embedding_params_are_checked_too(client, world):
    for kind, params, named in [
        ("metric", {"metrics": ["SSIM"], "api_key": "x"}, "params.api_key"),
        ("metric", {"metrics": ["SSIM"], "base_url": "http://example.com"}, "base_url"),
        ("embedding", {"clip_checkpoint": "/nowhere", "token": "x"}, "params.token"),
        ("embedding", {"clip_checkpoint": "/nowhere", "extra": 1}, "extra"),
    ]:
        body = {"study": "alice-study", "judge": f"offline {kind}", "kind": kind, "params": params}
        response = start(client, world["alice"], body)
        assert response.status_code == 400 and named in response.json()["detail"], (params, response.content)
    # no-reference metrics: SSIM or L1 on this text-to-image study would be refused (no source images)
    ok = start(client, world["alice"], {"study": "alice-study", "judge": "sharp", "kind": "metric",
                                        "params": {"metrics": ["sharpness", "noise"]}})
    assert ok.status_code == 201, ok.content


# ----------------------------------------------------------------- the worker re-validates

def test_a_judge_row_edited_to_a_researcher_url_still_does_not_connect(world, listener, settings,
                                                                       django_capture_on_commit_callbacks):
    judge = judge_create(name="edited", kind="viescore", params={"model": "fake-good"}, owner=world["alice"])
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run = judge_run_start(judge=judge, study=world["alice-study"])
    Judge.objects.filter(pk=judge.pk).update(params={"base_url": f"http://127.0.0.1:{listener.port}/v1", "model": "x"})
    for callback in callbacks:
        callback()
    run.refresh_from_db()
    assert run.state == "failed" and "params.base_url is not accepted" in run.error
    settings.JUDGE_ALLOW_RESEARCHER_URLS = True  # allowed, but loopback is still not
    JudgeRun.objects.filter(pk=run.pk).update(state="failed")
    with django_capture_on_commit_callbacks(execute=True):
        from analysis.judge_services import judge_run_resume

        with pytest.raises(JudgeRunError, match="loopback"):
            judge_run_resume(run=run)
    from analysis.judge_services import judge_run_execute

    JudgeRun.objects.filter(pk=run.pk).update(state="queued")
    judge_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.state == "failed" and "loopback" in run.error
    assert not JudgeScore.objects.filter(run=run).exists()
    assert_untouched(listener)


def test_a_name_that_turns_to_loopback_after_the_check_is_refused_at_connect_time(listener, monkeypatch):
    """DNS rebinding: the address is checked again when the connection opens, and used."""
    real = socket.getaddrinfo
    answers = {"rebind.test": "93.184.216.34"}

    def resolver(host, port, *args, **kwargs):
        if host in answers:
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (answers[host], port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    base = check_researcher_url(f"http://rebind.test:{listener.port}/v1")  # public now
    answers["rebind.test"] = "127.0.0.1"  # ...and loopback when the worker connects
    target = Target(base_url=base, model="m", api_key_env="", researcher_url=True, max_concurrency=1,
                    requests_per_minute=0)
    client = ChatClient(ClientConfig.from_target(target, {"max_retries": 2, "backoff_seconds": 0}))
    with pytest.raises(ChatError, match="loopback"):
        client.chat("hello")
    https = ClientConfig.from_target(Target(base_url=base.replace("http:", "https:"), model="m", api_key_env="",
                                            researcher_url=True, max_concurrency=1, requests_per_minute=0), {})
    with pytest.raises(ChatError, match="loopback"):  # the TLS path goes through the same check
        ChatClient(https).chat("hello")
    assert_untouched(listener)


def test_a_researcher_config_never_carries_a_key():
    with pytest.raises(EndpointError, match="never gets a key"):
        ClientConfig(base_url="https://example.com/v1", model="m", api_key="k", researcher_url=True)
    with pytest.raises(EndpointError, match="http:// or https://"):
        ClientConfig(base_url="file:///etc/passwd#", model="m")


# --------------------------------------------------------------- what the endpoint echoes

class _Echo(BaseHTTPRequestHandler):
    """Answers every request with an error that quotes the request's Authorization header, or a
    redirect to ``self.server.redirect`` when set."""

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.server.redirect:
            self.send_response(302)  # urllib would follow it, Authorization header and all
            self.send_header("Location", self.server.redirect)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = json.dumps({"error": {"message": f"Incorrect API key provided: {self.headers.get('Authorization')}"}}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def echo():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    httpd.redirect = ""
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def test_an_endpoint_echoing_the_key_leaves_no_key_in_stored_text(world, echo, settings,
                                                                  django_capture_on_commit_callbacks):
    settings.JUDGE_ENDPOINTS = {"echo": {"base_url": f"http://127.0.0.1:{echo.server_address[1]}/v1",
                                         "model": "m", "api_key_env": "JUDGE_API_KEY"}}
    judge = judge_create(name="echoed", kind="evalmi", params={"endpoint": "echo", "max_retries": 0},
                         owner=world["alice"])
    with django_capture_on_commit_callbacks(execute=True):
        run = judge_run_start(judge=judge, study=world["alice-study"])
    run.refresh_from_db()
    rows = list(JudgeScore.objects.filter(run=run).values_list("rationale", "raw_response", "details"))
    assert rows and "Incorrect API key provided: Bearer [redacted]" in rows[0][0]
    assert OPERATOR_KEY not in json.dumps(rows, default=str) and OPERATOR_KEY not in run.error


def test_a_redirect_from_an_endpoint_is_not_followed(world, echo, listener, settings,
                                                     django_capture_on_commit_callbacks):
    echo.redirect = f"http://127.0.0.1:{listener.port}/steal"
    settings.JUDGE_ENDPOINTS = {"echo": {"base_url": f"http://127.0.0.1:{echo.server_address[1]}/v1",
                                         "model": "m", "api_key_env": "JUDGE_API_KEY"}}
    judge = judge_create(name="redirected", kind="evalmi", params={"endpoint": "echo", "max_retries": 0},
                         owner=world["alice"])
    with django_capture_on_commit_callbacks(execute=True):
        run = judge_run_start(judge=judge, study=world["alice-study"])
    run.refresh_from_db()
    assert run.failed == run.total
    assert "HTTP 302" in JudgeScore.objects.filter(run=run).first().rationale
    assert_untouched(listener)


# ------------------------------------------------------------------------------ ownership

def test_another_researchers_judge_name_does_not_capture_the_run(client, world, server,
                                                                 django_capture_on_commit_callbacks):
    alice_body = {"study": "alice-study", "judge": "VIEScore gpt-4o", "kind": "viescore", "params": {"model": "fake-good"}}
    assert start(client, world["alice"], alice_body, django_capture_on_commit_callbacks).status_code == 201
    # Bob takes the same name with his own configuration: a judge of his, not a change to Alice's
    bob_body = {"study": "bob-study", "judge": "VIEScore gpt-4o", "kind": "viescore",
                "params": {"model": "fake-refuse"}}
    bob = start(client, world["bob"], bob_body, django_capture_on_commit_callbacks)
    assert bob.status_code == 201, bob.content
    assert Judge.objects.filter(name="VIEScore gpt-4o").count() == 2
    server.reset()
    again = start(client, world["alice"], {"study": "alice-study", "judge": "VIEScore gpt-4o"},
                  django_capture_on_commit_callbacks)
    assert again.status_code == 201
    run = JudgeRun.objects.get(pk=again.json()["id"])
    assert run.judge.owner == world["alice"] and run.judge.params == {"model": "fake-good"}
    assert run.cached == 2 and server.requests == 0  # her own cache, nothing sent anywhere
    # Bob cannot run Alice's judge by name on his study, nor read her runs
    client.force_login(world["bob"])
    Judge.objects.filter(owner=world["bob"]).delete()
    refused = start(client, world["bob"], {"study": "bob-study", "judge": "VIEScore gpt-4o"})
    assert refused.status_code == 400 and "no judge named" in refused.json()["detail"]
    assert client.get(reverse("api-judge-run", args=[run.pk])).status_code == 404
    assert client.get(reverse("api-judge-runs")).json()["count"] == 0


def test_the_same_config_and_images_do_not_share_cached_answers_across_owners(world, server,
                                                                            django_capture_on_commit_callbacks):
    params = {"model": "fake-good"}
    mine = judge_create(name="twin", kind="viescore", params=params, owner=world["alice"])
    theirs = judge_create(name="twin", kind="viescore", params=params, owner=world["bob"])
    with django_capture_on_commit_callbacks(execute=True):
        judge_run_start(judge=mine, study=world["alice-study"])
    with django_capture_on_commit_callbacks(execute=True):
        run = judge_run_start(judge=theirs, study=world["bob-study"])
    run.refresh_from_db()
    assert (run.cached, run.done) == (0, 2) and run.calls == 4


def test_only_staff_create_shared_judges_and_everyone_may_then_run_them(client, world,
                                                                        django_capture_on_commit_callbacks):
    body = {"study": "alice-study", "judge": "house VIEScore", "kind": "viescore", "params": {"model": "fake-good"},
            "shared": True}
    refused = start(client, world["alice"], body)
    assert refused.status_code == 400 and "only staff" in refused.json()["detail"]
    assert start(client, world["staff"], body, django_capture_on_commit_callbacks).status_code == 201
    assert Judge.objects.get(name="house VIEScore").is_shared
    by_name = start(client, world["bob"], {"study": "bob-study", "judge": "house VIEScore"},
                    django_capture_on_commit_callbacks)
    assert by_name.status_code == 201
    shadow = start(client, world["bob"], {**body, "shared": False, "study": "bob-study", "params": {"model": "fake-500"}})
    assert shadow.status_code == 400 and "shared judge's name" in shadow.json()["detail"]


def test_the_endpoint_list_shows_names_and_models_but_no_urls_or_key_variables(client, world, server):
    client.force_login(world["alice"])
    data = client.get(reverse("api-judge-endpoints")).json()
    assert data["endpoints"][0]["name"] == "default" and "fake-good" in data["endpoints"][0]["models"]
    text = json.dumps(data)
    assert server.base_url not in text and "127.0.0.1" not in text and "JUDGE_API_KEY" not in text


# ------------------------------------------------------------------------- configuration

@pytest.mark.parametrize("environ, message", [
    ({"JUDGE_ENDPOINTS": "{not json"}, "not valid JSON"),
    ({"JUDGE_ENDPOINTS": '{"a": {"base_url": "file:///etc/passwd", "model": "m"}}'}, "http:// or https://"),
    ({"JUDGE_ENDPOINTS": '{"a": {"base_url": "https://u:p@h/v1", "model": "m"}}'}, "credentials"),
    ({"JUDGE_ENDPOINTS": '{"a": {"base_url": "https://h/v1", "model": "m", "api_key": "sk"}}'}, "unknown key"),
    ({"JUDGE_ENDPOINTS": '{"a": {"base_url": "https://h/v1"}}'}, "give model"),
    ({"JUDGE_ENDPOINTS": '{"a": {"base_url": "https://h/v1", "model": "m", "max_concurrency": "x"}}'}, "max_concurrency"),
    ({"JUDGE_ENDPOINTS": '{"a b": {"base_url": "https://h/v1", "model": "m"}}'}, "endpoint name"),
    ({"JUDGE_API_BASE": "http://h/v1"}, "JUDGE_MODEL"),
    ({"JUDGE_API_BASE": "http://h/v1", "JUDGE_MODEL": "m", "JUDGE_MAX_CONCURRENCY": "many"}, "JUDGE_MAX_CONCURRENCY"),
])
def test_bad_endpoint_configuration_stops_start_up_with_the_reason(environ, message):
    with pytest.raises(EndpointError, match=message):
        endpoints_from_environ(environ)


def test_the_single_endpoint_variables_still_define_the_default_endpoint():
    specs = endpoints_from_environ({"JUDGE_API_BASE": "http://127.0.0.1:11434/v1/", "JUDGE_MODEL": "llava",
                                    "JUDGE_MODELS": "llava,qwen2-vl"})
    [endpoint] = endpoints.parse_endpoints(specs).values()
    assert (endpoint.name, endpoint.base_url, endpoint.models, endpoint.api_key_env) == (
        "default", "http://127.0.0.1:11434/v1", ("llava", "qwen2-vl"), "JUDGE_API_KEY")


def test_the_settings_module_refuses_a_bad_endpoint_at_start_up():
    import os
    import subprocess
    import sys

    env = {**os.environ, "JUDGE_ENDPOINTS": '{"x": {"base_url": "gopher://h", "model": "m"}}',
           "DJANGO_SETTINGS_MODULE": "annotation_site.settings"}
    result = subprocess.run([sys.executable, "-c", "import django; django.setup()"], env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode != 0 and "EnvError" in result.stderr and "http:// or https://" in result.stderr


def test_the_cli_picks_an_endpoint_by_name(world):
    from io import StringIO

    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="no judge endpoint named 'nope'"):
        call_command("run_judge", "alice-study", "--judge", "cli", "--kind", "viescore", "--endpoint", "nope",
                     stdout=StringIO())
    with pytest.raises(CommandError, match="params.base_url is not accepted"):
        call_command("run_judge", "alice-study", "--judge", "cli", "--kind", "viescore",
                     "--param", "base_url=http://169.254.169.254/v1", stdout=StringIO())
    assert not Judge.objects.exists()
