"""A real OpenAI-compatible HTTP server on loopback, for tests and benchmarks.

Standard library only. Serves GET /v1/models and POST /v1/chat/completions (plain and
streaming SSE) in the OpenAI wire shape, with injectable failures (HTTP status, optional
Retry-After), random faults of the kinds in `FAULTS`, and an optional required API key.
"""

from __future__ import annotations

import json
import random
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_REPLY = '{"label": "Benign", "confidence": 0.5, "rationale": "loopback default"}'

FAULTS = ("429", "500", "503", "hang", "reset", "garbage", "empty_choices", "huge")
"""Every fault kind: 429 with Retry-After, 500, 503, a hang past the client's timeout, a
connection reset, a 200 whose body is not JSON, a 200 with an empty `choices` list, and a
200 carrying `huge_bytes` of text. `huge_unsized` is the last one sent without a
Content-Length (read until the connection closes)."""


def _tokens(text: str) -> int:
    return len(text.split())


class LoopbackOpenAIServer:
    def __init__(
        self,
        reply: Callable[[dict], str | dict] | None = None,
        *,
        model_ids: Sequence[str] = ("loopback-model",),
        require_api_key: str | None = None,
        delay_s: float = 0.0,
        chaos: float = 0.0,
        chaos_seed: int = 0,
        hang_s: float = 2.0,
        faults: Sequence[str] = ("429", "500", "hang", "garbage"),
        huge_bytes: int = 5 * 1024 * 1024,
        reject_chat_echoing_key: bool = False,
    ) -> None:
        self.reply = reply or (lambda request: DEFAULT_REPLY)
        self.model_ids = list(model_ids)
        self.require_api_key = require_api_key
        self.delay_s = delay_s
        # Fault injection: this fraction of chat requests get one of `faults` (see FAULTS),
        # drawn evenly; a hang lasts `hang_s` (longer than the client's timeout).
        self.chaos = chaos
        self._chaos_rng = random.Random(chaos_seed)
        self.hang_s = hang_s
        unknown = set(faults) - {*FAULTS, "huge_unsized"}
        assert not unknown, f"unknown fault kinds {unknown}"
        self.faults = list(faults)
        self.huge_bytes = huge_bytes
        # A provider whose 401 body echoes the key it was sent, as OpenAI's does; the
        # model list still answers, so the run gets past preflight.
        self.reject_chat_echoing_key = reject_chat_echoing_key
        self.injected: list[str] = []
        self.fault_log: list[tuple[str | None, dict]] = []
        """(fault kind or None, request) for every chat request, in arrival order."""
        self.in_flight = 0
        self.peak_in_flight = 0
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._failures: list[tuple[int, float | None]] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._base_url: str | None = None

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> LoopbackOpenAIServer:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        self._base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> LoopbackOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """The URL it serves (kept after stop, so tests can probe a dead endpoint)."""
        assert self._base_url is not None, "server not started"
        return self._base_url

    def fail_next(self, n: int, status: int = 500, retry_after: float | None = None) -> None:
        """The next `n` chat requests get HTTP `status` (with Retry-After when given)."""
        with self._lock:
            self._failures.extend([(status, retry_after)] * n)

    # -- request handling ------------------------------------------------------------
    def _take_failure(self) -> tuple[int, float | None] | None:
        with self._lock:
            return self._failures.pop(0) if self._failures else None

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                return

            def _send_json(self, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
                kind = {401: "invalid_request_error", 404: "not_found", 429: "rate_limit_exceeded"}.get(
                    status, "server_error"
                )
                self._send_json(status, {"error": {"message": message, "type": kind, "code": kind}}, headers)

            def _authorized(self) -> bool:
                if server.require_api_key is None:
                    return True
                if self.headers.get("Authorization") == f"Bearer {server.require_api_key}":
                    return True
                self._error(401, "Incorrect API key provided")
                return False

            def do_GET(self) -> None:
                if self.path.rstrip("/") != "/v1/models":
                    return self._error(404, f"no route {self.path}")
                if not self._authorized():
                    return
                data = [{"id": m, "object": "model", "created": 0, "owned_by": "loopback"} for m in server.model_ids]
                self._send_json(200, {"object": "list", "data": data})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if self.path.rstrip("/") != "/v1/chat/completions":
                    return self._error(404, f"no route {self.path}")
                if not self._authorized():
                    return
                if server.reject_chat_echoing_key:
                    sent = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
                    return self._error(
                        401, f"Incorrect API key provided: {sent}. You can find your API key at the dashboard."
                    )
                try:
                    request = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    return self._error(400, "body is not JSON")
                with server._lock:
                    server.requests.append(request)
                    server.in_flight += 1
                    server.peak_in_flight = max(server.peak_in_flight, server.in_flight)
                try:
                    self._answer(request)
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def _answer(self, request: dict) -> None:
                with server._lock:
                    roll = server._chaos_rng.random() < server.chaos
                    kind = server._chaos_rng.choice(server.faults) if roll else None
                    if kind:
                        server.injected.append(kind)
                    server.fault_log.append((kind, request))
                if kind == "429":
                    return self._error(429, "injected rate limit", {"Retry-After": "0"})
                if kind in ("500", "503"):
                    return self._error(int(kind), f"injected server error {kind}")
                if kind == "reset":  # SO_LINGER 0: close() sends a TCP RST instead of a FIN
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.connection.close()
                    self.close_connection = True
                    return
                if kind == "empty_choices":
                    return self._send_json(
                        200,
                        {
                            "id": "chatcmpl-empty",
                            "object": "chat.completion",
                            "created": 0,
                            "model": request.get("model"),
                            "choices": [],
                        },
                    )
                if kind in ("huge", "huge_unsized"):
                    return self._huge(request, sized=kind == "huge")
                if kind == "hang":  # the client has given up by now; just drop the connection
                    time.sleep(server.hang_s)
                    self.close_connection = True
                    return
                if kind == "garbage":
                    data = b"<html>502 Bad Gateway</html>{{{"
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                failure = server._take_failure()
                if failure is not None:
                    status, retry_after = failure
                    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
                    return self._error(status, f"injected failure {status}", headers)
                if server.delay_s:
                    time.sleep(server.delay_s)  # a slow model; each request has its own thread
                reply = server.reply(request)
                # A dict reply is a tool-calling turn: {"tool_calls": [{"name", "arguments"}], "content"?}
                tool_calls = None
                if isinstance(reply, dict):
                    tool_calls = [
                        {
                            "id": f"call_{uuid.uuid4().hex[:8]}",
                            "type": "function",
                            "function": {"name": c["name"], "arguments": c.get("arguments", "{}")},
                        }
                        for c in reply.get("tool_calls", [])
                    ]
                    reply = reply.get("content") or ""
                text = reply
                prompt = " ".join(str(m.get("content") or "") for m in request.get("messages", []))
                usage = {
                    "prompt_tokens": _tokens(prompt),
                    "completion_tokens": _tokens(text),
                    "total_tokens": _tokens(prompt) + _tokens(text),
                }
                model = request.get("model", server.model_ids[0])
                ident, created = f"chatcmpl-{uuid.uuid4().hex[:12]}", int(time.time())
                if request.get("stream") and not tool_calls:
                    return self._stream(ident, created, model, text, usage, request)
                message: dict[str, Any] = {"role": "assistant", "content": text}
                if tool_calls:
                    message = {"role": "assistant", "content": text or None, "tool_calls": tool_calls}
                self._send_json(
                    200,
                    {
                        "id": ident,
                        "object": "chat.completion",
                        "created": created,
                        "model": model,
                        "choices": [
                            {"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}
                        ],
                        "usage": usage,
                    },
                )

            def _huge(self, request: dict, sized: bool) -> None:
                text = "A" * server.huge_bytes
                body = json.dumps(
                    {
                        "id": "chatcmpl-huge",
                        "object": "chat.completion",
                        "created": 0,
                        "model": request.get("model"),
                        "choices": [
                            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                        ],
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                if sized:
                    self.send_header("Content-Length", str(len(body)))
                else:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:  # the client stopped reading, as it should
                    self.close_connection = True

            def _stream(self, ident: str, created: int, model: str, text: str, usage: dict, request: dict) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()

                def chunk(delta: dict, finish: str | None = None, extra: dict | None = None) -> None:
                    body = {
                        "id": ident,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": model,
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                        **(extra or {}),
                    }
                    self.wfile.write(f"data: {json.dumps(body)}\n\n".encode())

                chunk({"role": "assistant", "content": ""})
                words = text.split(" ")
                for i, word in enumerate(words):
                    chunk({"content": word if i == 0 else " " + word})
                chunk({}, "stop")
                if (request.get("stream_options") or {}).get("include_usage"):
                    self.wfile.write(
                        f"data: {json.dumps({'id': ident, 'object': 'chat.completion.chunk', 'created': created, 'model': model, 'choices': [], 'usage': usage})}\n\n".encode()
                    )
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        return Handler
