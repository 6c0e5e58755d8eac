"""Flag checks every command runs before it touches anything (light: no heavy imports).

The output-path checks are :func:`personalign.data.check_out_dir` / ``check_out_file`` (library code uses them too).

Each raises :class:`personalign.errors.ConfigurationError`, which the CLI prints as one line and
exit code 2. Used as typer option callbacks (``callback=lm_option``) or called directly.
"""

from __future__ import annotations

from personalign.errors import ConfigurationError
from personalign.redaction import redact


def lm_option(value: str | None) -> str | None:
    """Typer callback of ``--lm``: None (the default model) or a non-blank model string.

    Raises:
        ConfigurationError: ``--lm ''`` or only whitespace (it would silently mean the default).
    """
    if value is not None and not value.strip():
        raise ConfigurationError("--lm is empty; give a model string (e.g. local/smollm2-135m-instruct) or omit "
                                 "--lm for the default model")
    return value.strip() if value is not None else None


def max_cost_option(value: str | None) -> float | None:
    """Typer callback of ``--max-cost``: None (no limit) or a finite number of dollars >= 0.

    Raises:
        ConfigurationError: negative, NaN, infinite or not a number (one line, exit 2).
    """
    if value is None:
        return None
    try:
        out = float(value.strip())
    except ValueError:
        out = float("nan")
    if not out >= 0 or out == float("inf"):
        shown = value if len(value) <= 40 else value[:40] + "..."
        raise ConfigurationError(f"--max-cost must be a finite number of dollars >= 0 (e.g. 0.50), not {shown!r}")
    return out


def api_base_option(value: str | None) -> str | None:
    """Typer callback of ``--api-base``: an ``http(s)://`` URL, passed to the verb (``api_base=``).

    Raises:
        ConfigurationError: not an http(s) URL (the value quoted with its password as ``***``).
    """
    if value is None:
        return None
    url = value.strip()
    if not url.startswith(("http://", "https://")):
        shown = repr(redact(value)) if len(value) <= 200 and value.startswith(("http", "ftp", "ws")) else \
            "the value given (not shown: it may hold a secret)"
        raise ConfigurationError(f"--api-base must be an http(s):// URL of an OpenAI-compatible server "
                                 f"(e.g. http://127.0.0.1:8000/v1), not {shown}")
    return url


def parse_lm_kwargs(value: str | None) -> dict | None:
    """``--lm-kwargs``: a JSON object of litellm/``dspy.LM`` kwargs, as a dict (None when not given).

    Raises:
        ConfigurationError: not a JSON object (one line saying where and what is wrong, never the
            value: it may hold a key).
    """
    import json

    if value is None or not value.strip():
        return None
    try:
        kwargs = json.loads(value)
    except ValueError as exc:
        raise ConfigurationError(f"--lm-kwargs: the value is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno} "
                                 f"(char {exc.pos}); the value is not shown)") from None
    except RecursionError:
        raise ConfigurationError("--lm-kwargs: the value is nested too deeply to read; the value is not shown") from None
    if not isinstance(kwargs, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
        raise ConfigurationError(f"--lm-kwargs: must be a JSON object, not {kind.get(type(kwargs), 'null')}")
    from personalign.settings import check_lm_kwargs

    check_lm_kwargs(kwargs)
    return kwargs


def lm_kwargs_option(value: str | None) -> str | None:
    """Typer callback of ``--lm-kwargs``: checked now (:func:`parse_lm_kwargs`), passed to the verb.

    Raises:
        ConfigurationError: not a JSON object.
    """
    parse_lm_kwargs(value)
    return value


__all__ = ["api_base_option", "lm_kwargs_option", "lm_option", "parse_lm_kwargs"]
