"""What every ``personalign run COMMAND`` shares: a run with the callbacks it was given (an MLflow
run, the LM cache), traces of the LM calls, progress on stderr."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Callable


def check_inputs(paths) -> None:
    """Raise DataError for the first of ``paths`` (None skipped) that does not exist."""
    from personalign.errors import DataError

    for path in paths:
        if path is not None and not Path(path).exists():
            raise DataError(path, None, None, "file not found")


def run_tracked(command: str, fn: Callable[[], dict], *, params: dict[str, Any], callbacks: Any = (),
                data: str | Path | None = None, lm: str | None = None, uses_lm: bool = True,
                inputs: tuple = ()) -> dict:
    """Run ``fn`` (a runner returning its result dict) as ``personalign run COMMAND``.

    ``inputs`` (paths) are checked to exist first. Prints an end line on stderr (the runner shows
    a progress bar per strategy). ``callbacks`` (:class:`personalign.tracking.RunCallback`) see one
    run ``run COMMAND`` with ``params``, the LM calls inside ``fn`` as traces, and the result
    (an MLflow run gets ``result.json``, its numbers as metrics and a child run per strategy; the
    result gains ``mlflow_run_id``).

    Raises:
        DataError: an ``inputs`` path does not exist (nothing written). Whatever ``fn`` raises; an
        unreachable tracking store fails before ``fn`` runs (ConfigurationError).
    """
    from personalign.lm import default_model
    from personalign.tracking.callbacks import Callbacks, RunInfo
    from personalign.tracking.mlflow import run_name

    check_inputs(inputs)
    model = (lm or default_model()) if uses_lm else None
    cbs = Callbacks(callbacks)
    run = RunInfo(f"run {command}", None, params=params, data=None if data is None else str(data), lm=model)
    t0 = time.perf_counter()
    cbs.check(run)
    out: dict = {}
    with cbs.run(run, out):
        with cbs.tracing(run, command):
            out.update(fn())
    sys.stderr.write(f"{run_name(run)}: done in {time.perf_counter() - t0:.1f} s"
                     + (f" (MLflow run {out['mlflow_run_id']})" if out.get("mlflow_run_id") else "") + "\n")
    return out


__all__ = ["check_inputs", "run_tracked"]
