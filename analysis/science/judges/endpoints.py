"""Where MLLM judges may send requests, and which judge parameters a researcher may set. No Django.

Endpoints belong to the operator: settings name them (``JUDGE_ENDPOINTS``, see README
"Configuration"), each with its base URL, the models it serves, the environment variable that
holds its key, and limits. A researcher's judge picks one *by name* (``params.endpoint``) and
never carries a URL, a key or the name of an environment variable.

An operator may let researchers give their own ``base_url`` (``JUDGE_ALLOW_RESEARCHER_URLS``,
off by default). Such a URL is only http(s), has no credentials in it, gets no Authorization
header, and must resolve only to public addresses (every address the name resolves to is
checked, here and again when the connection opens, so a DNS answer that changes in between
cannot point the worker at loopback or the cloud metadata service). Networks the operator lists
(``JUDGE_RESEARCHER_URL_NETWORKS``) are the only exceptions.

Judge parameters are checked against a schema per kind: types, bounds, sizes, and no unknown
keys. Anything named like a credential (``*key*``, ``*token*`` but ``max_tokens``, ``*secret*``,
``*password*``, ``headers``…) is refused by name, so it is never stored.
"""

from __future__ import annotations

import ipaddress
import json
import re
import socket
import urllib.parse
from dataclasses import dataclass

DEFAULT_ENDPOINT = "default"
MAX_CONCURRENCY = 64  # per run; an endpoint's own ``max_concurrency`` may be lower
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
MODEL_RE = re.compile(r"^[^\x00-\x1f\x7f]{1,200}$")
MAX_URL_LENGTH = 2048
MAX_PARAMS_BYTES = 4096
CHAT_KINDS = ("viescore", "gpt4v", "vice", "evalmi")
KEYLIKE_RE = re.compile(r"key|token|secret|passw|pwd|auth|credential|cookie|header|bearer|session", re.I)
KEYLIKE_ALLOWED = {"max_tokens"}


class EndpointError(ValueError):
    """An endpoint configuration, a researcher URL or a judge parameter is not acceptable."""


# ------------------------------------------------------------------------------ addresses

def forbidden_address(address: str, allowed_networks: tuple = ()) -> str | None:
    """Why ``address`` may not be reached from a researcher URL, or None when it may.

    Everything that is not a globally routable unicast address is refused (loopback, private,
    link-local with the 169.254.169.254 metadata service, carrier-grade NAT, unspecified,
    multicast, reserved, documentation ranges), also when written as an IPv4-mapped IPv6
    address; ``allowed_networks`` (``ip_network`` objects the operator listed) are let through.
    """
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return f"{address!r} is not an IP address"
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if any(ip in network for network in allowed_networks):
        return None
    if ip.is_loopback:
        return f"{ip} is a loopback address"
    if ip.is_link_local:
        return f"{ip} is a link-local address (cloud metadata lives there)"
    if ip.is_unspecified:
        return f"{ip} is the unspecified address"
    if ip.is_multicast:
        return f"{ip} is a multicast address"
    if ip.is_private or ip.is_reserved or not ip.is_global:
        return f"{ip} is a private or reserved address"
    return None


def resolve_checked(host: str, port: int, allowed_networks: tuple = (), *, resolver=None) -> list[str]:
    """Every address ``host`` resolves to, after checking each one; raises EndpointError.

    ``resolver`` defaults to ``socket.getaddrinfo``, which also reads numeric forms such as
    ``2130706433`` or ``0x7f.1`` as 127.0.0.1: these are judged by the address they reach.
    """
    resolver = resolver or socket.getaddrinfo
    try:
        infos = resolver(host, port, 0, socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise EndpointError(f"cannot resolve host {host!r}: {exc}") from None
    addresses = sorted({info[4][0] for info in infos})
    if not addresses:
        raise EndpointError(f"host {host!r} resolves to no address")
    for address in addresses:
        reason = forbidden_address(address, allowed_networks)
        if reason:
            raise EndpointError(f"base_url host {host!r} is not allowed: {reason}")
    return addresses


def _split_url(url: object, what: str) -> urllib.parse.SplitResult:
    if not isinstance(url, str) or not url:
        raise EndpointError(f"{what} must be a URL string")
    if len(url) > MAX_URL_LENGTH:
        raise EndpointError(f"{what} is longer than {MAX_URL_LENGTH} characters")
    if any(ord(ch) < 0x21 or ord(ch) == 0x7F for ch in url):
        raise EndpointError(f"{what} contains spaces or control characters")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise EndpointError(f"{what} is not a valid URL: {exc}") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise EndpointError(f"{what} must start with http:// or https:// (got {parts.scheme or 'no'} scheme)")
    if "@" in parts.netloc or parts.username is not None or parts.password is not None:
        raise EndpointError(f"{what} must not carry credentials (user:password@); keys belong to the operator")
    if not parts.hostname:
        raise EndpointError(f"{what} has no host")
    if parts.query or parts.fragment or "#" in url or "?" in url:
        raise EndpointError(f"{what} must not have a query or fragment; give the API root, e.g. https://host/v1")
    if port == 0:
        raise EndpointError(f"{what} has port 0")
    return parts


def normalize_base_url(url: object, what: str = "base_url") -> str:
    """An http(s) API root without credentials, query or fragment, trailing slash removed."""
    _split_url(url, what)
    return str(url).rstrip("/")


def check_researcher_url(url: object, allowed_networks: tuple = (), *, resolver=None) -> str:
    """A researcher-given base URL, checked for scheme, credentials and every resolved address."""
    base = normalize_base_url(url)
    parts = urllib.parse.urlsplit(base)
    port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    resolve_checked(parts.hostname, port, allowed_networks, resolver=resolver)
    return base


def parse_networks(values: list[str]) -> tuple:
    """Operator-listed networks (``10.0.0.0/8``, ``127.0.0.1``) a researcher URL may reach."""
    networks = []
    for value in values:
        try:
            networks.append(ipaddress.ip_network(value.strip(), strict=False))
        except ValueError:
            raise EndpointError(f"{value!r} is not an IP address or network (CIDR)") from None
    return tuple(networks)


# ------------------------------------------------------------------------------ endpoints

@dataclass(frozen=True)
class Endpoint:
    """An operator's OpenAI-compatible endpoint. ``models[0]`` is the default model;
    ``requests_per_minute`` 0 means no limit; the key is read from ``api_key_env`` when a
    request is made (empty: no key is sent)."""

    name: str
    base_url: str
    models: tuple[str, ...]
    api_key_env: str = ""
    max_concurrency: int = 8
    requests_per_minute: float = 0.0

    @property
    def default_model(self) -> str:
        return self.models[0]


ENDPOINT_KEYS = {"base_url", "model", "models", "api_key_env", "max_concurrency", "requests_per_minute"}


def parse_endpoint(name: object, spec: object) -> Endpoint:
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise EndpointError(f"endpoint name {name!r}: use letters, digits, '_', '.', '-' (at most 64)")
    if not isinstance(spec, dict):
        raise EndpointError(f"endpoint {name}: give an object with base_url, models, api_key_env…")
    unknown = sorted(set(spec) - ENDPOINT_KEYS)
    if unknown:
        raise EndpointError(f"endpoint {name}: unknown key(s) {', '.join(unknown)}; use {', '.join(sorted(ENDPOINT_KEYS))}")
    base_url = normalize_base_url(spec.get("base_url"), f"endpoint {name}: base_url")
    models = spec.get("models")
    default = spec.get("model")
    if models is None:
        models = [default] if default is not None else []
    if not isinstance(models, list) or not models or not all(isinstance(m, str) and MODEL_RE.match(m) for m in models):
        raise EndpointError(f"endpoint {name}: give model (a name) or models (a non-empty list of names)")
    if default is not None:
        if not isinstance(default, str) or not MODEL_RE.match(default):
            raise EndpointError(f"endpoint {name}: model must be a model name")
        models = [default] + [m for m in models if m != default]
    key_env = spec.get("api_key_env") or ""
    if not isinstance(key_env, str) or (key_env and not ENV_NAME_RE.match(key_env)):
        raise EndpointError(f"endpoint {name}: api_key_env must be an environment variable name")
    concurrency = spec.get("max_concurrency", 8)
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or not 1 <= concurrency <= MAX_CONCURRENCY:
        raise EndpointError(f"endpoint {name}: max_concurrency must be a whole number from 1 to {MAX_CONCURRENCY}")
    rpm = spec.get("requests_per_minute", 0)
    if isinstance(rpm, bool) or not isinstance(rpm, (int, float)) or not 0 <= rpm <= 1_000_000:
        raise EndpointError(f"endpoint {name}: requests_per_minute must be a number ≥ 0 (0 = no limit)")
    return Endpoint(name=name, base_url=base_url, models=tuple(dict.fromkeys(models)), api_key_env=key_env,
                    max_concurrency=concurrency, requests_per_minute=float(rpm))


def parse_endpoints(raw: object) -> dict[str, Endpoint]:
    """``{name: spec}`` → ``{name: Endpoint}``; raises EndpointError naming the bad entry."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise EndpointError("judge endpoints must be a JSON object: {\"name\": {\"base_url\": …, \"models\": […]}}")
    return {name: parse_endpoint(name, spec) for name, spec in raw.items()}


def _env_number(environ, name: str, default, kind):
    raw = (environ.get(name) or "").strip()
    if not raw:
        return default
    try:
        return kind(raw)
    except ValueError:
        raise EndpointError(f"{name}={raw!r} is not a {'whole ' if kind is int else ''}number") from None


def endpoints_from_environ(environ) -> dict[str, dict]:
    """The endpoint specs the environment defines (validated; returned as plain dicts).

    ``JUDGE_ENDPOINTS`` holds a JSON object of named endpoints. The older single-endpoint
    variables still work: ``JUDGE_API_BASE`` (with ``JUDGE_MODEL``, optional ``JUDGE_MODELS``
    for more allowed models, key in ``JUDGE_API_KEY``, limits ``JUDGE_MAX_CONCURRENCY`` (default
    64) and ``JUDGE_REQUESTS_PER_MINUTE``) define the endpoint named ``default``.
    """
    specs: dict[str, dict] = {}
    raw = (environ.get("JUDGE_ENDPOINTS") or "").strip()
    if raw:
        try:
            loaded = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise EndpointError(f"JUDGE_ENDPOINTS is not valid JSON: {exc}") from None
        if not isinstance(loaded, dict):
            raise EndpointError("JUDGE_ENDPOINTS must be a JSON object of named endpoints")
        specs.update(loaded)
    base = (environ.get("JUDGE_API_BASE") or "").strip()
    if base:
        if DEFAULT_ENDPOINT in specs:
            raise EndpointError(f"JUDGE_ENDPOINTS defines {DEFAULT_ENDPOINT!r} and JUDGE_API_BASE does too; keep one")
        model = (environ.get("JUDGE_MODEL") or "").strip()
        if not model:
            raise EndpointError("JUDGE_API_BASE is set but JUDGE_MODEL is not: name the default model")
        more = [m.strip() for m in (environ.get("JUDGE_MODELS") or "").split(",") if m.strip()]
        specs[DEFAULT_ENDPOINT] = {"base_url": base, "model": model, "models": [model, *more], "api_key_env": "JUDGE_API_KEY",
                                   "max_concurrency": _env_number(environ, "JUDGE_MAX_CONCURRENCY", MAX_CONCURRENCY, int),
                                   "requests_per_minute": _env_number(environ, "JUDGE_REQUESTS_PER_MINUTE", 0, float)}
    parse_endpoints(specs)  # fail at start-up, not in a worker
    return specs


# ------------------------------------------------------------------------------ params

@dataclass(frozen=True)
class _Field:
    kind: type | tuple
    low: float | None = None
    high: float | None = None
    max_length: int = 200

    def check(self, key: str, value: object) -> None:
        if self.kind is bool:
            if not isinstance(value, bool):
                raise EndpointError(f"params.{key} must be true or false")
            return
        if self.kind is str:
            if not isinstance(value, str) or not value or len(value) > self.max_length or not MODEL_RE.match(value):
                raise EndpointError(f"params.{key} must be a non-empty string of at most {self.max_length} characters")
            return
        if isinstance(value, bool) or not isinstance(value, self.kind) or value != value:  # value != value: NaN
            what = "a whole number" if self.kind is int else "a number"
            raise EndpointError(f"params.{key} must be {what} from {self.low:g} to {self.high:g}")
        if not self.low <= value <= self.high:
            what = "a whole number" if self.kind is int else "a number"
            raise EndpointError(f"params.{key} must be {what} from {self.low:g} to {self.high:g} (got {value})")


NUMBER = (int, float)
CHAT_FIELDS = {
    "endpoint": _Field(str, max_length=64),
    "model": _Field(str),
    "base_url": _Field(str, max_length=MAX_URL_LENGTH),
    "concurrency": _Field(int, 1, MAX_CONCURRENCY),
    "requests_per_minute": _Field(NUMBER, 0, 1_000_000),
    "max_retries": _Field(int, 0, 10),
    "backoff_seconds": _Field(NUMBER, 0, 60),
    "timeout_seconds": _Field(NUMBER, 0.1, 600),
    "temperature": _Field(NUMBER, 0, 2),
    "max_tokens": _Field(int, 1, 32768),
    "max_image_side": _Field(int, 32, 4096),
    "concat_images": _Field(bool),
}
VICE_FIELDS = {
    "vice_questions": _Field(int, 1, 50),
    "vice_max_rounds": _Field(int, 0, 5),
    "llm_model": _Field(str),
}


def keylike(name: str) -> bool:
    return name not in KEYLIKE_ALLOWED and bool(KEYLIKE_RE.search(name))


def check_shape(params: object) -> dict:
    """Refuse what no judge kind takes: non-objects, oversize params, credential-like keys,
    NUL bytes, and URLs (or ``user:pass@``) anywhere but ``base_url``."""
    if not isinstance(params, dict):
        raise EndpointError("judge parameters must be a JSON object")
    for key in params:
        if not isinstance(key, str) or not key or len(key) > 64 or "\x00" in key:
            raise EndpointError(f"parameter name {str(key)[:64]!r} is not acceptable")
        if keylike(key):
            raise EndpointError(
                f"params.{key} looks like a credential or header; keys and endpoints belong to the operator "
                "(pick an endpoint by name with params.endpoint)"
            )
    for key, value in params.items():
        if isinstance(value, str) and len(value) > MAX_URL_LENGTH:
            raise EndpointError(f"params.{key} is longer than {MAX_URL_LENGTH} characters")
    try:
        size = len(json.dumps(params, allow_nan=False))
    except (TypeError, ValueError):
        raise EndpointError("judge parameters must be plain JSON (no NaN or infinity)") from None
    if size > MAX_PARAMS_BYTES:
        raise EndpointError(f"judge parameters are {size} bytes; at most {MAX_PARAMS_BYTES}")
    for key, value in params.items():
        values = value if isinstance(value, list) else [value]
        for item in values:
            if isinstance(item, (dict, list)):
                raise EndpointError(f"params.{key} must not nest objects or lists")
            if isinstance(item, str):
                if "\x00" in item:
                    raise EndpointError(f"params.{key} contains a NUL byte")
                if key != "base_url" and ("://" in item or re.search(r"^[^/\s]+:[^/\s]*@", item)):
                    raise EndpointError(f"params.{key} must not hold a URL; endpoints are chosen by name (params.endpoint)")
    return params


def check_chat_params(kind: str, params: dict) -> dict:
    """Types and bounds of an MLLM judge's params; unknown keys refused by name."""
    check_shape(params)
    fields = {**CHAT_FIELDS, **(VICE_FIELDS if kind == "vice" else {})}
    unknown = sorted(set(params) - set(fields))
    if unknown:
        raise EndpointError(f"unknown parameter(s) {', '.join(unknown)} for a {kind} judge; use {', '.join(sorted(fields))}")
    for key, value in params.items():
        fields[key].check(key, value)
    return params


@dataclass(frozen=True)
class Target:
    """Where one judge's requests go: the operator's endpoint (with its key) or, when the
    operator allows it, a checked researcher URL (no key, addresses checked at connect time)."""

    base_url: str
    model: str
    api_key_env: str
    researcher_url: bool
    max_concurrency: int
    requests_per_minute: float
    endpoint: str = ""


def resolve_target(params: dict, endpoints: dict[str, Endpoint], *, allow_researcher_urls: bool,
                   allowed_networks: tuple = (), resolver=None) -> Target:
    """The endpoint and model an MLLM judge's params choose; raises EndpointError saying why not."""
    model = params.get("model")
    if "base_url" in params:
        if not allow_researcher_urls:
            raise EndpointError(
                "params.base_url is not accepted on this site: pick an operator endpoint by name with params.endpoint"
                + (f" ({', '.join(sorted(endpoints))})" if endpoints else "")
            )
        if "endpoint" in params:
            raise EndpointError("give params.endpoint or params.base_url, not both")
        if not model:
            raise EndpointError("params.model is required with params.base_url")
        base = check_researcher_url(params["base_url"], allowed_networks, resolver=resolver)
        return Target(base_url=base, model=model, api_key_env="", researcher_url=True,
                      max_concurrency=MAX_CONCURRENCY, requests_per_minute=0.0)
    name = params.get("endpoint") or DEFAULT_ENDPOINT
    endpoint = endpoints.get(name)
    if endpoint is None:
        if not endpoints:
            raise EndpointError("no judge endpoint is configured: the operator sets JUDGE_ENDPOINTS (or JUDGE_API_BASE)")
        raise EndpointError(f"no judge endpoint named {name!r}; choose params.endpoint from {', '.join(sorted(endpoints))}")
    for key in ("model", "llm_model"):
        chosen = params.get(key)
        if chosen and chosen not in endpoint.models:
            raise EndpointError(f"endpoint {name} does not serve params.{key} {chosen!r}; use one of {', '.join(endpoint.models)}")
    concurrency = params.get("concurrency")
    if concurrency is not None and concurrency > endpoint.max_concurrency:
        raise EndpointError(f"params.concurrency {concurrency} is above endpoint {name}'s limit of {endpoint.max_concurrency}")
    return Target(base_url=endpoint.base_url, model=model or endpoint.default_model, api_key_env=endpoint.api_key_env,
                  researcher_url=False, max_concurrency=endpoint.max_concurrency,
                  requests_per_minute=endpoint.requests_per_minute, endpoint=name)
