"""The bodies :mod:`personalign.testing.openai_server` sends: an OpenAI chat completion answering a
DSPy prompt, its token usage and log-probabilities, error bodies and the ``/v1/models`` list.

Answers follow the mock provider (:mod:`personalign.testing.mock_provider`): every output field of
the DSPy signature (:func:`personalign.testing._prompt.output_fields`) gets a value that depends
only on the conversation (sha256 of the messages), in ChatAdapter's ``[[ ## field ## ]]`` sections,
or as a JSON object when the request carries a ``response_format``. Where the mock provider can
answer (bool, int, float, str, list fields) the values are the same as its; a ``Literal`` field
gets one of its options and a pydantic-typed field the smallest instance of its schema. A request
that is not a DSPy prompt gets the smallest instance of its ``response_format`` schema (the
capability probe of :func:`personalign.lm.serving.probe`), else one ``relevant`` bool as JSON. A
request for one token (``max_tokens`` 1, :func:`personalign.lm.serving.yes_no_margin`) is answered
``Yes`` or ``No`` (the same bool as a ``relevant`` answer).

Tokens (``usage``, the ``max_tokens`` cut) are counted as OpenAI counts them, with tiktoken's
``cl100k_base`` read from the copy litellm bundles (:func:`personalign.lm.prices.cl100k`: never
downloaded), so a run's projected tokens can be held against what the server reports; without that
file, by one regular expression, :data:`TOKEN` (a run of word characters, or one other non-space
character). The log-probabilities are given per :data:`TOKEN`.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from typing import Any

from personalign.testing._prompt import (chat_reply, field_schema, literal_options, minimal_instance, output_fields,
                                         system_message)
from personalign.testing.mock_provider import _DEFAULT_FIELDS, _render, _value

TOKEN = re.compile(r"\w+|[^\w\s]")
_FILLERS = (" the", " a", " I", ".", ",", " and", " to", " of", " is", " it", " that", " in", " for", " on", " with",
            " as", " be", " not", " this", " you", " or", " at")


def count_tokens(text: str) -> int:
    """Tokens of ``text`` (>= 0) in cl100k (:func:`personalign.lm.prices.count_text`)."""
    from personalign.lm.prices import count_text

    return count_text(text)


def _cut(text: str, limit: int) -> str:
    """``text`` cut to its first ``limit`` tokens (cl100k, else :data:`TOKEN`)."""
    from personalign.lm.prices import cl100k

    enc = cl100k()
    if enc is not None:
        return enc.decode(enc.encode(text, disallowed_special=())[:limit])
    return text[:[m.end() for m in TOKEN.finditer(text)][limit - 1]]


def prompt_tokens(messages: list[dict]) -> int:
    """Tokens of a chat request as OpenAI counts them (:func:`personalign.lm.prices.count_messages`)."""
    from personalign.lm.prices import count_messages

    return count_messages(messages)


def digest(messages: list[dict]) -> bytes:
    """sha256 of the conversation (what every answer is a function of)."""
    return hashlib.sha256(json.dumps(messages, sort_keys=True, default=str).encode()).digest()


def _schema(response_format: Any) -> dict | None:
    """The JSON schema of an OpenAI ``response_format`` (``json_schema`` or llama-cpp-python's
    ``json_object`` + ``schema`` dialect), or None."""
    if not isinstance(response_format, dict):
        return None
    schema = (response_format.get("json_schema") or {}).get("schema") or response_format.get("schema")
    return schema if isinstance(schema, dict) else None


def answer(messages: list[dict], response_format: Any = None) -> str:
    """The reply text to a chat request (see the module docstring)."""
    system = system_message(messages)
    key = digest(messages)
    fields = output_fields(system)
    schema = _schema(response_format)
    if not fields and schema is not None:
        return json.dumps(minimal_instance(schema, text="mock", flag=key[0] % 10 < 3))
    values = {}
    for i, (name, typ) in enumerate(fields or _DEFAULT_FIELDS):
        options, sub = literal_options(typ), field_schema(system, name)
        if options:
            values[name] = options[key[i % len(key)] % len(options)]
        elif sub is not None:
            values[name] = minimal_instance(sub, text=f"mock {name}", flag=key[i % len(key)] % 10 < 3)
        else:
            values[name] = _value(name, typ, key, i)
    if response_format is not None or "[[ ## completed ## ]]" not in system:
        return json.dumps(values)
    return chat_reply(values, render=_render).rstrip("\n")


def yes_or_no(messages: list[dict]) -> str:
    """``Yes`` or ``No``: the bool a ``relevant`` answer to ``messages`` would carry."""
    return "Yes" if digest(messages)[0] % 10 < 3 else "No"


def _logprobs(tokens: list[str], key: bytes, top: int) -> dict:
    """OpenAI's ``logprobs`` of a choice: per token its logprob and ``top`` alternatives (itself
    first). A ``Yes``/``No`` token's runner-up is the other answer, ``margin`` nats (0.5-4.5,
    from ``key``) less likely, so :func:`personalign.lm.serving.yes_no_margin` reads +-margin."""
    out = []
    for i, tok in enumerate(tokens):
        lp = -round(0.05 + key[(2 * i) % len(key)] / 2550, 4)
        alts = [(tok, lp)]
        if tok in ("Yes", "No"):
            alts.append(("No" if tok == "Yes" else "Yes", round(lp - 0.5 - 4 * key[(2 * i + 1) % len(key)] / 255, 4)))
        floor = min(v for _, v in alts)
        alts += [(f, round(floor - 1 - j, 4)) for j, f in enumerate(x for x in _FILLERS if x != tok)]
        entry = [{"token": t, "logprob": v, "bytes": list(t.encode())} for t, v in alts[:max(top, 1)]]
        out.append({**entry[0], "top_logprobs": entry[:top]})
    return {"content": out}


def completion(body: dict, request_id: str) -> dict:
    """The OpenAI chat completion answering request ``body`` (``messages``, optional
    ``response_format``, ``max_tokens``/``max_completion_tokens``, ``n``, ``logprobs``,
    ``top_logprobs``); ``content`` is cut to ``max_tokens`` tokens (``finish_reason`` ``length``)."""
    messages = list(body.get("messages") or [])
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    text = yes_or_no(messages) if limit == 1 else answer(messages, body.get("response_format"))
    finish = "stop"
    if limit and count_tokens(text) > int(limit):
        text, finish = _cut(text, int(limit)), "length"
    tokens = TOKEN.findall(text)
    n = max(1, int(body.get("n") or 1))
    logprobs = _logprobs(tokens, digest(messages), int(body.get("top_logprobs") or 0)) if body.get("logprobs") else None
    choices = [{"index": i, "message": {"role": "assistant", "content": text}, "logprobs": logprobs,
                "finish_reason": finish} for i in range(n)]
    n_prompt, n_out = prompt_tokens(messages), n * count_tokens(text)
    return {"id": request_id, "object": "chat.completion", "created": int(time.time()),
            "model": str(body.get("model") or "mock"), "choices": choices,
            "usage": {"prompt_tokens": n_prompt, "completion_tokens": n_out, "total_tokens": n_prompt + n_out}}


def error(message: str, type_: str, code: str | None = None) -> dict:
    """An OpenAI-style error body: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def models(name: str) -> dict:
    """The ``GET /v1/models`` body listing one model ``name``."""
    return {"object": "list", "data": [{"id": name, "object": "model", "created": 0, "owned_by": "personalign"}]}
