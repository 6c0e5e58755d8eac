"""What a model's tokens cost, from litellm's bundled price map -- its local copy only, never
fetched -- and how a prompt is counted in tokens, with the tokenizer litellm ships.

* **Prices**: ``litellm.model_cost`` as litellm loads it with ``LITELLM_LOCAL_MODEL_COST_MAP=True``
  -- its bundled ``model_prices_and_context_window_backup.json``, never fetched. When litellm is
  not imported yet (a served model's run does not need it: DSPy talks to the endpoint itself),
  that same bundled file is read directly (:func:`cost_map`), so asking for a price never costs
  litellm's ~4 s import. No price table is kept here. A
  model string is looked up as it is, then without its provider prefix (``openai/gpt-4o-mini``
  -> ``gpt-4o-mini``). The embedded ``local/...`` models and a model the map does not list have
  no price (:func:`price` None): their calls cost ``$0`` and the cost line says so.
* **Tokens**: a priced model's prompt by ``litellm.token_counter`` (the model's tokenizer where
  litellm ships one, else its default, cl100k); the embedded models and an unpriced served model
  by tiktoken's ``cl100k_base`` read from the copy litellm bundles (:func:`cl100k`), without
  importing litellm (~4 s) -- approximate for the Qwen models, which have their own tokenizer.
  Nothing here reaches the network: a tokenizer file that is not bundled is never downloaded; the
  count then falls back to a regular expression (:data:`WORD`).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import re
import threading
from pathlib import Path
from typing import Any, Sequence

#: tiktoken's cache name of the cl100k file is the sha1 of this URL: the file litellm bundles.
CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
#: The fallback count when no tokenizer file is at hand: a word, or one other non-space character.
WORD = re.compile(r"\w+|[^\w\s]")
#: Tokens a chat format adds per message and per reply (OpenAI's count, as litellm's).
PER_MESSAGE, PER_REPLY = 3, 3
_lock = threading.Lock()


def _litellm_dir() -> Path | None:
    """The installed litellm package's folder, found without importing it."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    places = list(spec.submodule_search_locations or []) if spec else []
    return Path(places[0]) if places else None


@functools.lru_cache(maxsize=1)
def cl100k():
    """tiktoken's ``cl100k_base`` encoding from the file litellm bundles
    (``litellm/litellm_core_utils/tokenizers``), or None when that file or tiktoken is missing.
    Never downloads: tiktoken is pointed at the bundled folder only while the encoding loads."""
    base = _litellm_dir()
    folder = base / "litellm_core_utils" / "tokenizers" if base else None
    if folder is None or not (folder / hashlib.sha1(CL100K_URL.encode()).hexdigest()).is_file():
        return None
    try:
        import tiktoken
    except ImportError:
        return None
    with _lock:
        before = os.environ.get("TIKTOKEN_CACHE_DIR")
        os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)
        try:
            return tiktoken.get_encoding("cl100k_base")
        except Exception:  # noqa: BLE001 -- a damaged file: the fallback count
            return None
        finally:
            if before is None:
                os.environ.pop("TIKTOKEN_CACHE_DIR", None)
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = before


def count_text(text: str) -> int:
    """Tokens of ``text`` in cl100k (:func:`cl100k`), else by :data:`WORD`."""
    enc = cl100k()
    return len(enc.encode(text, disallowed_special=())) if enc is not None else len(WORD.findall(text))


def _content(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def count_messages(messages: Sequence[dict]) -> int:
    """Tokens of a chat request in cl100k, counted as OpenAI and litellm count one: each message's
    role and content plus :data:`PER_MESSAGE`, and :data:`PER_REPLY` for the reply's start."""
    return sum(count_text(str(m.get("role", ""))) + count_text(_content(m.get("content"))) + PER_MESSAGE
               for m in messages) + PER_REPLY


@functools.lru_cache(maxsize=1)
def _litellm():
    """litellm, imported with its local price map only (never fetched)."""
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import litellm

    return litellm


@functools.lru_cache(maxsize=1)
def _bundled_map() -> dict:
    import json

    base = _litellm_dir()
    path = base / "model_prices_and_context_window_backup.json" if base else None
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path else {}
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def cost_map() -> dict:
    """litellm's price map: ``litellm.model_cost`` when litellm is imported (with its local map:
    :func:`_litellm`), else the bundled file it loads that from, read directly."""
    import sys

    if "litellm" in sys.modules:
        return _litellm().model_cost
    return _bundled_map()


def _entry(model: str) -> dict | None:
    from personalign.lm._models import is_local

    if not model or is_local(model):
        return None
    table = cost_map()
    for key in (model, model.split("/", 1)[1] if "/" in model else None):
        entry = table.get(key) if key else None
        if isinstance(entry, dict) and isinstance(entry.get("input_cost_per_token"), (int, float)):
            return entry
    return None


@functools.lru_cache(maxsize=64)
def price(model: str | None) -> tuple[float, float] | None:
    """``(dollars per input token, dollars per output token)`` of ``model`` in litellm's bundled
    price map, or None: an embedded model, or a model the map has no price for."""
    entry = _entry(model or "")
    if entry is None:
        return None
    return float(entry["input_cost_per_token"]), float(entry.get("output_cost_per_token") or 0.0)


def priced(model: str | None) -> bool:
    """Whether ``model`` has a price on file (:func:`price`); the embedded models never do, and
    asking about them does not import litellm."""
    from personalign.lm._models import is_local

    return bool(model) and not is_local(model) and price(model) is not None


def dollars(model: str | None, input_tokens: float, output_tokens: float) -> float:
    """What ``input_tokens`` and ``output_tokens`` of ``model`` cost (``0.0`` without a price)."""
    if not priced(model):
        return 0.0
    p_in, p_out = price(model)
    return input_tokens * p_in + output_tokens * p_out


def prompt_tokens(model: str | None, messages: Sequence[dict]) -> tuple[int, bool]:
    """``(tokens of the chat request, exact)``: a priced model's by ``litellm.token_counter``
    (``exact`` True); any other by cl100k (:func:`count_messages`; ``exact`` False: approximate
    for a model with its own tokenizer)."""
    if priced(model):
        try:
            return int(_litellm().token_counter(model=model, messages=list(messages))), True
        except Exception:  # noqa: BLE001 -- a tokenizer litellm would have to fetch: counted as below
            pass
    return count_messages(messages), False


__all__ = ["count_messages", "count_text", "cl100k", "cost_map", "dollars", "price", "priced", "prompt_tokens"]
