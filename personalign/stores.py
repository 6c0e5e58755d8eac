"""Checks of the stores a command opens, run before any work, and the bound of every wait on them.

A tracking store that cannot answer must fail in one line within seconds, not hang:

* :func:`check_tracking_uri` -- before MLflow opens a store: an ``http(s)://`` server must answer
  an HTTP request within :data:`REACH_TIMEOUT_S` (:func:`check_reachable`); a ``sqlite:///`` store
  must be a regular SQLite file or absent in a writable directory (:func:`check_sqlite_file`),
  because MLflow retries a store it cannot open ten times with backoff (about 100 s) before it fails.
* :func:`bound_mlflow_http` -- MLflow's own HTTP client (used for every call to a server after the
  check) waits :data:`MLFLOW_HTTP_TIMEOUT_S` per request and retries :data:`MLFLOW_HTTP_MAX_RETRIES`
  times (MLflow's defaults: 120 s and 7 retries with backoff, several minutes); a value the user
  set in the environment is kept.
* :func:`bounded_lock` -- a file lock held by another process is waited for at most
  :data:`LOCK_TIMEOUT_S`, then one line names the lock file and the process holding it.

Every refusal is a one-line :class:`~personalign.errors.ConfigurationError` (exit 2 in the CLI).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlsplit

from personalign.errors import ConfigurationError

REACH_TIMEOUT_S = 5.0  # an http(s) tracking server answers a request within this, or the command stops
LOCK_TIMEOUT_S = 30.0  # the longest a command waits for a store's lock held by another process
SQLITE_BUSY_TIMEOUT_S = 5.0  # the check's wait for an SQLite store another process is writing
MLFLOW_HTTP_TIMEOUT_S = 20  # MLflow's HTTP request timeout for personalign's commands (MLflow: 120)
MLFLOW_HTTP_MAX_RETRIES = 2  # MLflow's HTTP retries (MLflow: 7, with backoff: minutes)
MLFLOW_HTTP_BACKOFF_FACTOR = 1  # seconds; MLflow's default is 2
HINT = "pass another --tracking-uri, or --no-track"


def shown(uri: str) -> str:
    """``uri`` safe to print: a password, a token user-info and secret query parameters as ``***``
    (:func:`personalign.redaction.redact`)."""
    from personalign.redaction import redact

    return redact(uri)


def bound_mlflow_http() -> None:
    """Bound MLflow's HTTP client for this process: ``MLFLOW_HTTP_REQUEST_TIMEOUT`` (seconds per
    request), ``MLFLOW_HTTP_REQUEST_MAX_RETRIES`` and ``MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR``, unless
    the environment sets them. Worst case per MLflow call: (1 + retries) x timeout + backoff."""
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", str(MLFLOW_HTTP_TIMEOUT_S))
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", str(MLFLOW_HTTP_MAX_RETRIES))
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", str(MLFLOW_HTTP_BACKOFF_FACTOR))


def check_reachable(url: str, timeout: float = REACH_TIMEOUT_S) -> None:
    """An ``http(s)://`` server answers within ``timeout`` seconds: any HTTP response to ``GET
    <url>/health`` (an error status included) counts; no connection, a reset or silence does not.

    Raises:
        ConfigurationError: one line naming the URL (password hidden), what happened and the bound.
    """
    import urllib.error
    import urllib.request

    probe = url.rstrip("/") + "/health"
    try:
        with urllib.request.urlopen(urllib.request.Request(probe, method="GET"), timeout=timeout):
            return
    except urllib.error.HTTPError:
        return  # it answered: a server is there
    except (urllib.error.URLError, OSError, ValueError) as exc:
        why = _why(getattr(exc, "reason", exc), timeout)
        raise ConfigurationError(f"MLflow tracking server {shown(url)} cannot be reached ({why}); "
                                 f"start it, or {HINT}") from None


def _why(reason, timeout: float) -> str:
    """Why a connection failed, in a few words: a timeout, a refusal, or the system's message."""
    import socket

    if isinstance(reason, (socket.timeout, TimeoutError)):
        return f"no answer within {timeout:g} s"
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    return (getattr(reason, "strerror", None) or str(reason) or type(reason).__name__).splitlines()[0][:120]


DB_PORTS = {"postgresql": 5432, "postgres": 5432, "mysql": 3306, "mssql": 1433}  # SQLAlchemy dialects MLflow takes


def check_db_reachable(url: str, timeout: float = REACH_TIMEOUT_S) -> None:
    """A database server (``postgresql://``, ``mysql+pymysql://``, ...) accepts a TCP connection on
    its host and port within ``timeout`` seconds; MLflow's own store retries a refused connection
    with backoff for about two minutes. A Unix-socket URL (no host) is left to the driver.

    Raises:
        ConfigurationError: one line naming the URL (password hidden), what happened and the bound.
    """
    import socket

    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port or DB_PORTS[parts.scheme.split("+", 1)[0].lower()]
    except ValueError as exc:
        raise ConfigurationError(f"MLflow tracking URI {shown(url)} is not a valid URL ({exc})") from None
    if not host:
        return
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        raise ConfigurationError(f"MLflow tracking database {shown(url)} cannot be reached ({_why(exc, timeout)}); "
                                 f"start it, or {HINT}") from None


def _kind(mode: int) -> str:
    return ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")


def check_regular(path: Path, what: str, hint: str = "") -> bool:
    """True when ``path`` is a regular file (symlinks followed), False when it does not exist.

    Raises:
        ConfigurationError: it exists and is not a regular file (a FIFO would block, a directory
            cannot be opened); one line naming ``what`` and the path.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise ConfigurationError(f"{what} {path}: {exc.strerror or exc}{hint}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ConfigurationError(f"{what} {path} is {_kind(st.st_mode)}, not a file{hint}")
    return True


def check_sqlite_file(path: Path, *, what: str = "MLflow tracking store") -> None:
    """An SQLite store file is absent (its directory creatable and writable) or a regular file
    that SQLite opens as a database (read-only, waiting at most :data:`SQLITE_BUSY_TIMEOUT_S`).

    Raises:
        ConfigurationError: a directory, FIFO or device; a file that is not an SQLite database; an
            unwritable directory (one line naming the path; never MLflow's ten retries).
    """
    path = Path(path).expanduser().absolute()
    hint = f"; {HINT}" if what.startswith("MLflow") else ""
    if not check_regular(path, what, hint):
        base = path.parent
        while not base.exists() and base != base.parent:
            base = base.parent
        if not base.is_dir():
            raise ConfigurationError(f"{what} {path} cannot be created: {base} is not a directory{hint}")
        if not os.access(base, os.W_OK | os.X_OK):
            raise ConfigurationError(f"{what} {path} cannot be created: {base} is not writable{hint}")
        return
    if path.stat().st_size == 0:
        return  # an empty file is a fresh store (created whole under the lock)
    problem = sqlite_problem(path)
    if problem is not None:
        raise ConfigurationError(f"{what} {path} cannot be read as an SQLite database ({problem}){hint}")


@contextlib.contextmanager
def read_only_sqlite(path: str | os.PathLike, *, timeout: float = SQLITE_BUSY_TIMEOUT_S,
                     immutable: bool = False) -> Iterator[Any]:
    """An ``sqlite3`` connection to the existing file ``path``, read-only, waiting at most ``timeout``
    s for a writer, closed after the block. ``immutable``: SQLite makes no ``-wal``/``-shm`` file
    beside it (the main file's header and schema are read as they are). Raises ``sqlite3.Error``."""
    import sqlite3

    flags = "mode=ro&immutable=1" if immutable else "mode=ro"
    con = sqlite3.connect(f"{Path(path).absolute().as_uri()}?{flags}", uri=True, timeout=timeout)
    try:
        yield con
    finally:
        con.close()


def sqlite_problem(path: Path, *, timeout: float = SQLITE_BUSY_TIMEOUT_S) -> str | None:
    """Why SQLite cannot read the existing file ``path`` as a database (its schema, opened
    read-only, waiting at most ``timeout`` s), or None when it can."""
    import sqlite3

    try:
        with read_only_sqlite(path, timeout=timeout) as con:
            con.execute("select count(*) from sqlite_master").fetchone()
    except sqlite3.Error as exc:
        return str(exc) or type(exc).__name__
    return None


def check_tracking_uri(uri: str, timeout: float = REACH_TIMEOUT_S) -> None:
    """Check an MLflow tracking URI before MLflow touches it (bounded: ``timeout`` for a server,
    :data:`SQLITE_BUSY_TIMEOUT_S` for an SQLite file); also bounds MLflow's HTTP client
    (:func:`bound_mlflow_http`). A store directory (a path or ``file://``) is left to MLflow.

    Raises:
        ConfigurationError: an unreachable server, an unusable SQLite file, or a scheme other than a
            path, ``file``, ``sqlite``, ``http(s)`` and the databases of :data:`DB_PORTS` (``databricks``
            and plugin schemes need credentials and endpoints looked up over the network); one line.
    """
    bound_mlflow_http()
    scheme = uri.split(":", 1)[0].lower() if ":" in uri else ""
    if uri.strip().lower() in ("databricks", "databricks-uc", "uc"):  # MLflow's profile-less URIs, not paths
        scheme = uri.strip().lower()
    if scheme not in ("", "file", "sqlite", "http", "https") and scheme.split("+", 1)[0] not in DB_PORTS:
        # databricks, uc, a plugin's scheme: credentials and endpoints MLflow would look up over the
        # network (a Databricks URI waits ~20 s and warns before it fails); personalign runs offline
        raise ConfigurationError(f"MLflow tracking URI {shown(uri)!r}: unsupported scheme '{scheme}'; use an MLflow "
                                 "server (http://HOST:PORT), sqlite:///PATH, a store directory, or a database "
                                 f"(postgresql://, mysql://, mssql://); or {HINT.split(', or ')[-1]}")
    if scheme in ("http", "https"):
        check_reachable(uri, timeout)
    elif scheme.split("+", 1)[0] in DB_PORTS:
        check_db_reachable(uri, timeout)
    elif scheme == "sqlite":
        db = uri[len("sqlite:///"):].split("?", 1)[0] if uri.startswith("sqlite:///") else ""
        if not db or db == ":memory:":  # sqlite:// and sqlite:///:memory: keep nothing after the command
            raise ConfigurationError(f"MLflow tracking URI {shown(uri)!r} is an in-memory database, which keeps "
                                     "nothing: give a file, sqlite:///PATH, or --no-track")
        check_sqlite_file(Path(db))


def lock_holder(path: str | os.PathLike) -> str:
    """Who holds the POSIX/flock lock on ``path``: ``"process 123 (personalign)"`` (its program name),
    read from ``/proc/locks`` (Linux); ``"another process"`` when it cannot be told."""
    try:
        st = os.stat(path)
        with open("/proc/locks", encoding="ascii", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return "another process"
    wanted = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in lines:
        fields = line.split()
        if "->" in fields:  # a waiter, not the holder
            continue
        dev = next((f for f in fields if f.count(":") == 2), None)
        if dev is None or dev.lower() != wanted.lower():
            continue
        pid = fields[fields.index(dev) - 1]
        if pid == str(os.getpid()):
            continue
        try:  # the program's name only: a command line may carry a secret (--lm-kwargs)
            with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as fh:
                name = " ".join(fh.read().split())[:40]
        except OSError:
            name = ""
        return f"process {pid}" + (f" ({name})" if name else "")
    return "another process"


@contextlib.contextmanager
def bounded_lock(path: str | os.PathLike, *, what: str, timeout: float | None = None) -> Iterator[None]:
    """Hold the file lock ``path`` (``filelock.FileLock``), waiting at most ``timeout`` seconds
    (default :data:`LOCK_TIMEOUT_S`).

    Raises:
        ConfigurationError: still held by another process after ``timeout``: one line naming
            ``what``, the lock file and the process holding it.
    """
    from filelock import FileLock, Timeout

    timeout = LOCK_TIMEOUT_S if timeout is None else timeout
    lock = FileLock(str(path), timeout=timeout)
    try:
        lock.acquire()
    except Timeout:
        raise ConfigurationError(f"{what}: waited {timeout:g} s for the lock {path}, held by {lock_holder(path)}; "
                                 "retry when it ends (if no such process runs, delete the lock file)") from None
    try:
        yield
    finally:
        lock.release()


__all__ = ["LOCK_TIMEOUT_S", "MLFLOW_HTTP_MAX_RETRIES", "MLFLOW_HTTP_TIMEOUT_S", "REACH_TIMEOUT_S",
           "SQLITE_BUSY_TIMEOUT_S", "bound_mlflow_http", "bounded_lock", "check_db_reachable", "check_reachable", "check_regular",
           "check_sqlite_file", "check_tracking_uri", "lock_holder", "read_only_sqlite", "shown", "sqlite_problem"]
