"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests and benchmarks: latency, rate
limits and seeded faults, answering DSPy prompts deterministically (no model).

    from personalign.testing import openai_server
    with openai_server(latency=0.5, max_in_flight=8, faults={"http_500": 0.1}) as srv:
        lm = personalign.lm.make_lm("openai/mock", api_base=srv.api_base)
        ...
        srv.stats()

It serves ``POST /v1/chat/completions`` (answers of :mod:`personalign.testing._openai_reply`:
ChatAdapter sections or JSON, ``usage``, ``logprobs``/``top_logprobs``, so the capability probe of
:func:`personalign.lm.serving.probe` finds a ``json_schema`` dialect and top_logprobs) and
``GET /v1/models``, on the standard library's ``ThreadingHTTPServer`` (a thread per connection,
HTTP/1.1 keep-alive). A chat request is, in order:

1. refused with **503** ``server_bound`` past ``max_requests`` (the server then stops itself);
2. refused with **429** when ``max_in_flight`` requests are already being served (or always, with
   ``rate_limit_forever``), with ``Retry-After`` (seconds, may be fractional) and
   ``retry-after-ms`` headers and an OpenAI ``rate_limit_exceeded`` error body;
3. given the fault of its request number (:class:`Faults`), or answered after ``latency`` seconds
   (a wait on a socket, so any number of requests wait at once; 500, 503 and drop come at once).

The server stops itself after ``max_lifetime`` seconds; a request still waiting then gets 503
``server_stopped``, and a closed server refuses connections.

What a client raises for each, with no retries (``max_retries=0``; ``num_retries=0``), as observed
with litellm 1.110 and DSPy 3.4.1 (``tests/testing/test_openai_server.py`` asserts it). DSPy's
``dspy.LM`` reaches an ``openai/...`` model on an ``api_base`` through its native engine, not
through litellm, so its errors are DSPy's own (``dspy.utils.exceptions``); litellm's are what
:func:`personalign.lm.serving.probe` and :func:`~personalign.lm.serving.yes_no_margin` see:

==============================  =====================================  ==============================
the server                      ``litellm.completion`` raises          ``dspy.LM`` raises
==============================  =====================================  ==============================
429 (``max_in_flight``)         ``RateLimitError``                     ``LMRateLimitError``
                                                                       (``retry_after`` = the header)
``http_500``: 500               ``InternalServerError``                ``LMServerError`` (status 500)
``http_503``: 503 overloaded    ``ServiceUnavailableError``            ``LMServerError`` (status 503)
``hang``: no answer             ``Timeout`` (the call's ``timeout``)   ``LMTransportError``
                                                                       (a read timeout)
``drop``: closed, no response   ``InternalServerError``                ``LMTransportError``
                                ("Connection error.")
``not_json``: 200, HTML body    ``InternalServerError``                ``LMProviderError`` (status 200)
``unparseable``: 200, prose     none (the text comes back)             none; the adapter raises
                                                                       ``AdapterParseError`` (after
                                                                       ChatAdapter's JSON fallback,
                                                                       a second request)
a closed server (refused)       ``InternalServerError``                ``LMTransportError``
==============================  =====================================  ==============================

So litellm 1.110 raises no ``APIConnectionError`` for a dropped or refused connection (a drop
and an unreachable server look alike to both clients). Retries: ``dspy.LM(num_retries=2)``
retries 429 (waiting ``Retry-After``), 500, 503, hang and drop (a 1 s back-off first), not
``not_json``; ``litellm.completion`` without ``max_retries`` makes 3 requests for a 429, a 500 or a
drop (the OpenAI SDK's 2 retries), each counted by the server.

``python -m personalign.testing.openai_server --latency 0.5 --port N`` serves until SIGTERM/SIGINT
or a bound, printing ``{"api_base": ...}`` when ready and :meth:`OpenAIServer.stats` at exit.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import select
import socket
import sys
import threading
import time
import types
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any, Iterator, Mapping

from personalign.testing._openai_handler import handler_class

KINDS = ("http_500", "http_503", "hang", "drop", "not_json", "unparseable")


@dataclass(frozen=True)
class Faults:
    """Which chat requests fail, and how: deterministic by request number (1-based, in arrival order).

    Attributes:
        rates: fault kind (:data:`KINDS`) -> fraction of requests; request ``n`` draws
            ``u = sha256(seed:n)`` in [0, 1) and takes the kind whose cumulative band (in
            :data:`KINDS` order) holds it.
        at: request number -> fault kind (wins over ``rates``).
        seed: seed of the draws.

    Raises:
        ValueError: an unknown kind, a rate outside [0, 1] or rates summing above 1.
    """

    rates: Mapping[str, float] = field(default_factory=dict)
    at: Mapping[int, str] = field(default_factory=dict)
    seed: int = 0

    def __post_init__(self) -> None:
        unknown = sorted({*self.rates, *self.at.values()} - set(KINDS))
        if unknown:
            raise ValueError(f"unknown fault kind(s) {unknown}; expected some of {KINDS}")
        if any(not 0 <= r <= 1 for r in self.rates.values()) or sum(self.rates.values()) > 1:
            raise ValueError(f"fault rates must be in [0, 1] and sum to at most 1: {dict(self.rates)}")

    def kind(self, n: int) -> str | None:
        """The fault of request ``n``, or None."""
        if n in self.at:
            return self.at[n]
        u = int.from_bytes(hashlib.sha256(f"{self.seed}:{n}".encode()).digest()[:8], "big") / 2.0**64
        edge = 0.0
        for kind in KINDS:
            edge += self.rates.get(kind, 0.0)
            if u < edge:
                return kind
        return None


class _HTTPServer(ThreadingHTTPServer):
    """``ThreadingHTTPServer`` that reports each accepted connection to ``track`` (so that
    :meth:`OpenAIServer.close` can end them all) and keeps a client's disconnect off stderr."""

    daemon_threads = False  # every handler thread is joined by server_close()
    request_queue_size = 256  # a burst of connections is queued, not dropped (listen backlog)

    def __init__(self, address: tuple[str, int], handler, track) -> None:
        self._track = track
        super().__init__(address, handler)

    def process_request(self, request, client_address) -> None:
        self._track(request, opened=True)  # in the accepting thread: no connection escapes close()
        super().process_request(request, client_address)

    def shutdown_request(self, request) -> None:
        self._track(request, opened=False)
        super().shutdown_request(request)

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], OSError):  # a client that left is no error; a bug is
            super().handle_error(request, client_address)


class OpenAIServer:
    """A running server (see the module docstring); use :func:`openai_server`.

    Attributes:
        api_base: ``http://127.0.0.1:PORT/v1``. port: the port. model: the name ``/v1/models`` lists.
    """

    def __init__(self, *, port: int = 0, latency: float = 0.0, max_in_flight: int | None = None,
                 retry_after: float = 0.5, rate_limit_forever: bool = False, faults: Faults | None = None,
                 max_requests: int = 10_000, max_lifetime: float = 300.0, model: str = "mock") -> None:
        self.latency, self.max_in_flight, self.retry_after = float(latency), max_in_flight, float(retry_after)
        self.rate_limit_forever, self.faults, self.model = rate_limit_forever, faults or Faults(), model
        self.max_requests, self.max_lifetime = int(max_requests), float(max_lifetime)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._conns: set[socket.socket] = set()
        self._counts: dict[str, Any] = {
            "requests": 0, "answered": 0, "in_flight": 0, "max_in_flight": 0, "rate_limited": 0, "over_bound": 0,
            "bad_request": 0, "stopped": 0, "client_gone": 0, "models": 0, "prompt_tokens": 0,
            "completion_tokens": 0, "faults": dict.fromkeys(KINDS, 0)}
        self._timeline: list[dict] = []
        self._closed = False
        self._httpd = _HTTPServer(("127.0.0.1", port), handler_class(self), self._track)
        self._wake_r, self._wake_w = os.pipe()  # readable once stopping: wakes every waiting request
        self.port = self._httpd.server_address[1]
        self.api_base = f"http://127.0.0.1:{self.port}/v1"
        self._t0 = time.monotonic()
        self._serving = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                         name=f"openai-server-{self.port}", daemon=True)
        self._stopper = threading.Thread(target=self._stop_after_lifetime, name=f"openai-server-{self.port}-stop",
                                         daemon=True)
        self._serving.start()
        self._stopper.start()

    # -- lifecycle ------------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop answering: waiting requests wake and get 503; the listener stops (idempotent)."""
        if not self._stop.is_set():
            self._stop.set()
            with contextlib.suppress(OSError):
                os.write(self._wake_w, b"x")

    def _stop_after_lifetime(self) -> None:
        self._stop.wait(self.max_lifetime)
        self.stop()
        self._httpd.shutdown()  # returns once serve_forever has returned

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the server stops (a bound, :meth:`stop`); True when it has."""
        return self._stop.wait(timeout)

    def close(self) -> None:
        """Stop, close every connection and the listener, join every thread (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self.stop()
        self._stopper.join()
        self._serving.join()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:  # e.g. idle keep-alive connections, whose threads wait for a next request
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self._httpd.server_close()  # joins the handler threads
        os.close(self._wake_r)
        os.close(self._wake_w)

    # -- statistics -----------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """A snapshot: ``requests`` (chat requests received), ``answered`` (200 with an answer),
        ``in_flight`` / ``max_in_flight`` (requests being served now / most at once),
        ``rate_limited`` (429s), ``faults`` (kind -> count), ``over_bound`` (refused past
        ``max_requests``), ``stopped`` (answered 503 because the server stopped), ``client_gone``
        (the client left before the answer), ``models`` (``GET /v1/models``), ``prompt_tokens`` /
        ``completion_tokens`` (usage reported, summed), ``uptime_s``, and ``timeline``: per chat
        request ``{"n", "start", "end", "status", "outcome"}``: seconds since the server started at
        its arrival and when its reply was ready (counted then, before it is written: a client
        holding its reply finds it here), the HTTP status (0: none sent) and ``ok``,
        ``rate_limited``, ``over_bound``, ``stopped``, ``client_gone``, ``bad_request`` or a fault
        kind."""
        with self._lock:
            out = {**self._counts, "faults": dict(self._counts["faults"])}
            out["timeline"] = [dict(t) for t in self._timeline]
        out["uptime_s"] = round(time.monotonic() - self._t0, 4)
        return out

    def _track(self, conn: socket.socket, *, opened: bool) -> None:
        """Keep the set of open connections (closed at :meth:`close`)."""
        with self._lock:
            (self._conns.add if opened else self._conns.discard)(conn)

    def _count(self, key: str) -> None:
        with self._lock:
            self._counts[key] += 1

    def _now(self) -> float:
        return round(time.monotonic() - self._t0, 6)

    def _admit(self) -> tuple[int, str | None]:
        """Count a chat request; its number and its refusal (``over_bound``, ``rate_limited``) or None."""
        with self._lock:
            c = self._counts
            c["requests"] += 1
            n = c["requests"]
            if n > self.max_requests or self._stop.is_set():
                return n, "over_bound"
            if self.rate_limit_forever or (self.max_in_flight is not None and c["in_flight"] >= self.max_in_flight):
                return n, "rate_limited"
            c["in_flight"] += 1
            c["max_in_flight"] = max(c["max_in_flight"], c["in_flight"])
            return n, None

    def _done(self, entry: dict, *, admitted: bool, usage: dict | None = None) -> None:
        with self._lock:
            c = self._counts
            if admitted:
                c["in_flight"] -= 1
            if entry["outcome"] in KINDS:
                c["faults"][entry["outcome"]] += 1
            elif entry["outcome"] == "ok":
                c["answered"] += 1
            elif entry["outcome"] in c:
                c[entry["outcome"]] += 1
            if usage:
                c["prompt_tokens"] += usage["prompt_tokens"]
                c["completion_tokens"] += usage["completion_tokens"]
            self._timeline.append({**entry, "end": self._now()})

    def _pause(self, conn: socket.socket, seconds: float | None) -> str:
        """Wait ``seconds`` (None: without end) without polling; ``"done"``, ``"stopped"`` (the
        server stops) or ``"gone"`` (the client closed its connection)."""
        deadline = None if seconds is None else time.monotonic() + seconds
        poller = select.poll()  # not select.select: it fails on a descriptor number >= 1024
        poller.register(self._wake_r, select.POLLIN)
        poller.register(conn, select.POLLIN)
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return "done"
            if self._stop.is_set():
                return "stopped"
            ready = dict(poller.poll(None if left is None else max(1, int(left * 1000) + 1)))
            if self._wake_r in ready:
                return "stopped"
            if conn.fileno() in ready:
                try:
                    gone = conn.recv(1, socket.MSG_PEEK) == b""
                except OSError:
                    gone = True
                if gone:
                    return "gone"
                poller.unregister(conn)  # data, not EOF: stop watching the connection


@contextlib.contextmanager
def openai_server(*, latency: float = 0.0, max_in_flight: int | None = None, retry_after: float = 0.5,
                  rate_limit_forever: bool = False, faults: Faults | Mapping[str, float] | None = None,
                  max_requests: int = 10_000, max_lifetime: float = 300.0, port: int = 0,
                  model: str = "mock") -> Iterator[OpenAIServer]:
    """An :class:`OpenAIServer` on ``127.0.0.1:port`` (0: a free port) for the ``with`` block.

    Args:
        latency: seconds before each chat answer (>= 0).
        max_in_flight: requests served at once before a 429 (None: no limit).
        retry_after: seconds in the 429's ``Retry-After`` header.
        rate_limit_forever: every chat request gets a 429.
        faults: a :class:`Faults`, or its ``rates`` (kind -> fraction).
        max_requests / max_lifetime: bounds; past either the server refuses (503) and stops.
        model: the name ``GET /v1/models`` lists (any model name is answered).

    Raises:
        ValueError: a negative latency, a max_in_flight below 1, a bad fault spec.
        OSError: the port cannot be bound.
    """
    if latency < 0 or retry_after < 0 or (max_in_flight is not None and max_in_flight < 1):
        raise ValueError(f"latency and retry_after must be >= 0 and max_in_flight >= 1 "
                         f"(got {latency}, {retry_after}, {max_in_flight})")
    spec = faults if isinstance(faults, Faults) else Faults(rates=dict(faults or {}))
    srv = OpenAIServer(port=port, latency=latency, max_in_flight=max_in_flight, retry_after=retry_after,
                       rate_limit_forever=rate_limit_forever, faults=spec, max_requests=max_requests,
                       max_lifetime=max_lifetime, model=model)
    try:
        yield srv
    finally:
        srv.close()


def main(argv: list[str] | None = None) -> int:
    """``python -m personalign.testing.openai_server``: serve until SIGTERM/SIGINT or a bound."""
    import argparse
    import signal

    ap = argparse.ArgumentParser(prog="python -m personalign.testing.openai_server", description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0, help="Port on 127.0.0.1 (0: a free one).")
    ap.add_argument("--latency", type=float, default=0.0, help="Seconds before each answer.")
    ap.add_argument("--max-in-flight", type=int, default=None, help="Requests at once before a 429.")
    ap.add_argument("--retry-after", type=float, default=0.5, help="Seconds in a 429's Retry-After.")
    ap.add_argument("--rate-limit-forever", action="store_true", help="Every chat request gets a 429.")
    ap.add_argument("--fault", action="append", default=[], metavar="KIND=RATE", help=f"Fault rate; KIND in {KINDS}.")
    ap.add_argument("--seed", type=int, default=0, help="Seed of the fault draws.")
    ap.add_argument("--max-requests", type=int, default=10_000)
    ap.add_argument("--max-lifetime", type=float, default=3600.0, help="Seconds before the server stops itself.")
    args = ap.parse_args(argv)
    try:
        rates = {k: float(v) for k, _, v in (f.partition("=") for f in args.fault)}
        faults = Faults(rates=rates, seed=args.seed)
    except ValueError as exc:
        sys.stderr.write(f"error: --fault: {exc}\n")
        return 2
    with openai_server(latency=args.latency, max_in_flight=args.max_in_flight, retry_after=args.retry_after,
                       rate_limit_forever=args.rate_limit_forever, faults=faults, max_requests=args.max_requests,
                       max_lifetime=args.max_lifetime, port=args.port) as srv:
        signal.signal(signal.SIGTERM, lambda *_: srv.stop())
        print(json.dumps({"api_base": srv.api_base, "port": srv.port}), flush=True)
        try:
            srv.wait()
        except KeyboardInterrupt:
            pass
    print(json.dumps(srv.stats()), flush=True)
    return 0


class _CallableModule(types.ModuleType):
    """This module, callable as :func:`openai_server`: ``from personalign.testing import
    openai_server`` gives the module (a package's submodule shadows a function of its name), and
    ``openai_server(latency=...)`` still starts a server."""

    def __call__(self, **kwargs: Any):
        return openai_server(**kwargs)


sys.modules[__name__].__class__ = _CallableModule

__all__ = ["KINDS", "Faults", "OpenAIServer", "openai_server"]

if __name__ == "__main__":
    raise SystemExit(main())
