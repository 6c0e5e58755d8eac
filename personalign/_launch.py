"""The console script ``personalign`` (``personalign = personalign._launch:main``).

It imports the command line inside a ``try``: a Ctrl-C (or SIGTERM, SIGHUP) while Python is
still importing it (the first ~0.2 s of a command) ends with one line and exit 130 (143, 129),
not Python's ``KeyboardInterrupt`` traceback or a silent death. Before this module runs, only ``personalign/__init__`` is imported (the offline
defaults: about a millisecond), which is why the package imports its public names lazily and
checks library versions here and on first use, not at import. A Ctrl-C earlier still, while
Python itself starts (its ``site`` module, the first ~20 ms), is Python's own. Once the command line is imported, :func:`personalign.cli.main` handles signals itself
(:mod:`personalign.cli._signals`).
"""

from __future__ import annotations

import sys


def _starting(signum: int, frame) -> None:
    raise KeyboardInterrupt(signum)


def main() -> None:
    """Import :mod:`personalign.cli` and run it; SIGINT, SIGTERM or SIGHUP during the import exits
    128 + signal in one line (Python's defaults: a traceback for SIGINT, a silent death for the others)."""
    try:  # from the first line: importing `signal` itself takes 10-20 ms (enum, functools) under load
        import signal

        for sig in (signal.SIGTERM, signal.SIGHUP):  # until the command installs its own (it restores them)
            if signal.getsignal(sig) is not signal.SIG_IGN:  # `nohup` ignores SIGHUP: kept ignored
                signal.signal(sig, _starting)
        from personalign._versions import check_versions

        check_versions()  # one line and exit 2 on an untested dspy/optuna/mlflow/litellm release
        from personalign.cli import main as cli_main
    except KeyboardInterrupt as exc:
        _starting_line(exc)
    try:  # the command installs its own handlers (personalign.cli._signals) and turns interrupts into
        cli_main()  # one line; one that escapes came before it did: nothing has run yet
    except KeyboardInterrupt as exc:
        _starting_line(exc)


def _starting_line(exc: KeyboardInterrupt) -> None:
    import signal

    signum = getattr(exc, "signum", None) or (exc.args[0] if exc.args and isinstance(exc.args[0], int)
                                                else signal.SIGINT)
    sys.stderr.write(f"interrupted ({signal.Signals(signum).name}) while starting: nothing was run\n")
    raise SystemExit(128 + signum) from None


__all__ = ["main"]
