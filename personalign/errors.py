"""User-facing errors.

Every error a user can cause (bad flags, bad files, missing models, unwritable directories)
is a :class:`PersonalignError`. The CLI prints its message on one line and exits with
``exit_code`` (2), without a traceback. Library callers catch it like any exception.
"""

from __future__ import annotations

from typing import TypeVar

E = TypeVar("E", bound=BaseException)


class PersonalignError(Exception):
    """Base class of errors caused by input or configuration; message is one line."""

    exit_code = 2


class ConfigurationError(PersonalignError):
    """A setting, flag or environment variable has an unusable value."""


class ArgumentError(ConfigurationError):
    """A verb's argument has an unusable value. The message names the Python argument
    (``limit must be >= 1, got 0``); the command line shows the flag instead (:meth:`as_flag`:
    ``--limit must be >= 1, got 0``).

    Attributes:
        argument: the Python argument's name (``n_boot``); problem: the rest of the message.
    """

    def __init__(self, argument: str, problem: str):
        self.argument, self.problem = argument, problem
        super().__init__(f"{argument} {problem}")

    def as_flag(self) -> str:
        """The message as the command line says it: the argument as its flag."""
        return f"--{self.argument.replace('_', '-')} {self.problem}"


class UsageProblem(ConfigurationError):
    """A command line that does not parse (click's usage errors: a bad value, a missing or unknown
    option), as one line."""


class UnknownModelError(ConfigurationError):
    """A ``local/...`` model string names no embedded model."""


class ModelFileError(PersonalignError):
    """A model file is missing, unreadable or fails its sha256 check."""


class CacheDirError(ConfigurationError):
    """The cache directory cannot be created or written."""


class ContextWindowError(PersonalignError):
    """A prompt does not fit the model's context window (n_ctx tokens)."""


class RateLimitedError(PersonalignError):
    """The model's endpoint kept refusing calls for the rate (HTTP 429) or as overloaded (503)
    after every retry the retry policy allows: the run stops (every call would fail alike); exit 1."""

    exit_code = 1


class LMCallFailed(PersonalignError):
    """A model call the run cannot do without (a forward pass of a batch of yes/no margins, which
    a scored strategy fits and scores together) failed after every retry the retry policy allows:
    the run stops, writing nothing half; the message names the model and the failure. Exit code 1."""

    exit_code = 1


class BudgetExceeded(PersonalignError):
    """The next model call would pass ``--max-cost``: the run stops before it, writing nothing
    half; the message says how far it got. Exit code 1."""

    exit_code = 1


class Declined(PersonalignError):
    """The run was not started: its estimated time passes the ``--confirm-over`` threshold and the
    answer at the terminal was not yes. Nothing ran; exit code 1."""

    exit_code = 1


def located(path: object, line: int | None, field: str | None, problem: str) -> str:
    """``"PATH[:LINE]: [field 'FIELD': ]PROBLEM"``: how a data problem is named (errors and warnings)."""
    where = str(path) if line is None else f"{path}:{line}"
    what = f"field '{field}': " if field else ""
    return f"{where}: {what}{problem}"


class DataError(PersonalignError):
    """A data file is malformed. The message names the file, the line and the field."""

    def __init__(self, path: object, line: int | None, field: str | None, problem: str):
        self.path, self.line, self.field, self.problem = str(path), line, field, problem
        super().__init__(located(path, line, field, problem))


class Interrupted(KeyboardInterrupt):
    """The process got SIGTERM (or SIGINT) and unwinds as from Ctrl-C: ``finally`` blocks and
    context managers run (MLflow runs are closed KILLED, temporary files removed) and the CLI
    exits ``128 + signal`` (130 for SIGINT, 143 for SIGTERM) with one line on stderr.

    Attributes:
        signum: the signal number.
    """

    def __init__(self, signum: int):
        import signal

        self.signum = signum
        super().__init__(signal.Signals(signum).name)


def note_partial(exc: BaseException, *paths) -> None:
    """Record on an interrupt (any ``KeyboardInterrupt``) the files a long run left holding its
    partial result (``"complete": false``), so the CLI's one line names them; None paths are
    skipped. They accumulate in ``exc.partial_files`` (a list of str)."""
    kept = [str(p) for p in paths if p]
    if kept:
        exc.partial_files = [*getattr(exc, "partial_files", []), *kept]


def note_killed_runs(exc: BaseException, *run_ids: str) -> None:
    """Record on an interrupt the MLflow runs it closed as KILLED, so the CLI's one line says so
    only when there were some (``exc.killed_runs``, a list of run ids)."""
    if run_ids:
        exc.killed_runs = [*getattr(exc, "killed_runs", []), *run_ids]


def printable(text: str) -> str:
    """``text`` safe to print on one line: a control character, an escape or a lone surrogate is
    shown as its Python escape (``\\n``, ``\\x1b``, ``\\ud800``); other text is kept. Every ``error:``
    line of the command line goes through it (a value holding a newline cannot forge a second line)."""
    return text if text.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def brief(exc: BaseException, limit: int = 200) -> str:
    """``"TypeName: first line of the message"`` (at most ``limit`` characters of it): how an
    unexpected exception is named inside one ``error:`` line or a result's ``*_error`` field."""
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:limit]}"


def find_in_chain(exc: BaseException | None, kind: type[E]) -> E | None:
    """The first exception of type ``kind`` in ``exc``'s cause/context chain (``exc`` included), or None."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, kind):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def find_personalign_error(exc: BaseException | None) -> PersonalignError | None:
    """Return the first :class:`PersonalignError` in an exception's cause/context chain.

    LM libraries (litellm, DSPy) wrap errors raised inside a provider; this recovers ours.
    """
    return find_in_chain(exc, PersonalignError)


__all__ = ["ArgumentError", "BudgetExceeded", "CacheDirError", "ConfigurationError", "ContextWindowError", "DataError",
           "Declined", "Interrupted", "ModelFileError", "PersonalignError", "RateLimitedError", "UnknownModelError",
           "UsageProblem", "brief", "find_in_chain", "find_personalign_error", "located", "note_killed_runs",
           "note_partial", "printable"]
