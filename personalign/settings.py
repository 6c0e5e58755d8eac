"""Where outputs go. All paths are resolved once per call from the environment.

``PERSONALIGN_RUNS_DIR`` (default ``./runs``) holds every output: the MLflow store
(``mlflow.db``), Optuna storage, saved programs, the DSPy cache (``cache/``, or
``PERSONALIGN_CACHE_DIR``) and the assembled Gemma model file (``models/``).
"""

from __future__ import annotations

import os
from pathlib import Path


def runs_dir() -> Path:
    return Path(os.environ.get("PERSONALIGN_RUNS_DIR", "runs")).expanduser().absolute()


def cache_dir() -> Path:
    env = os.environ.get("PERSONALIGN_CACHE_DIR")
    return Path(env).expanduser().absolute() if env else runs_dir() / "cache"


def models_dir() -> Path:
    env = os.environ.get("PERSONALIGN_MODELS_DIR")
    return Path(env).expanduser().absolute() if env else runs_dir() / "models"


def default_tracking_uri() -> str:
    return f"sqlite:///{runs_dir() / 'mlflow.db'}"
