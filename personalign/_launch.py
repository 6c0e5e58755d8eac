"""The console script ``personalign`` (``personalign = personalign._launch:main``).

It imports the command line inside a ``try``: a Ctrl-C while Python is still importing it (the
first ~0.2 s of a command) ends with one line and exit 130, not Python's ``KeyboardInterrupt``
traceback. Before this module runs, only ``personalign/__init__`` is imported (the offline
defaults: about a millisecond), which is why the package imports its public names lazily and
checks library versions here and on first use, not at import. A Ctrl-C earlier still, while
Python itself starts (its ``site`` module, the first ~20 ms), is Python's own. Once the command line is imported, :func:`personalign.cli.main` handles signals itself
(:mod:`personalign.cli._signals`).
"""

from __future__ import annotations

import sys


def main() -> None:
    """Import :mod:`personalign.cli` and run it; an interrupt during the import exits 130 in one line."""
    try:
        from personalign._versions import check_versions

        check_versions()  # one line and exit 2 on an untested dspy/optuna/mlflow/litellm release
        from personalign.cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("interrupted (SIGINT) while starting: nothing was run\n")
        raise SystemExit(130) from None
    cli_main()


__all__ = ["main"]
