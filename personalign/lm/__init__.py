"""LM backends: the embedded llama.cpp models behind litellm, settings, cache and call counting.

Public API::

    lm = personalign.lm.make_lm("local/qwen2.5-coder-1.5b-instruct")   # or any litellm model string
    with personalign.lm.use(lm):                                  # dspy.context(lm=..., adapter=...)
        dspy.Predict(MySignature)(...)

``make_lm`` validates the model string (an unknown ``local/NAME`` or a string litellm cannot route
raises :class:`~personalign.errors.UnknownModelError`), registers the ``local`` litellm provider,
and for embedded models checks the model file (sha256) before the first call. ``count_tokens`` /
``prompt_tokens`` / ``context_window`` measure text and prompts on an embedded model's tokenizer
(:mod:`personalign.lm.tokens`). ``use`` picks DSPy's JSONAdapter for embedded models, so every
typed output is grammar-constrained (see :mod:`personalign.lm._provider`), and ChatAdapter (DSPy's
default) for other models.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Iterator

from personalign.errors import CacheDirError, UnknownModelError
from personalign.lm._models import (DEFAULT_MODEL, FAST_MODEL, MODELS, PROVIDER, TINY_MODEL, default_model, get_spec,
                                    how_verified, is_local, model_file)
from personalign.lm.tokens import context_window, count_tokens, prompt_tokens

__all__ = [
    "bench_model", "DEFAULT_MODEL", "default_model", "FAST_MODEL", "TINY_MODEL", "MODELS", "LocalSettings",
    "CallCounter", "calls_text", "check_cache_dir", "configure_cache", "configure_local", "current_settings",
    "grammar_constrained", "context_window", "count_tokens", "prompt_tokens", "make_lm", "adapter_for",
    "adapter_name", "resolve_lm", "model_file", "how_verified", "use", "concurrency", "is_local",
]


def __getattr__(name: str):
    if name == "bench_model":
        from personalign.lm.speed import bench_model

        return bench_model
    if name in ("CallCounter", "calls_text"):
        from personalign.lm import calls

        return getattr(calls, name)
    if name == "LocalSettings":
        from personalign.lm._engine import LocalSettings

        return LocalSettings
    raise AttributeError(name)


def resolve_lm(lm: Any = None, uses_lm: bool = True):
    """The ``dspy.LM`` a program runs on: None -> the default model (:func:`default_model`), a model
    string -> :func:`make_lm`, an LM object unchanged; None when the program uses no LM
    (``uses_lm`` False). Raises :class:`~personalign.errors.UnknownModelError` like ``make_lm``."""
    if not uses_lm:
        return None
    if lm is None or isinstance(lm, str):
        return make_lm(lm or default_model())
    return lm


def configure_local(**settings: Any) -> None:
    """Change the embedded backend's settings (n_ctx, n_threads, seed, temperature, max_tokens,
    max_string_chars, max_list_items); see :class:`LocalSettings`."""
    from dataclasses import replace

    from personalign.lm._engine import configure_settings, current_settings

    configure_settings(replace(current_settings(), **settings))


def current_settings():
    """The embedded backend's active :class:`LocalSettings` (from ``PERSONALIGN_*`` environment
    variables until :func:`configure_local` changes them)."""
    from personalign.lm._engine import current_settings as _current

    return _current()


def grammar_constrained(model: str) -> bool:
    """True when ``model``'s typed outputs are grammar-constrained: litellm reports schema support
    and the ``response_format`` parameter, so DSPy's JSONAdapter sends the signature's schema."""
    from personalign.lm._provider import grammar_constrained as _constrained

    return _constrained(model)


def check_cache_dir(cache_dir: str | os.PathLike | None = None) -> Path:
    """The DSPy cache directory (``cache_dir``, default ``runs/cache``), created and checked
    writable, without importing DSPy.

    Raises:
        CacheDirError: the directory cannot be created or written (one-line message with the path).
    """
    from personalign.settings import cache_dir as default_cache_dir

    path = Path(cache_dir).expanduser().absolute() if cache_dir else default_cache_dir()
    try:
        path.mkdir(mode=0o755, parents=True, exist_ok=True)  # never group-writable (it will hold pickles)
        probe = path / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise CacheDirError(
            f"cache dir {path} is not writable ({exc.strerror or exc}); pass --cache-dir DIR, set "
            "PERSONALIGN_CACHE_DIR, or --no-cache"
        ) from None
    _check_cache_files(path)
    return path


def _check_cache_files(path: Path) -> None:
    """DSPy's disk cache (diskcache's ``FanoutCache``: shard directories ``000``, ``001``, ... each
    holding an SQLite ``cache.db``) is opened only if what exists of it has the right kind: a FIFO
    would block SQLite, a directory would crash it.

    Raises:
        CacheDirError: one line naming the entry and what it is.
    """
    import stat

    entries = [(path / "cache.db", stat.S_ISREG, "a regular file")]
    for shard in [*sorted(path.glob("[0-9][0-9][0-9]")), path / "forward-pass", path / "ledger"]:
        entries += [(shard, stat.S_ISDIR, "a directory"), (shard / "cache.db", stat.S_ISREG, "a regular file")]
    for entry, ok, kind in entries:
        try:
            mode = entry.stat().st_mode
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise CacheDirError(f"cache dir {path}: {entry.name} cannot be read ({exc.strerror or exc}); "
                                "pass another --cache-dir, or --no-cache") from None
        if not ok(mode):
            raise CacheDirError(f"cache dir {path}: {entry.relative_to(path)} is not {kind} (DSPy's disk cache "
                                "could not open it); remove it, pass another --cache-dir, or --no-cache")
    from personalign.lm._cache_trust import check_cache_trust

    check_cache_trust(path)  # owned by the user, not writable by others, SQLite files that open


def configure_cache(cache_dir: str | os.PathLike | None = None, *, enabled: bool = True) -> Path | None:
    """Point DSPy's disk + memory cache at ``cache_dir`` (default ``runs/cache``): a
    :class:`personalign.lm.ledger.KeyedCache`, DSPy's cache whose keys a projection can look up.

    Returns the directory (None when disabled).

    Raises:
        CacheDirError: the directory cannot be created or written (one-line message with the path).
    """
    from personalign.settings import cache_dir as default_cache_dir

    path = check_cache_dir(cache_dir) if enabled else (
        Path(cache_dir).expanduser().absolute() if cache_dir else default_cache_dir())
    os.environ.setdefault("DSPY_CACHEDIR", str(path))
    from personalign.lm.ledger import install

    install(enabled, str(path))  # DSPy's cache, whose keys a projection can look up (personalign.lm.ledger)
    return path if enabled else None


def _check_routable(model: str) -> None:
    import io

    import litellm

    try:
        with contextlib.redirect_stdout(io.StringIO()):  # litellm prints a provider list on failure
            litellm.get_llm_provider(model=model)
    except Exception:
        raise UnknownModelError(
            f"unknown model string '{model}': litellm cannot route it; use local/qwen2.5-coder-1.5b-instruct, "
            "local/qwen2.5-coder-0.5b-instruct, local/smollm2-135m-instruct, or a litellm string such as openai/gpt-4o-mini or ollama_chat/llama3"
        ) from None


def make_lm(model: str | None = None, *, temperature: float | None = None, max_tokens: int | None = None,
            cache: bool = True, num_retries: int = 2, load: bool = True, api_base: str | None = None,
            **kwargs: Any):
    """Build a ``dspy.LM`` for an embedded model (``local/NAME``) or any litellm model string.

    Args:
        model: None = :func:`default_model` (``PERSONALIGN_LM``, else
            ``local/qwen2.5-coder-1.5b-instruct``), ``local/qwen2.5-coder-0.5b-instruct``
            (fast), ``local/smollm2-135m-instruct`` (tiny, at chance) or a litellm string.
        temperature: sampling temperature (default 0.0 for embedded models and self-hosted
            endpoints, DSPy's default for hosted ones).
        max_tokens: output budget in tokens (default 512 for embedded models and endpoints).
        cache: use DSPy's cache (configure where with :func:`configure_cache`).
        num_retries: litellm retries of transient failures.
        load: for embedded models, load and verify the model now; for a model on an ``api_base``,
            run the endpoint's capability check now (:func:`personalign.lm.serving.probe`, one
            line on stderr). Errors surface here, not mid-run.
        api_base: an OpenAI-compatible server for a non-embedded model (default
            ``PERSONALIGN_API_BASE``); extra litellm kwargs come from ``kwargs`` and
            ``PERSONALIGN_LM_KWARGS`` (a JSON object; ``kwargs`` win).

    Raises:
        UnknownModelError: unknown ``local/NAME`` or a string litellm cannot route.
        ModelFileError: the embedded model file is missing or fails its sha256 check.
        ConfigurationError: the endpoint cannot be reached, or PERSONALIGN_LM_KWARGS is not a JSON object.
    """

    from personalign.lm._provider import register
    from personalign.settings import endpoint_env

    model = model or default_model()
    extra: dict[str, Any] = {}
    if is_local(model):
        get_spec(model)
        register()
        if load:
            from personalign.lm._engine import get_engine

            get_engine(model)
        temperature = 0.0 if temperature is None else temperature
        max_tokens = 512 if max_tokens is None else max_tokens
    else:
        env_base, env_kwargs = endpoint_env()
        extra.update(env_kwargs)
        api_base = api_base or extra.pop("api_base", None) or env_base
        if not api_base:  # a served model is checked by its capability probe, without importing litellm (~4 s)
            register()
            _check_routable(model)
        if api_base:  # a self-hosted server: deterministic by default, like the embedded engine
            extra["api_base"] = _userinfo_to_header(api_base, extra)
            if model.startswith("openai/") and "api_key" not in extra and "api_key" not in kwargs \
                    and not os.environ.get("OPENAI_API_KEY"):
                extra["api_key"] = "none"  # a local server wants none; the OpenAI client insists on one
            temperature = 0.0 if temperature is None else temperature
            max_tokens = 512 if max_tokens is None else max_tokens
    extra.update(kwargs)
    if temperature is not None:
        extra["temperature"] = temperature
    if max_tokens is not None:
        extra["max_tokens"] = max_tokens
    from personalign.settings import check_lm_kwargs

    check_lm_kwargs(extra)  # --lm-kwargs / lm_kwargs: one line per wrong type, before any model is built
    num_retries = extra.pop("num_retries", num_retries)  # --lm-kwargs may set it (checked: settings.check_lm_kwargs)
    from personalign.lm.client import ENDPOINT_TIMEOUT, LM

    if not is_local(model):
        extra.setdefault("timeout", ENDPOINT_TIMEOUT)  # a hung endpoint fails the call, not the run
    # DSPy's own retries off: the one retry policy (personalign.lm.retry) runs in LM.__call__
    lm = LM(model, cache=cache, num_retries=0, **extra)
    lm.transient_retries = int(num_retries)
    if load and not is_local(model) and api_base:
        from personalign.lm.serving import probe

        probe(lm)
    return lm


def _userinfo_to_header(api_base: str, extra: dict) -> str:
    """``api_base`` without its user-info (``http://user:PW@host/v1`` -> ``http://host/v1``), sent
    instead as the HTTP Basic ``Authorization`` header it stands for (RFC 7617), so that the
    password is never part of what litellm returns and DSPy's cache stores (``api_base`` in a
    response's hidden parameters). A header the caller set is kept.

    Raises:
        ConfigurationError: a query parameter holding a secret (``?key=``, ``?api_key=``, ``?sig=``):
            it cannot be moved to a header for the server, and would be stored with every response."""
    import base64
    import re
    from urllib.parse import unquote, urlsplit, urlunsplit

    from personalign.redaction import query_secret

    parts = urlsplit(api_base)
    params = parts.path.partition(";")[2]  # matrix parameters (";key=...") count as a query
    pairs = [p.partition("=")[0] for p in re.split(r"[&;]", f"{parts.query};{params}") if p]
    for name in pairs:
        if query_secret(name):
            from personalign.errors import ConfigurationError

            raise ConfigurationError(f"--api-base: its query holds a secret ({name}=***), which DSPy's response cache "
                                     "would store; send it as a header instead: --lm-kwargs "
                                     "'{\"extra_headers\": {\"x-api-key\": \"...\"}}' (or the provider's api_key)")
    if "@" not in parts.netloc:
        return api_base
    info, host = parts.netloc.rsplit("@", 1)
    user, _, password = info.partition(":")
    headers = dict(extra.get("extra_headers") or {})
    if not any(k.lower() == "authorization" for k in headers):
        token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    extra["extra_headers"] = headers
    return urlunsplit(parts._replace(netloc=host))


def adapter_for(model: str):
    """The DSPy adapter a model's programs run through: JSONAdapter (grammar-constrained typed
    outputs) for embedded models; for an endpoint probed by :func:`make_lm`, JSONAdapter sending
    the schema in the server's dialect when it constrains to one
    (:func:`personalign.lm.serving.schema_adapter`), else ChatAdapter; for other models,
    JSONAdapter when litellm reports JSON-schema support, else ChatAdapter (DSPy's default)."""
    import dspy

    if is_local(model):
        return dspy.JSONAdapter()
    from personalign.lm.serving import known, schema_adapter

    endpoint = known(model)
    if endpoint is not None:
        return schema_adapter(endpoint.schema_dialect) if endpoint.schema_dialect else dspy.ChatAdapter()
    return dspy.JSONAdapter() if _litellm_schema(model) else dspy.ChatAdapter()


def _litellm_schema(model: str) -> bool:
    try:
        import litellm

        return bool(litellm.supports_response_schema(model=model))
    except Exception:  # noqa: BLE001 -- unknown to litellm's model map
        return False


def adapter_name(model: str) -> str:
    """The name of :func:`adapter_for`'s adapter, as printed and recorded (run records' ``adapter``):
    ``json-grammar`` (embedded), ``json-schema[DIALECT]`` (an endpoint), ``json`` or ``chat``."""
    import dspy

    adapter = adapter_for(model)
    if is_local(model):
        return "json-grammar"
    name = getattr(adapter, "name", None)
    if name:
        return name
    return "json" if isinstance(adapter, dspy.JSONAdapter) else "chat"


#: The ``dspy.context`` key holding the run's calls in flight (:func:`use`, :func:`concurrency`).
CONCURRENCY_KEY = "personalign_concurrency"


@contextlib.contextmanager
def use(lm, *, concurrency: int | None = None) -> Iterator[Any]:
    """``dspy.context`` with ``lm`` and its adapter, entered once per verb (inner layers run inside
    it). Safe from worker threads (never ``dspy.configure``). ``lm`` None: nothing changes (an
    LM-free run, or the caller's context already holds the model). ``concurrency``: the calls the
    run keeps in flight (:func:`concurrency`), and the cap of the endpoint's window
    (:class:`personalign.lm.flight.Window`)."""
    import dspy

    extra = {}
    if concurrency is not None:
        extra[CONCURRENCY_KEY] = int(concurrency)
        if lm is not None:
            from personalign.lm.client import endpoint_key
            from personalign.lm.flight import window_for

            window_for(endpoint_key(lm), int(concurrency))
    if lm is None:
        with dspy.context(**extra) if extra else contextlib.nullcontext():
            yield None
        return
    with dspy.context(lm=lm, adapter=adapter_for(lm.model), **extra):
        yield lm


def concurrency(lm=None) -> int:
    """The calls in flight the current run keeps: the value :func:`use` entered, else the
    default for ``lm`` (or the context's model): 1 for the embedded engine and DSPy's ``DummyLM``
    (its answers are a sequence), 32 for any other (:func:`personalign.lm.flight.in_flight_default`)."""
    import dspy

    from personalign.lm.flight import in_flight_default

    value = dspy.settings.get(CONCURRENCY_KEY)
    if value:
        return int(value)
    lm = lm if lm is not None else dspy.settings.lm
    from dspy.utils import DummyLM

    if isinstance(lm, DummyLM):  # in-process answers given in order: side by side they would be scrambled
        return 1
    return in_flight_default(getattr(lm, "model", None))
