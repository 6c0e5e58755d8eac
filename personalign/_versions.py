"""The library versions personalign is tested on, and the guard that refuses the others.

personalign calls into DSPy, Optuna, MLflow and litellm internals that change between releases
(DSPy announced the removal of the custom-engine ``complete_legacy()`` path in 3.5, for one).
``make setup`` installs through ``constraints.txt``; this module holds the *ranges* the suite passed
on, and :func:`check_versions` — run once before the first command or public name (``personalign._launch``, ``personalign.__getattr__``) — refuses an installed version
outside them with one line, before a half-compatible library fails somewhere deep inside a run.

Reading versions uses :mod:`importlib.metadata` only (no library is imported; about a millisecond).
Set ``PERSONALIGN_ALLOW_UNTESTED=1`` to turn the refusal into a warning (at your own risk).
"""

from __future__ import annotations

import os
import sys
import warnings
from importlib import metadata

#: distribution name -> (lowest tested version, first untested version). Widen a bound only after
#: the whole suite (``make test``, slow tests included) passed on the new release; keep it in step
#: with ``pyproject.toml`` and ``constraints.txt``.
TESTED: dict[str, tuple[str, str]] = {
    "dspy": ("3.4", "3.5"),
    "optuna": ("4.0", "6"),
    "mlflow": ("3.0", "4"),
    "litellm": ("1.108", "2"),
}

ALLOW_ENV = "PERSONALIGN_ALLOW_UNTESTED"


class UntestedVersionError(ImportError):
    """An installed library is outside the range personalign is tested on. Message: one line."""

    exit_code = 2


def _release(version: str) -> tuple[int, ...]:
    from packaging.version import Version  # packaging ships with pip/setuptools and every wheel-era env

    return Version(version).release


def untested(installed: dict[str, str | None] | None = None) -> list[str]:
    """Return one message per installed library outside :data:`TESTED` (empty: all tested).

    Args:
        installed: distribution -> version (None: not installed); default: read from the
            environment with :func:`importlib.metadata.version`.
    """
    if installed is None:
        installed = {}
        for name in TESTED:
            try:
                installed[name] = metadata.version(name)
            except metadata.PackageNotFoundError:
                installed[name] = None
    problems = []
    for name, (low, high) in TESTED.items():
        version = installed.get(name)
        if version is None:
            continue  # a missing dependency fails at its own import, with pip's own message
        if not (_release(low) <= _release(version) < _release(high)):
            problems.append(f"{name} {version} is outside the tested range >={low},<{high}")
    return problems


def _one_line_hook(previous):
    def hook(exc_type, exc, tb):
        if issubclass(exc_type, UntestedVersionError):
            sys.stderr.write(f"error: {exc}\n")
            sys.stderr.flush()
            os._exit(UntestedVersionError.exit_code)
        previous(exc_type, exc, tb)

    return hook


def check_versions(installed: dict[str, str | None] | None = None) -> None:
    """Refuse untested library versions (see the module doc).

    Raises:
        UntestedVersionError: one line naming the library, its version and the tested range, and
            the two ways out (``make setup``, or ``PERSONALIGN_ALLOW_UNTESTED=1``). Left uncaught
            (the CLI, a script), it prints that line alone on stderr and exits with status 2.
    """
    problems = untested(installed)
    if not problems:
        return
    message = (
        "; ".join(problems)
        + " (install the tested versions: `pip install -c constraints.txt -e .`, or `make setup`;"
        + f" set {ALLOW_ENV}=1 to run anyway)"
    )
    if os.environ.get(ALLOW_ENV, "").strip().lower() in {"1", "true", "yes"}:
        warnings.warn(f"personalign: {message}", RuntimeWarning, stacklevel=2)
        return
    sys.excepthook = _one_line_hook(sys.excepthook)
    raise UntestedVersionError(message)
