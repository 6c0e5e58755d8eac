"""The run record of a comparison written to a file the user names (``compare --results FILE``):
:class:`RecordCallback`, the one results-file writer of the verbs (:func:`personalign.record.write_record`;
benchmarks write theirs through the same function)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from personalign.tracking.callbacks import RunCallback, RunInfo


def check_results_path(path: Path) -> None:
    """``FILE`` must be ``<name>.json`` in an existing folder, ``name`` a record name
    (:data:`personalign.record.NAME`): checked before anything runs.

    Raises:
        ArgumentError: naming the path and what is wrong with it (``results``)."""
    from personalign.errors import ArgumentError
    from personalign.record import NAME

    if path.suffix != ".json" or not NAME.match(path.stem):
        raise ArgumentError("results", f"{path}: must be NAME.json with NAME lower-case letters, digits and single "
                                       "hyphens (the record's name)")
    if not path.parent.is_dir():
        raise ArgumentError("results", f"{path}: folder {path.parent} does not exist")


def write_results_file(path: Path, result: dict) -> Path:
    """Write the compare result's run record to ``path`` (name = the file's stem; ``extra`` gains the
    per-strategy rows without predictions, so the figures can be rebuilt from the file), atomically."""
    from personalign.record import write_record

    rows = [{k: v for k, v in r.items() if k not in ("predictions", "predictions_by_repeat")}
            for r in result["strategies"]]
    record = {**result["run_record"], "name": path.stem,
              "extra": {**result["run_record"]["extra"], "groups": result.get("groups"), "strategies": rows}}
    return write_record(path, record)


class RecordCallback(RunCallback):
    """Write the run record of a comparison to ``path`` when it ends (and, for a long run, after
    each strategy, ``"complete": false`` until the last one)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.partial_file: Path | None = None  # set while the file holds a partial record

    def check(self, run: RunInfo) -> None:
        check_results_path(self.path)

    def on_partial(self, run: RunInfo, result: dict) -> None:
        if result.get("run_record"):
            self.partial_file = write_results_file(self.path, result)

    def on_run_end(self, run: RunInfo, result: dict, status: str) -> None:
        if status == "FINISHED" and result.get("run_record"):
            write_results_file(self.path, result)
            self.partial_file = None


class ConfigureCache(RunCallback):
    """Point DSPy's LM cache at ``cache_dir`` (default ``runs/cache``; ``enabled=False``: off) once
    every input of the run is valid, so a refused command leaves no cache folder behind
    (:func:`personalign.lm.configure_cache`). Put it first among a run's callbacks: a cache folder
    that cannot be written then fails the run before any other callback starts."""

    def __init__(self, cache_dir: str | Path | None = None, *, enabled: bool = True) -> None:
        self.cache_dir, self.enabled = cache_dir, enabled

    def on_run_start(self, run: RunInfo) -> None:
        from personalign.lm import configure_cache

        configure_cache(self.cache_dir, enabled=self.enabled)


__all__ = ["ConfigureCache", "RecordCallback", "check_results_path", "write_results_file"]
