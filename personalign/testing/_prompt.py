"""The one reader of DSPy's prompt format used by the test doubles.

DSPy's ChatAdapter and JSONAdapter both describe the signature in the system message::

    Your output fields are:
    1. `relevant` (bool): ...
    All interactions will be structured in the following way, ...

:func:`output_fields` returns the ``(name, type)`` pairs of that block, so a dummy can answer any
signature (the task's and the proposers' of MIPROv2/COPRO/SIMBA/GEPA alike).
"""

from __future__ import annotations

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


def system_message(messages: list[dict]) -> str:
    """The content of the first system message of a chat request ('' when there is none)."""
    return str(next((m.get("content") or "" for m in messages if m.get("role") == "system"), ""))


def chat_reply(values: dict, render=str) -> str:
    """``values`` in ChatAdapter's format: ``[[ ## name ## ]]`` sections (each value written with
    ``render``), then ``[[ ## completed ## ]]``."""
    return "".join(f"[[ ## {k} ## ]]\n{render(v)}\n\n" for k, v in values.items()) + "[[ ## completed ## ]]\n"


__all__ = ["output_fields", "system_message", "chat_reply"]
