"""Ctrl-C and SIGTERM for every command, in one place: unwind, clean up, one line, exit 128 + signal.

:func:`handle_signals` installs one handler for SIGINT and SIGTERM that raises
:class:`personalign.errors.Interrupted` (a ``KeyboardInterrupt``) in the main thread, so the
command unwinds as from Ctrl-C: context managers close their MLflow runs as KILLED
(:meth:`personalign.tracking.Tracker.run`), Optuna marks the running trial FAIL, temporary files
are removed and result files, written only at the end and atomically, are not written. A second
signal while unwinding exits at once (``os._exit``); the next command closes what was left open
(runs of dead processes as KILLED, stale trials as FAIL).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import Iterator

from personalign.errors import Interrupted, find_in_chain

SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _handler(signum: int, frame) -> None:
    for sig in SIGNALS:  # a second signal while unwinding: stop now
        signal.signal(sig, _again)
    raise Interrupted(signum)


def _again(signum: int, frame) -> None:
    sys.stderr.write(f"interrupted again ({signal.Signals(signum).name}): exiting without cleanup\n")
    sys.stderr.flush()
    os._exit(128 + signum)


@contextlib.contextmanager
def handle_signals() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise :class:`Interrupted` (main thread only; elsewhere a
    no-op); the previous handlers are restored after it (callers in the same process, e.g. tests)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in SIGNALS}
    for sig in SIGNALS:
        signal.signal(sig, _handler)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def interrupt_of(exc: BaseException | None) -> KeyboardInterrupt | None:
    """The ``KeyboardInterrupt`` in ``exc``'s cause/context chain (typer turns Ctrl-C into
    ``typer.Exit(130)`` raised from it), or None."""
    return find_in_chain(exc, KeyboardInterrupt)


def exit_code(exc: KeyboardInterrupt) -> int:
    """``128 + signal``: 130 for Ctrl-C / SIGINT, 143 for SIGTERM."""
    return 128 + getattr(exc, "signum", signal.SIGINT)


def message(exc: KeyboardInterrupt) -> str:
    """The one stderr line of an interrupted command; it names the files that keep a partial
    result (``"complete": false``) only when the command wrote one
    (:func:`personalign.errors.note_partial`)."""
    name = signal.Signals(getattr(exc, "signum", signal.SIGINT)).name
    line = f"interrupted ({name}): open MLflow runs closed as KILLED, no complete result written"
    partial = list(dict.fromkeys(getattr(exc, "partial_files", None) or ()))
    if partial:
        line += f"; the partial result (\"complete\": false) is in {', '.join(partial)}"
    return line


__all__ = ["exit_code", "handle_signals", "interrupt_of", "message"]
