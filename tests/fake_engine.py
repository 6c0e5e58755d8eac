"""An embedded engine with no model behind it, for control flow: :class:`FakeEngine` is a real
:class:`personalign.lm._engine.LocalEngine` (its ``next_token_logprobs`` and KV-prefix bookkeeping
run as written; ``next_token_logprobs_hidden`` is that pass plus a stand-in hidden state) over a
stand-in for llama.cpp whose logits are a
deterministic function of the evaluated tokens, and whose ``complete`` answers a JSON schema with
values hashed from the prompt. Installed with :func:`install` in place of ``get_engine``, so
``local/...`` model strings run through the real provider, adapter and counting code in milliseconds.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import threading
from types import SimpleNamespace

import numpy as np

from personalign.lm._engine import Completion, LocalEngine, LocalSettings
from personalign.lm._models import get_spec


class FakeLlm:
    """The parts of ``llama_cpp.Llama`` the engine's forward passes use."""

    def __init__(self, n_ctx: int = 4096, n_vocab: int = 128) -> None:
        self.input_ids = np.zeros(n_ctx, dtype=np.intc)
        self.n_tokens = 0
        self._vocab = n_vocab
        self.logits = (ctypes.c_float * n_vocab)()
        self._ctx = SimpleNamespace(get_logits=lambda: ctypes.cast(self.logits, ctypes.POINTER(ctypes.c_float)))
        self.evaluated = 0  # tokens evaluated, over all calls

    def tokenize(self, text: bytes, add_bos: bool = False, special: bool = True) -> list[int]:
        return [b % self._vocab for b in text]

    def n_vocab(self) -> int:
        return self._vocab

    def n_embd(self) -> int:
        return 16

    def reset(self) -> None:
        self.n_tokens = 0

    def eval(self, tokens) -> None:
        tokens = list(tokens)
        self.input_ids[self.n_tokens:self.n_tokens + len(tokens)] = tokens
        self.n_tokens += len(tokens)
        self.evaluated += len(tokens)
        seed = int.from_bytes(hashlib.sha256(bytes(self.input_ids[: self.n_tokens] % 256)).digest()[:4], "little")
        values = np.random.default_rng(seed).normal(size=self._vocab)
        for i, v in enumerate(values):
            self.logits[i] = float(v)


class FakeEngine(LocalEngine):
    """A :class:`LocalEngine` over :class:`FakeLlm` (no file, no weights)."""

    def __init__(self, model: str) -> None:  # noqa: D107 -- no llama.cpp load
        self.spec = get_spec(model)
        self.sha256 = hashlib.sha256(model.encode()).hexdigest()  # stands in for the model file's (forward-pass keys)
        self.settings = LocalSettings(n_ctx=4096)
        self.llm = FakeLlm()
        self.lock = threading.RLock()
        self.calls = self.prompt_tokens = self.evaluated_tokens = 0
        self.completions = 0

    def next_token_logprobs_hidden(self, prompt, candidates):
        """The real :meth:`next_token_logprobs` (its pass and its count), and a hidden state of
        ``n_embd`` values taken from the same logits (llama.cpp's embeddings API needs a real context)."""
        if not isinstance(prompt, str):
            prompt = bytes(int(t) for t in prompt).decode("latin-1")  # FakeLlm.tokenize of it gives the tokens back
        logprobs = self.next_token_logprobs(prompt, candidates)
        hidden = np.frombuffer(bytes(self.llm.logits), dtype=np.float32)[: self.llm.n_embd()].astype(np.float64)
        return logprobs, hidden

    def render(self, messages):
        return "\n".join(f"{m.get('role')}: {m.get('content')}" for m in messages) + "\nassistant:", []

    def complete(self, prompt, *, max_tokens=None, temperature=None, seed=None, stop=None, schema=None,
                 logprobs=None) -> Completion:
        self.completions += 1
        digest = hashlib.sha256(prompt.encode()).digest()
        props = (schema or {}).get("properties") or {"answer": {"type": "string"}}
        values = {}
        for i, (name, spec) in enumerate(props.items()):
            kind = spec.get("type")
            values[name] = (digest[i] % 3 == 0 if kind == "boolean" else int(digest[i] % 5) if kind == "integer"
                            else round(digest[i] / 255, 3) if kind == "number" else f"text {digest[i]}")
        return Completion(text=json.dumps(values), finish_reason="stop", prompt_tokens=len(prompt) // 4,
                          completion_tokens=8)


def install(monkeypatch) -> dict[str, FakeEngine]:
    """Serve every ``local/...`` model from a :class:`FakeEngine` (one per model); returns them."""
    import personalign.lm._engine as engine_module

    engines: dict[str, FakeEngine] = {}

    def get_engine(model: str) -> FakeEngine:
        name = get_spec(model).model_string
        if name not in engines:
            engines[name] = FakeEngine(name)
        return engines[name]

    monkeypatch.setattr(engine_module, "get_engine", get_engine)
    return engines
