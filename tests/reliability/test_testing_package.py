"""The shipped test doubles (:mod:`personalign.testing`): one reader of DSPy's prompt, a dummy LM
that answers typed signatures, and imports that stay light."""

from __future__ import annotations

import subprocess
import sys
from typing import Literal

import dspy
import pydantic

from personalign.testing._prompt import field_schema, literal_options, minimal_instance, output_fields
from personalign.testing.dummies import SchemaDummyLM


class Item(pydantic.BaseModel):
    name: str
    score: float
    tags: list[str] = []


class Typed(dspy.Signature):
    """Answer."""

    question: str = dspy.InputField()
    rating: Literal[1, 2, 3] = dspy.OutputField()
    choice: Literal["A", "B"] = dspy.OutputField()
    item: Item = dspy.OutputField()
    ok: bool = dspy.OutputField()


def test_output_fields_and_schemas_from_both_adapters():
    for adapter in (dspy.ChatAdapter(), dspy.JSONAdapter()):
        system = adapter.format(Typed, [], {"question": "q"})[0]["content"]
        assert output_fields(system) == [("rating", "Literal[1, 2, 3]"), ("choice", "Literal['A', 'B']"),
                                         ("item", "Item"), ("ok", "bool")]
        schema = field_schema(system, "item")
        assert schema["required"] == ["name", "score"]
        assert field_schema(system, "ok") is None
    assert output_fields("not a DSPy prompt") == []
    assert literal_options("Literal[1, 2, 3]") == [1, 2, 3] and literal_options("Literal['A', 'B']") == ["A", "B"]
    assert literal_options("str") == []
    assert minimal_instance({"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/I"}},
                            {"I": {"type": "object", "properties": {"n": {"enum": [4, 5]}}, "required": ["n"]}}) == [{"n": 4}]


def test_the_dummy_answers_typed_signatures_with_both_adapters():
    for adapter in (dspy.ChatAdapter(), dspy.JSONAdapter()):
        lm = SchemaDummyLM()
        with dspy.context(lm=lm, adapter=adapter):
            out = dspy.Predict(Typed)(question="q")
        assert out.rating == 1 and out.choice == "A" and isinstance(out.item, Item) and isinstance(out.ok, bool)
        assert len(lm.calls) == 1  # parsed on the first call: no adapter fallback


def test_importing_personalign_imports_no_test_framework():
    code = ("import sys, personalign, personalign.testing, personalign.testing.dummies, "
            "personalign.testing.mock_provider, personalign.testing.faults; "
            "assert 'pytest' not in sys.modules, 'pytest imported'; "
            "from personalign.testing import StageTestCase; assert 'pytest' in sys.modules")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
