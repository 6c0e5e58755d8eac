"""Scores from an LM's own typed answer: the log-probability margin of a boolean output field.

A binary program (``relevant: bool``, ``accepted: bool``) that asks its LM for token
log-probabilities (OpenAI's ``logprobs``/``top_logprobs``, which the embedded ``local/...``
models return for typed outputs and many hosted models return too) can score its own answer:
at the token where the field's value starts, ``log P(true) - log P(false)``, each side summed over
the top alternatives that spell it (``true``, `` True``, ``tr``...; case-insensitive prefixes).
The score is the program's own prompt (instructions and demos, as compiled) read out as a real
number instead of a yes/no, so a decision rule (a threshold or a within-group top share) can be
fitted on it at compile time (:mod:`personalign.optimizers.decision`).

* :func:`request` -- the LM kwargs that ask for log-probabilities, or ``{}`` when the active LM
  does not return them (litellm's ``get_supported_openai_params``; DSPy's DummyLM: ``{}``).
* :func:`bool_margin` -- the margin from a prediction's ``logprobs`` (DSPy puts the choice's
  ``logprobs`` on the :class:`dspy.Prediction` when they were requested).
"""

from __future__ import annotations

import functools
import re
from typing import Any, Sequence

import numpy as np

TOP_LOGPROBS = 20  # OpenAI's maximum; the local models report the same number


@functools.lru_cache(maxsize=64)
def _supports(model: str) -> bool:
    try:
        import litellm

        from personalign.lm._models import PROVIDER
        from personalign.lm._provider import register

        register()
        provider = PROVIDER if model.startswith(PROVIDER + "/") else None
        params = litellm.get_supported_openai_params(model=model, custom_llm_provider=provider) or []
    except Exception:  # unknown provider or model: ask for nothing
        return False
    return "logprobs" in params and "top_logprobs" in params


def request(lm: Any = None) -> dict[str, Any]:
    """``{"config": {"logprobs": True, "top_logprobs": 20}}`` -- keyword arguments for a
    ``dspy.Predict`` call -- when ``lm`` (default: DSPy's configured LM) reports log-probability
    support through litellm, else ``{}``."""
    import dspy

    lm = lm if lm is not None else dspy.settings.lm
    model = getattr(lm, "model", None)
    from personalign.lm.serving import known

    endpoint = known(model) if isinstance(model, str) else None  # a probed server says what it returns
    if endpoint is not None:
        return {"config": {"logprobs": True, "top_logprobs": min(TOP_LOGPROBS, endpoint.top_logprobs)}} \
            if endpoint.top_logprobs else {}
    if not isinstance(model, str) or not _supports(model):
        return {}
    return {"config": {"logprobs": True, "top_logprobs": TOP_LOGPROBS}}


def with_logprobs(predictor, **inputs: Any):
    """Call ``predictor(**inputs)`` asking for log-probabilities when the active LM returns them;
    return ``(prediction, logprobs or None)``. The log-probabilities are removed from the
    prediction, so traces (a teleprompter's bootstrapped demos) and saved programs do not carry
    them."""
    out = predictor(**inputs, **request())
    lp = out.get("logprobs") if hasattr(out, "get") else None
    if lp is not None:
        del out["logprobs"]
    return out, lp


def scored(predictor, field: str, **inputs: Any):
    """:func:`with_logprobs`, returning ``(prediction, score)`` with ``score =
    bool_margin(..., field)`` (None without log-probabilities)."""
    out, lp = with_logprobs(predictor, **inputs)
    return out, bool_margin(lp, field)


def bool_field(signature) -> str:
    """The name of ``signature``'s (last) boolean output field.

    Raises:
        ValueError: the signature has no ``bool`` output field."""
    names = [n for n, f in signature.output_fields.items() if f.annotation is bool]
    if not names:
        raise ValueError(f"{signature.__name__} has no bool output field")
    return names[-1]


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def _value_start(text: str, field: str) -> int | None:
    """Character offset where ``field``'s value starts in a JSON answer (``"field": value``) or a
    DSPy chat-format answer (``[[ ## field ## ]]`` then the value); the last occurrence wins."""
    name = re.escape(field)
    pattern = rf'"{name}"\s*:\s*|\[\[ ## {name} ## \]\]\s*'
    starts = [m.end() for m in re.finditer(pattern, text)]
    return starts[-1] if starts else None


def _side(top: list[tuple[str, float]], word: str) -> float | None:
    lps = [lp for tok, lp in top if tok.strip() and word.startswith(tok.strip().lower())]
    return float(np.logaddexp.reduce(lps)) if lps else None


def _value_top(logprobs: Any, field: str) -> list[tuple[str, float]] | None:
    """The top alternatives ``[(token, logprob)]`` at the token where ``field``'s value starts
    (the chosen token added when the grammar took one outside the top); None when there are no
    log-probabilities or the field is not found."""
    content = _get(logprobs, "content") if logprobs is not None else None
    if not content:
        return None
    spans, text = [], ""
    for tok in content:
        piece = str(_get(tok, "token", "") or "")
        spans.append((len(text), len(text) + len(piece)))
        text += piece
    start = _value_start(text, field)
    if start is None:
        return None
    for i, (a, b) in enumerate(spans):
        if b > start and text[max(a, start):b].strip():
            tok = content[i]
            break
    else:
        return None
    top = [(str(_get(t, "token", "")), float(_get(t, "logprob"))) for t in (_get(tok, "top_logprobs") or [])]
    chosen = str(_get(tok, "token", ""))
    if chosen not in {t for t, _ in top}:
        top.append((chosen, float(_get(tok, "logprob"))))
    return top


def bool_margin(logprobs: Any, field: str) -> float | None:
    """``log P(true) - log P(false)`` (natural logs) for ``field``'s value in an answer.

    Args:
        logprobs: a choice's ``logprobs`` (``{"content": [{"token", "logprob", "top_logprobs":
            [{"token", "logprob"}]}]}``, as a dict or litellm's ``ChoiceLogprobs``), or None.
        field: the boolean output field's name (from the signature).

    Returns:
        the margin; None when there are no log-probabilities, the field is not found, or neither
        side is among the top alternatives. A side missing from the top alternatives is bounded
        by the least likely alternative reported (so the margin is then a bound, never inf).
    """
    top = _value_top(logprobs, field)
    if not top:
        return None
    yes, no = _side(top, "true"), _side(top, "false")
    if yes is None and no is None:
        return None
    floor = min(lp for _, lp in top)
    return float((yes if yes is not None else floor) - (no if no is not None else floor))


def choice_distribution(logprobs: Any, field: str, choices: Sequence[Any]) -> dict[Any, float] | None:
    """The model's probability of each of ``choices`` (e.g. ``[1, 2, 3, 4, 5]`` of a
    ``Literal`` field) for ``field``'s value, renormalized over the choices: each choice's mass is
    the summed probability of the top alternatives that spell it exactly (stripped,
    case-insensitive), so it suits choices that are one token each (digits, letters).

    Returns:
        ``{choice: probability}`` summing to 1; None when there are no log-probabilities, the
        field is not found, or no choice is among the top alternatives.
    """
    top = _value_top(logprobs, field)
    if not top:
        return None
    mass = {c: 0.0 for c in choices}
    keys = {str(c).strip().lower(): c for c in choices}
    for tok, lp in top:
        c = keys.get(tok.strip().lower().strip('"'))
        if c is not None:
            mass[c] += float(np.exp(lp))
    total = sum(mass.values())
    if total <= 0:
        return None
    return {c: m / total for c, m in mass.items()}


def expected_value(logprobs: Any, field: str, values: Sequence[float]) -> float | None:
    """The mean of numeric ``values`` under :func:`choice_distribution` (e.g. the expected 1-5
    rating); None when the distribution is."""
    dist = choice_distribution(logprobs, field, values)
    if dist is None:
        return None
    return float(sum(float(v) * p for v, p in dist.items()))


__all__ = ["TOP_LOGPROBS", "bool_field", "bool_margin", "choice_distribution", "expected_value", "request", "scored",
           "with_logprobs"]
