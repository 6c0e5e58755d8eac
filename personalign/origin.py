"""What a personalign server on loopback answers: its own page, and programs (:class:`OwnOrigin`).

Every page open in the user's browser can send requests to any port of 127.0.0.1. A page served
from another loopback port (a notebook, a dev server, another tool's page) is another *origin* to
the browser but the same machine, and neither MLflow's default nor a host check tells it apart.
:class:`OwnOrigin` is ASGI middleware that answers a request only when

* its ``Host`` is one of the server's own names (a page that reaches the port through a DNS name
  it controls, by DNS rebinding, sends that name): else 400;
* its ``Origin``, when the browser sends one, is the server's own, ``http://`` + that ``Host``:
  browsers send it on every POST, PUT, DELETE and PATCH (``fetch`` in any mode, ``no-cors`` and
  HTML forms included) and on every cross-origin ``fetch``, so another origin's writes, reads and
  CORS preflights are refused: else 403;
* it is not a subresource request the browser marks as from another site or origin
  (``Sec-Fetch-Site: same-site`` or ``cross-site`` outside a navigation: an ``<img>`` or
  ``<script>`` pointed at the API, which sends no ``Origin``): else 403.

A refusal is ``{"error": "one line"}`` with no CORS header, sent before the app sees the request
or reads its body. Requests without these headers (``curl``, Python, ``MlflowClient``) come from
programs the user runs and are answered as before; a link followed from another page still opens
the page (a navigation).
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable

OTHER_SITE = (b"same-site", b"cross-site")  # Sec-Fetch-Site of a request another origin's page made


def host_allowed(host: str, hosts: Iterable[str]) -> bool:
    """``host`` (a ``Host`` header, lowercased) is one of ``hosts``: an entry ``NAME:PORT`` matches
    exactly, a bare ``NAME`` matches that name on any port."""
    name, _, port = host.rpartition(":")
    if not (name and port.isdigit()):
        name = host
    return host in hosts or name in hosts


class OwnOrigin:
    """ASGI middleware: ``app`` answers requests addressed to ``hosts`` from its own origin only
    (the module's rules), refusals as JSON ``{"error": ...}`` naming ``what`` (the server)."""

    def __init__(self, app: Callable, hosts: Iterable[str], what: str = "this server"):
        self.app, self.hosts, self.what = app, frozenset(h.lower() for h in hosts), what
        if not self.hosts:
            raise ValueError("OwnOrigin needs at least one host")

    def refusal(self, headers: dict[bytes, bytes]) -> tuple[int, str] | None:
        """``(status, reason)`` of a request with ``headers`` (lowercased names) to refuse, or None."""
        host = headers.get(b"host", b"").decode("latin-1").lower()
        if not host_allowed(host, self.hosts):
            return 400, f"{self.what} answers only requests addressed to {', '.join(sorted(self.hosts))}"
        origin = headers.get(b"origin")
        if origin is not None and origin.decode("latin-1").lower() != f"http://{host}":
            return 403, (f"cross-origin request refused: {self.what} answers only its own page "
                         f"(http://{host}), not {origin.decode('latin-1')[:100]}")
        if headers.get(b"sec-fetch-site") in OTHER_SITE and headers.get(b"sec-fetch-mode") != b"navigate":
            return 403, f"cross-origin request refused: {self.what} answers only its own page (http://{host})"
        return None

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> Any:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        refused = self.refusal({k.lower(): v for k, v in scope.get("headers", [])})
        if refused is None:
            return await self.app(scope, receive, send)
        if scope["type"] == "websocket":
            return await send({"type": "websocket.close", "code": 1008})  # policy violation
        status, reason = refused
        body = json.dumps({"error": reason}).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"cache-control", b"no-store"), (b"x-content-type-options", b"nosniff")]})
        await send({"type": "http.response.body", "body": body})


__all__ = ["OwnOrigin", "host_allowed"]
