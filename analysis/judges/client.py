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
The API key comes from the environment variable named by the judge (``JUDGE_API_KEY`` by
default) and is never stored in the judge's parameters or in responses kept in the database.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

DEFAULT_BASE_URL_ENV = "JUDGE_API_BASE"
DEFAULT_MODEL_ENV = "JUDGE_MODEL"
DEFAULT_KEY_ENV = "JUDGE_API_KEY"
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

    @classmethod
    def from_params(cls, params: dict, env: dict | None = None) -> "ClientConfig":
        """Build from judge parameters, falling back to the environment.

        ``base_url``/``model`` come from params or ``JUDGE_API_BASE``/``JUDGE_MODEL``; the key
        only from the environment variable named by ``api_key_env`` (default ``JUDGE_API_KEY``).
        Raises ``ValueError`` naming what is missing, or when params carry a key.
        """
        env = os.environ if env is None else env
        if any(k in params for k in ("api_key", "key", "token")):
            raise ValueError("judge parameters must not contain an API key; set it in the environment (api_key_env)")
        base_url = params.get("base_url") or env.get(DEFAULT_BASE_URL_ENV)
        model = params.get("model") or env.get(DEFAULT_MODEL_ENV)
        if not base_url:
            raise ValueError(f"no endpoint: set params.base_url or {DEFAULT_BASE_URL_ENV}")
        if not model:
            raise ValueError(f"no model: set params.model or {DEFAULT_MODEL_ENV}")
        return cls(
            base_url=str(base_url).rstrip("/"),
            model=str(model),
            api_key=env.get(params.get("api_key_env") or DEFAULT_KEY_ENV) or None,
            timeout_seconds=float(params.get("timeout_seconds", 60.0)),
            max_retries=int(params.get("max_retries", 3)),
            backoff_seconds=float(params.get("backoff_seconds", 1.0)),
            requests_per_minute=float(params.get("requests_per_minute", 0.0)),
            temperature=float(params.get("temperature", 0.0)),
            max_tokens=int(params.get("max_tokens", 800)),
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


class ChatClient:
    def __init__(self, config: ClientConfig, *, sleep=time.sleep):
        self.config = config
        self.limiter = RateLimiter(config.requests_per_minute, sleep=sleep)
        self._sleep = sleep
        self._lock = threading.Lock()
        self.requests_sent = 0  # HTTP attempts, including retries

    def _post(self, body: bytes) -> tuple[dict, int]:
        request = urllib.request.Request(
            self.config.base_url + "/chat/completions",
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        if self.config.api_key:
            request.add_header("Authorization", f"Bearer {self.config.api_key}")
        with self._lock:
            self.requests_sent += 1
        with urllib.request.urlopen(request, timeout=self.config.timeout_seconds) as response:
            payload = response.read()
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
                detail = exc.read()[:300].decode("utf-8", "replace") if exc.fp else ""
                last_error = ChatError(f"HTTP {exc.code}: {detail}".strip(), status=exc.code, attempts=attempt + 1)
                retry_after = exc.headers.get("Retry-After") if exc.headers else None
                last_error.retry_after = float(retry_after) if retry_after and retry_after.isdigit() else None
                if exc.code in RETRY_STATUSES:
                    continue
                raise last_error from None
            except (urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError) as exc:
                reason = getattr(exc, "reason", exc)
                last_error = ChatError(f"request failed: {reason}", attempts=attempt + 1)
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
