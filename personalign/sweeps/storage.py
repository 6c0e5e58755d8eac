"""Optuna storages of a sweep, with worker liveness on Optuna's heartbeat interface.

Both storages implement Optuna's ``BaseHeartbeat`` (the interface ``RDBStorage`` implements), so
Optuna itself records a heartbeat while a trial runs (``study.optimize``), fails stale trials
before each new trial (``optuna.storages.fail_stale_trials``) and hands each one to the storage's
``heartbeat_stale_trial_callback`` (e.g. ``RetryHeartbeatStaleTrialCallback``). A RUNNING trial is
stale when

* its worker ran on this machine and its process is gone (:func:`~personalign.sweeps.workers.worker_alive`:
  at once, no grace period), or
* its worker is unknown here (another machine) and no heartbeat came for ``grace_period`` seconds:
  :class:`JournalHeartbeatStorage` keeps the last heartbeat in the trial's system attribute
  :data:`HEARTBEAT_ATTR` (seconds since the epoch); :class:`LivenessRDBStorage` leaves it to
  ``RDBStorage``'s own heartbeat table.
"""

from __future__ import annotations

import re
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import optuna
from optuna.storages import JournalStorage, RDBStorage
from optuna.trial import FrozenTrial, TrialState

from personalign.errors import ConfigurationError
from personalign.redaction import redact
from personalign.sweeps.workers import WORKER_ATTR, worker_alive, worker_id

HEARTBEAT_INTERVAL = 10  # seconds between heartbeats of a running trial
GRACE_PERIOD = 40  # seconds without a heartbeat after which a trial of an unknown worker is stale
SCHEMA_RETRIES = 4  # re-opens of a fresh RDB another process is creating at the same moment
HEARTBEAT_ATTR = "personalign:heartbeat"  # system attr (journal storages): unix time of the last heartbeat

# Optuna's heartbeat interface: the extension point its fail_stale_trials, heartbeat thread and
# RetryHeartbeatStaleTrialCallback work through (``isinstance(storage, BaseHeartbeat)``). Optuna 5.0
# documents it and RDBStorage implements it, but exports it only from a private module; it is taken
# here from the bases of the public RDBStorage, so no private Optuna name is imported, and a test
# fails if RDBStorage stops implementing it.
BaseHeartbeat = next(c for c in RDBStorage.__mro__ if c.__name__ == "BaseHeartbeat")


class WorkerLiveness:
    """Mixin of the sweep's storages: which RUNNING trials belong to dead workers.

    A trial records its worker (:data:`~personalign.sweeps.workers.WORKER_ATTR`) in the same write
    that makes it RUNNING (:meth:`create_new_trial`; a WAITING trial popped by ``study.ask()``: in
    the write right after, :meth:`set_trial_state_values`), so a worker killed anywhere inside
    ``study.ask()`` -- while the sampler works, before any heartbeat -- leaves a trial known dead
    at once, never a RUNNING trial nobody can judge. Subclasses set ``grace_period`` and
    implement :meth:`heartbeat_stale`.
    """

    grace_period: int | None

    @staticmethod
    def with_worker(template_trial: FrozenTrial | None) -> FrozenTrial | None:
        """The template of a new trial: for ``study.ask()``'s fresh RUNNING trial (no template), a
        RUNNING template carrying this process's worker; other templates (enqueued, retried) as given."""
        if template_trial is not None:
            return template_trial
        from optuna.trial import create_trial

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return create_trial(state=TrialState.RUNNING, system_attrs={WORKER_ATTR: worker_id()})

    def create_new_trial(self, study_id: int, template_trial: FrozenTrial | None = None) -> int:
        return super().create_new_trial(study_id, self.with_worker(template_trial))

    def set_trial_state_values(self, trial_id: int, state: TrialState, values=None) -> bool:
        popped = super().set_trial_state_values(trial_id, state, values)
        if popped and state == TrialState.RUNNING:  # a WAITING trial taken by this worker
            self.set_trial_system_attr(trial_id, WORKER_ATTR, worker_id())
        return popped

    def heartbeat_stale(self, trial: FrozenTrial, now: float) -> bool:
        """Whether ``trial``'s heartbeat stopped (used only when its worker's liveness is unknown)."""
        raise NotImplementedError

    def is_stale(self, trial: FrozenTrial, now: float | None = None) -> bool:
        """Whether the RUNNING ``trial``'s worker is dead: known dead on this machine, or no
        heartbeat for ``grace_period`` seconds."""
        alive = worker_alive(trial.system_attrs.get(WORKER_ATTR))
        if alive is not None:
            return not alive
        return self.heartbeat_stale(trial, time.time() if now is None else now)

    def stale_trial_ids(self, study_id: int, only_dead_workers: bool = False, only_unrecorded: bool = False) -> list[int]:
        """Storage ids of the stale RUNNING trials of ``study_id`` (only those of known-dead
        workers of this machine when ``only_dead_workers``; only those without a recorded worker,
        by :meth:`heartbeat_stale`, when ``only_unrecorded``)."""
        now = time.time()
        out = []
        for t in self.get_all_trials(study_id, deepcopy=False, states=(TrialState.RUNNING,)):
            if only_dead_workers:
                stale = worker_alive(t.system_attrs.get(WORKER_ATTR)) is False
            elif only_unrecorded:
                stale = WORKER_ATTR not in t.system_attrs and self.heartbeat_stale(t, now)
            else:
                stale = self.is_stale(t, now)
            if stale:
                out.append(self.get_trial_id_from_study_id_trial_number(study_id, t.number))
        return out


class JournalHeartbeatStorage(WorkerLiveness, JournalStorage, BaseHeartbeat):
    """``JournalStorage`` with Optuna's heartbeat: the last heartbeat of a trial is its system
    attribute :data:`HEARTBEAT_ATTR`.

    Args:
        backend: a journal backend (``JournalFileBackend(path)``).
        heartbeat_interval: seconds between heartbeats (>= 1).
        grace_period: seconds without a heartbeat after which a trial is stale (default
            ``2 * heartbeat_interval``, as ``RDBStorage``).
        heartbeat_stale_trial_callback: ``callback(study, frozen_trial)`` for each trial failed as stale.
    """

    def __init__(self, backend, *, heartbeat_interval: int = HEARTBEAT_INTERVAL, grace_period: int | None = None,
                 heartbeat_stale_trial_callback: Callable | None = None) -> None:
        if heartbeat_interval < 1:
            raise ValueError("heartbeat_interval must be a positive integer")
        super().__init__(backend)
        self.heartbeat_interval = heartbeat_interval
        self.grace_period = grace_period
        self.heartbeat_stale_trial_callback = heartbeat_stale_trial_callback

    def record_heartbeat(self, trial_id: int) -> None:
        try:
            self.set_trial_system_attr(trial_id, HEARTBEAT_ATTR, time.time())
        except optuna.exceptions.UpdateFinishedTrialError:
            pass  # failed as stale by another worker meanwhile: nothing left to keep alive

    def heartbeat_stale(self, trial: FrozenTrial, now: float) -> bool:
        grace = self.grace_period if self.grace_period is not None else 2 * self.heartbeat_interval
        last = trial.system_attrs.get(HEARTBEAT_ATTR)
        if last is None and trial.datetime_start is not None:
            last = trial.datetime_start.timestamp()
        return last is not None and now - float(last) > grace

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:  # BaseHeartbeat's interface
        return self.stale_trial_ids(study_id)

    def get_heartbeat_interval(self) -> int | None:
        return self.heartbeat_interval

    def get_heartbeat_stale_trial_callback(self) -> Callable | None:
        return self.heartbeat_stale_trial_callback


class LivenessRDBStorage(WorkerLiveness, RDBStorage):
    """``RDBStorage`` whose stale trials are those of its heartbeat plus those of workers known
    dead on this machine (failed at once instead of after the grace period)."""

    def _create_new_trial(self, study_id: int, template_trial: FrozenTrial | None = None) -> FrozenTrial:
        # what Optuna's cache in front of every RDBStorage (study._storage) calls to create a trial
        return super()._create_new_trial(study_id, self.with_worker(template_trial))

    def heartbeat_stale(self, trial: FrozenTrial, now: float) -> bool:
        """A trial with no recorded worker (a worker killed between taking a WAITING trial and
        recording itself) started over ``grace_period`` seconds ago; with a worker, RDBStorage's
        heartbeat table decides (in ``_get_stale_trial_ids``)."""
        if WORKER_ATTR in trial.system_attrs or trial.datetime_start is None:
            return False
        grace = self.grace_period if self.grace_period is not None else 2 * (self.get_heartbeat_interval() or 0)
        return now - trial.datetime_start.timestamp() > grace

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:  # BaseHeartbeat's interface
        found = super()._get_stale_trial_ids(study_id) if self.get_heartbeat_interval() is not None else []
        return sorted(set(found) | set(self.stale_trial_ids(study_id, only_dead_workers=True))
                      | set(self.stale_trial_ids(study_id, only_unrecorded=True)))


def is_stale(trial: FrozenTrial, storage, *, now: float | None = None) -> bool:
    """Whether the RUNNING ``trial`` of ``storage`` (from :func:`open_storage`) has a dead worker;
    for other storages, only a worker known dead on this machine counts."""
    if isinstance(storage, WorkerLiveness):
        return storage.is_stale(trial, now)
    return worker_alive(trial.system_attrs.get(WORKER_ATTR)) is False


def trial_id(storage, study_name: str, number: int) -> int:
    """The storage id of trial ``number`` of study ``study_name`` (for the storage's trial methods)."""
    return storage.get_trial_id_from_study_id_trial_number(storage.get_study_id_from_name(study_name), number)


redact_url = redact
"""``redact_url(url)``: ``url`` with its password as ``***`` (safe to print and log) -- the one
redaction function, :func:`personalign.redaction.redact`, under the name the sweep code uses."""


def open_storage(url: str, *, heartbeat_interval: int = HEARTBEAT_INTERVAL, grace_period: int = GRACE_PERIOD,
                 on_stale: Callable | None = None):
    """Optuna storage for ``url``, with heartbeats every ``heartbeat_interval`` seconds, trials
    stale after ``grace_period`` seconds without one, and ``on_stale(study, frozen_trial)`` as the
    ``heartbeat_stale_trial_callback``.

    * ``journal:PATH`` -> :class:`JournalHeartbeatStorage` on ``JournalFileBackend(PATH)``;
    * ``sqlite:///PATH``, ``postgresql+psycopg://...``, ``mysql://...`` -> :class:`LivenessRDBStorage`.

    Raises:
        ConfigurationError: unsupported URL, missing database driver, unreachable database.
    """
    kwargs: dict[str, Any] = {"heartbeat_interval": heartbeat_interval, "grace_period": grace_period,
                              "heartbeat_stale_trial_callback": on_stale}
    if url.startswith("journal:"):
        from optuna.storages.journal import JournalFileBackend

        path = Path(url[len("journal:"):]).expanduser()
        if not str(path) or str(path) == ".":
            raise ConfigurationError("--storage journal:PATH needs a file path, e.g. journal:runs/optuna.journal")
        from personalign.stores import check_regular

        if check_regular(path, "--storage journal file"):  # a FIFO would block the open forever
            check_journal(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            return JournalHeartbeatStorage(JournalFileBackend(str(path)), **kwargs)
        except OSError as exc:
            raise ConfigurationError(f"cannot use journal file {path}: {exc.strerror or exc}") from None
        except Exception as exc:  # noqa: BLE001 -- Optuna replays every record: garbage raises anything
            raise ConfigurationError(f"--storage journal file {path} is not an Optuna journal (a record cannot be "
                                     f"replayed: {type(exc).__name__}); pass another journal:PATH") from None
    if "://" not in url:
        raise ConfigurationError(f"unsupported --storage '{redact(url)}': use sqlite:///PATH, journal:PATH or "
                                 "postgresql+psycopg://USER@HOST/DB")
    engine_kwargs: dict[str, Any] = {}
    if url.startswith("sqlite:"):
        db = url.split("sqlite:///", 1)[-1].split("?", 1)[0] if url.startswith("sqlite:///") else ""
        if not db or db == ":memory:":  # a study in memory dies with the process: nothing to resume or share
            raise ConfigurationError(f"--storage '{redact(url)}' is an in-memory database: a sweep's study must "
                                     "outlive the process; use sqlite:///PATH (a file) or journal:PATH")
        if db:
            from personalign.stores import check_sqlite_file

            check_sqlite_file(Path(db), what="--storage")  # a FIFO, a directory or a non-database: one line
            Path(db).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine_kwargs["connect_args"] = {"timeout": 60}  # threads wait for SQLite's lock instead of failing
    else:
        engine_kwargs["pool_pre_ping"] = True
    for attempt in range(SCHEMA_RETRIES + 1):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return LivenessRDBStorage(url, engine_kwargs=engine_kwargs, **kwargs)
        except ImportError as exc:
            raise ConfigurationError(f"cannot open --storage {redact(url)}: database driver missing ({redact(str(exc))}); for "
                                     "PostgreSQL: pip install 'personalign[postgres]' (psycopg 3) and a URL "
                                     "postgresql+psycopg://USER@HOST/DB") from None
        except Exception as exc:  # noqa: BLE001 -- SQLAlchemy raises many types for bad URLs / servers
            if attempt < SCHEMA_RETRIES and _schema_race(exc):
                time.sleep(0.5 * (attempt + 1))  # another process is creating the same fresh database
                continue
            first = redact((str(exc).strip().splitlines() or [type(exc).__name__])[0])[:200]
            raise ConfigurationError(f"cannot open --storage {redact(url)}: {type(exc).__name__}: {first}") from None
    raise AssertionError("unreachable")


def check_journal(path: Path) -> None:
    """Every complete line of an Optuna journal file is a JSON object with an integer ``op_code``
    (Optuna writes whole lines under its lock; an unterminated last line is a write in progress
    and is left to Optuna). Optuna itself skips a bad last line and fails later, with a traceback.

    Raises:
        ConfigurationError: one line naming the file and the line.
    """
    import json

    try:
        with open(path, "rb") as fh:
            for lineno, raw in enumerate(fh, start=1):
                if not raw.endswith(b"\n"):
                    break
                try:
                    record = json.loads(raw)
                except ValueError:
                    record = None
                if not isinstance(record, dict) or type(record.get("op_code")) is not int:
                    raise ConfigurationError(f"--storage journal file {path}:{lineno} is not an Optuna journal "
                                             "record; pass another journal:PATH")
    except OSError as exc:
        raise ConfigurationError(f"cannot use journal file {path}: {exc.strerror or exc}") from None


def _schema_race(exc: BaseException) -> bool:
    """True for the errors of two processes creating one fresh RDB schema at once: Optuna's
    version row inserted twice (``IntegrityError`` on ``alembic_version``) or a table created twice."""
    text = str(exc)
    return (type(exc).__name__ == "IntegrityError" and "alembic_version" in text) or "already exists" in text


_STUDY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def check_study_name(name: str) -> str:
    """A ``--study-name`` is a safe slug: letters, digits, ``.``, ``_``, ``-`` (first a letter or a
    digit, at most 128 characters, no ``..``), so the export directory it names
    (``runs/programs/STAGE-sweep-STUDY-trialN``) stays under ``runs/programs``. Returns it.

    Raises:
        ConfigurationError: one line naming the value.
    """
    if not isinstance(name, str) or not _STUDY_NAME.fullmatch(name) or ".." in name:
        raise ConfigurationError(f"--study-name {str(name)[:80]!r} is not a safe name: use letters, digits, '.', "
                                 "'_' and '-' (starting with a letter or a digit, at most 128, no '..')")
    return name


def fail_stale_trials(study) -> None:
    """Optuna's ``optuna.storages.fail_stale_trials(study)`` without its experimental warning: set
    the stale RUNNING trials to FAIL and call the storage's stale-trial callback for each."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)


__all__ = ["GRACE_PERIOD", "HEARTBEAT_ATTR", "HEARTBEAT_INTERVAL", "BaseHeartbeat", "JournalHeartbeatStorage",
           "LivenessRDBStorage", "WorkerLiveness", "check_journal", "check_study_name", "fail_stale_trials", "is_stale", "open_storage", "redact_url",
           "trial_id"]
