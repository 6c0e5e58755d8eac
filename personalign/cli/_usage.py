"""Click's usage errors as one line: the root group of ``personalign`` turns every click exception
raised while parsing or dispatching (a bad value such as ``--limit -5``, a missing option or
argument, an unknown option or command) into :class:`personalign.errors.UsageProblem`, which
:func:`personalign.cli.main` prints as ``error: <message> (try 'personalign CMD --help')`` and exits
2, as every input error.

Only the exception changes, not the flow: Ctrl-C and SIGTERM still reach typer and ``main()``'s
interrupt line (exit 130/143); ``--help`` and ``typer.Exit`` are not click exceptions; and
``personalign`` with no arguments still prints the help (click's ``NoArgsIsHelpError`` passes
through). Typer >= 0.29 carries its own copy of click, whose exceptions derive from
``typer.TyperException``; older typers raise ``click.ClickException``: both are caught.
"""

from __future__ import annotations

from contextlib import contextmanager

import click
import typer
from typer.core import TyperGroup

from personalign.errors import UsageProblem

#: The click exceptions of the installed typer (its own copy of click, or click itself).
CLICK_ERRORS = tuple({getattr(typer, "TyperException", click.ClickException), click.ClickException})


def _is_help(exc: BaseException) -> bool:
    """``personalign`` (or a group) with no arguments: click shows the help through this exception."""
    return any(c.__name__ == "NoArgsIsHelpError" for c in type(exc).__mro__)


def one_line(exc: Exception) -> UsageProblem:
    """The :class:`UsageProblem` of a click exception: its message and, for a usage error (exit
    code 2, with a context), where to find help."""
    message = (exc.format_message() if hasattr(exc, "format_message") else str(exc)).rstrip(".")
    ctx = getattr(exc, "ctx", None)
    if getattr(exc, "exit_code", None) == 2 and ctx is not None:
        message += f" (try '{ctx.command_path} --help')"
    return UsageProblem(message)


@contextmanager
def _one_line_usage():
    """Re-raise a click exception (not the no-arguments help) as its :func:`one_line` problem."""
    try:
        yield
    except CLICK_ERRORS as exc:
        if _is_help(exc):
            raise
        raise one_line(exc) from None


class OneLineUsageGroup(TyperGroup):
    """The root command group (``typer.Typer(cls=OneLineUsageGroup)``): see the module docstring."""

    def make_context(self, info_name, args, parent=None, **extra):
        with _one_line_usage():
            return super().make_context(info_name, args, parent=parent, **extra)

    def invoke(self, ctx):
        with _one_line_usage():
            return super().invoke(ctx)


__all__ = ["CLICK_ERRORS", "OneLineUsageGroup", "one_line"]
