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
