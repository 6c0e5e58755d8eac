"""``personalign ui``: MLflow's UI on the project's store, offline, on loopback only.

Plain ``mlflow ui`` imports litellm, which fetches a remote model cost map at start (a stall, or
a network call, on every launch). This command starts the same server (``mlflow server``) with
personalign's offline environment (:mod:`personalign._env`: ``LITELLM_LOCAL_MODEL_COST_MAP``,
telemetry off), on ``127.0.0.1`` only, with the store personalign writes to, and prints the URL of
the experiment's runs page to open.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from personalign.redaction import redact

LOOPBACK = "127.0.0.1"


def ui_command(tracking_uri: str | None = None, port: int = 5000) -> tuple[list[str], dict[str, str]]:
    """``(argv, env)`` of the MLflow UI server for ``tracking_uri`` (default: personalign's store,
    ``sqlite:///<runs>/mlflow.db``) on ``http://127.0.0.1:<port>``; ``env`` is this process's
    environment plus the offline defaults (the user's explicit values win)."""
    from personalign.settings import OFFLINE_DEFAULTS
    from personalign.settings import default_tracking_uri, runs_dir

    uri = tracking_uri or default_tracking_uri()
    argv = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", uri, "--host", LOOPBACK,
            "--port", str(port), "--workers", "1"]
    if uri.startswith("sqlite:"):  # artifacts uploaded through the UI go beside the others, not ./mlartifacts
        argv += ["--artifacts-destination", (runs_dir() / "mlartifacts").resolve().as_uri()]
    env = {**OFFLINE_DEFAULTS, **os.environ}
    return argv, env


SQLITE_MAGIC = b"SQLite format 3\x00"
SERVER_SCHEMES = ("postgresql", "mysql", "mssql")  # SQLAlchemy stores MLflow's server opens itself


def parse_port(value: str) -> int:
    """``--port`` as an int from 1 to 65535.

    Raises:
        ConfigurationError: one line naming the flag and the value.
    """
    from personalign.errors import ConfigurationError

    text = str(value).strip()
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise ConfigurationError(f"--port {value!r} is not a TCP port: give an integer from 1 to 65535")
    return int(text)


def check_store(uri: str) -> None:
    """Check, without creating anything, that ``uri`` names an existing MLflow store the UI can
    open: an SQLite database file (``sqlite:///PATH``), a file-store directory (a path or
    ``file://``), or a database server URI (postgresql, mysql, mssql).

    Raises:
        ConfigurationError: an ``http(s)://`` server (open it directly); an unknown scheme; a
            missing store; a file that is not an SQLite database; a path that is not a directory.
    """
    from urllib.parse import urlparse

    from personalign.errors import ConfigurationError

    flag = f"--tracking-uri {redact(uri)!r}"
    if uri.startswith(("http://", "https://")):
        raise ConfigurationError(f"{redact(uri)} is an MLflow server already: open it in a browser")
    scheme = urlparse(uri).scheme if "://" in uri or uri.startswith("sqlite:") else ""
    if scheme == "sqlite":
        db = Path(uri[len("sqlite:///"):].split("?", 1)[0]) if uri.startswith("sqlite:///") else None
        if db is None or not str(db):
            raise ConfigurationError(f"{flag}: give an SQLite file as sqlite:///PATH")
        if not db.exists():
            raise ConfigurationError(f"no MLflow store at {db}: run a command first (e.g. `personalign compare`) "
                                     "or pass --tracking-uri URI")
        if not db.is_file():  # checked before opening: a FIFO would block
            raise ConfigurationError(f"{flag}: {db} is not an SQLite database (not a regular file)")
        try:
            with open(db, "rb") as fh:
                head = fh.read(len(SQLITE_MAGIC))
        except OSError as exc:
            raise ConfigurationError(f"{flag}: cannot read {db}: {exc.strerror or exc}") from None
        if head != SQLITE_MAGIC:
            raise ConfigurationError(f"{flag}: {db} is not an SQLite database")
        return
    if scheme in SERVER_SCHEMES or scheme.split("+")[0] in SERVER_SCHEMES:
        from personalign.tracking import check_tracking_uri

        check_tracking_uri(uri)  # bounded: MLflow retries a refused database for minutes
        return
    if scheme not in ("", "file"):
        raise ConfigurationError(f"{flag}: unsupported scheme '{scheme}'; use sqlite:///PATH, a store directory, "
                                 "postgresql://, mysql:// or mssql://")
    path = Path(urlparse(uri).path if scheme == "file" else uri).expanduser()
    if not path.is_dir():
        what = "does not exist" if not path.exists() else "is not a directory"
        raise ConfigurationError(f"{flag}: the store directory {path} {what}")


def run_ui(*, tracking_uri: str | None, port: str | int) -> None:
    """Run the MLflow UI server until Ctrl-C or SIGTERM, after printing the URL of the experiment's
    runs page (:func:`personalign.tracking.runs_page_url`: the runs list with personalign's metric
    columns, not MLflow's GenAI overview). The server runs in its own process group, stopped whole
    when this command stops: ``mlflow server`` leaves its workers (uvicorn, huey consumers) running
    when only its own process is signalled.

    Raises:
        ConfigurationError: a bad ``--port``; a URI :func:`check_store` refuses.
    """
    from personalign.settings import default_tracking_uri
    from personalign.tracking import runs_page_url

    number = parse_port(str(port))
    uri = tracking_uri or default_tracking_uri()
    check_store(uri)
    argv, env = ui_command(tracking_uri, number)
    url = runs_page_url(uri, f"http://{LOOPBACK}:{number}")
    sys.stderr.write(f"MLflow UI for {redact(uri)}, offline; Ctrl-C stops. Open:\n  {url}\n")
    sys.stderr.flush()
    import subprocess

    server = subprocess.Popen(argv, env=env, start_new_session=True)
    try:
        server.wait()
    finally:
        _stop_group(server)


def _stop_group(server, grace: float = 10.0) -> None:
    """SIGTERM to the server's process group, SIGKILL after ``grace`` seconds; returns once no process
    of the group is left (its workers may outlive the leader a moment, until they are reaped), or
    after SIGKILL's 5 s."""
    import signal
    import subprocess
    import time

    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        deadline = time.monotonic() + wait
        try:
            os.killpg(server.pid, sig)
        except ProcessLookupError:
            return
        try:
            server.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        while True:  # the leader is gone; its workers may not be yet
            try:
                os.killpg(server.pid, 0)
            except ProcessLookupError:
                return
            if time.monotonic() >= deadline:
                break
            time.sleep(0.05)
