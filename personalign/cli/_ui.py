"""``personalign ui``: MLflow's UI on the project's store, offline, on loopback only.

Plain ``mlflow ui`` imports litellm, which fetches a remote model cost map at start (a stall, or
a network call, on every launch). This command starts the same server (``mlflow server``) with
personalign's offline environment (:mod:`personalign._env`: ``LITELLM_LOCAL_MODEL_COST_MAP``,
telemetry off), on ``127.0.0.1`` only, with the store personalign writes to, and prints the URL of
the experiment's runs page to open. The server answers its own page only (``http://127.0.0.1:PORT``
as origin and host: :mod:`personalign._mlflow_ui`); MLflow's own check lets a page on any other
loopback port read and write the store.

It opens only an existing MLflow store (:func:`check_store`: an SQLite file holding MLflow's
tables, read-only; a file-store directory with an experiment folder) on a free port
(:func:`check_port`), all before the server starts; the server's output goes to a log file named
on start, and a server that exits on its own with an error is one line naming it. The server
runs in its own process group under a small leader (:data:`GROUP_LEADER`) that the kernel signals
when this command dies, even by SIGKILL, and that stops the whole group.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from personalign.errors import PersonalignError
from personalign.redaction import redact

LOOPBACK = "127.0.0.1"


def ui_command(tracking_uri: str | None = None, port: int = 5000) -> tuple[list[str], dict[str, str]]:
    """``(argv, env)`` of the MLflow UI server for ``tracking_uri`` (default: personalign's store,
    ``sqlite:///<runs>/mlflow.db``) on ``http://127.0.0.1:<port>``, answering that origin and host
    only (:mod:`personalign._mlflow_ui`: ``mlflow server`` behind an origin check, since MLflow's
    own lets every loopback port through); ``env`` is this process's environment plus the offline
    defaults (the user's explicit values win), without ``MLFLOW_SERVER_DISABLE_SECURITY_MIDDLEWARE``."""
    from personalign.settings import OFFLINE_DEFAULTS
    from personalign.settings import default_tracking_uri, runs_dir

    uri = tracking_uri or default_tracking_uri()
    own = f"{LOOPBACK}:{port}"
    argv = [sys.executable, "-m", "personalign._mlflow_ui", "--backend-store-uri", uri, "--host", LOOPBACK,
            "--port", str(port), "--workers", "1", "--allowed-hosts", own, "--cors-allowed-origins", f"http://{own}",
            "--x-frame-options", "SAMEORIGIN"]
    if uri.startswith("sqlite:"):  # artifacts uploaded through the UI go beside the others, not ./mlartifacts
        argv += ["--artifacts-destination", (runs_dir() / "mlartifacts").resolve().as_uri()]
    env = {**OFFLINE_DEFAULTS, **os.environ}
    env.pop("MLFLOW_SERVER_DISABLE_SECURITY_MIDDLEWARE", None)  # the flags above, not the user's environment
    return argv, env


def shown(text: object) -> str:
    """``text`` redacted, control characters (a newline, an escape) as Python escapes: one line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in redact(str(text)))


SQLITE_MAGIC = b"SQLite format 3\x00"
MLFLOW_TABLES = ("alembic_version", "experiments", "runs", "metrics", "params", "tags")
"""Tables every MLflow SQLite store has (``alembic_version``: MLflow's schema version, one row)."""
SERVER_SCHEMES = ("postgresql", "mysql", "mssql")  # SQLAlchemy stores MLflow's server opens itself


def parse_port(value: str) -> int:
    """``--port`` as an int from 1 to 65535.

    Raises:
        ConfigurationError: one line naming the flag and the value.
    """
    from personalign.errors import ConfigurationError

    text = str(value).strip()
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 65535:  # not '５０００
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

    flag = f"--tracking-uri {shown(uri)!r}"
    if uri.startswith(("http://", "https://")):
        raise ConfigurationError(f"{shown(uri)} is an MLflow server already: open it in a browser")
    scheme = urlparse(uri).scheme if "://" in uri or uri.startswith("sqlite:") else ""
    if scheme == "sqlite":
        db = Path(uri[len("sqlite:///"):].split("?", 1)[0]) if uri.startswith("sqlite:///") else None
        if db is None or not str(db):
            raise ConfigurationError(f"{flag}: give an SQLite file as sqlite:///PATH")
        try:
            exists, regular = db.exists(), db.is_file()
        except OSError as exc:  # a name too long for the file system
            raise ConfigurationError(f"{flag}: cannot use {shown(str(db)[:80])}: {exc.strerror or exc}") from None
        if not exists:
            raise ConfigurationError(f"no MLflow store at {shown(db)}: run a command first (e.g. `personalign "
                                     "compare`) or pass --tracking-uri URI")
        if not regular:  # checked before opening: a FIFO would block
            raise ConfigurationError(f"{flag}: {shown(db)} is not an SQLite database (not a regular file)")
        try:
            with open(db, "rb") as fh:
                head = fh.read(len(SQLITE_MAGIC))
        except OSError as exc:
            raise ConfigurationError(f"{flag}: cannot read {shown(db)}: {exc.strerror or exc}") from None
        if head != SQLITE_MAGIC:
            raise ConfigurationError(f"{flag}: {shown(db)} is not an SQLite database")
        _check_mlflow_tables(db, flag)
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
        raise ConfigurationError(f"{flag}: the store directory {shown(path)} {what}")
    if not any(d.name.isdigit() and (d / "meta.yaml").is_file() for d in _children(path)):
        raise ConfigurationError(f"{flag}: {shown(path)} is not an MLflow file store (no experiment folder "
                                 "<id>/meta.yaml in it)")
    if os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() not in ("true", "1"):
        raise ConfigurationError(f"{flag}: MLflow serves a file store only with MLFLOW_ALLOW_FILE_STORE=true "
                                 "(or move it to SQLite: mlflow migrate-filestore)")


def _children(path: Path) -> list[Path]:
    """The folders in ``path`` (at most 10,000 entries looked at; unreadable: none)."""
    import itertools

    try:
        with os.scandir(path) as entries:
            return [Path(e.path) for e in itertools.islice(entries, 10_000) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _check_mlflow_tables(db: Path, flag: str) -> None:
    """Open ``db`` read-only and require MLflow's tables (:data:`MLFLOW_TABLES`) and its schema
    version: MLflow would otherwise create its ~60 tables in any SQLite file it is given.

    Raises:
        ConfigurationError: not a database (garbage after the header), unreadable, or without them.
    """
    import sqlite3
    from urllib.parse import quote

    from personalign.errors import ConfigurationError

    try:
        con = sqlite3.connect(f"file:{quote(str(db.resolve()))}?mode=ro&immutable=1", uri=True, timeout=5)
        try:
            names = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            versioned = "alembic_version" in names and con.execute("SELECT count(*) FROM alembic_version").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error as exc:
        raise ConfigurationError(f"{flag}: {shown(db)} is not a readable SQLite database ({shown(exc)})") from None
    missing = [t for t in MLFLOW_TABLES if t not in names] or ([] if versioned else ["alembic_version row"])
    if missing:
        raise ConfigurationError(f"{flag}: {shown(db)} is not an MLflow store (no table {', '.join(missing)}); "
                                 "personalign ui opens only an existing MLflow store")


def check_port(port: int) -> None:
    """Check ``127.0.0.1:port`` is free: bind it (with ``SO_REUSEADDR``, as the server does) and let go.

    Raises:
        ConfigurationError: one line naming ``--port`` and why (in use, not allowed).
    """
    import socket

    from personalign.errors import ConfigurationError

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((LOOPBACK, port))
        except OSError as exc:
            raise ConfigurationError(f"--port {port}: cannot listen on {LOOPBACK}:{port} ({exc.strerror or exc}); "
                                     "give another port") from None


GROUP_LEADER = """
import os, signal, subprocess, sys, time
stopping = []
signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(signum))
signal.signal(signal.SIGHUP, lambda signum, frame: stopping.append(signum))
if sys.platform.startswith("linux"):
    import ctypes
    ctypes.CDLL(None).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
if os.getppid() != int(sys.argv[1]):
    sys.exit(143)
server = subprocess.Popen(sys.argv[2:])
while server.poll() is None and not stopping:
    time.sleep(0.2)
if stopping:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.killpg(0, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while server.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    os.killpg(0, signal.SIGKILL)
code = server.returncode
sys.exit(code if code >= 0 else 128 - code)
"""
"""The server's process-group leader (``python -c GROUP_LEADER PARENT_PID ARGV...``): asks the
kernel for SIGTERM when ``personalign ui`` dies (Linux ``prctl(PR_SET_PDEATHSIG)``: also when it
is killed by SIGKILL), does not start if it died already, runs the server, and on SIGTERM or
SIGHUP sends SIGTERM to the whole group, then SIGKILL to what is left (at most 10 s later); exits
with the server's code."""


class ServerExited(PersonalignError):
    """The MLflow server stopped on its own with an error (its output is in the log file named)."""

    exit_code = 1


def run_ui(*, tracking_uri: str | None, port: str | int) -> None:
    """Run the MLflow UI server until Ctrl-C, SIGTERM or SIGHUP (exit 130, 143, 129), after
    printing the URL of the experiment's runs page (:func:`personalign.tracking.runs_page_url`:
    the runs list with personalign's metric columns, not MLflow's GenAI overview) and the server's
    log file (removed when the command is stopped; kept when the server fails). The server runs in
    its own process group (:data:`GROUP_LEADER`), stopped whole when this command stops: ``mlflow
    server`` leaves its workers (uvicorn, huey consumers) running when only its own process is
    signalled.

    Raises:
        ConfigurationError: a bad or busy ``--port`` (:func:`check_port`); a URI :func:`check_store`
            refuses. Both before the server starts.
        ServerExited: the server stopped on its own with a non-zero code (naming its log file).
    """
    import subprocess
    import tempfile

    from personalign.settings import default_tracking_uri
    from personalign.tracking import runs_page_url

    number = parse_port(str(port))
    uri = tracking_uri or default_tracking_uri()
    check_store(uri)
    check_port(number)
    argv, env = ui_command(tracking_uri, number)
    url = runs_page_url(uri, f"http://{LOOPBACK}:{number}")
    fd, log = tempfile.mkstemp(prefix="personalign-ui-", suffix=".log")
    sys.stderr.write(f"MLflow UI for {shown(uri)}, offline; Ctrl-C stops (server log: {log}). Open:\n  {url}\n")
    sys.stderr.flush()

    # Ctrl-C, SIGTERM and SIGHUP raise Interrupted here (personalign.cli._signals, as for every command)
    with os.fdopen(fd, "wb") as out:
        server = subprocess.Popen([sys.executable, "-c", GROUP_LEADER, str(os.getpid()), *argv], env=env,
                                  stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    stopped = False
    try:
        code = server.wait()
    except KeyboardInterrupt:
        stopped = True
        raise
    finally:
        _stop_group(server)
        if stopped:
            Path(log).unlink(missing_ok=True)
    if code != 0:
        raise ServerExited(f"the MLflow server stopped with exit code {code}; its output is in {log}")
    Path(log).unlink(missing_ok=True)


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
