"""Shared helpers for benchmark scripts (each script prints exactly one JSON object on stdout)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def shared_data() -> Path:
    """``../shared/data`` beside the project root (or PERSONALIGN_SHARED_DATA)."""
    env = os.environ.get("PERSONALIGN_SHARED_DATA")
    return Path(env) if env else ROOT.parent / "shared" / "data"


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def quiet_logs() -> None:
    import logging

    for name in ("LiteLLM", "litellm", "dspy", "httpx"):
        logging.getLogger(name).setLevel(logging.ERROR)


def run_on_prefeval(benchmark: str, data: str | None, work) -> int:
    """Run ``work(root)`` on the PrefEval root ``data`` (default ``shared_data()/prefeval``; absent:
    a ``skipped`` object) and emit its dict; an input error (PersonalignError) is one ``error:``
    line on stderr and exit code 2, nothing on stdout. Returns the exit code."""
    root = Path(data) if data else shared_data() / "prefeval"
    if data is None and not root.is_dir():
        emit({"benchmark": benchmark, "skipped": f"PrefEval not found at {root}"})
        return 0
    from personalign.errors import PersonalignError, find_personalign_error

    try:
        out = work(root)
    except Exception as exc:  # noqa: BLE001 -- input errors: one line, exit 2
        ours = exc if isinstance(exc, PersonalignError) else find_personalign_error(exc)
        if ours is None:
            raise
        sys.stderr.write(f"error: {ours}\n")
        return 2
    emit(out)
    return 0
