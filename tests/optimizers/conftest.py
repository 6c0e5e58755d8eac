"""Fixtures for the optimizer tests: a schema-following DummyLM and a tiny relevance train/val set.

``SchemaDummyLM`` is DSPy's ``DummyLM`` (control flow only, no model) with an engine that answers
*any* signature: it reads the requested output fields from the adapter's system message and fills
each with a placeholder of its type -- a bool chosen by a CRC of the request (deterministic, mixed
True/False), a short string, ``0.5``, ``1``, ``[]`` or ``{}`` -- in ChatAdapter or JSONAdapter
format. That lets the proposers of MIPROv2/COPRO/SIMBA/GEPA (which use their own signatures) run.
"""

from __future__ import annotations

import json
import re
import threading
import zlib
from pathlib import Path

import dspy
import pytest
from dspy.clients.engines.dummy_engine import AsyncDummyEngine, DummyEngine
from dspy.utils.dummies import DummyLM

ROOT = Path(__file__).resolve().parents[2]

# the relevance stage's teleprompter settings (metric and label field): wrappers have no stage defaults
REL = {"metric": __import__("personalign.metrics", fromlist=["relevance_accuracy"]).relevance_accuracy,
       "label_field": "relevant"}
DEMO = ROOT / "examples" / "relevance_demo.jsonl"

_FIELD = re.compile(r"^\d+\. `(\w+)` \((.*?)\)(?::|$)")


def _output_fields(system: str) -> list[tuple[str, str]]:
    if "Your output fields are:" not in system:
        return []
    block = system.split("Your output fields are:", 1)[1].split("All interactions will be structured", 1)[0]
    fields = []
    for line in block.splitlines():
        m = _FIELD.match(line.strip())
        if m:
            fields.append((m.group(1), m.group(2)))
    return fields


def _value(name: str, type_: str, key: int):
    t = type_.lower()
    if t.startswith("bool"):
        return key % 2 == 0
    if t.startswith("int"):
        return 1
    if t.startswith("float"):
        return 0.5
    if t.startswith("list"):
        return []
    if t.startswith("dict"):
        return {}
    return f"Placeholder {name}: decide carefully from the inputs."


class SchemaEngine(DummyEngine):
    # one entry in ``owner.calls`` per request (a request with n > 1 returns n completions)
    def complete(self, request):
        self.owner.calls.append(threading.current_thread().name)
        return super().complete(request)

    def complete_legacy(self, lm, request, **kwargs):
        self.owner.calls.append(threading.current_thread().name)
        return super().complete_legacy(lm, request, **kwargs)

    def _complete_messages(self, messages):
        from dspy.lm15 import Message, Response, TextPart, Usage

        system = next((m["content"] for m in messages if m["role"] == "system"), "")
        last = messages[-1]["content"] if messages else ""
        key = zlib.crc32(last.encode("utf-8"))
        values = {n: _value(n, t, key) for n, t in _output_fields(system)}
        if "Outputs will be a JSON object" in system:
            text = json.dumps(values)
        else:
            text = "".join(f"[[ ## {k} ## ]]\n{v}\n\n" for k, v in values.items()) + "[[ ## completed ## ]]\n"
        return Response(id=None, model="dummy", message=Message.assistant([TextPart(text)]), finish_reason="stop",
                        usage=Usage(input_tokens=1, output_tokens=1, total_tokens=2))


class SchemaDummyLM(DummyLM):
    """DummyLM answering every signature with typed placeholders (see the module docstring)."""

    def __init__(self):
        super().__init__([])
        self.calls: list[str] = []
        self._engine_spec = SchemaEngine(self)
        self._async_engine_spec = AsyncDummyEngine(self._engine_spec)

    def copy(self, **kwargs):
        copied = super().copy(**kwargs)
        copied.calls = self.calls
        copied._engine_spec = SchemaEngine(copied)
        copied._async_engine_spec = AsyncDummyEngine(copied._engine_spec)
        return copied


@pytest.fixture
def dummy_lm():
    return SchemaDummyLM()


@pytest.fixture(scope="session")
def relevance_sets():
    from personalign.data import load_relevance

    rows = load_relevance(DEMO)
    train = [r.to_dspy() for r in rows if r.split == "train"]
    val = [r.to_dspy() for r in rows if r.split == "val"]
    return train, val


@pytest.fixture
def tiny(relevance_sets):
    """8 train / 6 val relevance examples (both labels in each)."""
    train, val = relevance_sets
    return train[:8], val[:6]


@pytest.fixture(autouse=True)
def no_configure_in_worker_threads(monkeypatch):
    """Fail any ``dspy.configure`` (or ``dspy.settings.configure``) from a non-main thread."""
    calls = []
    real = type(dspy.settings).configure

    def guarded(self, **kwargs):
        calls.append(threading.current_thread().name)
        if threading.current_thread() is not threading.main_thread():
            raise AssertionError(f"dspy.configure called from worker thread {threading.current_thread().name}")
        return real(self, **kwargs)

    monkeypatch.setattr(type(dspy.settings), "configure", guarded)
    monkeypatch.setattr(dspy, "configure", lambda **kw: guarded(dspy.settings, **kw))
    yield calls
