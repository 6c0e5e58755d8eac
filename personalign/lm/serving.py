"""The same program on an OpenAI-compatible server (llama.cpp's server, llama-cpp-python's
``python -m llama_cpp.server``, vLLM, a hosted API): capability check, adapter, log-probabilities.

An endpoint is a litellm model string plus an ``api_base`` (``--api-base`` /
``PERSONALIGN_API_BASE``; model kwargs from ``--lm-kwargs`` / ``PERSONALIGN_LM_KWARGS``).
:func:`probe` asks it two short questions at start and reports in one line what it can do:

* **typed outputs**: whether it constrains an answer to a JSON schema, in which request dialect --
  OpenAI's ``{"type": "json_schema", "json_schema": {"schema": ...}}`` (OpenAI, vLLM, llama.cpp's
  C++ server) or ``{"type": "json_object", "schema": ...}`` (llama-cpp-python's server). With
  one, programs run through :class:`SchemaAdapter` (DSPy's JSONAdapter sending the signature's
  schema, bounded exactly as the embedded engine bounds it, so a greedy decode follows the same
  grammar); without, through DSPy's ChatAdapter (free text, parsed).
* **top_logprobs**: whether answers carry ``logprobs.content[i].top_logprobs``; ``yes-prob``
  (:func:`yes_no_margin`), the judges' margin and decision calibration need them.

Sources: OpenAI's Chat Completions ``response_format`` / ``logprobs`` / ``top_logprobs``;
llama-cpp-python ``llama_chat_format`` (``json_object`` + ``schema``, grammar from the schema).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

from personalign.errors import ConfigurationError, PersonalignError
from personalign.redaction import redact

PROBE_FIELD = "zq_flag"  # a key no unconstrained model writes for "Say hello."
PROBE_SCHEMA = {"type": "object", "properties": {PROBE_FIELD: {"type": "boolean"}}, "required": [PROBE_FIELD],
                "additionalProperties": False}
DIALECTS = ("json_schema", "json_object")


@dataclass(frozen=True)
class Endpoint:
    """What an OpenAI-compatible endpoint can do, as measured by :func:`probe`.

    Attributes:
        model: the litellm model string. api_base: the server URL (None: litellm's default).
        schema_dialect: ``"json_schema"``, ``"json_object"`` or None (no schema-constrained output).
        top_logprobs: alternatives per token it returned (0: none).
    """

    model: str
    api_base: str | None
    schema_dialect: str | None
    top_logprobs: int

    @property
    def adapter(self) -> str:
        """The adapter name recorded in run records (``adapter`` field)."""
        return f"json-schema[{self.schema_dialect}]" if self.schema_dialect else "chat"

    def summary(self) -> str:
        """One line: what the endpoint does and lacks, and the adapter in use."""
        where = f"{self.model} at {redact(self.api_base)}" if self.api_base else self.model
        typed = (f"typed outputs schema-constrained ({self.schema_dialect} response_format)" if self.schema_dialect
                 else "LACKS JSON-schema response_format: typed outputs are parsed from free text (ChatAdapter)")
        lps = (f"top_logprobs {self.top_logprobs}" if self.top_logprobs
               else "LACKS top_logprobs: yes-prob, judge margins and decision calibration are unavailable")
        return f"endpoint {where}: {typed}; {lps}; adapter {self.adapter}"


_endpoints: dict[str, Endpoint] = {}
_seconds: dict[str, float] = {}  # model -> seconds of its capability check's first answered call
_lock = threading.Lock()


def response_format(schema: dict[str, Any], dialect: str, name: str = "output") -> dict[str, Any]:
    """An OpenAI-style ``response_format`` asking for ``schema`` in ``dialect``."""
    if dialect == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}}
    if dialect == "json_object":
        return {"type": "json_object", "schema": schema}
    raise ValueError(f"unknown response_format dialect {dialect!r}; expected one of {DIALECTS}")


def _call(lm, messages: list[dict], **extra: Any):
    """One uncached chat completion with ``lm``'s kwargs (api_base, keys, extra_body), through
    ``dspy.LM.forward`` on a copy without cache or retries (an OpenAI-shaped response; DSPy's own
    engine reaches an OpenAI-compatible server without importing litellm)."""
    import dspy

    plain = dspy.LM.copy(lm, cache=False, num_retries=0)
    return dspy.LM.forward(plain, messages=messages, **{"temperature": 0.0, "n": 1, **extra})


def _top(choice) -> int:
    lp = getattr(choice, "logprobs", None)
    content = (lp.get("content") if isinstance(lp, dict) else getattr(lp, "content", None)) if lp else None
    if not content:
        return 0
    tops = [(t.get("top_logprobs") if isinstance(t, dict) else getattr(t, "top_logprobs", None)) for t in content]
    return max(len(t or []) for t in tops)


def probe(lm, *, quiet: bool = False) -> Endpoint:
    """Measure (once per process and model) what ``lm``'s endpoint can do; print
    :meth:`Endpoint.summary` on stderr unless ``quiet``.

    Cost: one or two completions of at most 16 tokens.

    Raises:
        ConfigurationError: the endpoint cannot be reached or answers with an error (one line
            naming the model, the URL and the cause).
    """
    api_base = lm.kwargs.get("api_base")
    with _lock:
        seen = _endpoints.get(lm.model)
        if seen is not None and seen.api_base == api_base:  # the same model on another server: probed again
            return seen
    messages = [{"role": "user", "content": "Say hello."}]
    dialect, top, reached, last_error = None, 0, False, None
    for candidate in DIALECTS:
        try:
            t0 = time.perf_counter()
            resp = _call(lm, messages, max_tokens=16, logprobs=True, top_logprobs=5,
                         response_format=response_format(PROBE_SCHEMA, candidate))
            with _lock:
                _seconds[lm.model] = time.perf_counter() - t0
        except Exception as exc:  # noqa: BLE001 -- a 4xx for an unknown dialect, or no server at all
            last_error = exc
            continue
        reached = True
        choice = resp.choices[0]
        top = max(top, _top(choice))
        try:
            value = json.loads(choice.message.content or "")
        except ValueError:
            continue
        if isinstance(value, dict) and set(value) == {PROBE_FIELD} and isinstance(value[PROBE_FIELD], bool):
            dialect = candidate
            break
    if not reached:
        try:
            resp = _call(lm, messages, max_tokens=4, logprobs=True, top_logprobs=5)
            top = _top(resp.choices[0])
        except Exception as exc:  # noqa: BLE001
            cause = redact(str(exc).strip().splitlines()[0])[:200] if str(exc).strip() else type(exc).__name__
            raise ConfigurationError(f"cannot use endpoint {lm.model}" + (f" at {redact(api_base)}" if api_base else "")
                                     + f": {cause}") from None
        del last_error
    endpoint = Endpoint(model=lm.model, api_base=api_base, schema_dialect=dialect, top_logprobs=top)
    with _lock:
        _endpoints[lm.model] = endpoint
    if not quiet:
        sys.stderr.write(endpoint.summary() + "\n")
    return endpoint


def probed_speed(model: str) -> dict | None:
    """The seconds of the capability check's call to ``model``'s endpoint in this process, as a
    speed (:func:`personalign.lm.speed.known_speed`'s shape: ``{"generation": {...}}``) for a
    first run's time estimate; None when it was not probed. A short completion (16 tokens at most):
    for a hosted model, whose call is mostly waiting, near a call's time; a lower bound otherwise."""
    import datetime

    with _lock:
        seconds = _seconds.get(model)
    if seconds is None:
        return None
    return {"generation": {"seconds_per_call": seconds, "calls": 1, "source": "the capability check",
                           "measured": datetime.date.today().isoformat()}}


def known(model: str) -> Endpoint | None:
    """The probed :class:`Endpoint` of ``model`` in this process, or None."""
    with _lock:
        return _endpoints.get(model)


def endpoint_info(model: str) -> dict[str, Any] | None:
    """:func:`known` as a dict (for run records and JSON output), plus its ``adapter`` name; the
    ``api_base`` with its password as ``***`` (:func:`personalign.redaction.redact`)."""
    ep = known(model)
    return None if ep is None else {**redact(asdict(ep)), "adapter": ep.adapter}


def require_top_logprobs(model: str, what: str) -> None:
    """Check that ``model`` can give ``what`` (e.g. "yes-probability scoring") the
    log-probabilities it needs: embedded models and endpoints not (yet) probed pass; a probed
    endpoint that returned no ``top_logprobs`` does not.

    Raises:
        ConfigurationError: one line naming the model, the endpoint and what is missing.
    """
    ep = known(model)
    if ep is not None and not ep.top_logprobs:
        where = f" at {redact(ep.api_base)}" if ep.api_base else ""
        raise ConfigurationError(f"{what} needs token log-probabilities, and endpoint {model}{where} returns no "
                                 "top_logprobs (serve the model with llama.cpp's server, vLLM, or run it embedded: local/...)")


def _output_schema(signature) -> dict[str, Any]:
    """The JSON schema of a signature's outputs, as DSPy's JSONAdapter builds it for the embedded
    models (so both paths constrain to the same grammar)."""
    from dspy.adapters import json_adapter

    build = getattr(json_adapter, "_get_structured_outputs_response_format", None)
    if build is not None:
        try:
            fmt = build(signature, True)
        except TypeError:
            fmt = build(signature)
        from personalign.lm._schema import schema_from_response_format

        schema = schema_from_response_format(fmt)
        if schema is not None:
            return schema
    import pydantic

    fields = {name: (f.annotation, ...) for name, f in signature.output_fields.items()}
    return pydantic.create_model("DSPyProgramOutputs", **fields).model_json_schema()


def schema_adapter(dialect: str):
    """A DSPy JSONAdapter that sends every signature's output schema in ``dialect``, its strings
    and lists bounded as the embedded engine bounds them (:func:`personalign.lm._schema.fit_schema`
    with the backend's ``max_string_chars`` / ``max_list_items`` and the call's ``max_tokens``)."""
    import dspy

    from personalign.lm._engine import current_settings
    from personalign.lm._schema import fit_schema

    class SchemaAdapter(dspy.JSONAdapter):
        """DSPy's JSONAdapter, with the response_format of an OpenAI-compatible server's dialect."""

        name = f"json-schema[{dialect}]"

        def _prepare_response_format(self, lm, lm_kwargs, signature):
            s = current_settings()
            budget = int(lm_kwargs.get("max_tokens") or lm.kwargs.get("max_tokens") or s.max_tokens)
            schema = fit_schema(_output_schema(signature), s.max_string_chars, s.max_list_items, budget=budget)
            # keys sorted as the embedded engine sorts them before building its grammar (llama.cpp's
            # converter orders object properties as given), so both decode fields in one order
            schema = json.loads(json.dumps(schema, sort_keys=True))
            lm_kwargs["response_format"] = response_format(schema, dialect, name=signature.__name__)

    return SchemaAdapter()


def yes_no_margin(lm, messages: Sequence[dict], *, top_logprobs: int = 20) -> float:
    """``log p(yes) - log p(no)`` of an endpoint's first answer token (natural logs): each side the
    logsumexp of the top alternatives among the embedded scorer's variants
    (:data:`personalign.lm.yesno.YES` / ``NO``), a side missing from the top bounded by the least likely alternative
    reported (the embedded engine reads the exact probabilities; this is the same margin from the
    ``top_logprobs`` an endpoint returns). One completion of one token, temperature 0.

    Raises:
        ConfigurationError: the endpoint returned no ``top_logprobs`` (one line naming it).
        BudgetExceeded: the run's ``--max-cost`` would be passed (:func:`personalign.lm.spend.charged`).
        LMCallFailed: the call failed after the retry policy's retries (a timeout, 5xx, garbage).
    """

    from personalign.lm.calls import count_call

    from personalign.lm.client import within_window
    from personalign.lm.spend import charged  # --max-cost holds forward passes too

    t0 = time.perf_counter()
    try:
        resp = within_window(lm, lambda: charged(lambda: _call(lm, list(messages), max_tokens=1, logprobs=True,
                                                               top_logprobs=top_logprobs)))
    except PersonalignError:
        raise
    except Exception as exc:  # noqa: BLE001 -- after its retries: one line, the run stops (LMCallFailed)
        from personalign.errors import LMCallFailed, brief
        from personalign.lm.retry import fatal_lm_error

        fatal = fatal_lm_error(exc)
        if fatal is not None:
            raise fatal from exc
        raise LMCallFailed(f"a yes/no margin from {lm.model} failed after its retries "
                           f"({brief(exc)}); nothing written") from exc
    # a forward pass through the endpoint: a model call, billed at the usage it reports
    count_call(lm.model, seconds=time.perf_counter() - t0, usage=getattr(resp, "usage", None))
    choice = resp.choices[0]
    lp = getattr(choice, "logprobs", None)
    content = (lp.get("content") if isinstance(lp, dict) else getattr(lp, "content", None)) if lp else None
    first = content[0] if content else None
    top = (first.get("top_logprobs") if isinstance(first, dict) else getattr(first, "top_logprobs", None)) if first \
        else None
    if not top:
        raise ConfigurationError(f"endpoint {lm.model} returned no top_logprobs: yes-probability scoring needs an "
                                 "endpoint that returns logprobs/top_logprobs (e.g. llama.cpp's server, vLLM)")
    pairs = [((t.get("token") if isinstance(t, dict) else t.token) or "",
              float(t.get("logprob") if isinstance(t, dict) else t.logprob)) for t in top]
    floor = min(v for _, v in pairs)

    from personalign.lm.yesno import NO, YES

    def side(words) -> float:
        lps = [v for tok, v in pairs if tok in words]
        return float(np.logaddexp.reduce(lps)) if lps else floor

    return side(YES) - side(NO)


__all__ = ["DIALECTS", "Endpoint", "endpoint_info", "known", "probe", "require_top_logprobs", "response_format",
           "schema_adapter", "yes_no_margin"]
