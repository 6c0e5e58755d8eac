"""The run-record format of ``benchmarks/results/<name>.json`` (the shared contract of the figures
issue), written here until ``personalign/record.py`` lands: one JSON object with ``name, title,
command, git_commit, date, machine, versions, model, adapter, sampler, data, resampling, stage,
figures, extra``. Written atomically (temp file + rename)."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

from _common import ROOT

_DISTS = {"personalign": "personalign", "dspy": "dspy", "optuna": "optuna", "mlflow": "mlflow",
          "litellm": "litellm", "llama_cpp_python": "llama_cpp_python"}


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _model(model: str | None) -> dict:
    if not model:
        return {"name": None, "sha256": None}
    try:
        from personalign.lm import get_spec, is_local

        spec = get_spec(model) if is_local(model) else None
        sha = spec.split.sha256 if spec is not None and spec.split is not None else None
    except Exception:  # noqa: BLE001 -- an unknown model is recorded by name only
        sha = None
    return {"name": model, "sha256": sha}


def run_record(*, name: str, title: str, command: str, model: str | None, data: Path | None, stage: str | None,
               resampling: dict | None, figures: list[dict], extra: dict, adapter: str | None = None,
               sampler: dict | None = None) -> dict:
    """One run record (see the module docstring).

    Raises:
        ValueError: two figures share a key.
    """
    keys = [f["key"] for f in figures]
    if len(keys) != len(set(keys)):
        raise ValueError(f"duplicate figure keys in {name}: {sorted({k for k in keys if keys.count(k) > 1})}")
    data_rec = None
    if data is not None:
        from personalign.data.digest import file_sha256

        data_rec = {"path": str(data), "sha256": file_sha256(data)}
    return {"name": name, "title": title, "command": command, "git_commit": _git_commit(),
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "machine": {"cpu_count": os.cpu_count() or 0, "platform": platform.platform()},
            "versions": {k: _version(v) for k, v in _DISTS.items()}, "model": _model(model), "adapter": adapter,
            "sampler": sampler, "data": data_rec, "resampling": resampling, "stage": stage, "figures": figures,
            "extra": extra}


def write_record(path: Path, record: dict) -> None:
    """Write ``record`` to ``path`` atomically (no half-written file on an interrupt)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    tmp.replace(path)
