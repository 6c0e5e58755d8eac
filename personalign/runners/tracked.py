"""What every ``personalign run COMMAND`` shares: the LM cache, an MLflow run (tracker injected),
traces of the LM calls, progress on stderr."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Callable

from personalign.tracking import numeric_metrics


def _flat_numbers(obj: dict, prefix: str = "") -> dict[str, Any]:
    """Numeric entries (and ``[low, high]`` CIs) of ``obj`` and of its nested dicts, keys joined by ``.``."""
    out: dict[str, Any] = {}
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flat_numbers(value, f"{name}."))
        elif numeric_metrics({name: value}):
            out[name] = value
    return out


def log_runner_result(tracker, out: dict) -> None:
    """Log a runner's result into the active run: ``result.json``, its numeric entries as metrics
    (``<metric>/<strategy>`` for each row of ``strategies``) and one child run per strategy."""
    if tracker is None or not tracker.enabled:
        return
    tracker.log_dict(out, "result.json")
    rows = [r for r in out.get("strategies") or [] if isinstance(r, dict) and "name" in r]
    top = _flat_numbers({k: v for k, v in out.items() if k != "strategies"})
    for row in rows:
        label = str(row["name"]).replace("@", " at ")
        top.update({f"{k}/{label}": v for k, v in _flat_numbers(row).items()})
    tracker.log_metrics(top)
    for row in rows:
        with tracker.run(str(row["name"]), nested=True, params={"strategy": row["name"]}):
            tracker.log_metrics(_flat_numbers(row))


def check_inputs(paths) -> None:
    """Raise DataError for the first of ``paths`` (None skipped) that does not exist."""
    from personalign.errors import DataError

    for path in paths:
        if path is not None and not Path(path).exists():
            raise DataError(path, None, None, "file not found")


def run_tracked(command: str, fn: Callable[[], dict], *, params: dict[str, Any], tracker=None,
                data: str | Path | None = None, lm: str | None = None, uses_lm: bool = True,
                inputs: tuple = ()) -> dict:
    """Run ``fn`` (a runner returning its result dict) as ``personalign run COMMAND``.

    ``inputs`` (paths) are checked to exist first. Prints an end line on stderr (the runner
    shows a progress bar per strategy); with ``tracker`` (:class:`personalign.tracking.Tracker`) logs one MLflow run named
    after command, data and model with ``params``, the result (:func:`log_runner_result`) and the
    LM calls as capped traces (:func:`personalign.tracking_native.lm_traces`); the result gains
    ``mlflow_run_id``.

    Raises:
        DataError: an ``inputs`` path does not exist (nothing written). Whatever ``fn`` raises
        (a run opened for it is deleted when that is a :class:`PersonalignError`); a bad
        tracking URI fails before ``fn`` runs (ConfigurationError).
    """
    from personalign.lm import default_model
    from personalign.tracking_native import lm_traces, run_name

    from personalign.errors import PersonalignError

    check_inputs(inputs)
    model = (lm or default_model()) if uses_lm else None
    name = run_name("run", command, data=data, lm=model)
    t0 = time.perf_counter()
    if tracker is not None and tracker.enabled:
        tracker.check()
        run_id = None
        try:
            with tracker.run(name, params=params, tags={"command": f"run {command}"}):
                run_id = tracker.run_id
                with lm_traces(tracker, tags={"runner": command}):
                    out = fn()
                log_runner_result(tracker, out)
                out["mlflow_run_id"] = run_id
        except PersonalignError:
            if run_id:  # bad input found while loading: no run is left for it in the UI
                tracker.client().delete_run(run_id)
            raise
    else:
        out = fn()
    sys.stderr.write(f"{name}: done in {time.perf_counter() - t0:.1f} s"
                     + (f" (MLflow run {out['mlflow_run_id']})" if out.get("mlflow_run_id") else "") + "\n")
    return out


__all__ = ["check_inputs", "log_runner_result", "run_tracked"]
