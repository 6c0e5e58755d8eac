"""JSON-schema bounding for grammar-constrained decoding (used by :mod:`personalign.lm._engine`,
which re-exports every name here).

A typed answer's JSON schema becomes a GBNF grammar (llama.cpp's own ``json_schema_to_gbnf``, in :mod:`personalign.lm._engine`)
after every free string and list is bounded, so that the longest possible constrained answer
always ends inside ``max_tokens``.
"""

from __future__ import annotations

import copy
import json
from typing import Any


def bound_schema(schema: dict[str, Any], max_string_chars: int, max_list_items: int) -> dict[str, Any]:
    """Return a copy of a JSON schema in which every free string has ``maxLength`` and every array
    ``maxItems`` (existing, tighter bounds are kept). Enums and consts are left alone.

    Bounded values make the grammar finite, so a constrained answer cannot be cut off by the
    token budget and fail to parse.
    """
    out = copy.deepcopy(schema)

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            typ = node.get("type")
            types = typ if isinstance(typ, list) else [typ]
            if "string" in types and "enum" not in node and "const" not in node and "pattern" not in node:
                node["maxLength"] = min(int(node.get("maxLength", max_string_chars)), max_string_chars)
            if "array" in types:
                node["maxItems"] = min(int(node.get("maxItems", max_list_items)), max_list_items)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(out)
    return out


def _max_chars(node: Any, defs: dict[str, Any], depth: int = 0) -> int:
    """Upper bound on the JSON text length of a value of ``node`` (counting one char per string
    character and one per separator): finite once every string and list is bounded."""
    if depth > 20 or not isinstance(node, dict):
        return 64
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        return _max_chars(defs.get(name, {}), defs, depth + 1)
    for key in ("anyOf", "oneOf"):
        if key in node:
            return max((_max_chars(n, defs, depth + 1) for n in node[key]), default=64)
    if "enum" in node:
        return max((len(json.dumps(v)) for v in node["enum"]), default=4)
    if "const" in node:
        return len(json.dumps(node["const"]))
    typ = node.get("type")
    if isinstance(typ, list):
        return max(_max_chars({**node, "type": t}, defs, depth + 1) for t in typ)
    if typ == "string":
        return int(node.get("maxLength", 10_000)) + 2
    if typ == "integer":
        return 18
    if typ == "number":
        return 40
    if typ == "boolean":
        return 5
    if typ == "null":
        return 4
    if typ == "array":
        return 2 + int(node.get("maxItems", 1_000)) * (_max_chars(node.get("items", {}), defs, depth + 1) + 2)
    props = node.get("properties", {})
    return 2 + sum(len(k) + 6 + _max_chars(v, defs, depth + 1) for k, v in props.items())


def fit_schema(schema: dict[str, Any], max_string_chars: int, max_list_items: int, budget: int) -> dict[str, Any]:
    """Bound a schema (:func:`bound_schema`) and tighten the bounds until its longest possible
    answer fits ``budget`` output tokens (a token is at least one character), shortening strings
    first (down to 16 chars) and then lists (down to 1 item). Returns the bounded schema."""
    defs = schema.get("$defs", {}) or schema.get("definitions", {})
    chars, items = max_string_chars, max_list_items
    while True:
        bounded = bound_schema(schema, chars, items)
        bdefs = bounded.get("$defs", {}) or bounded.get("definitions", {}) or defs
        if _max_chars(bounded, bdefs) <= budget or (chars <= 16 and items <= 1):
            return bounded
        if chars > 16:
            chars = max(16, int(chars * 0.75))
        else:
            items = max(1, items - 1)


def schema_from_response_format(response_format: Any) -> dict[str, Any] | None:
    """Extract a JSON schema from an OpenAI-style ``response_format`` (dict or pydantic model class).

    ``{"type": "json_object"}`` maps to "any JSON object"; ``None`` or ``{"type": "text"}`` to None.
    """
    if response_format is None:
        return None
    if isinstance(response_format, type) and hasattr(response_format, "model_json_schema"):
        return response_format.model_json_schema()
    if isinstance(response_format, dict):
        kind = response_format.get("type")
        if kind == "json_schema":
            js = response_format.get("json_schema") or {}
            return js.get("schema") or {"type": "object"}
        if kind == "json_object":
            return response_format.get("schema") or {"type": "object"}
    return None


__all__ = ["bound_schema", "fit_schema", "schema_from_response_format"]
