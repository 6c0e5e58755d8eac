"""``personalign label serve``: a local annotation page for a rows file (Starlette + uvicorn).

The server listens on 127.0.0.1 only and answers its own page only
(:class:`personalign.origin.OwnOrigin`): requests addressed to 127.0.0.1 or localhost (a page
elsewhere cannot reach it through DNS rebinding), whose ``Origin``, when the browser sends one, is
the page's own (a page on another port or site can neither read the rows nor post a label, not
even as a form or a ``no-cors`` fetch). Labels are JSON POSTs of at most :data:`MAX_BODY` bytes.
The page is one HTML file with its script inline: no CDN, no web font, no network (its
Content-Security-Policy forbids any other origin).

HTTP API (JSON; errors are ``{"error": "one line"}``: 400 a bad annotator, row id or label
value, a body that is not JSON or nested too deeply, or another host; 403 another origin; 413 a
body over :data:`MAX_BODY` (refused unread); 415 not JSON; 503 the store refused -- in every
error case nothing was stored):

* ``GET /api/task``: the stage's fields and choices (:meth:`~personalign.labels.spec.LabelSpec.page`),
  ``total``, ``annotators`` (``[{"name", "done", "skipped"}]``), ``annotator`` (``--annotator``),
  ``rows`` (the file's name), ``export_hint``.
* ``GET /api/state?annotator=NAME``: :meth:`~personalign.labels.queue.LabelQueue.state`.
* ``POST /api/label`` ``{"annotator", "row_id", "value"}``; ``POST /api/skip`` ``{"annotator",
  "row_id"}``; ``POST /api/undo`` ``{"annotator"}``: the state after it, once committed.
"""

from __future__ import annotations

import errno
import json
import socket
from importlib import resources
from typing import Any, Callable

from personalign.errors import ConfigurationError

HOST = "127.0.0.1"
DEFAULT_PORT = 8765
MAX_BODY = 1024 * 1024  # bytes of a POST's body; a label is well under 1 KiB
CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
       "img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


def page_html() -> str:
    """The annotation page (``personalign/labels/page.html``)."""
    return resources.files("personalign.labels").joinpath("page.html").read_text(encoding="utf-8")


def build_app(queue, *, annotator: str | None = None, export_hint: str = ""):
    """The Starlette app serving ``queue`` (a :class:`~personalign.labels.queue.LabelQueue`)."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.middleware import Middleware
    from starlette.responses import HTMLResponse, JSONResponse
    from starlette.routing import Route

    from personalign.origin import OwnOrigin
    from personalign.labels.spec import LabelValueError
    from personalign.labels.store import StoreError

    html = page_html()
    headers = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}

    def answer(data: Any, status: int = 200) -> JSONResponse:
        return JSONResponse(data, status_code=status, headers=headers)

    async def call(fn: Callable, *args) -> JSONResponse:
        try:
            return answer(await run_in_threadpool(fn, *args))
        except LabelValueError as exc:
            return answer({"error": str(exc)}, 400)
        except StoreError as exc:
            return answer({"error": f"not saved: {exc}"}, 503)

    async def body(request) -> dict | JSONResponse:
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            return answer({"error": "send JSON (Content-Type: application/json)"}, 415)
        too_big = answer({"error": f"the request body is over {MAX_BODY // 1024} KiB"}, 413)
        length = request.headers.get("content-length", "")
        if length.isdigit() and int(length) > MAX_BODY:  # refused before a byte of it is read
            return too_big
        raw = bytearray()
        async for chunk in request.stream():  # a chunked body: read up to the bound, no further
            raw += chunk
            if len(raw) > MAX_BODY:
                return too_big
        try:
            data = json.loads(raw)
        except ValueError:
            return answer({"error": "the request body is not valid JSON"}, 400)
        except RecursionError:
            return answer({"error": "the request body is JSON nested too deeply"}, 400)
        if not isinstance(data, dict):
            return answer({"error": "expected a JSON object"}, 400)
        return data

    async def index(request):
        return HTMLResponse(html, headers={**headers, "Content-Security-Policy": CSP})

    async def task(request):
        def info():
            return {**queue.spec.page(), "total": len(queue.rows), "annotators": queue.annotators(),
                    "annotator": annotator, "rows": queue.rows.path.name, "export_hint": export_hint}
        return await call(info)

    async def state(request):
        return await call(queue.state, request.query_params.get("annotator"))

    def post(action: Callable, *fields: str):
        async def endpoint(request):
            data = await body(request)
            if isinstance(data, JSONResponse):
                return data
            missing = [f for f in ("annotator", *fields) if f not in data]
            if missing:
                return answer({"error": f"missing {', '.join(missing)}"}, 400)
            return await call(action, data["annotator"], *(data[f] for f in fields))
        return endpoint

    routes = [Route("/", index), Route("/api/task", task), Route("/api/state", state),
              Route("/api/label", post(queue.label, "row_id", "value"), methods=["POST"]),
              Route("/api/skip", post(queue.skip, "row_id"), methods=["POST"]),
              Route("/api/undo", post(queue.undo), methods=["POST"])]
    return Starlette(routes=routes, middleware=[Middleware(OwnOrigin, hosts=[HOST, "localhost"], what="label serve")])


def bind(port: int) -> socket.socket:
    """A listening TCP socket on 127.0.0.1:``port`` (0: a free port).

    Raises:
        ConfigurationError: the port is in use or not allowed (one line naming it).
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart need not wait out TIME_WAIT
    try:
        sock.bind((HOST, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigurationError(f"port {port} on {HOST} is in use (another label serve?); choose another "
                                     "with --port, or --port 0 for a free one") from None
        raise ConfigurationError(f"cannot listen on {HOST}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(False)
    return sock


def open_queue(rows, stage, store_url: str | None = None):
    """The :class:`~personalign.labels.queue.LabelQueue` of a rows file for a stage, on a store.

    Args:
        rows: the rows JSONL (every row: a unique string ``id`` and the stage's inputs).
        stage: a stage reference (:func:`personalign.stages.resolve_stage`).
        store_url: a SQLAlchemy URL; None: :func:`~personalign.labels.store.default_store_url`
            (its folder is created).

    Raises:
        ConfigurationError: an unknown stage, an output that cannot be labelled by hand, a bad URL.
        DataError: a row that does not fit the stage (file, line, field).
        StoreError: a store that is locked, read-only or unreachable.
    """
    from personalign.labels.queue import LabelQueue
    from personalign.labels.rowfile import read_rows
    from personalign.labels.spec import label_spec
    from personalign.labels.store import LabelStore, default_store_url
    from personalign.stages import resolve_stage

    st = resolve_stage(stage)
    spec = label_spec(st)
    rowfile = read_rows(rows, st, spec)
    store = LabelStore(store_url or default_store_url(), write=True, create_folder=store_url is None)
    return LabelQueue(spec, rowfile, store)


def serve(rows, stage, *, store_url: str | None = None, port: int = DEFAULT_PORT, annotator: str | None = None,
          echo: Callable[[str], None] = print) -> None:
    """Serve the annotation page for ``rows`` until interrupted (Ctrl-C / SIGTERM).

    Prints one line, ``serving N rows of stage S at http://127.0.0.1:PORT/ ...``, when the page is
    reachable. Raises what :func:`open_queue` and :func:`bind` raise, before anything is served;
    a bad ``annotator`` is a ConfigurationError.
    """
    import uvicorn

    from personalign.labels.queue import check_annotator
    from personalign.labels.spec import LabelValueError

    if annotator is not None:
        try:
            check_annotator(annotator)
        except LabelValueError as exc:
            raise ConfigurationError(f"--annotator: {exc}") from None
    sock = bind(port)  # a port in use is refused before the store is opened or created
    try:
        queue = open_queue(rows, stage, store_url)
    except BaseException:
        sock.close()
        raise
    try:
        store_opt = "" if store_url is None else f" --store '{queue.store.shown}'"
        hint = f"personalign label export --rows {rows}{store_opt} --out labelled.jsonl"
        app = build_app(queue, annotator=annotator, export_hint=hint)
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
        url = f"http://{HOST}:{sock.getsockname()[1]}/"
        echo(f"serving {len(queue.rows)} rows of stage {queue.spec.stage} at {url} (labels go to "
             f"{queue.store.shown}); Ctrl-C stops")
        server.run(sockets=[sock])
    finally:
        sock.close()
        queue.store.close()


__all__ = ["DEFAULT_PORT", "HOST", "MAX_BODY", "bind", "build_app", "open_queue", "page_html", "serve"]
