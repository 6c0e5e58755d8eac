"""What a person labels for a stage, read from its signature: the input fields to show (each
field's prefix as its heading, its description beneath) and the output field's allowed values,
each a button with a keyboard shortcut.

A stage can be labelled by hand when its output field is a ``bool`` (buttons Yes ``y`` / No
``n``; values ``true``/``false``) or a ``Literal[...]`` of allowed values (a stage file's
``type = ["low", "high"]``; buttons in declared order, keys ``1`` .. ``9``). Label values are the
output type's own JSON values, the same as the gold label field of a canonical row.
"""

from __future__ import annotations

import json
import typing
from dataclasses import asdict, dataclass
from typing import Any

from personalign.errors import ConfigurationError

SKIP_KEY, UNDO_KEY = "s", "u"


class LabelValueError(ValueError):
    """A label value the stage's output field does not allow (message: one line)."""


@dataclass(frozen=True)
class FieldView:
    """A signature field as the page shows it: ``title`` (its prefix without the colon, else the
    name) and ``description`` (None when the signature gives none)."""

    name: str
    title: str
    description: str | None


@dataclass(frozen=True)
class Choice:
    """One allowed label: its JSON ``value``, the button's ``text`` and its shortcut ``key``
    (None past the ninth value)."""

    value: Any
    text: str
    key: str | None


@dataclass(frozen=True)
class LabelSpec:
    """The labelling view of a stage (:func:`label_spec`)."""

    stage: str
    summary: str
    inputs: tuple[FieldView, ...]
    output: FieldView
    choices: tuple[Choice, ...]

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.inputs)

    def allowed(self) -> str:
        """The allowed values as JSON, comma-separated (for messages)."""
        return ", ".join(json.dumps(c.value, ensure_ascii=False) for c in self.choices)

    def check(self, value: Any) -> Any:
        """``value`` if it is one of the allowed values (type-exact: ``"true"`` is not ``true``).

        Raises:
            LabelValueError: another value, naming it, the output field and the allowed values.
        """
        for c in self.choices:
            if type(c.value) is type(value) and c.value == value:
                return c.value
        shown = json.dumps(value, ensure_ascii=False) if _jsonable(value) else repr(value)
        raise LabelValueError(f"unknown label value {shown[:80]} for '{self.output.name}' (allowed: {self.allowed()})")

    def from_text(self, text: Any) -> Any:
        """The value a choice string names (Label Studio's ``value.choices``): a choice's text or
        its value as a string, case-insensitive; a bool also from yes/no/true/false.

        Raises:
            LabelValueError: no choice matches.
        """
        if isinstance(text, str):
            key = text.strip().lower()
            for c in self.choices:
                names = {c.text.lower(), str(c.value).lower()}
                if isinstance(c.value, bool):
                    names |= {"yes", "true"} if c.value else {"no", "false"}
                if key in names:
                    return c.value
        texts = ", ".join(json.dumps(c.text, ensure_ascii=False) for c in self.choices)
        shown = json.dumps(text, ensure_ascii=False) if _jsonable(text) else repr(text)
        raise LabelValueError(f"unknown label value {shown[:80]} for '{self.output.name}' (allowed: {texts})")

    def page(self) -> dict[str, Any]:
        """What the annotation page needs (JSON-serializable)."""
        return {"stage": self.stage, "summary": self.summary, "inputs": [asdict(f) for f in self.inputs],
                "output": asdict(self.output), "choices": [asdict(c) for c in self.choices],
                "keys": {"skip": SKIP_KEY, "undo": UNDO_KEY}}


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def _field_view(name: str, field) -> FieldView:
    extra = getattr(field, "json_schema_extra", None) or {}
    prefix = str(extra.get("prefix") or "").strip().rstrip(":").strip()
    desc = str(extra.get("desc") or "").strip()
    if not desc or desc == f"${{{name}}}":  # DSPy's placeholder for a field declared without one
        desc = ""
    return FieldView(name, prefix or name.replace("_", " ").capitalize(), desc or None)


def _choices(stage, annotation) -> tuple[Choice, ...]:
    if annotation is bool:
        return Choice(True, "Yes", "y"), Choice(False, "No", "n")
    if typing.get_origin(annotation) is typing.Literal:
        values = typing.get_args(annotation)
        if values and all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in values):
            return tuple(Choice(v, str(v), str(i + 1) if i < 9 else None) for i, v in enumerate(values))
    shown = annotation.__name__ if isinstance(annotation, type) else str(annotation)
    raise ConfigurationError(f"stage '{stage.name}': its output '{stage.output}' is {shown}; labelling by hand needs "
                             "a bool output or a list of allowed values (a Literal, e.g. type = [\"low\", \"high\"])")


def label_spec(stage) -> LabelSpec:
    """The :class:`LabelSpec` of a :class:`~personalign.stages.Stage` (read-only use of
    its signature: input fields in signature order, the first output field).

    Raises:
        ConfigurationError: an output type that is neither ``bool`` nor a ``Literal`` of strings
            or integers (a free-text or scored output has no buttons).
    """
    sig = stage.signature_class
    out = stage.output
    choices = _choices(stage, sig.output_fields[out].annotation)
    return LabelSpec(stage=stage.name, summary=stage.summary,
                     inputs=tuple(_field_view(n, sig.input_fields[n]) for n in stage.inputs),
                     output=_field_view(out, sig.output_fields[out]), choices=choices)


__all__ = ["Choice", "FieldView", "LabelSpec", "LabelValueError", "SKIP_KEY", "UNDO_KEY", "label_spec"]
