"""Every ``PERSONALIGN_*`` environment setting, validated once (pydantic-settings), and where outputs go.

``PERSONALIGN_RUNS_DIR`` (default ``./runs``) holds every output: the MLflow store
(``mlflow.db``), Optuna storage, saved programs, the DSPy cache (``cache/``, or
``PERSONALIGN_CACHE_DIR``). The assembled model files live in the user's model cache
(:func:`models_dir`), shared by every runs folder.

:func:`env_settings` reads the environment into :class:`EnvSettings` (cached per environment
snapshot, so a changed variable is read again); :func:`check_environment` is what the CLI runs
before any command: every bad value is a one-line :class:`~personalign.errors.ConfigurationError`
naming the variable and the value (exit 2). A new setting is one field of :class:`EnvSettings`
(with its bounds) and, if it is a path, one entry of :data:`PATH_SETTINGS`.
"""

from __future__ import annotations

import os
import stat
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Optional

from personalign._env import OFFLINE_DEFAULTS  # re-exported: the offline defaults every process applies
from personalign.errors import ConfigurationError

PREFIX = "PERSONALIGN_"
GGUF_PREFIX = PREFIX + "GGUF_"  # PERSONALIGN_GGUF_<MODEL>: another copy of an embedded model's file
N_CTX_MIN, N_CTX_MAX = 512, 32768  # >= a prompt, a demo and an answer; <= the embedded models' trained context
THREADS_MAX = 1024
SEED_MAX = 2**32 - 1  # llama.cpp seeds are uint32
MAX_TRACES_MAX = 1_000_000
#: upper bounds of the counts a command takes: a bootstrap holds an (n_boot, rows) int64 array
#: (20,000 x 2,000 rows: 320 MB); a study of more trials than this is a typo, not a plan
N_BOOT_MAX = 20_000
N_TRIALS_MAX = 100_000


@lru_cache(maxsize=1)
def _model_class():
    """The pydantic-settings model (built on first use: importing this module stays stdlib-only)."""
    from pydantic import Field, field_validator
    from pydantic_settings import BaseSettings, SettingsConfigDict

    class EnvSettings(BaseSettings):
        """The ``PERSONALIGN_*`` variables, each with its type and bounds (None = not set)."""

        model_config = SettingsConfigDict(env_prefix=PREFIX, extra="ignore", case_sensitive=True,
                                          validate_default=True)
        RUNS_DIR: Path = Path("runs")
        CACHE_DIR: Optional[Path] = None
        MODELS_DIR: Optional[Path] = None
        N_CTX: Optional[Annotated[int, Field(ge=N_CTX_MIN, le=N_CTX_MAX)]] = None
        THREADS: Optional[Annotated[int, Field(ge=1, le=THREADS_MAX)]] = None
        SEED: Optional[Annotated[int, Field(ge=0, le=SEED_MAX)]] = None
        MAX_TRACES: Optional[Annotated[int, Field(ge=0, le=MAX_TRACES_MAX)]] = None
        KV_REUSE: Optional[bool] = None
        BATCH_DECODE: Optional[bool] = None
        LM: Optional[str] = None

        @field_validator("*", mode="before")
        @classmethod
        def _blank_is_unset(cls, value, info):
            if isinstance(value, str) and not value.strip():
                return None if info.field_name != "RUNS_DIR" else "runs"
            return value.strip() if isinstance(value, str) else value

        @field_validator("N_CTX", "THREADS", "SEED", "MAX_TRACES", mode="before")
        @classmethod
        def _plain_digits(cls, value):
            # an integer is written in plain digits: pydantic's lax mode would take '4096.0', '4_096'
            if not isinstance(value, str) or not value.strip():
                return value
            if not (value.strip().isascii() and value.strip().isdigit()):
                raise ValueError("not an integer in plain digits")
            return int(value.strip())

    return EnvSettings


# what each setting must be, in words, for the error line
EXPECTED = {
    "N_CTX": f"an integer from {N_CTX_MIN} to {N_CTX_MAX} (tokens)",
    "THREADS": f"an integer from 1 to {THREADS_MAX}",
    "SEED": f"an integer from 0 to {SEED_MAX}",
    "MAX_TRACES": f"an integer from 0 to {MAX_TRACES_MAX} (0 turns traces off)",
    "KV_REUSE": "1 or 0 (true/false, yes/no, on/off)",
    "BATCH_DECODE": "1 or 0 (true/false, yes/no, on/off)",
}
PATH_SETTINGS = ("RUNS_DIR", "CACHE_DIR", "MODELS_DIR")


def _snapshot() -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith(PREFIX)))


@lru_cache(maxsize=8)
def _load(snapshot: tuple[tuple[str, str], ...]):
    from pydantic import ValidationError

    cls = _model_class()
    try:
        return cls(_env_file=None)
    except ValidationError as exc:
        err = exc.errors()[0]
        name = str(err["loc"][0]) if err["loc"] else "?"
        value = dict(snapshot).get(PREFIX + name, err.get("input"))
        expected = EXPECTED.get(name, err["msg"])
        raise ConfigurationError(f"{PREFIX}{name}={value!r} is not valid: expected {expected}") from None


def env_settings():
    """The validated ``PERSONALIGN_*`` settings (an ``EnvSettings``; fields None when unset).

    Raises:
        ConfigurationError: one line naming the first bad variable, its value and what it must be.
    """
    return _load(_snapshot())


def _check_dir_setting(name: str, path: Path, *, writable: bool) -> None:
    var = f"{PREFIX}{name}={str(path)!r}"
    if path.exists() and not path.is_dir():
        raise ConfigurationError(f"{var} is not a directory (it is a file)")
    if not writable:
        return
    base = path
    while not base.exists() and base != base.parent:
        base = base.parent
    if not base.is_dir():
        raise ConfigurationError(f"{var} cannot be created: {base} is a file")
    if not os.access(base, os.W_OK | os.X_OK):
        raise ConfigurationError(f"{var} is not writable" if base == path else
                                 f"{var} cannot be created: {base} is not writable")


def check_regular_file(path: Path, *, what: str, expected_size: int | None = None) -> os.stat_result:
    """Refuse, before opening it, anything but a regular file of the expected size (a FIFO would
    block, ``/dev/zero`` never ends, a directory cannot be read). Returns its ``stat``.

    Raises:
        ConfigurationError: one line naming ``what`` (the variable or the model) and the path.
    """
    try:
        st = os.stat(path)
    except OSError as exc:
        raise ConfigurationError(f"{what}: cannot read {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = ("a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode)
                else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "not a regular file")
        raise ConfigurationError(f"{what}: {path} is {kind}, not a model file")
    if expected_size is not None and st.st_size != expected_size:
        raise ConfigurationError(f"{what}: {path} holds {st.st_size} bytes, expected {expected_size}")
    return st


def check_environment(*, writes: bool = True) -> None:
    """Validate every ``PERSONALIGN_*`` setting before any work: types and bounds, the directories
    (not a file; writable when the command ``writes``; the models dir may be read-only: it is
    written only when a model is assembled), and every ``PERSONALIGN_GGUF_*`` file (a regular file).

    Raises:
        ConfigurationError: one line naming the variable and its value.
    """
    s = env_settings()
    for name in PATH_SETTINGS:
        value = getattr(s, name)
        if value is not None:
            _check_dir_setting(name, Path(value).expanduser().absolute(),
                               writable=writes and name != "MODELS_DIR")
    for key, value in _snapshot():
        if key.startswith(GGUF_PREFIX) and value.strip():
            check_regular_file(Path(value).expanduser(), what=f"{key}={value!r}")


def runs_dir() -> Path:
    return Path(env_settings().RUNS_DIR).expanduser().absolute()


def cache_dir() -> Path:
    env = env_settings().CACHE_DIR
    return Path(env).expanduser().absolute() if env else runs_dir() / "cache"


def models_dir() -> Path:
    """The model cache: ``PERSONALIGN_MODELS_DIR``, else ``models/`` in the platform's user cache
    directory (platformdirs: ``~/.cache/personalign/models`` on Linux, ``~/Library/Caches/
    personalign/models`` on macOS, ``personalign/Cache/models`` under ``%LOCALAPPDATA%`` on
    Windows; Linux honours ``XDG_CACHE_HOME``). One per user, shared by every runs folder."""
    env = env_settings().MODELS_DIR
    if env:
        return Path(env).expanduser().absolute()
    from platformdirs import user_cache_path

    return user_cache_path("personalign", appauthor=False) / "models"


def default_tracking_uri() -> str:
    return f"sqlite:///{runs_dir() / 'mlflow.db'}"


def default_sweep_storage() -> str:
    """The Optuna storage of a sweep given no ``--storage``: ``sqlite:///RUNS/optuna.db``."""
    return f"sqlite:///{runs_dir() / 'optuna.db'}"


def endpoint_env() -> tuple[str | None, dict]:
    """Where non-embedded models run: ``(PERSONALIGN_API_BASE or None, PERSONALIGN_LM_KWARGS as a
    dict)``. The kwargs (a JSON object, e.g. ``{"api_key": "none", "extra_body": {"repeat_penalty":
    1.0}}``) go to ``dspy.LM`` / litellm with every call.

    Raises:
        ConfigurationError: PERSONALIGN_LM_KWARGS is not a JSON object (one line naming the line,
            column and what is wrong; never the value, which may hold a key).
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
        raise ConfigurationError(f"PERSONALIGN_LM_KWARGS (--lm-kwargs) is not JSON: {exc.msg} at line {exc.lineno} "
                                 f"column {exc.colno} (char {exc.pos}); the value is not shown (it may hold a key)") \
            from None
    except RecursionError:
        raise ConfigurationError("PERSONALIGN_LM_KWARGS (--lm-kwargs) is nested too deeply to read; the value is not "
                                 "shown") from None
    if not isinstance(kwargs, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(kwargs), "a number")
        raise ConfigurationError(f"PERSONALIGN_LM_KWARGS (--lm-kwargs) must be a JSON object {{...}}, not {kind}")
    check_lm_kwargs(kwargs)
    return base, kwargs


def _is_number(value) -> bool:
    import math

    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# the litellm / dspy.LM kwargs personalign knows, with what each must be (JSON types: no bool for a number)
LM_KWARG_CHECKS = {
    "num_retries": (lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 100,
                    "an integer from 0 to 100"),
    "timeout": (lambda v: _is_number(v) and v > 0, "a number of seconds > 0"),
    "temperature": (lambda v: _is_number(v) and v >= 0, "a number >= 0"),
    "top_p": (lambda v: _is_number(v) and 0 <= v <= 1, "a number from 0 to 1"),
    "max_tokens": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1, "an integer >= 1"),
}


LM_KWARGS_DEPTH_MAX = 32  # litellm kwargs nest a few levels (extra_body, response_format schemas)


def check_lm_kwargs(kwargs: dict) -> None:
    """Check the known model kwargs (at most :data:`LM_KWARGS_DEPTH_MAX` levels deep;
    :data:`LM_KWARG_CHECKS`: ``num_retries`` an integer 0-100,
    ``timeout`` seconds > 0, ``temperature`` >= 0, ``top_p`` in [0, 1], ``max_tokens`` >= 1; finite
    JSON numbers, never booleans); other keys go to litellm unchecked.

    Raises:
        ConfigurationError: one line naming the key, its value and what it must be.
    """
    stack, depth = [(kwargs, 1)], 1
    while stack:  # iteratively: a deep value would overflow every recursive reader after this one
        value, level = stack.pop()
        depth = max(depth, level)
        if depth > LM_KWARGS_DEPTH_MAX:
            raise ConfigurationError(f"PERSONALIGN_LM_KWARGS (--lm-kwargs): nested more than {LM_KWARGS_DEPTH_MAX} "
                                     "levels deep; the value is not shown")
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        stack.extend((child, level + 1) for child in children)
    for key, (ok, expected) in LM_KWARG_CHECKS.items():
        if key in kwargs and not ok(kwargs[key]):
            import json

            shown = json.dumps(kwargs[key])[:40]
            raise ConfigurationError(f"PERSONALIGN_LM_KWARGS (--lm-kwargs): {key!r} must be {expected}, not {shown}")


__all__ = ["OFFLINE_DEFAULTS", "EXPECTED", "N_CTX_MAX", "N_CTX_MIN", "PATH_SETTINGS", "cache_dir", "check_environment",
           "check_lm_kwargs", "check_regular_file", "default_sweep_storage", "default_tracking_uri", "endpoint_env",
           "env_settings", "models_dir", "runs_dir"]
