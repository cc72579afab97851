"""A small client for OpenAI-compatible chat-completions endpoints (OpenAI, vLLM, Ollama, LM Studio).

Standard library only (urllib), no Django. Thread-safe: one client is shared by the runner's
thread pool. What it does for every request:

- **rate limit**: at most ``requests_per_minute`` request *starts* per minute across threads
  (0 = unlimited), by spacing starts at least 60/rpm seconds apart;
- **timeout**: ``timeout_seconds`` per attempt (connect + read);
- **retries**: on HTTP 429, 5xx, connection errors and timeouts, up to ``max_retries`` extra
  attempts with exponential backoff ``backoff_seconds · 2^attempt`` (a ``Retry-After`` header,
  when present, is honoured up to 60 s). Other 4xx errors are not retried.

Calls that still fail raise :class:`ChatError`; the caller records the item as failed.
The API key comes from the environment variable the *operator's* endpoint names
(:mod:`analysis.science.judges.endpoints`), is never stored in the judge's parameters, and is blanked
out of every reply and error text before anything is kept. Redirects are never followed (a
3xx is an error): urllib would forward the Authorization header to wherever it points. Only
http and https are opened (no file://, ftp://, data:). A researcher-given URL
(``researcher_url``) goes without a key and without the environment's proxies, and every
connection re-resolves the host and refuses a forbidden address before connecting, to the
address it checked (no DNS-rebinding window).
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

from analysis.science.judges.endpoints import EndpointError, Target, normalize_base_url, resolve_checked

REDACTED = "[redacted]"
RETRY_STATUSES = {429, 500, 502, 503, 504}


class ChatError(RuntimeError):
    """The endpoint could not give an answer (after retries); ``status`` is the last HTTP status."""

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 1):
        super().__init__(message)
        self.status = status
        self.attempts = attempts


@dataclass
class ChatReply:
    text: str
    finish_reason: str | None = None
    refusal: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_ms: int = 0
    attempts: int = 1
    raw: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ClientConfig:
    base_url: str
    model: str
    api_key: str | None = None
    timeout_seconds: float = 60.0
    max_retries: int = 3
    backoff_seconds: float = 1.0
    requests_per_minute: float = 0.0
    temperature: float = 0.0
    max_tokens: int = 800
    researcher_url: bool = False  # a researcher-given URL: no key, no proxies, addresses checked per connection
    allowed_networks: tuple = ()  # networks the operator lets researcher URLs reach anyway

    def __post_init__(self):
        normalize_base_url(self.base_url)  # http(s) only, no credentials, on every path to a request
        if self.researcher_url and self.api_key:
            raise EndpointError("a researcher-given URL never gets a key")

    def __repr__(self) -> str:  # keep the key out of logs and tracebacks
        return f"ClientConfig(base_url={self.base_url!r}, model={self.model!r}, researcher_url={self.researcher_url})"

    @classmethod
    def from_target(cls, target: Target, params: dict, *, env: dict | None = None,
                    allowed_networks: tuple = ()) -> "ClientConfig":
        """Build from a checked :class:`Target` and the judge's (already validated) params.

        The key is read from the operator endpoint's variable; a researcher URL gets none. The
        request rate is the stricter of the endpoint's limit and the judge's.
        """
        env = os.environ if env is None else env
        api_key = None if target.researcher_url or not target.api_key_env else (env.get(target.api_key_env) or None)
        rates = [r for r in (target.requests_per_minute, float(params.get("requests_per_minute", 0.0))) if r > 0]
        return cls(
            base_url=target.base_url.rstrip("/"),
            model=target.model,
            api_key=api_key,
            timeout_seconds=float(params.get("timeout_seconds", 60.0)),
            max_retries=int(params.get("max_retries", 3)),
            backoff_seconds=float(params.get("backoff_seconds", 1.0)),
            requests_per_minute=min(rates) if rates else 0.0,
            temperature=float(params.get("temperature", 0.0)),
            max_tokens=int(params.get("max_tokens", 800)),
            researcher_url=target.researcher_url,
            allowed_networks=tuple(allowed_networks) if target.researcher_url else (),
        )


class RateLimiter:
    """Spaces request starts at least ``60 / per_minute`` seconds apart, across threads."""

    def __init__(self, per_minute: float, *, clock=time.monotonic, sleep=time.sleep):
        self.interval = 60.0 / per_minute if per_minute and per_minute > 0 else 0.0
        self._next = 0.0
        self._lock = threading.Lock()
        self._clock, self._sleep = clock, sleep

    def wait(self) -> None:
        if not self.interval:
            return
        with self._lock:
            now = self._clock()
            start = max(now, self._next)
            self._next = start + self.interval
        if start > now:
            self._sleep(start - now)


def text_part(text: str) -> dict:
    return {"type": "text", "text": text}


def image_part(url: str) -> dict:
    return {"type": "image_url", "image_url": {"url": url}}


def _guarded_connector(allowed_networks: tuple):
    """A ``create_connection`` that resolves the host itself, refuses if *any* address is
    forbidden, and connects to a checked address (the one urllib would have used)."""

    def connect(address, timeout=socket._GLOBAL_DEFAULT_TIMEOUT, source_address=None, **kwargs):
        host, port = address
        checked = resolve_checked(host, port, allowed_networks)  # raises EndpointError (a ValueError)
        last: OSError | None = None
        for ip in checked:
            try:
                return socket.create_connection((ip, port), timeout, source_address)
            except OSError as exc:
                last = exc
        raise last or OSError(f"cannot connect to {host}")

    return connect


class _GuardedHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, connector):
        super().__init__()
        self._connector = connector

    def http_open(self, req):
        def factory(host, **kwargs):
            conn = http.client.HTTPConnection(host, **kwargs)
            conn._create_connection = self._connector
            return conn

        return self.do_open(factory, req)


class _GuardedHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, connector):
        super().__init__()
        self._connector = connector

    def https_open(self, req):
        def factory(host, **kwargs):
            conn = http.client.HTTPSConnection(host, **kwargs)  # TLS still checks the certificate for the name
            conn._create_connection = self._connector
            return conn

        return self.do_open(factory, req, context=self._context)


def build_opener(config: ClientConfig) -> urllib.request.OpenerDirector:
    """http and https only, no redirect handler (a 3xx becomes an HTTPError). Operator
    endpoints keep the environment's proxies; researcher URLs connect directly, guarded."""
    opener = urllib.request.OpenerDirector()
    if config.researcher_url:
        connector = _guarded_connector(config.allowed_networks)
        handlers = [_GuardedHTTPHandler(connector), _GuardedHTTPSHandler(connector)]
    else:
        handlers = [urllib.request.ProxyHandler(), urllib.request.HTTPHandler(), urllib.request.HTTPSHandler()]
    for handler in [*handlers, urllib.request.HTTPDefaultErrorHandler(), urllib.request.HTTPErrorProcessor()]:
        opener.add_handler(handler)
    return opener


class ChatClient:
    def __init__(self, config: ClientConfig, *, sleep=time.sleep):
        self.config = config
        self.limiter = RateLimiter(config.requests_per_minute, sleep=sleep)
        self._sleep = sleep
        self._lock = threading.Lock()
        self._opener = build_opener(config)
        self.requests_sent = 0  # HTTP attempts, including retries

    def redact(self, text: str) -> str:
        """``text`` with the API key blanked out (endpoints echo keys in error messages)."""
        key = self.config.api_key
        return text.replace(key, REDACTED) if key and text else text

    def _redact_bytes(self, payload: bytes) -> bytes:
        key = self.config.api_key
        if not key:
            return payload
        return payload.replace(key.encode(), REDACTED.encode()).replace(json.dumps(key)[1:-1].encode(), REDACTED.encode())

    def _post(self, body: bytes) -> tuple[dict, int]:
        url = self.config.base_url + "/chat/completions"
        if urllib.parse.urlsplit(url).scheme.lower() not in ("http", "https"):  # ClientConfig checks too
            raise ChatError("endpoint URL must be http(s)")
        request = urllib.request.Request(
            url,
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        if self.config.api_key and not self.config.researcher_url:
            request.add_header("Authorization", f"Bearer {self.config.api_key}")
        with self._lock:
            self.requests_sent += 1
        with self._opener.open(request, timeout=self.config.timeout_seconds) as response:
            payload = self._redact_bytes(response.read())
            status = response.status
        try:
            return json.loads(payload), status
        except json.JSONDecodeError:
            raise ChatError(f"endpoint returned non-JSON body: {payload[:200]!r}", status=status) from None

    def chat(self, content: list[dict] | str, *, system: str | None = None, model: str | None = None) -> ChatReply:
        """One user turn (text and image parts) → the assistant's reply, with retries."""
        messages = []
        if system:
            messages.append({"role": "system", "content": system})
        messages.append({"role": "user", "content": content})
        body = json.dumps(
            {
                "model": model or self.config.model,
                "messages": messages,
                "temperature": self.config.temperature,
                "max_tokens": self.config.max_tokens,
            }
        ).encode()
        last_error: ChatError | None = None
        started = time.monotonic()
        for attempt in range(self.config.max_retries + 1):
            if attempt:
                delay = self.config.backoff_seconds * (2 ** (attempt - 1))
                if last_error is not None and getattr(last_error, "retry_after", None) is not None:
                    delay = max(delay, min(last_error.retry_after, 60.0))
                self._sleep(delay)
            self.limiter.wait()
            try:
                data, _status = self._post(body)
            except urllib.error.HTTPError as exc:
                detail = self.redact(self._redact_bytes(exc.read()[:300]).decode("utf-8", "replace")) if exc.fp else ""
                last_error = ChatError(f"HTTP {exc.code}: {detail}".strip(), status=exc.code, attempts=attempt + 1)
                retry_after = exc.headers.get("Retry-After") if exc.headers else None
                last_error.retry_after = float(retry_after) if retry_after and retry_after.isascii() and retry_after.isdigit() else None
                if exc.code in RETRY_STATUSES:
                    continue
                raise last_error from None
            except EndpointError as exc:  # a researcher URL now resolves to a forbidden address: never retried
                raise ChatError(f"request refused: {exc}", attempts=attempt + 1) from None
            except (urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError) as exc:
                reason = getattr(exc, "reason", exc)
                if isinstance(reason, EndpointError):
                    raise ChatError(f"request refused: {reason}", attempts=attempt + 1) from None
                last_error = ChatError(self.redact(f"request failed: {reason}"), attempts=attempt + 1)
                last_error.retry_after = None
                continue
            return self._reply(data, started=started, attempts=attempt + 1)
        assert last_error is not None
        last_error.attempts = self.config.max_retries + 1
        raise last_error

    @staticmethod
    def _reply(data: dict, *, started: float, attempts: int) -> ChatReply:
        try:
            choice = data["choices"][0]
            message = choice.get("message") or {}
        except (KeyError, IndexError, TypeError, AttributeError):
            raise ChatError(f"reply has no choices: {json.dumps(data)[:200]}") from None
        content = message.get("content")
        if isinstance(content, list):  # some servers return content parts
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        usage = data.get("usage") or {}
        return ChatReply(
            text=content or "",
            finish_reason=choice.get("finish_reason"),
            refusal=message.get("refusal"),
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            latency_ms=int((time.monotonic() - started) * 1000),
            attempts=attempts,
            raw=data,
        )
