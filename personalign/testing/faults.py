"""Fault injection through litellm (``python -m personalign.testing.faults ARGS...`` runs the CLI
with it, see :func:`main`): a ``CustomLLM`` provider that fails a seeded ~20% of calls.

:class:`FaultInjector` wraps another litellm ``CustomLLM`` handler (the embedded ``local``
provider, or the ``mock`` provider of :mod:`personalign.testing.mock_provider`) and, for each call, decides from
``sha256(seed, request, n-th occurrence of this request)`` whether to

* raise an exception (``RuntimeError`` -- litellm wraps it as ``APIConnectionError``),
* raise ``litellm.Timeout``,
* return an empty completion (``content=""``; DSPy's adapter cannot parse it),

each with probability ``rate / 3``, or to delegate to the wrapped handler. The decision depends
only on the seed, the request (messages and sampling parameters) and how many times that exact
request was seen before, so the same run with the same seed sees the same faults, and a retry of
the same request draws again (it is not doomed to fail forever).

The faults travel the real path: litellm -> ``dspy.LM`` (which retries exceptions and timeouts
``num_retries`` times, 2 in :func:`personalign.lm.make_lm`) -> the adapter (an empty output is an
``AdapterParseError``) -> the program -> :func:`personalign.programs.run.run_program` or a
teleprompter.

``stats`` counts attempts, random faults by kind (``exception``, ``timeout``, ``empty``), poisoned
requests (``poisoned``, ``poisoned_<kind>``), successful calls (``ok``) and retries (a request
seen again after a fault on it).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from collections import Counter
from typing import Any, Iterator

import personalign  # noqa: F401  (offline litellm defaults before litellm is imported)
import litellm
from litellm import CustomLLM
from litellm.types.utils import Choices, Message, ModelResponse, Usage
from litellm.utils import custom_llm_setup

KINDS = ("exception", "timeout", "empty")


class FaultInjector(CustomLLM):
    """A litellm provider that injects faults into a seeded fraction of the calls of ``inner``.

    Args:
        inner: the wrapped ``CustomLLM`` handler (answers the calls that do not fail).
        rate: probability of a fault per call (split evenly over exception, timeout, empty output).
        seed: seed of the fault decisions.
        poison: markers; a request whose messages contain one always fails (``poison_kinds`` in
            turn), so no retry can save it (counted in ``stats["poisoned"]``).
    """

    def __init__(self, inner: CustomLLM, *, rate: float = 0.2, seed: int = 0, poison: tuple[str, ...] = (),
                 poison_kinds: tuple[str, ...] = KINDS) -> None:
        super().__init__()
        self.inner = inner
        self.poison = tuple(poison)
        self.poison_kinds = tuple(poison_kinds)
        self.rate = float(rate)
        self.seed = int(seed)
        self._n_random_faults = 0
        self._lock = threading.Lock()
        self._seen: Counter[str] = Counter()
        self._faulted: set[str] = set()
        self.stats: Counter[str] = Counter()

    def _decide(self, messages: list, optional_params: dict) -> str | None:
        params = {k: v for k, v in (optional_params or {}).items() if k in ("temperature", "n", "seed", "max_tokens")}
        key = hashlib.sha256(json.dumps([messages, params], sort_keys=True, default=str).encode()).hexdigest()
        with self._lock:
            occurrence = self._seen[key]
            self._seen[key] += 1
            self.stats["attempts"] += 1
            if occurrence > 0 and key in self._faulted:
                self.stats["retries"] += 1
        if self.poison and any(m in json.dumps(messages, default=str) for m in self.poison):
            kind = self.poison_kinds[occurrence % len(self.poison_kinds)]
            with self._lock:
                self._faulted.add(key)
                self.stats["poisoned"] += 1
                self.stats[f"poisoned_{kind}"] += 1
            return kind
        digest = hashlib.sha256(f"{self.seed}:{key}:{occurrence}".encode()).digest()
        u = int.from_bytes(digest[:8], "big") / 2.0**64
        if u >= self.rate:
            return None
        with self._lock:  # which calls fail is a seeded draw; the kinds take turns, so each one occurs
            kind = KINDS[self._n_random_faults % len(KINDS)]
            self._n_random_faults += 1
            self._faulted.add(key)
            self.stats[kind] += 1
        return kind

    def completion(self, model: str, messages: list, api_base: str, custom_prompt_dict: dict,
                   model_response: ModelResponse, print_verbose, encoding, api_key, logging_obj,
                   optional_params: dict, acompletion=None, litellm_params=None, logger_fn=None,
                   headers=None, timeout=None, client=None) -> ModelResponse:
        kind = self._decide(messages, optional_params)
        if kind == "exception":
            raise RuntimeError("injected fault: provider exception")
        if kind == "timeout":
            raise litellm.Timeout("injected fault: request timed out", model=model, llm_provider="faulty")
        if kind == "empty":
            return ModelResponse(model=model, created=int(time.time()),
                                 choices=[Choices(index=0, finish_reason="stop",
                                                  message=Message(role="assistant", content=""))],
                                 usage=Usage(prompt_tokens=1, completion_tokens=0, total_tokens=1))
        out = self.inner.completion(model, messages, api_base, custom_prompt_dict, model_response, print_verbose,
                                    encoding, api_key, logging_obj, optional_params, acompletion, litellm_params,
                                    logger_fn, headers, timeout, client)
        with self._lock:
            self.stats["ok"] += 1
        return out

    async def acompletion(self, *args: Any, **kwargs: Any) -> ModelResponse:
        import asyncio

        return await asyncio.to_thread(self.completion, *args, **kwargs)


def handler_of(provider: str) -> CustomLLM:
    """The handler registered for ``provider`` in ``litellm.custom_provider_map``."""
    for entry in litellm.custom_provider_map or []:
        if entry.get("provider") == provider:
            return entry["custom_handler"]
    raise LookupError(f"no litellm custom provider '{provider}' registered")


def _register_local() -> None:
    """Register personalign's ``local`` litellm provider (``make_lm`` does, once per process;
    ``load=False``: no model file is opened)."""
    from personalign.lm import TINY_MODEL, make_lm

    make_lm(TINY_MODEL, load=False)


@contextlib.contextmanager
def provider(name: str, handler: CustomLLM) -> Iterator[CustomLLM]:
    """Register ``handler`` as litellm provider ``name`` (replacing one of that name) for the block.

    personalign's own ``local`` provider is registered first, so that a later
    :func:`personalign.lm.make_lm` (which registers it once per process) cannot swap it back in."""
    _register_local()
    before = list(litellm.custom_provider_map or [])
    litellm.custom_provider_map = [e for e in before if e.get("provider") != name] + [
        {"provider": name, "custom_handler": handler}]
    custom_llm_setup()
    try:
        yield handler
    finally:
        litellm.custom_provider_map = before
        custom_llm_setup()


@contextlib.contextmanager
def fast_lm_retries() -> Iterator[None]:
    """``dspy.LM``'s and :class:`personalign.lm.LM`'s retries of failed calls without their back-off
    sleeps (1 s, 2 s, ... in ``dspy.clients.execution`` and :meth:`personalign.lm.retry.RetryPolicy.backoff`), so a test with many injected faults stays short; the retries
    themselves still happen (``stats["retries"]`` counts them).

    This patches DSPy's private ``execution._delay`` because DSPy 3.4.1 has no public back-off
    setting: ``dspy.LM(num_retries=...)`` sets only the count, and the one public input of the delay,
    a ``retry_after`` hint on the error, survives only on litellm-typed errors (``litellm.Timeout``
    with ``retry_after=0`` was retried without sleeping); litellm re-wraps the ``exception`` fault
    (an arbitrary provider exception) as ``APIConnectionError`` without the hint, and raising
    ``APIConnectionError`` itself would read as an unreachable server
    (:func:`personalign.lm.retry.provider_exception`)."""
    import os

    from dspy.clients import execution

    real = execution._delay
    before = os.environ.get("PERSONALIGN_RETRY_BACKOFF")
    execution._delay = lambda exc, attempt: 0.0
    os.environ["PERSONALIGN_RETRY_BACKOFF"] = "0"  # personalign.lm.LM's own retries (personalign.lm.retry.backoff_scale)
    try:
        yield
    finally:
        execution._delay = real
        if before is None:
            os.environ.pop("PERSONALIGN_RETRY_BACKOFF", None)
        else:
            os.environ["PERSONALIGN_RETRY_BACKOFF"] = before


def main(argv: list[str] | None = None) -> None:
    """Run the ``personalign`` CLI with faults injected into the ``local`` provider.

    ``PERSONALIGN_TEST_FAULTS`` (JSON): ``rate``, ``seed``, ``poison`` (markers), ``stats`` (a file
    the fault counts are written to at exit), ``fast_retries`` (drop dspy.LM's back-off sleeps),
    ``inner``: ``"mock"`` (default; :mod:`personalign.testing.mock_provider` answers) or
    ``"local"`` (the embedded model answers).
    """
    import os
    import sys
    from pathlib import Path

    conf = json.loads(os.environ.get("PERSONALIGN_TEST_FAULTS") or "{}")
    if conf.get("inner", "mock") == "mock":
        from personalign.testing import mock_provider

        mock_provider.register()
        inner = handler_of("mock")
    else:
        _register_local()
        inner = handler_of("local")
    injector = FaultInjector(inner, rate=conf.get("rate", 0.2), seed=conf.get("seed", 0),
                             poison=tuple(conf.get("poison", ())))
    from personalign.cli import main as cli_main

    retries = fast_lm_retries() if conf.get("fast_retries") else contextlib.nullcontext()
    try:
        with provider("local", injector), retries:
            cli_main(sys.argv[1:] if argv is None else argv)
    finally:
        if conf.get("stats"):
            Path(conf["stats"]).write_text(json.dumps(dict(injector.stats)))


if __name__ == "__main__":
    main()
