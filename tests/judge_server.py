"""A local OpenAI-compatible chat-completions server for judge tests (stdlib only).

Start it with ``with FakeJudgeServer() as server:``; ``server.base_url`` is
``http://127.0.0.1:<random port>/v1``. The *model name* in each request picks the behaviour:

- ``fake-good``: well-formed answers for every judge prompt (VIEScore JSON, GPT-4V points and
  final answers, ViCE plan/answers/refinement/score JSON and its editing variant (source
  description, remain/remove/add plan, edit/preserve scores), EvalMi numbers and yes/no). Scores
  follow the mean brightness of the last image, so they are deterministic and vary by item.
- ``fake-malformed``: prose with no score.
- ``fake-refuse``: a polite refusal.
- ``fake-slow``: a good answer after ``server.slow_seconds``.
- ``fake-429-once``: HTTP 429 for the first attempt of each distinct request, then good.
- ``fake-429``: always HTTP 429.  ``fake-500``: always HTTP 500.

``server.requests`` counts every HTTP request (retries included); ``server.bodies`` keeps the
parsed request bodies and ``server.headers`` the request headers.

Judges reach it as an operator endpoint: ``server.endpoints()`` is a ``JUDGE_ENDPOINTS`` value
naming it ``default`` with every fake model (set it with the ``settings`` fixture).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from PIL import Image, ImageStat


def _brightness(messages: list) -> float | None:
    """Mean brightness in [0, 1] of the last image in the request, or None without images."""
    urls = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            urls += [p["image_url"]["url"] for p in content if p.get("type") == "image_url"]
    if not urls:
        return None
    data = base64.b64decode(urls[-1].split(",", 1)[1])
    with Image.open(io.BytesIO(data)) as image:
        return sum(ImageStat.Stat(image.convert("L")).mean) / 255.0


def _all_brightness(messages: list) -> list[float]:
    values = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            for part in content:
                if part.get("type") == "image_url":
                    data = base64.b64decode(part["image_url"]["url"].split(",", 1)[1])
                    with Image.open(io.BytesIO(data)) as image:
                        values.append(ImageStat.Stat(image.convert("L")).mean[0] / 255.0)
    return values


def _text(messages: list) -> str:
    parts = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        else:
            parts += [p.get("text", "") for p in content if p.get("type") == "text"]
    return "\n".join(parts)


def good_answer(messages: list) -> str:
    text = _text(messages)
    level = _brightness(messages)
    score10 = round(10 * level) if level is not None else int(hashlib.sha256(text.encode()).hexdigest(), 16) % 11
    if '"score": [...]' in text or "Return score =" in text:
        count = 3 if "Give three scores" in text else 2 if "Give two scores" in text else 1
        scores = [max(0, min(10, score10 - i)) for i in range(count)]
        return "```json\n" + json.dumps({"score": scores, "reasoning": f"Brightness suggests {score10}/10."}) + "\n```"
    if "Total Score: __/100" in text:
        r, c, o = round(40 * level), round(30 * level), round(30 * (1 - level / 2))
        return f"The image is fine.\nRelevance: {r}/40\nVisual Clarity: {c}/30\nObject Accuracy: {o}/30\nTotal Score: {r + c + o}/100"
    if "Final Answer: image 0/image 1/Tie" in text:
        first, second = _all_brightness(messages)[:2]
        choice = "Tie" if abs(first - second) < 0.02 else ("image 0" if first > second else "image 1")
        return f"Comparing both, step by step... Final Answer: {choice}."
    if "Describe this image factually" in text:  # ViCE editing: the source described
        return f"A plain square of brightness {score10} filling the frame."
    if '"remain"' in text and '"questions"' in text:  # ViCE editing plan, questions tagged by set
        n = int(re.search(r"exactly (\d+) short questions", text).group(1))
        tags = ["remain"] + ["add", "remove"] * n
        return json.dumps({"remain": ["the square's shape"], "remove": ["the old colour"], "add": ["the new colour"],
                           "questions": [{"set": tags[i], "question": f"What colour is shape {i}?"} for i in range(n)]})
    if '"edit_score"' in text:  # ViCE editing score: changed answers = edit made; the gap costs preservation
        before = [int(x) for x in re.findall(r"original: .*?brightness (\d+)", text)]
        after = [int(x) for x in re.findall(r"edited: .*?brightness (\d+)", text)]
        gap = abs(after[0] - before[0]) if before and after else 0
        return json.dumps({"edit_score": min(10, 2 * gap), "preserve_score": max(0, 10 - gap),
                           "reasoning": f"answers moved by {gap} brightness steps"})
    if '"concepts"' in text and '"questions"' in text:
        n = int(re.search(r"exactly (\d+) short questions", text).group(1))
        return json.dumps({"concepts": ["a shape", "its colour"], "questions": [f"Is there shape {i}?" for i in range(1, n + 1)]})
    if '"answers"' in text:
        count = len(re.findall(r"^\d+\. ", text, re.MULTILINE))
        return json.dumps({"answers": [f"Yes, visible (brightness {score10})." for _ in range(count)]})
    if '"need_more"' in text:
        return json.dumps({"need_more": True, "questions": ["Is the colour right?"]})
    if "from a transcript" in text:
        match = re.search(r"brightness (\d+)", text)
        return json.dumps({"score": int(match.group(1)) if match else 5, "reasoning": "Transcript shows the concepts."})
    if "Answer yes or no" in text:
        return "Yes." if score10 >= 5 else "No."
    if "0 to 100" in text:
        return str(round(100 * level))
    return "I do not recognise this prompt."


FAKE_MODELS = ("fake-good", "fake-malformed", "fake-refuse", "fake-slow", "fake-429-once", "fake-429", "fake-500",
               "fake-429-odd-retry")


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"

    def log_message(self, *args) -> None:  # keep test output quiet
        pass

    def _send(self, status: int, payload: dict, headers: dict | None = None) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        owner = self.server.owner
        body = json.loads(raw)
        with owner.lock:
            owner.requests += 1
            owner.headers.append(dict(self.headers))
            owner.bodies.append(body)
            digest = hashlib.sha256(raw).hexdigest()
            seen_before = digest in owner.seen
            owner.seen.add(digest)
        if not self.path.endswith("/chat/completions"):
            return self._send(404, {"error": {"message": "not found"}})
        model = body.get("model", "")
        if model == "fake-429" or (model == "fake-429-once" and not seen_before):
            return self._send(429, {"error": {"message": "rate limited"}}, {"Retry-After": "0"})
        if model == "fake-429-odd-retry":  # a superscript two: "digit" to str.isdigit, not to float()
            return self._send(429, {"error": {"message": "rate limited"}}, {"Retry-After": "\u00b2"})
        if model == "fake-500":
            return self._send(500, {"error": {"message": "boom"}})
        if model == "fake-slow":
            time.sleep(owner.slow_seconds)
        messages = body.get("messages", [])
        if model == "fake-malformed":
            content = "Well, it is a picture. Quite something, honestly."
        elif model == "fake-refuse":
            content = "I'm sorry, but I can't help with evaluating this image."
        else:
            content = good_answer(messages)
        self._send(
            200,
            {
                "id": "chatcmpl-test",
                "object": "chat.completion",
                "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 100, "completion_tokens": len(content) // 4, "total_tokens": 100 + len(content) // 4},
            },
        )


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: "FakeJudgeServer"


class FakeJudgeServer:
    def __init__(self, *, slow_seconds: float = 1.0):
        self.slow_seconds = slow_seconds
        self.lock = threading.Lock()
        self.requests = 0
        self.bodies: list[dict] = []
        self.headers: list[dict] = []
        self.seen: set[str] = set()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def endpoints(self, name: str = "default", **extra) -> dict:
        return {name: {"base_url": self.base_url, "models": list(FAKE_MODELS), **extra}}

    def reset(self) -> None:
        with self.lock:
            self.requests = 0
            self.bodies.clear()
            self.headers.clear()
            self.seen.clear()

    def __enter__(self) -> "FakeJudgeServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
