"""Ctrl-C, SIGTERM and SIGHUP for every command, in one place: unwind, clean up, one line, exit
128 + signal (130, 143, 129).

:func:`handle_signals` installs one handler for SIGINT, SIGTERM and SIGHUP that raises
:class:`personalign.errors.Interrupted` (a ``KeyboardInterrupt``) in the main thread, so the
command unwinds as from Ctrl-C: context managers close their MLflow runs as KILLED
(:meth:`personalign.tracking.Tracker.run`), Optuna marks the running trial FAIL, temporary files
are removed and result files, written only at the end and atomically, are not written. A second
signal while unwinding exits at once (``os._exit``); the next command closes what was left open
(runs of dead processes as KILLED, stale trials as FAIL). An interrupt raised inside a garbage
collector's finalizer (where Python would swallow it) is raised again in the command's own code
(:func:`_unraisable`): an interrupted command never ends with a complete result and exit 0.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import Iterator

from personalign.errors import Interrupted, find_in_chain

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # Ctrl-C, kill, the terminal closed
_handled: list[int] = list(SIGNALS)  # SIGHUP only when not ignored at the start (`nohup` ignores it)
_received: list[int] = []  # signals received within handle_signals (main() checks it at the end)


def _handler(signum: int, frame) -> None:
    _received.append(signum)
    for sig in _handled:  # a second signal while unwinding: stop now
        signal.signal(sig, _again)
    raise Interrupted(signum)


def _unraisable(previous):
    """A ``sys.unraisablehook`` that raises again, in the command's own code, an
    :class:`Interrupted` Python swallowed.

    A signal handler runs between any two bytecodes of the main thread, also inside a ``__del__``
    or a weakref callback run by the garbage collector (SQLAlchemy closes connections in such
    callbacks); an exception raised there cannot propagate: Python prints "Exception ignored in
    ..." and the interrupted command would run on to a complete result. This hook drops that
    message and arms :func:`_raise_at_next_event` on the frames of the code the finalizer
    interrupted: the interrupt is raised there, at the next line (or return) that code executes,
    however much time the process spends in finalizers."""

    def hook(unraisable) -> None:
        import threading

        exc = unraisable.exc_value
        if isinstance(exc, Interrupted) and _received and threading.current_thread() is threading.main_thread():
            import inspect

            here = inspect.currentframe()
            _raise_at_next_event(here.f_back if here is not None else None, exc.signum)
            return
        previous(unraisable)

    return hook


def _raise_at_next_event(frame, signum: int) -> None:
    """Raise :class:`Interrupted` at the next trace event (a line, a return) of ``frame`` or of a
    frame below it on the stack -- the way ``pdb.set_trace`` stops there: each frame's ``f_trace``
    and a global trace function that leaves new frames (more finalizers) untraced. The first event
    restores the previous trace function, disarms every frame and raises (through :func:`_handler`,
    so a further signal exits at once)."""
    previous = sys.gettrace()
    armed = []
    fired: list[bool] = []

    def disarm() -> None:
        for f in armed:
            f.f_trace = None
        sys.settrace(previous)

    def local(f, event, arg):
        if fired:
            return None
        fired.append(True)
        disarm()
        _handler(signum, f)  # raises in f
        return None

    def untraced(f, event, arg):
        return None

    while frame is not None:
        frame.f_trace = local
        frame.f_trace_lines = True
        armed.append(frame)
        frame = frame.f_back
    for sig in _handled:  # not delivered yet: a second signal now is still a first one
        signal.signal(sig, _handler)
    sys.settrace(untraced)


def _again(signum: int, frame) -> None:
    sys.stderr.write(f"interrupted again ({signal.Signals(signum).name}): exiting without cleanup\n")
    sys.stderr.flush()
    os._exit(128 + signum)


@contextlib.contextmanager
def handle_signals() -> Iterator[None]:
    """Within the block, SIGINT, SIGTERM and SIGHUP raise :class:`Interrupted` (main thread only;
    elsewhere a no-op; SIGHUP stays ignored under ``nohup``); one swallowed inside a finalizer is raised again in the code it interrupted
    (:func:`_unraisable`), and a block that ends normally although a signal came raises it at the
    end. The previous handlers and ``sys.unraisablehook`` are restored after it (callers in the
    same process, e.g. tests)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in SIGNALS}
    _handled[:] = [sig for sig in SIGNALS if sig != signal.SIGHUP or previous[sig] is not signal.SIG_IGN]
    previous_hook = sys.unraisablehook
    _received.clear()
    for sig in _handled:
        signal.signal(sig, _handler)
    sys.unraisablehook = _unraisable(previous_hook)
    try:
        try:
            yield
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            # a signal came but its interrupt never reached the top (a success, an error, another exit
            # code): the run was still interrupted (128 + signal), whatever it did after
            if _received and not (isinstance(exc, SystemExit) and exc.code in (128 + s for s in SIGNALS)):
                raise Interrupted(_received[0]) from exc
            raise
        if _received:
            raise Interrupted(_received[0])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sys.unraisablehook = previous_hook


def interrupt_of(exc: BaseException | None) -> KeyboardInterrupt | None:
    """The ``KeyboardInterrupt`` in ``exc``'s cause/context chain (typer turns Ctrl-C into
    ``typer.Exit(130)`` raised from it), or None."""
    return find_in_chain(exc, KeyboardInterrupt)


def exit_code(exc: KeyboardInterrupt) -> int:
    """``128 + signal``: 130 for Ctrl-C / SIGINT, 143 for SIGTERM."""
    return 128 + getattr(exc, "signum", signal.SIGINT)


def message(exc: KeyboardInterrupt) -> str:
    """The one stderr line of an interrupted command; it counts the MLflow runs closed as KILLED
    (:func:`personalign.errors.note_killed_runs`) and names the files that keep a partial result
    (``"complete": false``, :func:`personalign.errors.note_partial`) only when there were some."""
    name = signal.Signals(getattr(exc, "signum", signal.SIGINT)).name
    line = f"interrupted ({name}): no complete result written"
    killed = list(dict.fromkeys(getattr(exc, "killed_runs", None) or ()))
    if killed:
        line += f"; {len(killed)} open MLflow {'run' if len(killed) == 1 else 'runs'} closed as KILLED"
    partial = list(dict.fromkeys(getattr(exc, "partial_files", None) or ()))
    if partial:
        line += f"; the partial result (\"complete\": false) is in {', '.join(partial)}"
    return line


__all__ = ["exit_code", "handle_signals", "interrupt_of", "message"]
