"""Yes/no scoring with an embedded model: the log-probability margin of "Yes" over "No".

Given chat messages that end with a yes/no question, the model's next-token distribution at the
start of the answer gives ``log p(Yes) - log p(No)`` (a real-valued score; threshold it, or
rank by it for AUC). The seed study reports LLM relevance judges near chance on this task; this
is the cheapest way to measure how much signal a local model has.
"""

from __future__ import annotations

import json
import threading
from typing import Sequence

from personalign.lm.yesno import NO, YES, margin_of  # noqa: F401  (the answer tokens, shared with serving)


def yes_no_margin(model: str, messages: Sequence[dict], lm=None) -> float:
    """``logsumexp(log p(yes variants)) - logsumexp(log p(no variants))`` for the next token.

    An embedded model (``local/...``) reads its exact next-token distribution; any other model is
    asked through its endpoint for the first answer token's ``top_logprobs``
    (:func:`personalign.lm.serving.yes_no_margin`; ``lm`` is its ``dspy.LM``, default the one in
    the current ``dspy`` context).

    Raises:
        ContextWindowError: the prompt does not fit n_ctx.
        ConfigurationError: a non-embedded model without an LM in context, or whose endpoint
            returns no ``top_logprobs``.
    """
    from personalign.lm._engine import get_engine
    from personalign.lm._models import is_local

    if not is_local(model):
        import dspy

        from personalign.errors import ConfigurationError
        from personalign.lm.serving import yes_no_margin as endpoint_margin

        lm = lm if lm is not None else dspy.settings.lm
        if lm is None or getattr(lm, "model", None) != model:
            raise ConfigurationError(f"yes-probability scoring with {model} needs its LM in context "
                                     "(personalign.lm.use(make_lm(...)))")
        return endpoint_margin(lm, messages)

    engine = get_engine(model)
    prompt, _ = engine.render(list(messages))
    return margin_of(engine.next_token_logprobs(prompt, list(YES + NO)))


def resolve_model(model: str | None) -> str:
    """The model string to score with: ``model`` if given, else the LM of the current dspy context
    (set by :func:`personalign.lm.use`), else :func:`personalign.lm.default_model`."""
    import dspy

    if model:
        return model
    lm = dspy.settings.lm
    if lm is not None and getattr(lm, "model", None):
        return str(lm.model)
    from personalign.lm._models import default_model

    return default_model()


def cached_yes_no_margin(model: str, messages: Sequence[dict]) -> float:
    """:func:`yes_no_margin`, cached. Units: nats.

    An embedded model's margin is the one of :func:`personalign.lm.forward.yes_no_pass`: one
    forward pass that also keeps the hidden state for ``lm-probe``, cached in memory and under the
    LM cache dir, keyed by the model file's sha256 and the exact prompt tokens. A served model's
    margin is kept in this process's memory and DSPy's cache (wherever
    :func:`personalign.lm.configure_cache` points it; memory only when the cache is off), keyed by
    the messages, the model and the endpoint's ``api_base``. A rerun computes no margin twice.
    A margin a cache answers is a cached model call (:func:`personalign.lm.calls.count_cached`).

    Raises: as :func:`yes_no_margin`.
    """
    import dspy

    from personalign.lm._models import is_local

    if is_local(model):
        from personalign.lm.forward import yes_no_pass

        return yes_no_pass(model, messages).margin
    request, memo = _served_request(model, messages)
    from personalign.lm.calls import count_cached, count_computed

    with _served_lock:
        hit = _served.get(memo)
    if hit is not None:
        count_cached(model, memo)  # a margin a cache answered: counted apart, once per run step
        return hit
    cache = getattr(dspy, "cache", None)
    value = cache.get(request) if cache is not None else None
    if not isinstance(value, float):
        value = float(yes_no_margin(model, messages))  # the endpoint call counts itself
        count_computed(memo)
        if cache is not None:
            cache.put(request, value)
    else:
        count_cached(model, memo)
    with _served_lock:
        _served[memo] = value
    return value


def _served_request(model: str, messages: Sequence[dict], lm=None) -> tuple[dict, str]:
    """``(request, memo)``: a served model's margin as DSPy's cache keys it, and as this process's
    memory does (the endpoint of ``lm``, default the LM in context, when it is ``model``'s)."""
    import dspy

    lm = lm if lm is not None else dspy.settings.lm
    endpoint = lm.kwargs.get("api_base") if lm is not None and getattr(lm, "model", None) == model else None
    request = {"personalign": "yes_no_margin/1", "model": model, "messages": list(messages), "weights": None}
    if endpoint:
        request["api_base"] = endpoint
    return request, json.dumps(request, sort_keys=True, default=str)


def margin_lookup(model: str, messages: Sequence[dict], lm=None) -> tuple[str, bool]:
    """``(key, cached)`` of the margin :func:`cached_yes_no_margin` would compute: its cache key,
    and whether a cache holds it (an embedded model's pass: :func:`personalign.lm.forward.pass_lookup`;
    a served model's: this process's memory, or DSPy's cache by key, no value read). No model call."""
    from personalign.lm._models import is_local

    if is_local(model):
        from personalign.lm.forward import pass_lookup

        return pass_lookup(model, messages)
    import dspy

    request, memo = _served_request(model, messages, lm)
    with _served_lock:
        if memo in _served:
            return memo, True
    cache = getattr(dspy, "cache", None)
    try:
        return memo, cache is not None and cache.cache_key(request) in cache
    except Exception:  # noqa: BLE001 -- a locked or broken cache: not known to hold it
        return memo, False


_served: dict[str, float] = {}  # a served model's margins in this process (the cache may be off)
_served_lock = threading.Lock()


def cached_yes_no_margins(model: str, messages: Sequence[Sequence[dict]], order: Sequence[int] | None = None) -> list[float]:
    """:func:`cached_yes_no_margin` of each message list (nats, shape (n,), in the caller's order).
    An embedded model evaluates them one at a time in ``order`` (e.g. :func:`sharing_order`, so its
    KV prefix is reused); a served model keeps the run's calls in flight
    (:func:`personalign.lm.concurrency`, :func:`personalign.lm.flight.map_in_flight`)."""
    from personalign.lm._models import is_local

    order = list(order) if order is not None else list(range(len(messages)))
    out = [0.0] * len(messages)
    if is_local(model):
        for i in order:
            out[i] = cached_yes_no_margin(model, messages[i])
        return out
    from personalign.lm import concurrency
    from personalign.lm.flight import map_in_flight

    values = map_in_flight(lambda _, i: cached_yes_no_margin(model, messages[i]), order, concurrency())
    for i, v in zip(order, values):
        out[i] = v
    return out


def relevance_messages(attribute: str, prompt: str) -> list[dict]:
    """The yes/no question used to score relevance (attribute, prompt).

    Laid out for KV prefix reuse: the stable system text, then the (long, shared) request, then
    the (short, varying) attribute and the question, so consecutive pairs of one request share
    everything up to the attribute."""
    return [
        {"role": "system", "content": "You decide whether a fact about a user should change how an assistant answers."},
        {"role": "user", "content": f"User's request: {prompt}\n\nUser fact: {attribute}\n\n"
                                    "Should the answer to this request be different because of the user fact? "
                                    "Answer Yes or No."},
    ]


def sharing_order(keys: Sequence[tuple]) -> list[int]:
    """Indices of ``keys`` sorted so items with a shared prompt prefix run back to back (stable).

    ``keys[i]`` is a tuple whose leading elements form the shared prefix (e.g. ``(request,
    user_id, attribute)``); evaluating in this order lets the engine's KV cache reuse the longest
    common prefix between consecutive calls. Callers return results in their own order."""
    return sorted(range(len(keys)), key=lambda i: keys[i])
