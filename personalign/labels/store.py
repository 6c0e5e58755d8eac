"""The label store: every human label, one database row per (stage, row id, annotator).

A store is any SQLAlchemy database URL: SQLite by default (``sqlite:///RUNS/labels.db``,
:func:`default_store_url`), PostgreSQL for a team (``postgresql+psycopg://USER@HOST/DB``; install
``personalign[postgres]``). Two tables (created when missing):

* ``personalign_labels``: ``id`` (increasing: the order labels were given), ``stage``,
  ``row_id``, ``annotator``, ``value`` (the label as JSON text, e.g. ``true`` or ``"high"``;
  NULL = the annotator skipped the row), ``rows_sha256`` (sha256 of the rows file it was given
  on), ``time`` (UTC). ``UNIQUE (stage, row_id, annotator)``: a label is never duplicated; a
  resubmission replaces it, an undo deletes it.
* ``personalign_label_files``: each rows file served or imported (``sha256``, ``stage``,
  ``path``, ``n_rows``, ``time`` last served), so ``label export`` finds a file's stage.

Every write is one transaction, committed before the call returns (so before the annotation
page is told "saved"): a label survives ``kill -9`` of the server. SQLite transactions that write
begin ``IMMEDIATE`` and wait at most :data:`BUSY_TIMEOUT_S` seconds for another process's lock;
reads begin deferred (no write lock). The threads of one process take turns at a lock of their own
first (SQLite's busy handler polls, and among 20 annotators' requests a writer could lose every
poll for the whole timeout: a false "locked for more than 5 s").
Database failures (locked, read-only, unreachable, not a store) are one-line :class:`StoreError`\\ s.
"""

from __future__ import annotations

import contextlib
import json
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator

from personalign.errors import ConfigurationError, PersonalignError

BUSY_TIMEOUT_S = 5.0  # how long a write waits for another process's SQLite lock before failing
MAX_ROW_ID, MAX_ANNOTATOR, MAX_STAGE = 255, 64, 128  # column widths (characters)
READS_ONLY = "personalign_reads_only"  # execution option of a connection that only reads
RETRIES = 10  # a concurrent first label of one (stage, row, annotator) on a server database: retried


class StoreError(PersonalignError):
    """The store cannot be used: locked, read-only, unreachable, or not a label store (one line)."""


@dataclass(frozen=True)
class Label:
    """One stored label. ``value`` is None when the annotator skipped the row."""

    id: int
    stage: str
    row_id: str
    annotator: str
    value: Any
    rows_sha256: str
    time: datetime

    @property
    def skipped(self) -> bool:
        return self.value is None


def default_store_url() -> str:
    """``sqlite:///RUNS/labels.db`` under :func:`personalign.settings.runs_dir`."""
    from personalign.settings import runs_dir

    return f"sqlite:///{runs_dir() / 'labels.db'}"


def shown_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (safe to print)."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 -- not a URL: it has no password part
        return url


def _tables():
    import sqlalchemy as sa

    meta = sa.MetaData()
    labels = sa.Table(
        "personalign_labels", meta,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("stage", sa.String(MAX_STAGE), nullable=False),
        sa.Column("row_id", sa.String(MAX_ROW_ID), nullable=False),
        sa.Column("annotator", sa.String(MAX_ANNOTATOR), nullable=False),
        sa.Column("value", sa.Text, nullable=True),
        sa.Column("rows_sha256", sa.String(64), nullable=False),
        sa.Column("time", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("stage", "row_id", "annotator", name="uq_personalign_label"),
        sa.Index("ix_personalign_labels_annotator", "stage", "annotator"),
        sqlite_autoincrement=True,  # ids never reused: id order is the order labels were given
    )
    files = sa.Table(
        "personalign_label_files", meta,
        sa.Column("sha256", sa.String(64), primary_key=True),
        sa.Column("stage", sa.String(MAX_STAGE), primary_key=True),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("n_rows", sa.Integer, nullable=False),
        sa.Column("time", sa.DateTime(timezone=True), nullable=False),
    )
    return meta, labels, files


def _problem(exc: BaseException) -> str:
    """The database's complaint in words a user can act on."""
    orig = getattr(exc, "orig", None) or exc
    text = (str(orig).strip().splitlines() or [type(orig).__name__])[0][:200]
    low = text.lower()
    if "database is locked" in low or "database table is locked" in low:
        return f"locked by another process for more than {BUSY_TIMEOUT_S:g} s; nothing was written, try again"
    if "readonly" in low or "read-only" in low:
        return "read-only (the file or its folder cannot be written); give a writable --store"
    if "unable to open database file" in low:
        return "cannot open the database file (does its folder exist, and may you write there?)"
    if "file is not a database" in low:
        return "not an SQLite database"
    if "no such table" in low or ("relation" in low and "does not exist" in low):
        return "not a personalign label store (no labels table)"
    return text


class LabelStore:
    """A label store at a SQLAlchemy ``url``.

    Args:
        url: e.g. ``sqlite:///runs/labels.db`` or ``postgresql+psycopg://user@host/db``.
        write: open for writing: tables are created when missing (a probe that the store is
            writable and not locked). False: the store must exist (an SQLite file is never created).
        create_folder: create a missing parent folder of an SQLite file (the default store).

    Raises:
        ConfigurationError: not a database URL; an in-memory SQLite URL; a missing driver; an
            SQLite file that does not exist (``write=False``) or whose folder does not.
        StoreError: the database refuses (locked, read-only, unreachable, not a label store).
    """

    def __init__(self, url: str, *, write: bool = True, create_folder: bool = False):
        import sqlalchemy as sa
        from sqlalchemy.engine import make_url

        self.url, self.shown, self.write = url, shown_url(url), write
        self._turn = threading.Lock()  # this process's SQLite transactions, one at a time
        try:
            parsed = make_url(url)
        except Exception:  # noqa: BLE001 -- ArgumentError, ValueError: not a URL
            raise ConfigurationError(f"--store {url!r} is not a database URL; e.g. sqlite:///runs/labels.db or "
                                     "postgresql+psycopg://USER@HOST/DB") from None
        kwargs: dict[str, Any] = {}
        self.sqlite = parsed.get_backend_name() == "sqlite"
        if self.sqlite:
            self._check_sqlite_path(parsed.database, write=write, create_folder=create_folder)
            kwargs["connect_args"] = {"timeout": BUSY_TIMEOUT_S, "check_same_thread": False}
        else:
            kwargs["pool_pre_ping"] = True
        try:
            self.engine = sa.create_engine(parsed, **kwargs)
        except ImportError as exc:
            raise ConfigurationError(f"--store {self.shown}: database driver missing ({exc}); for PostgreSQL: "
                                     "pip install 'personalign[postgres]'") from None
        except sa.exc.ArgumentError as exc:  # NoSuchModuleError: an unknown dialect or driver name
            raise ConfigurationError(f"--store {self.shown}: {str(exc).splitlines()[0][:160]}") from None
        if self.sqlite:
            self._sqlite_transactions()
        self.meta, self.labels_table, self.files_table = _tables()
        with self._errors():
            if write:
                self.meta.create_all(self.engine)
            else:
                with self.engine.connect() as conn:
                    if not sa.inspect(conn).has_table("personalign_labels"):
                        raise StoreError(f"label store {self.shown}: not a personalign label store (no labels table)")

    def _check_sqlite_path(self, database: str | None, *, write: bool, create_folder: bool) -> None:
        if not database or database == ":memory:" or database.startswith("file:"):
            raise ConfigurationError(f"--store {self.url}: give an SQLite file (sqlite:///PATH); an in-memory "
                                     "store loses every label when the server stops")
        path = Path(database).expanduser()
        if not write and not path.exists():
            raise ConfigurationError(f"--store {self.url}: no such file {path}")
        if path.exists() and not path.is_file():
            raise ConfigurationError(f"--store {self.url}: {path} is not a regular file")
        if write and not path.parent.is_dir():
            if not create_folder:
                raise ConfigurationError(f"--store {self.url}: the folder {path.parent} does not exist")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ConfigurationError(f"--store {self.url}: cannot create {path.parent} "
                                         f"({exc.strerror or exc})") from None

    def _sqlite_transactions(self) -> None:
        """pysqlite begins transactions lazily, so a read that turns into a write can fail at once
        with "database is locked"; take the write lock at BEGIN instead (waiting up to the busy
        timeout) in every transaction of a writable store (SQLAlchemy's documented recipe)."""
        from sqlalchemy import event

        @event.listens_for(self.engine, "connect")
        def _no_pysqlite_begin(dbapi_conn, _record):
            dbapi_conn.isolation_level = None

        @event.listens_for(self.engine, "begin")
        def _begin(conn):
            reads = conn.get_execution_options().get(READS_ONLY, False)
            conn.exec_driver_sql("BEGIN IMMEDIATE" if self.write and not reads else "BEGIN")

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        import sqlalchemy.exc as sa_exc

        try:
            yield
        except sa_exc.IntegrityError:
            raise  # a concurrent first insert of one key: the caller retries
        except (sa_exc.OperationalError, sa_exc.ProgrammingError, sa_exc.InterfaceError,
                sa_exc.InternalError) as exc:
            raise StoreError(f"label store {self.shown}: {_problem(exc)}") from None
        except sa_exc.DatabaseError as exc:  # e.g. "file is not a database"
            raise StoreError(f"label store {self.shown}: {_problem(exc)}") from None

    @contextlib.contextmanager
    def _turn_taken(self) -> Iterator[None]:
        """On SQLite, after this process's earlier transactions (:attr:`_turn`, waited on for at
        most :data:`BUSY_TIMEOUT_S`); elsewhere at once (the database server queues them)."""
        if not self.sqlite:
            yield
            return
        if not self._turn.acquire(timeout=BUSY_TIMEOUT_S):
            raise StoreError(f"label store {self.shown}: busy with this process's other requests for more than "
                             f"{BUSY_TIMEOUT_S:g} s; nothing was written, try again")
        try:
            yield
        finally:
            self._turn.release()

    @contextlib.contextmanager
    def _transaction(self):
        """One transaction, committed when the block ends (rolled back on an exception)."""
        with self._turn_taken(), self._errors(), self.engine.begin() as conn:
            yield conn

    @contextlib.contextmanager
    def _reading(self):
        """A connection for reads only: on SQLite its transaction begins deferred (no write lock)."""
        with self._turn_taken(), self._errors(), self.engine.connect() as conn:
            yield conn.execution_options(**{READS_ONLY: True})

    def close(self) -> None:
        self.engine.dispose()

    # --- writes: one transaction each ---
    def register_rows(self, stage: str, sha256: str, path: str, n_rows: int) -> None:
        """Record that the rows file ``sha256`` is labelled for ``stage`` now (its path and the
        time it was last served or imported). Always a write: a server calls it at start, so a
        read-only or locked store is refused before the page is served."""
        import sqlalchemy as sa

        t = self.files_table
        for attempt in range(RETRIES):
            try:
                with self._transaction() as conn:
                    values = {"path": str(path), "n_rows": n_rows, "time": datetime.now(timezone.utc)}
                    done = conn.execute(t.update().where(t.c.sha256 == sha256, t.c.stage == stage).values(**values))
                    if done.rowcount == 0:
                        conn.execute(t.insert().values(sha256=sha256, stage=stage, **values))
                return
            except sa.exc.IntegrityError as exc:
                if attempt == RETRIES - 1:
                    raise StoreError(f"label store {self.shown}: {_problem(exc)}") from None
                _backoff(attempt)

    def put(self, stage: str, row_id: str, annotator: str, value: Any, rows_sha256: str) -> Label:
        """Store ``annotator``'s label ``value`` (None: a skip) of ``row_id``, replacing any earlier
        one; committed when this returns. ``value`` must be JSON-serializable (checked by the caller
        against the stage: :mod:`personalign.labels.spec`)."""
        return self.put_many([(stage, row_id, annotator, value, rows_sha256)])[0]

    def put_many(self, labels: Iterable[tuple[str, str, str, Any, str]]) -> list[Label]:
        """Store ``(stage, row_id, annotator, value, rows_sha256)`` tuples in ONE transaction
        (all or none), each replacing any earlier label of its key. Returns the stored labels."""
        import sqlalchemy as sa

        items = list(labels)
        for stage, row_id, annotator, _, _ in items:
            _check_key(stage, row_id, annotator)
        t = self.labels_table
        for attempt in range(RETRIES):
            try:
                out = []
                with self._transaction() as conn:
                    for stage, row_id, annotator, value, sha in items:
                        now = datetime.now(timezone.utc)
                        conn.execute(t.delete().where(*_key(t, stage, row_id, annotator)))
                        text = None if value is None else json.dumps(value, ensure_ascii=False)
                        new_id = conn.execute(t.insert().values(stage=stage, row_id=row_id, annotator=annotator,
                                                                value=text, rows_sha256=sha, time=now)
                                              ).inserted_primary_key[0]
                        out.append(Label(new_id, stage, row_id, annotator, value, sha, now))
                return out
            except sa.exc.IntegrityError as exc:
                if attempt == RETRIES - 1:
                    raise StoreError(f"label store {self.shown}: {_problem(exc)}") from None
                _backoff(attempt)
        raise AssertionError("unreachable")

    def delete(self, stage: str, row_id: str, annotator: str) -> bool:
        """Delete ``annotator``'s label of ``row_id``; True when there was one."""
        t = self.labels_table
        with self._transaction() as conn:
            return conn.execute(t.delete().where(*_key(t, stage, row_id, annotator))).rowcount > 0

    def undo_last(self, stage: str, annotator: str, row_ids: Iterable[str] | None = None) -> Label | None:
        """Delete ``annotator``'s most recent label or skip (among ``row_ids``, if given) in one
        transaction and return it; None when there is none."""
        import sqlalchemy as sa

        t = self.labels_table
        wanted = None if row_ids is None else set(row_ids)
        with self._transaction() as conn:
            rows = conn.execute(sa.select(t).where(t.c.stage == stage, t.c.annotator == annotator)
                                .order_by(t.c.id.desc())).mappings().all()
            last = next((r for r in rows if wanted is None or r["row_id"] in wanted), None)
            if last is None:
                return None
            conn.execute(t.delete().where(t.c.id == last["id"]))
            return _label(last)

    # --- reads ---
    def labels(self, stage: str | None = None, annotator: str | None = None) -> list[Label]:
        """Stored labels (skips included), oldest first; of one stage and/or annotator if given."""
        import sqlalchemy as sa

        t = self.labels_table
        query = sa.select(t).order_by(t.c.id)
        if stage is not None:
            query = query.where(t.c.stage == stage)
        if annotator is not None:
            query = query.where(t.c.annotator == annotator)
        with self._reading() as conn:
            return [_label(r) for r in conn.execute(query).mappings()]

    def annotators(self) -> list[str]:
        """Annotators with at least one stored label or skip, of any stage, sorted."""
        import sqlalchemy as sa

        t = self.labels_table
        with self._reading() as conn:
            return sorted(r[0] for r in conn.execute(sa.select(t.c.annotator).distinct()))

    def stages(self) -> list[str]:
        """Stages with at least one stored label, sorted."""
        import sqlalchemy as sa

        t = self.labels_table
        with self._reading() as conn:
            return sorted(r[0] for r in conn.execute(sa.select(t.c.stage).distinct()))

    def stages_of_file(self, sha256: str) -> list[str]:
        """Stages the rows file ``sha256`` was served or imported for, sorted."""
        import sqlalchemy as sa

        t = self.files_table
        with self._reading() as conn:
            return sorted(r[0] for r in conn.execute(sa.select(t.c.stage).where(t.c.sha256 == sha256)))


def _backoff(attempt: int) -> None:
    """Sleep a little (randomized, growing) before retrying a transaction that raced another."""
    import random
    import time

    time.sleep(random.uniform(0, 0.01 * (attempt + 1)))


def _key(t, stage: str, row_id: str, annotator: str):
    return t.c.stage == stage, t.c.row_id == row_id, t.c.annotator == annotator


def _check_key(stage: str, row_id: str, annotator: str) -> None:
    for what, value, width in (("stage", stage, MAX_STAGE), ("row id", row_id, MAX_ROW_ID),
                               ("annotator", annotator, MAX_ANNOTATOR)):
        if not isinstance(value, str) or not value or len(value) > width:
            raise ConfigurationError(f"{what} {value!r}: expected a non-empty string of at most {width} characters")


def _label(row) -> Label:
    when = row["time"]
    if when is not None and when.tzinfo is None:  # SQLite keeps no zone: it was written as UTC
        when = when.replace(tzinfo=timezone.utc)
    value = None if row["value"] is None else json.loads(row["value"])
    return Label(row["id"], row["stage"], row["row_id"], row["annotator"], value, row["rows_sha256"], when)


__all__ = ["BUSY_TIMEOUT_S", "Label", "LabelStore", "StoreError", "default_store_url", "shown_url"]
