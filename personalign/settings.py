"""Where outputs go. All paths are resolved once per call from the environment.

``PERSONALIGN_RUNS_DIR`` (default ``./runs``) holds every output: the MLflow store
(``mlflow.db``), Optuna storage, saved programs, the DSPy cache (``cache/``, or
``PERSONALIGN_CACHE_DIR``). The assembled model files live in the user's model cache
(:func:`models_dir`), shared by every runs folder.
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
    """The model cache: ``PERSONALIGN_MODELS_DIR``, else ``models/`` in the platform's user cache
    directory (platformdirs: ``~/.cache/personalign/models`` on Linux, ``~/Library/Caches/
    personalign/models`` on macOS, ``personalign/Cache/models`` under ``%LOCALAPPDATA%`` on
    Windows; Linux honours ``XDG_CACHE_HOME``). One per user, shared by every runs folder."""
    env = os.environ.get("PERSONALIGN_MODELS_DIR")
    if env:
        return Path(env).expanduser().absolute()
    from platformdirs import user_cache_path

    return user_cache_path("personalign", appauthor=False) / "models"


def default_tracking_uri() -> str:
    return f"sqlite:///{runs_dir() / 'mlflow.db'}"


def endpoint_env() -> tuple[str | None, dict]:
    """Where non-embedded models run: ``(PERSONALIGN_API_BASE or None, PERSONALIGN_LM_KWARGS as a
    dict)``. The kwargs (a JSON object, e.g. ``{"api_key": "none", "extra_body": {"repeat_penalty":
    1.0}}``) go to ``dspy.LM`` / litellm with every call.

    Raises:
        ConfigurationError: PERSONALIGN_LM_KWARGS is not a JSON object (one line, the value quoted).
    """
    import json

    from personalign.errors import ConfigurationError

    base = os.environ.get("PERSONALIGN_API_BASE", "").strip() or None
    raw = os.environ.get("PERSONALIGN_LM_KWARGS", "").strip()
    if not raw:
        return base, {}
    try:
        kwargs = json.loads(raw)
    except ValueError as exc:
        raise ConfigurationError(f"PERSONALIGN_LM_KWARGS (--lm-kwargs) is not JSON ({exc.msg} at char {exc.pos}): "
                                 f"{raw[:80]!r}") from None
    if not isinstance(kwargs, dict):
        raise ConfigurationError(f"PERSONALIGN_LM_KWARGS (--lm-kwargs) must be a JSON object, not {raw[:80]!r}")
    return base, kwargs
