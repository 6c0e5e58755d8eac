"""The one reader of DSPy's prompt format used by the test doubles.

DSPy's ChatAdapter and JSONAdapter both describe the signature in the system message::

    Your output fields are:
    1. `relevant` (bool): ...
    All interactions will be structured in the following way, ...

:func:`output_fields` returns the ``(name, type)`` pairs of that block, so a dummy can answer any
signature (the task's and the proposers' of MIPROv2/COPRO/SIMBA/GEPA alike).
"""

from __future__ import annotations

import json
import re

_FIELD = re.compile(r"^\d+\. `(\w+)` \((.*?)\)(?::|$)")
_START = "Your output fields are:"
_END = "All interactions will be structured"


def output_fields(system: str) -> list[tuple[str, str]]:
    """``[(name, type), ...]`` of the output fields listed in a DSPy system message, in order.

    ``type`` is DSPy's rendering (``bool``, ``str``, ``list[str]``, ...). Returns ``[]`` when
    ``system`` has no output-field block (not a DSPy prompt).
    """
    if _START not in system:
        return []
    block = system.split(_START, 1)[1].split(_END, 1)[0]
    return [(m.group(1), m.group(2)) for m in (_FIELD.match(line.strip()) for line in block.splitlines()) if m]


_SCHEMA_NOTE = "# note: the value you produce must adhere to the JSON schema: "


def field_schema(system: str, name: str) -> dict | None:
    """The JSON schema DSPy gives for output field ``name`` of a non-primitive type (a pydantic
    model, a typed list), or None. Both adapters write it as a ``# note`` after ``{name}``; the
    JSONAdapter's is inside a JSON string (escaped)."""
    for line in system.splitlines():
        head, sep, rest = line.partition("{%s}" % name)
        if not sep or _SCHEMA_NOTE not in rest:
            continue
        text = rest.split(_SCHEMA_NOTE, 1)[1].rstrip().rstrip(",")  # JSONAdapter: '..."' or '...",'
        for candidate in (text, text[:-1] if text.endswith('"') else text):
            try:
                value = json.loads(candidate)
            except ValueError:
                try:
                    value = json.loads(json.loads(f'"{candidate}"'))
                except ValueError:
                    continue
            if isinstance(value, dict):
                return value
    return None


def minimal_instance(schema: dict, defs: dict | None = None, *, text: str = "placeholder", flag: bool = True):
    """A smallest value valid under the JSON ``schema``: the first ``enum``/``const`` option, ``[]``
    (or one item when ``minItems`` > 0), an object with its required properties, ``text``, 1, 0.5,
    ``flag``; ``$ref`` and ``anyOf``/``oneOf`` (first non-null option) are followed."""
    defs = {**(defs or {}), **schema.get("$defs", {})}
    if "$ref" in schema:
        return minimal_instance(defs.get(schema["$ref"].rsplit("/", 1)[-1], {}), defs, text=text, flag=flag)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        options = [o for o in schema.get(key, []) if o.get("type") != "null"]
        if options:
            return minimal_instance(options[0], defs, text=text, flag=flag)
    kind = schema.get("type")
    if kind == "array":
        n = int(schema.get("minItems", 0))
        return [minimal_instance(schema.get("items", {}), defs, text=text, flag=flag) for _ in range(n)]
    if kind == "object":
        props = schema.get("properties", {})
        return {k: minimal_instance(props.get(k, {}), defs, text=text, flag=flag) for k in schema.get("required", [])}
    return {"integer": 1, "number": 0.5, "boolean": flag, "null": None}.get(kind, text)


def literal_options(type_: str) -> list:
    """The options of a DSPy-rendered ``Literal[...]`` type (``Literal[1, 2]`` -> ``[1, 2]``,
    ``Literal['A', 'B']`` -> ``["A", "B"]``); [] for any other type."""
    if not type_.startswith("Literal[") or not type_.endswith("]"):
        return []
    out = []
    for raw in type_[len("Literal["):-1].split(","):
        raw = raw.strip()
        try:
            out.append(json.loads(raw.replace("'", '"')))
        except ValueError:
            out.append(raw.strip("'\""))
    return out


def system_message(messages: list[dict]) -> str:
    """The content of the first system message of a chat request ('' when there is none)."""
    return str(next((m.get("content") or "" for m in messages if m.get("role") == "system"), ""))


def chat_reply(values: dict, render=str) -> str:
    """``values`` in ChatAdapter's format: ``[[ ## name ## ]]`` sections (each value written with
    ``render``), then ``[[ ## completed ## ]]``."""
    return "".join(f"[[ ## {k} ## ]]\n{render(v)}\n\n" for k, v in values.items()) + "[[ ## completed ## ]]\n"


__all__ = ["output_fields", "field_schema", "literal_options", "minimal_instance", "system_message", "chat_reply"]
