"""The HTTP side of :mod:`personalign.testing.openai_server`: one ``http.server`` request handler
per connection, turning a chat request into its refusal (503 ``server_bound``, 429), its fault or
its answer (:mod:`personalign.testing._openai_reply`), and counting it on the server."""

from __future__ import annotations

import contextlib
import json
import socket
from http.server import BaseHTTPRequestHandler
from typing import Any, Mapping

from personalign.testing import _openai_reply as reply


def handler_class(server: Any) -> type[BaseHTTPRequestHandler]:
    """The request handler class bound to ``server`` (a
    :class:`~personalign.testing.openai_server.OpenAIServer`; one instance per connection)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "personalign-openai-mock/1"

        def setup(self) -> None:
            super().setup()
            # headers and body go out as two writes: without TCP_NODELAY the body waits for the
            # client's delayed ACK (~40 ms a request on Linux loopback), which no real server adds
            with contextlib.suppress(OSError):
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def finish(self) -> None:
            with contextlib.suppress(OSError):
                super().finish()

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 -- no access log on stderr
            pass

        def _send(self, status: int, body: dict | bytes, headers: Mapping[str, str] = {}) -> None:  # noqa: B006
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)
            except OSError:  # the client left
                self.close_connection = True
            if server.wait(0):  # stopping: no next request on this connection
                self.close_connection = True

        def do_GET(self) -> None:  # noqa: N802
            if self.path.rstrip("/") not in ("/v1/models", "/models"):
                return self._send(404, reply.error(f"no route GET {self.path}", "invalid_request_error"))
            server._count("models")
            self._send(200, reply.models(server.model))

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                return self._send(404, reply.error(f"no route POST {self.path}", "invalid_request_error"))
            entry = {"start": server._now(), "status": 0, "outcome": "error"}
            entry["n"], refusal = server._admit()
            usage = None
            try:
                entry["status"], entry["outcome"], body, headers, usage = self._outcome(raw, entry["n"], refusal)
            finally:  # counted before the reply is written: a client that has its reply sees it in stats()
                server._done(entry, admitted=refusal is None, usage=usage)
            if body is None:  # dropped, hung up on, or the client left: no response
                self.close_connection = True
            else:
                self._send(entry["status"], body, headers)

        def _outcome(self, raw: bytes, n: int, refusal: str | None) -> tuple:
            """``(status, outcome, body, headers, usage)`` of chat request ``n``: ``body`` None when
            no response is sent (status 0), ``usage`` the answer's when one is sent."""
            if refusal == "rate_limited":
                return 429, refusal, reply.error("Rate limit reached: too many requests in flight", "requests",
                                                 "rate_limit_exceeded"), \
                    {"Retry-After": f"{server.retry_after:g}",
                     "retry-after-ms": str(int(round(server.retry_after * 1000)))}, None
            if refusal == "over_bound":
                server.stop()
                return 503, refusal, reply.error("server bound reached (max_requests or max_lifetime)",
                                                 "server_error", "server_bound"), {}, None
            try:
                body = json.loads(raw or b"{}")
                if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or body.get("stream"):
                    raise ValueError("expected a JSON object with a messages list, without stream")
            except ValueError as exc:
                return 400, "bad_request", reply.error(f"invalid request: {exc}", "invalid_request_error"), {}, None
            kind = server.faults.kind(n)
            if kind == "drop":
                return 0, kind, None, {}, None
            if kind in ("http_500", "http_503"):
                what = {"http_500": ("internal error", "internal_error"), "http_503": ("overloaded", "overloaded")}
                message, code = what[kind]
                return int(kind[-3:]), kind, reply.error(f"injected fault: {message}", "server_error", code), {}, None
            waited = server._pause(self.connection, None if kind == "hang" else server.latency)
            if waited == "stopped":
                return 503, kind or "stopped", reply.error("server stopped", "server_error", "server_stopped"), {}, None
            if waited == "gone" or kind == "hang":
                return 0, kind or "client_gone", None, {}, None
            if kind == "not_json":
                return 200, kind, b"<html><body>502 Bad Gateway (injected fault)</body></html>", {}, None
            out = reply.completion(body, f"chatcmpl-mock-{n}")
            if kind == "unparseable":
                for choice in out["choices"]:
                    choice["message"]["content"] = "Sorry, I cannot help with that."
            return 200, kind or "ok", out, {}, out["usage"]

    return Handler
