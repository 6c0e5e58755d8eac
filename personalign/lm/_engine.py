"""In-process llama.cpp engine for the embedded models (the only module that imports llama_cpp).

One :class:`LocalEngine` per model per process, created on first use and shared by every
thread; calls into llama.cpp are serialized by a per-engine lock (a llama.cpp context is not
thread-safe). Typed outputs are grammar-constrained: a JSON schema becomes a GBNF grammar
(llama.cpp's own ``json_schema_to_gbnf``), after bounding every free string and list so that a
constrained answer always ends inside ``max_tokens`` (:mod:`personalign.lm._schema`, re-exported here).
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from personalign.errors import ContextWindowError, ModelFileError
from personalign.lm.calls import count_call  # every forward pass outside DSPy's LM counts as a model call
from personalign.lm._models import LocalModelSpec, get_spec, model_file
from personalign.lm._schema import (  # noqa: F401  (part of this module's API: callers import them from here)
    _max_chars,
    bound_schema,
    fit_schema,
    schema_from_response_format,
)


@dataclass(frozen=True)
class LocalSettings:
    """Settings of the embedded backend.

    Attributes:
        n_ctx: context window in tokens (prompt + output).
        n_threads: CPU threads for llama.cpp (default: all cores).
        seed: sampling seed; with temperature > 0 each call gets seed + call index, so samples differ
            but a rerun of the same sequence of calls is identical.
        temperature: default sampling temperature (0 = greedy).
        max_tokens: default output budget in tokens.
        max_string_chars: upper bound on every free-text string in a constrained JSON answer.
        max_list_items: upper bound on every list in a constrained JSON answer.
        reuse_prefix: keep the KV cache between calls and evaluate only the tokens after the
            longest prefix a prompt shares with the previous call (False: reset before every
            call; same outputs, for measuring the gain -- ``PERSONALIGN_KV_REUSE=0``).
        batch_decode: answer a call asking for ``n > 1`` choices with one batched decode of the n
            sequences (:func:`personalign.lm._batch.complete_many`) instead of n calls in turn
            (``PERSONALIGN_BATCH_DECODE=0`` turns it off).
    """

    n_ctx: int = 4096
    n_threads: int = field(default_factory=lambda: max(1, os.cpu_count() or 1))
    seed: int = 0
    temperature: float = 0.0
    max_tokens: int = 512
    max_string_chars: int = 600
    max_list_items: int = 12
    reuse_prefix: bool = True
    batch_decode: bool = True

    @classmethod
    def from_env(cls) -> "LocalSettings":
        """Settings overridden by ``PERSONALIGN_N_CTX``, ``PERSONALIGN_THREADS``, ``PERSONALIGN_SEED``,
        ``PERSONALIGN_KV_REUSE``, ``PERSONALIGN_BATCH_DECODE`` (validated by :func:`personalign.settings.env_settings`).

        Raises:
            ConfigurationError: a variable out of its type or bounds (names it and its value).
        """
        from personalign.settings import env_settings

        env = env_settings()
        s = cls()
        if env.N_CTX is not None:
            s = replace(s, n_ctx=env.N_CTX)
        if env.THREADS is not None:
            s = replace(s, n_threads=env.THREADS)
        if env.SEED is not None:
            s = replace(s, seed=env.SEED)
        if env.KV_REUSE is not None:
            s = replace(s, reuse_prefix=env.KV_REUSE)
        if env.BATCH_DECODE is not None:
            s = replace(s, batch_decode=env.BATCH_DECODE)
        return s


@dataclass
class Completion:
    """One generation: ``text``, ``finish_reason`` ("stop" | "length"), token counts and, when
    requested for a schema-constrained call, ``logprobs``: OpenAI's ``choice.logprobs.content``
    shape, one ``{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}``
    per generated token (natural logs, the model's own distribution before the grammar)."""

    text: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    logprobs: list[dict[str, Any]] | None = None


@lru_cache(maxsize=64)
def _gbnf_for(schema_json: str) -> str:
    """GBNF text for a JSON schema (llama.cpp's json_schema_to_gbnf; cached per schema)."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    return json_schema_to_gbnf(schema_json)


class LocalEngine:
    """A loaded embedded model. Use :func:`get_engine`, not the constructor."""

    def __init__(self, spec: LocalModelSpec, settings: LocalSettings):
        from llama_cpp import Llama

        from personalign.lm._exit import quiet_exit

        quiet_exit()

        self.spec = spec
        self.settings = settings
        self.path, self.sha256 = model_file(spec.model_string)
        try:
            self.llm = Llama(
                model_path=str(self.path),
                n_ctx=settings.n_ctx,
                n_threads=settings.n_threads,
                n_threads_batch=settings.n_threads,
                seed=settings.seed,
                verbose=False,
            )
        except (ValueError, RuntimeError) as exc:
            raise ModelFileError(f"llama.cpp could not load {self.path}: {exc}") from None
        self.lock = threading.RLock()
        self.calls = 0
        self.prompt_tokens = 0  # prompt tokens submitted, over all calls
        self.evaluated_tokens = 0  # prompt tokens actually evaluated (the rest came from the KV cache)
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        template = self.llm.metadata.get("tokenizer.chat_template")
        if not template:
            raise ModelFileError(f"{self.path} carries no chat template")
        vocab = self.llm._model  # token text for BOS/EOS as the template expects
        bos = vocab.token_get_text(self.llm.token_bos()) if self.llm.token_bos() >= 0 else ""
        eos = vocab.token_get_text(self.llm.token_eos()) if self.llm.token_eos() >= 0 else ""
        self._formatter = Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos)
        self._stop = [eos] if eos else []

    def close(self) -> None:
        """Free the batch decoder's context (it runs on these weights), then the model."""
        dec = getattr(self, "batch_decoder", None)
        if dec is not None:
            dec.close()
        self.llm.close()

    # ---------------------------------------------------------------- prompts
    def render(self, messages: list[dict[str, Any]]) -> tuple[str, list[str]]:
        """Render chat messages into the model's prompt text; return (prompt, stop strings)."""
        msgs = [{"role": m.get("role", "user"), "content": _content_text(m.get("content"))} for m in messages]
        out = self._formatter(messages=msgs)
        stop = out.stop if isinstance(out.stop, list) else ([out.stop] if out.stop else [])
        return out.prompt, sorted(set(stop + self._stop))

    def _start(self, tokens: list[int]) -> int:
        """Prepare the KV cache for a call on ``tokens`` (caller holds the lock): reset it unless
        prefix reuse is on; return how many leading tokens are already in the cache (at most
        ``len(tokens) - 1``: the last prompt token is always evaluated, for fresh logits)."""
        if not self.settings.reuse_prefix:
            self.llm.reset()
        cached = self.llm.input_ids[: self.llm.n_tokens]
        n = min(len(cached), len(tokens) - 1)
        prefix = 0
        if n > 0:
            import numpy as np

            diff = np.nonzero(cached[:n] != np.asarray(tokens[:n], dtype=cached.dtype))[0]
            prefix = int(diff[0]) if len(diff) else n
        self.calls += 1
        self.prompt_tokens += len(tokens)
        self.evaluated_tokens += len(tokens) - prefix
        return prefix

    def count_tokens(self, text: str) -> int:
        return len(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    # ------------------------------------------------------------- generation
    def complete(
        self,
        prompt: str,
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        stop: list[str] | None = None,
        schema: dict[str, Any] | None = None,
        logprobs: int | None = None,
    ) -> Completion:
        """Generate from a rendered prompt, optionally constrained to a JSON schema.

        ``logprobs``: None (default) for none, else the number of top alternatives (0-20) to
        report per generated token; supported for schema-constrained calls (typed outputs, where
        DSPy's JSONAdapter sends the schema), ignored for free text (``Completion.logprobs`` None).

        Raises:
            ContextWindowError: the prompt leaves fewer than 8 tokens of the n_ctx window.
        """
        s = self.settings
        temperature = s.temperature if temperature is None else float(temperature)
        max_tokens = s.max_tokens if max_tokens is None else int(max_tokens)
        tokens = self.llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
        room = s.n_ctx - len(tokens)
        if room < 8:
            raise ContextWindowError(
                f"prompt of {len(tokens)} tokens does not fit the {s.n_ctx}-token context of {self.spec.model_string}; "
                "shorten the input or raise n_ctx (PERSONALIGN_N_CTX)"
            )
        max_tokens = min(max_tokens, room)
        grammar_text = None
        if schema is not None:
            bounded = fit_schema(schema, s.max_string_chars, s.max_list_items, budget=max_tokens)
            grammar_text = _gbnf_for(json.dumps(bounded, sort_keys=True))
        with self.lock:
            prefix = self._start(tokens)
            if seed is None:
                seed = s.seed if temperature == 0 else s.seed + self.calls
            if grammar_text is not None:
                from personalign.lm._constrained import generate_constrained

                steps = [] if logprobs is not None else None
                ids, finish = generate_constrained(self.llm, tokens, grammar_text, max_tokens=max_tokens,
                                                   temperature=temperature, seed=seed, prefix=prefix,
                                                   logprobs=steps, top_logprobs=int(logprobs or 0))
                text = self.llm.detokenize(ids).decode("utf-8", errors="replace")
                return Completion(text=text, finish_reason=finish, prompt_tokens=len(tokens),
                                  completion_tokens=len(ids),
                                  logprobs=None if steps is None else [self._token_logprob(*st) for st in steps])
            out = self.llm.create_completion(
                prompt=tokens,
                max_tokens=max_tokens,
                temperature=temperature,
                seed=seed,
                stop=stop if stop is not None else self._stop,
                repeat_penalty=1.0,
            )
        choice = out["choices"][0]
        usage = out.get("usage", {})
        return Completion(
            text=choice["text"],
            finish_reason=choice.get("finish_reason") or "stop",
            prompt_tokens=int(usage.get("prompt_tokens", len(tokens))),
            completion_tokens=int(usage.get("completion_tokens", 0)),
        )

    def _token_logprob(self, token: int, logprob: float, top: list[tuple[int, float]]) -> dict[str, Any]:
        def entry(tok: int, lp: float) -> dict[str, Any]:
            raw = self.llm.detokenize([tok])
            return {"token": raw.decode("utf-8", errors="replace"), "logprob": lp, "bytes": list(raw)}

        return {**entry(token, logprob), "top_logprobs": [entry(t, lp) for t, lp in top]}

    def next_token_logprobs(self, prompt: str, candidates: list[str]) -> dict[str, tuple[int, float]]:
        """Log-probability of each candidate's first token as the next token after ``prompt``.

        Used for yes/no scoring (the log-probability margin of "yes" over "no"). Returns, per
        candidate, (first token id, natural-log probability); candidates sharing a first token
        share its id, so callers can de-duplicate.
        """
        import numpy as np

        tokens = self._prompt_tokens(prompt)
        with self.lock:
            t0, prefix = time.perf_counter(), self._start(tokens)
            self.llm.n_tokens = prefix
            self.llm.eval(tokens[prefix:])
            logits = np.ctypeslib.as_array(self.llm._ctx.get_logits(), shape=(self.llm.n_vocab(),)).astype(np.float64)
        count_call(self.spec.model_string, seconds=time.perf_counter() - t0, prompt_tokens=len(tokens) - prefix)
        return self._candidate_logprobs(logits, candidates)

    def next_token_logprobs_hidden(self, prompt: str | list[int], candidates: list[str]):
        """:meth:`next_token_logprobs` plus the model's final hidden state at the last prompt token
        (the position that emits the next token): ``(logprobs, hidden)``, ``hidden`` float64 of
        shape (n_embd,) (llama.cpp's output embedding of that token, after the final norm).
        ``prompt``: the rendered text, or its tokens (:meth:`_prompt_tokens`).

        With embeddings on, llama.cpp marks every token of a batch as an output (logits of the
        whole vocabulary for each), so the prompt is evaluated with them off and only the last
        token runs as a one-token ``Llama.eval`` with them on (``llama_set_embeddings``); that one
        eval yields both the logits and the hidden state, read with ``llama_get_logits_ith`` /
        ``llama_get_embeddings_ith`` at ``-1`` (the last output) through ``Llama.ctx``, all
        llama-cpp-python's public API. KV prefix reuse is kept. Cached and shared between
        features by :func:`personalign.lm.forward.yes_no_pass`."""
        import llama_cpp
        import numpy as np

        tokens = self._prompt_tokens(prompt) if isinstance(prompt, str) else self._check_fits(list(prompt))
        with self.lock:
            t0, prefix = time.perf_counter(), self._start(tokens)
            self.llm.n_tokens = prefix
            if prefix < len(tokens) - 1:
                self.llm.eval(tokens[prefix:-1])
            ctx = self.llm.ctx
            llama_cpp.llama_set_embeddings(ctx, True)
            try:
                self.llm.eval(tokens[-1:])
                hidden = np.ctypeslib.as_array(llama_cpp.llama_get_embeddings_ith(ctx, -1), shape=(self.llm.n_embd(),))
                hidden = hidden.astype(np.float64)
                logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, -1), shape=(self.llm.n_vocab(),))
                logits = logits.astype(np.float64)
            finally:
                llama_cpp.llama_set_embeddings(ctx, False)
        count_call(self.spec.model_string, seconds=time.perf_counter() - t0, prompt_tokens=len(tokens) - prefix)
        return self._candidate_logprobs(logits, candidates), hidden

    def _prompt_tokens(self, prompt: str) -> list[int]:
        """The prompt's tokens; ContextWindowError when they do not fit n_ctx."""
        return self._check_fits(self.llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True))

    def _check_fits(self, tokens: list[int]) -> list[int]:
        """``tokens``, or ContextWindowError when they do not fit n_ctx."""
        if len(tokens) >= self.settings.n_ctx:
            raise ContextWindowError(
                f"prompt of {len(tokens)} tokens does not fit the {self.settings.n_ctx}-token context"
            )
        return tokens

    def _candidate_logprobs(self, logits, candidates: list[str]) -> dict[str, tuple[int, float]]:
        import numpy as np

        logz = np.logaddexp.reduce(logits)
        result = {}
        for cand in candidates:
            ids = self.llm.tokenize(cand.encode("utf-8"), add_bos=False, special=False)
            result[cand] = (ids[0], float(logits[ids[0]] - logz)) if ids else (-1, float("-inf"))
        return result


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


_engines: dict[str, LocalEngine] = {}
_engines_lock = threading.Lock()
_settings: LocalSettings | None = None


def configure_settings(settings: LocalSettings) -> None:
    """Set the backend settings; an already loaded model is reloaded on next use if n_ctx/threads change."""
    global _settings
    with _engines_lock:
        _settings = settings
        for name, eng in list(_engines.items()):
            if (eng.settings.n_ctx, eng.settings.n_threads) != (settings.n_ctx, settings.n_threads):
                eng.close()
                del _engines[name]
            else:
                eng.settings = settings


def current_settings() -> LocalSettings:
    global _settings
    if _settings is None:
        _settings = LocalSettings.from_env()
    return _settings


def get_engine(model: str) -> LocalEngine:
    """The process-wide engine for a ``local/NAME`` model, loaded on first use (thread-safe)."""
    spec = get_spec(model)
    with _engines_lock:
        eng = _engines.get(spec.name)
        if eng is None:
            eng = LocalEngine(spec, current_settings())
            _engines[spec.name] = eng
        return eng


def loaded_engines() -> dict[str, LocalEngine]:
    return dict(_engines)


def close_all() -> None:
    """Free every loaded model (registered atexit: llama.cpp objects freed during interpreter
    teardown print spurious errors)."""
    with _engines_lock:
        for eng in _engines.values():
            try:
                eng.close()
            except Exception:  # noqa: BLE001 -- best effort at exit
                pass
        _engines.clear()


import atexit  # noqa: E402

atexit.register(close_all)
