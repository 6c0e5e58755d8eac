"""Stand-in writer of the run-record format until ``personalign/record.py`` (the figures issue,
item 7) is on this branch: same function names and output, so a benchmark switches by changing
its import. The schema the page renderer checks is :class:`benchmarks.report.RunRecord`.
"""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Sequence

PACKAGES = {"personalign": "personalign", "dspy": "dspy", "optuna": "optuna", "mlflow": "mlflow",
            "litellm": "litellm", "llama_cpp_python": "llama-cpp-python"}
ROOT = Path(__file__).resolve().parent.parent


def versions() -> dict[str, str]:
    out = {}
    for key, dist in PACKAGES.items():
        try:
            out[key] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[key] = "not installed"
    return out


def git_commit() -> str:
    """HEAD of the source tree, ``+dirty`` with uncommitted changes to tracked files."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "") if head.returncode == 0 else "unknown"


def model_info(model: str | None) -> dict[str, Any]:
    """The model string and, for an embedded split GGUF, its pinned sha256 (nothing re-hashed)."""
    if not model:
        return {"name": None, "sha256": None}
    from personalign.lm import MODELS

    spec = MODELS.get(model.split("/", 1)[1]) if model.startswith("local/") else None
    split = getattr(spec, "split", None)
    return {"name": model, "sha256": split.sha256 if split is not None else None}


def figure(key: str, label: str, value: float, *, metric: str, strategy: str | None = None,
           ci: Sequence[float] | None = None, n: int | None = None, note: str | None = None) -> dict[str, Any]:
    return {"key": key, "label": label, "strategy": strategy, "metric": metric, "value": float(value),
            "ci": None if ci is None else [float(ci[0]), float(ci[1])], "n": n, "note": note}


def run_record(name: str, figures: Sequence[dict], *, title: str, command: str | None = None,
               model: str | None = None, adapter: str | None = None, sampler: dict | None = None,
               data: str | os.PathLike | None = None, data_sha256: str | None = None,
               resampling: dict | None = None, stage: str | None = None, extra: dict | None = None) -> dict:
    from personalign.data.digest import file_sha256

    return {"name": name, "title": title,
            "command": command or shlex.join(["python", *sys.argv]),
            "git_commit": git_commit(), "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "machine": {"cpu_count": os.cpu_count() or 1, "platform": platform.platform()},
            "versions": versions(), "model": model_info(model), "adapter": adapter, "sampler": sampler,
            "data": None if data is None else {"path": str(data), "sha256": data_sha256 or file_sha256(data)},
            "resampling": resampling, "stage": stage, "figures": list(figures), "extra": extra or {}}
