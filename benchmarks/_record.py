"""Write ``benchmarks/results/<name>.json`` in the run-record format (the shared contract; the
"figures" work adds ``personalign/record.py`` as its one writer -- this minimal writer follows
the same keys until then): validated, then written atomically (tmp + rename)."""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from _common import ROOT

PACKAGES = {"personalign": "personalign", "dspy": "dspy", "optuna": "optuna", "mlflow": "mlflow",
            "litellm": "litellm", "llama_cpp_python": "llama-cpp-python"}
FIGURE_KEYS = ("key", "label", "strategy", "metric", "value", "ci", "n", "note")


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _git_commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        return head.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def write_record(name: str, *, title: str, command: str | None = None, model: str | None = None,
                 adapter: str | None = None, data: dict | None = None, stage: str | None = None,
                 figures: list[dict], extra: dict | None = None, sampler: dict | None = None,
                 resampling: dict | None = None) -> dict:
    """Build, check and write the record; return it. Raises ValueError on a malformed figure."""
    from personalign.lm import MODELS, is_local

    keys = [f.get("key") for f in figures]
    if len(set(keys)) != len(keys):
        raise ValueError(f"figure keys are not unique: {keys}")
    for f in figures:
        if set(f) != set(FIGURE_KEYS):
            raise ValueError(f"figure {f.get('key')} has keys {sorted(f)}, expected {list(FIGURE_KEYS)}")
    spec = MODELS.get(model.split("/", 1)[1]) if model and is_local(model) else None
    record = {
        "name": name, "title": title,
        "command": command or " ".join(shlex.quote(a) for a in [Path(sys.executable).name, *sys.argv]),
        "git_commit": _git_commit(), "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform()},
        "versions": {k: _version(d) for k, d in PACKAGES.items()},
        "model": {"name": model, "sha256": spec.split.sha256 if spec is not None and spec.split else None},
        "adapter": adapter, "sampler": sampler, "data": data, "resampling": resampling, "stage": stage,
        "figures": figures, "extra": extra or {},
    }
    out = ROOT / "benchmarks" / "results" / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, out)
    return record
