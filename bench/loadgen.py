"""A small asyncio HTTP/1.1 load generator for loopback servers (no dependencies).

One connection per request (gunicorn's sync workers close after each response), a per-client
cookie jar, and a hard deadline plus a request cap so a run is always bounded.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field
from urllib.parse import urlencode

_COOKIE = re.compile(r"^([^=;\s]+)=([^;]*)")


@dataclass
class Response:
    status: int
    headers: dict[str, list[str]]
    body: bytes
    seconds: float

    def header(self, name: str) -> str:
        values = self.headers.get(name.lower())
        return values[-1] if values else ""

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


@dataclass
class Client:
    host: str
    port: int
    cookies: dict[str, str] = field(default_factory=dict)
    timeout: float = 30.0

    async def request(self, method: str, path: str, form: dict | None = None,
                      headers: dict | None = None) -> Response:
        if not path.startswith("/"):
            raise ValueError(f"loopback paths only, got {path!r}")
        body = urlencode(form).encode() if form is not None else b""
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}", "Connection: close",
                 f"Content-Length: {len(body)}"]
        if form is not None:
            lines.append("Content-Type: application/x-www-form-urlencoded")
        if self.cookies:
            lines.append("Cookie: " + "; ".join(f"{k}={v}" for k, v in self.cookies.items()))
        for name, value in (headers or {}).items():
            lines.append(f"{name}: {value}")
        raw = ("\r\n".join(lines) + "\r\n\r\n").encode() + body
        start = time.perf_counter()
        reader, writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), self.timeout)
        try:
            writer.write(raw)
            await writer.drain()
            data = await asyncio.wait_for(reader.read(), self.timeout)
        finally:
            writer.close()
        seconds = time.perf_counter() - start
        head, _, payload = data.partition(b"\r\n\r\n")
        head_lines = head.decode("latin-1").split("\r\n")
        status = int(head_lines[0].split()[1])
        parsed: dict[str, list[str]] = {}
        for line in head_lines[1:]:
            name, _, value = line.partition(":")
            parsed.setdefault(name.strip().lower(), []).append(value.strip())
        for cookie in parsed.get("set-cookie", []):
            match = _COOKIE.match(cookie)
            if match:
                self.cookies[match.group(1)] = match.group(2)
        if "chunked" in ",".join(parsed.get("transfer-encoding", [])):
            payload = _dechunk(payload)
        return Response(status, parsed, payload, seconds)


def _dechunk(payload: bytes) -> bytes:
    out, rest = bytearray(), payload
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out += rest[:size]
        rest = rest[size + 2:]
    return bytes(out)


async def wait_for_server(host: str, port: int, path: str = "/bench/bare", seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            response = await Client(host, port, timeout=5).request("GET", path)
            if response.status == 200:
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"server on {host}:{port} did not answer {path} within {seconds:.0f} s")
        await asyncio.sleep(0.2)
