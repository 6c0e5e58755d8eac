"""The command line's ``on_cost`` (:func:`cost_gate`): the cost line printed, and a question at a
terminal when the estimate passes ``--confirm-over``."""

from __future__ import annotations

import sys
from typing import Callable

from personalign._verbs.cost import Cost, duration


def cost_gate(confirm_over: float | None = None, *, assume_yes: bool = False, stream=None,
              stdin=None) -> Callable[[Cost], None]:
    """The command line's ``on_cost``: print :meth:`Cost.line` on ``stream`` (stderr); when the
    estimate passes ``confirm_over`` seconds and ``assume_yes`` is off, ask on a terminal and raise
    :class:`personalign.errors.Declined` unless the answer is yes. Never asks when ``stdin`` is not
    a terminal (CI, a pipe, a scheduler): it says so and the run goes on."""

    def on_cost(cost: Cost) -> None:
        from personalign.errors import Declined

        out, inp = stream or sys.stderr, stdin or sys.stdin
        out.write(cost.line() + "\n")
        seconds = cost.seconds
        if assume_yes or confirm_over is None or seconds is None or seconds <= confirm_over:
            out.flush()
            return
        over = f"the estimate ({duration(seconds)}) passes --confirm-over {confirm_over:g} s"
        if inp is None or not inp.isatty():
            out.write(f"note: {over}; not asking (stdin is not a terminal): running\n")
            out.flush()
            return
        out.write(f"{over}. Run it? [y/N] ")
        out.flush()
        if inp.readline().strip().lower() not in ("y", "yes"):
            raise Declined(f"not run: {over} and the answer was not yes (--yes skips the question)")

    return on_cost


__all__ = ["cost_gate"]
