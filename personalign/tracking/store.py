"""The one place that talks to MLflow: runs, params, metrics, artifacts.

Default store: ``sqlite:///runs/mlflow.db`` with artifacts under ``runs/mlartifacts``; any
tracking URI (e.g. an ``mlflow server`` at http://127.0.0.1:5000) by argument. View with
``mlflow ui --backend-store-uri sqlite:///runs/mlflow.db``.

Secrets are never logged: params, tags, dicts and texts go through
:func:`personalign.redaction.redact` (keys naming a key, token, secret or password, header values,
URL passwords, and the values of API keys/tokens found in the environment become ``***``).

Run-state hygiene: a fresh sqlite store is created and migrated in a temporary file under a file
lock and renamed into place, so concurrent first commands never see (or leave) a half-migrated
store. Every run carries the tag ``personalign.worker`` (host, boot, pid, process start); when a
command opens the store it closes, as KILLED, the RUNNING runs whose process on this machine is
gone (a predecessor killed with -9).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Iterator

from personalign.redaction import redact

WORKER_TAG = "personalign.worker"


def _worker() -> str:
    from personalign.processes import worker_id

    return worker_id()


def numeric_metrics(metrics: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """The numeric entries of ``metrics`` as floats; a ``[low, high]`` CI becomes ``name_low`` /
    ``name_high``; NaN and non-numeric values are dropped."""
    out: dict[str, float] = {}
    for k, v in metrics.items():
        key = f"{prefix}{k}"
        if isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, (int, float)) for x in v):
            out[f"{key}_low"], out[f"{key}_high"] = float(v[0]), float(v[1])
        elif isinstance(v, bool):
            out[key] = float(v)
        elif isinstance(v, (int, float)) and v == v:
            out[key] = float(v)
    return out


def _flatten(prefix: str, obj: Any, out: dict[str, Any]) -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = obj


class Tracker:
    """MLflow runs for personalign commands.

    Args:
        tracking_uri: MLflow tracking URI (default ``sqlite:///<runs>/mlflow.db``).
        experiment: experiment name (default ``personalign``).

    Raises:
        ConfigurationError: an ``http(s)`` server that does not answer within
            :data:`personalign.stores.REACH_TIMEOUT_S`, or an ``sqlite`` store that is not a
            database file (:func:`personalign.stores.check_tracking_uri`); one line, nothing written.
    """

    def __init__(self, tracking_uri: str | None = None, experiment: str = "personalign"):
        from personalign.settings import default_tracking_uri, runs_dir

        self.tracking_uri = tracking_uri or default_tracking_uri()
        self.experiment = experiment
        self._artifact_root = runs_dir() / "mlartifacts"
        self._ready = False
        self.closed_orphans: list[str] = []  # runs of killed predecessors closed when the store was opened
        self.killed: list[str] = []  # runs this tracker closed as KILLED (an interrupt): the CLI's line counts them
        from personalign.stores import check_tracking_uri  # before any work, with no side effect: a dead

        check_tracking_uri(self.tracking_uri)  # server or a bad store file is refused when nothing is written yet

    def check(self) -> None:
        """Open the tracking store now (creating it whole if missing) and close, as KILLED, the runs
        of killed predecessors (their ids in :attr:`closed_orphans`).

        Raises:
            ConfigurationError: the URI is unsupported or its store cannot be created (one line).
        """
        from personalign.errors import ConfigurationError, PersonalignError

        try:
            self._setup()
        except PersonalignError:
            raise  # already one line (personalign.stores: an unreachable server, a bad SQLite file, a held lock)
        except Exception as exc:  # noqa: BLE001 -- MLflow raises many types for bad URIs
            first = redact((str(exc).strip().splitlines() or [type(exc).__name__])[0])[:200]
            raise ConfigurationError(f"cannot use MLflow tracking URI '{redact(self.tracking_uri)}': "
                                     f"{type(exc).__name__}: {first}; pass --tracking-uri URI or "
                                     "--no-track") from None

    def _setup(self):
        import mlflow

        if not self._ready:
            from personalign.stores import check_tracking_uri

            check_tracking_uri(self.tracking_uri)  # bounded: a dead server or a bad file fails in seconds
            with self._store_lock():
                mlflow.set_tracking_uri(self.tracking_uri)
                client = mlflow.MlflowClient()
                exp = client.get_experiment_by_name(self.experiment)
                if exp is None:
                    location = None
                    if self.tracking_uri.startswith("sqlite:"):
                        self._artifact_root.mkdir(parents=True, exist_ok=True)
                        location = self._artifact_root.as_uri()
                    client.create_experiment(self.experiment, artifact_location=location)
                mlflow.set_experiment(self.experiment)
            self._ready = True
            try:
                self.closed_orphans = self.close_orphaned_runs()
            except Exception as exc:  # noqa: BLE001 -- hygiene is best effort; the command's own run matters
                import logging

                logging.getLogger(__name__).warning("could not close orphaned MLflow runs: %s", redact(str(exc)))
        return mlflow

    def _sqlite_path(self) -> Path | None:
        if not self.tracking_uri.startswith("sqlite:///"):
            return None
        path = self.tracking_uri[len("sqlite:///"):].split("?", 1)[0]
        return None if path in ("", ":memory:") else Path(path)

    @contextlib.contextmanager
    def _store_lock(self) -> Iterator[None]:
        """Hold ``<db>.lock`` (sqlite stores) while the store is opened; create a missing store whole.

        A missing sqlite database is created and migrated as ``.<db>.init-<pid>`` and renamed into
        place, so no process ever opens a half-migrated store, even if this one is killed."""
        db = self._sqlite_path()
        if db is None:
            yield
            return
        from personalign.stores import bounded_lock

        db.parent.mkdir(parents=True, exist_ok=True)
        with bounded_lock(str(db) + ".lock", what="MLflow tracking store"):
            if not db.exists() or db.stat().st_size == 0:
                import mlflow

                tmp = db.with_name(f".{db.name}.init-{os.getpid()}")
                tmp.unlink(missing_ok=True)
                try:
                    mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp}").search_experiments(max_results=1)
                    os.replace(tmp, db)
                finally:
                    tmp.unlink(missing_ok=True)
            yield

    def close_orphaned_runs(self, status: str = "KILLED") -> list[str]:
        """Close the RUNNING runs of this experiment whose ``personalign.worker`` process (on this
        machine) is gone; returns their run ids. Runs of live processes and of other machines stay."""
        from personalign.processes import worker_alive

        return self.close_stale_runs({}, lambda tags: worker_alive(tags.get(WORKER_TAG)) is False, status=status,
                                     require_tag=WORKER_TAG)

    def start(self, name: str, *, params: dict[str, Any] | None = None, tags: dict[str, str] | None = None) -> str:
        """Open a top-level run and make it the active one; returns its id (close it with :meth:`end`)."""
        mlflow = self._setup()
        active = mlflow.start_run(run_name=name, tags={WORKER_TAG: _worker(), **(tags or {})})
        self.run_id = active.info.run_id
        if params:
            self.log_params(params)
        return self.run_id

    def end(self, run_id: str, status: str = "FINISHED") -> None:
        """Close the active run ``run_id`` with ``status`` (FINISHED, FAILED or KILLED)."""
        self._end_active(self._setup(), run_id, status)

    @contextlib.contextmanager
    def run(self, name: str, *, params: dict[str, Any] | None = None, tags: dict[str, str] | None = None,
            nested: bool = False) -> Iterator["Tracker"]:
        """Open a run (a child of the active run when ``nested``). It is closed FINISHED, FAILED
        on an exception, KILLED on an interrupt (``KeyboardInterrupt``: Ctrl-C, or SIGTERM through
        :class:`personalign.errors.Interrupted`) -- MLflow's ``mlflow.end_run(status=...)``."""
        mlflow = self._setup()
        previous = getattr(self, "run_id", None)
        tags = {WORKER_TAG: _worker(), **{k: redact(v, k) for k, v in (tags or {}).items()}}
        active = mlflow.start_run(run_name=name, nested=nested, tags=tags)
        self.run_id = active.info.run_id
        status = "FINISHED"
        try:
            if params:
                self.log_params(params)
            yield self
        except BaseException as exc:
            status = "KILLED" if isinstance(exc, KeyboardInterrupt) else "FAILED"
            raise
        finally:
            run_id = self.run_id
            if nested:
                self.run_id = previous
            self._end_active(mlflow, run_id, status)

    def _end_active(self, mlflow, run_id: str, status: str) -> None:
        """``mlflow.end_run(status)`` of the active run ``run_id``; when MLflow's fluent state fails
        (an interrupt landed inside a store call), close the run by id on a fresh client."""
        if status == "KILLED":
            self.killed.append(run_id)
        try:
            mlflow.end_run(status=status)
            return
        except Exception:  # noqa: BLE001 -- retried below by id; the command's own exception matters
            pass
        try:
            mlflow.MlflowClient(tracking_uri=self.tracking_uri).set_terminated(run_id, status)
        except Exception as exc:  # noqa: BLE001 -- the next command closes it (close_orphaned_runs)
            import logging

            logging.getLogger(__name__).warning("could not close MLflow run %s: %s", run_id, redact(str(exc)))

    def log_params(self, params: dict[str, Any]) -> None:
        flat: dict[str, Any] = {}
        _flatten("", redact(params), flat)
        self._setup().log_params({k: str(v)[:6000] for k, v in flat.items()})

    def log_metrics(self, metrics: dict[str, Any], prefix: str = "") -> None:
        """Log numeric metrics; a ``[low, high]`` CI becomes ``name_ci_low`` / ``name_ci_high``."""
        self._setup().log_metrics(numeric_metrics(metrics, prefix))

    def log_dict(self, obj: Any, artifact_file: str) -> None:
        from personalign.data.strict_json import dumps

        self._setup().log_text(dumps(redact(obj), indent=2, default=str), artifact_file)

    def log_text(self, text: str, artifact_file: str) -> None:
        self._setup().log_text(redact(text), artifact_file)

    def log_artifact(self, path: str | os.PathLike) -> None:
        self._setup().log_artifact(str(path))

    # --- Runs addressed by id (thread-safe: no fluent "active run"); used by sweeps, whose trials
    # --- run in worker threads and whose runs must be closed from another process after a crash.

    def client(self):
        """The ``mlflow.MlflowClient`` of this store."""
        import mlflow

        self._setup()
        return mlflow.MlflowClient(tracking_uri=self.tracking_uri)

    def start_run_by_id(self, name: str, *, parent_run_id: str | None = None, params: dict[str, Any] | None = None,
                        tags: dict[str, str] | None = None) -> str:
        """Create a run (a child of ``parent_run_id`` when given) without making it the active run.

        Returns its run id. Close it with :meth:`end_run_by_id`.
        """
        client = self.client()
        import mlflow

        exp = client.get_experiment_by_name(self.experiment)
        all_tags = {"mlflow.runName": name, WORKER_TAG: _worker(),
                    **{k: str(redact(v, k)) for k, v in (tags or {}).items()}}
        if parent_run_id:
            all_tags["mlflow.parentRunId"] = parent_run_id
        run = client.create_run(exp.experiment_id, tags=all_tags, run_name=name)
        if params:
            flat: dict[str, Any] = {}
            _flatten("", redact(params), flat)
            client.log_batch(run.info.run_id, params=[mlflow.entities.Param(k, str(v)[:6000]) for k, v in flat.items()])
        return run.info.run_id

    def log_metrics_to(self, run_id: str | None, metrics: dict[str, Any], prefix: str = "") -> None:
        """:meth:`log_metrics` into the run ``run_id``."""
        client = self.client()
        if not run_id:
            return
        import time

        import mlflow

        stamp = int(time.time() * 1000)
        client.log_batch(run_id, metrics=[mlflow.entities.Metric(k, v, stamp, 0)
                                          for k, v in numeric_metrics(metrics, prefix).items()])

    def log_dict_to(self, run_id: str | None, obj: Any, artifact_file: str) -> None:
        client = self.client()
        if run_id:
            from personalign.data.strict_json import dumps

            client.log_text(run_id, dumps(redact(obj), indent=2, default=str), artifact_file)

    def log_artifact_to(self, run_id: str | None, path: str | os.PathLike) -> None:
        client = self.client()
        if run_id:
            client.log_artifact(run_id, str(path))

    def set_tags_to(self, run_id: str | None, tags: dict[str, Any]) -> None:
        client = self.client()
        if run_id:
            import mlflow

            client.log_batch(run_id, tags=[mlflow.entities.RunTag(k, str(redact(v, k))) for k, v in tags.items()])

    def end_run_by_id(self, run_id: str | None, status: str = "FINISHED", *, metrics: dict[str, Any] | None = None,
                      tags: dict[str, Any] | None = None) -> None:
        """Log ``metrics`` and ``tags`` (one batch) and close ``run_id`` with ``status`` (FINISHED,
        FAILED or KILLED); a run closed already is left as is."""
        client = self.client()
        if not run_id:
            return
        import time

        import mlflow

        if client.get_run(run_id).info.status != "RUNNING":
            return
        stamp = int(time.time() * 1000)
        batch_metrics = [mlflow.entities.Metric(k, v, stamp, 0) for k, v in numeric_metrics(metrics or {}).items()]
        batch_tags = [mlflow.entities.RunTag(k, str(redact(v, k))) for k, v in (tags or {}).items()]
        if batch_metrics or batch_tags:
            client.log_batch(run_id, metrics=batch_metrics, tags=batch_tags)
        client.set_terminated(run_id, status)
        if status == "KILLED":
            self.killed.append(run_id)

    def run_status(self, run_id: str) -> str:
        return self.client().get_run(run_id).info.status

    def close_stale_runs(self, tags: dict[str, str], is_dead, status: str = "KILLED",
                         require_tag: str | None = None) -> list[str]:
        """Close the RUNNING runs carrying every tag of ``tags`` (and the tag ``require_tag``, any
        value) for which ``is_dead(run_tags)`` is true (e.g. the process that opened them was
        killed); returns their run ids."""
        client = self.client()
        exp = client.get_experiment_by_name(self.experiment)
        if exp is None:
            return []
        clauses = [f"tags.`{k}` = '{v}'" for k, v in tags.items()] + ["attributes.status = 'RUNNING'"]
        if require_tag:
            clauses.append(f"tags.`{require_tag}` LIKE '%'")
        closed = []
        for run in client.search_runs([exp.experiment_id], filter_string=" and ".join(clauses), max_results=1000):
            if is_dead(run.data.tags) and client.get_run(run.info.run_id).info.status == "RUNNING":
                client.set_terminated(run.info.run_id, status)
                closed.append(run.info.run_id)
        return closed
