"""A schema-following dummy LM (control flow only, no model), as ``dspy.utils.dummies`` is.

:class:`SchemaDummyLM` is DSPy's ``DummyLM`` with an engine that answers *any* signature: it
reads the requested output fields from the adapter's system message
(:func:`personalign.testing._prompt.output_fields`) and fills each with a placeholder of its type
-- a bool chosen by a CRC of the request (deterministic, mixed True/False), a short string,
``0.5``, ``1``, ``[]`` or ``{}`` -- in ChatAdapter or JSONAdapter format. That lets the proposers
of MIPROv2/COPRO/SIMBA/GEPA (which use their own signatures) run. ``lm.calls`` holds one entry
(the thread name) per request that reached the engine, shared by copies of the LM.

    lm = SchemaDummyLM()
    with dspy.context(lm=lm):
        program(attribute="...", prompt="...")
    assert len(lm.calls) == 1
"""

from __future__ import annotations

import json
import threading
import zlib

from dspy.clients.engines.dummy_engine import AsyncDummyEngine, DummyEngine
from dspy.utils.dummies import DummyLM

from personalign.testing._prompt import (chat_reply, field_schema, literal_options, minimal_instance, output_fields,
                                         system_message)


def placeholder(name: str, type_: str, key: int, schema: dict | None = None):
    """The dummy's value of output field ``name`` of DSPy type ``type_`` for request hash ``key``:
    a bool by the key's parity, 1, 0.5, ``[]``, ``{}``, the first option of a ``Literal``, the
    smallest value valid under ``schema`` (DSPy's JSON schema of a pydantic type), else a
    sentence."""
    options = literal_options(type_)
    if options:
        return options[0]
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
    text = f"Placeholder {name}: decide carefully from the inputs."
    if schema is not None:
        return minimal_instance(schema, text=text, flag=key % 2 == 0)
    return text


class SchemaEngine(DummyEngine):
    """DSPy's dummy engine answering from the output fields of the request's system message.

    ``owner.calls`` gets one entry per request (a request with ``n > 1`` returns n completions).
    Subclasses change answers by overriding :meth:`values`.
    """

    def complete(self, request):
        self.owner.calls.append(threading.current_thread().name)
        return super().complete(request)

    def complete_legacy(self, lm, request, **kwargs):
        self.owner.calls.append(threading.current_thread().name)
        return super().complete_legacy(lm, request, **kwargs)

    def values(self, fields: list[tuple[str, str]], messages: list[dict]) -> dict:
        """``{field: value}`` of the reply; ``fields`` are ``(name, type)`` pairs."""
        last = messages[-1]["content"] if messages else ""
        key = zlib.crc32(last.encode("utf-8"))
        system = system_message(messages)
        return {n: placeholder(n, t, key, field_schema(system, n)) for n, t in fields}

    def _complete_messages(self, messages):
        from dspy.lm15 import Message, Response, TextPart, Usage

        system = system_message(messages)
        values = self.values(output_fields(system), messages)
        text = json.dumps(values) if "Outputs will be a JSON object" in system else chat_reply(values)
        return Response(id=None, model="dummy", message=Message.assistant([TextPart(text)]), finish_reason="stop",
                        usage=Usage(input_tokens=1, output_tokens=1, total_tokens=2))


class SchemaDummyLM(DummyLM):
    """DummyLM answering every signature with typed placeholders (see the module docstring).

    Attributes:
        engine_class: the :class:`SchemaEngine` (sub)class answering the requests.
        calls: one entry (thread name) per request that reached the engine.
    """

    engine_class = SchemaEngine

    def __init__(self):
        super().__init__([])
        self.calls: list[str] = []
        self._engine_spec = self.engine_class(self)
        self._async_engine_spec = AsyncDummyEngine(self._engine_spec)

    def copy(self, **kwargs):
        copied = super().copy(**kwargs)
        copied.calls = self.calls
        copied._engine_spec = self.engine_class(copied)
        copied._async_engine_spec = AsyncDummyEngine(copied._engine_spec)
        return copied


__all__ = ["SchemaDummyLM", "SchemaEngine", "placeholder"]
