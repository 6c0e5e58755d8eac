"""Flag checks every command runs before it touches anything (light: no heavy imports).

The output-path checks live in :mod:`personalign._paths` (library code uses them too).

Each raises :class:`personalign.errors.ConfigurationError`, which the CLI prints as one line and
exit code 2. Used as typer option callbacks (``callback=lm_option``) or called directly.
"""

from __future__ import annotations

from personalign._paths import check_out_dir, check_out_file  # noqa: F401  (re-exported for the commands)
from personalign.errors import ConfigurationError


def lm_option(value: str | None) -> str | None:
    """Typer callback of ``--lm``: None (the default model) or a non-blank model string.

    Raises:
        ConfigurationError: ``--lm ''`` or only whitespace (it would silently mean the default).
    """
    if value is not None and not value.strip():
        raise ConfigurationError("--lm is empty; give a model string (e.g. local/smollm2-135m-instruct) or omit "
                                 "--lm for the default model")
    return value.strip() if value is not None else None


__all__ = ["check_out_dir", "check_out_file", "lm_option"]
