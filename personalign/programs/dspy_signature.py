"""``signature.py``: the signature a program was compiled with, as a file plain DSPy imports.

DSPy's ``Predict.load`` matches a saved signature's fields by **position**: a hand-written class
with its fields in another order silently gets the wrong descriptions. So every saved program
(:func:`personalign.programs.saved.save_program`) gets, beside ``program.json``, a Python file that
imports only ``dspy`` and the standard library: the signature class exactly as compiled (field
names, order, types, descriptions, prefixes, instructions) and ``load(path=...)``, which returns the
``dspy.Predict`` or ``dspy.ChainOfThought`` the program wraps with the saved state loaded by DSPy's
own ``.load``. Every value in it is a literal written by ``repr``: nothing of the program is
executed to build it, and personalign never imports it (it is for the user).

A strategy whose state cannot load into plain DSPy (a fitted decision rule without a predictor,
weights, several predictors composed, a type that needs personalign) gets a ``load()`` that raises
:data:`REFUSAL` -- one line naming what needs personalign and the ``personalign eval`` command --
instead of DSPy's ``KeyError: 'signature'``. A program that loads but whose plain-DSPy predictions
differ from ``personalign eval`` (a decision rule or threshold on its score) warns so on ``load()``.
A program composing several predictors also gets ``predictors()``: each plain ``dspy.Predict`` it
holds, by name, with its saved state (DSPy's ``load_state``).
"""

from __future__ import annotations

import keyword
import re
import types
import typing
from typing import Any

FILE = "signature.py"
_PLAIN = (str, int, float, bool, bytes)


def plain_module(program) -> Any:
    """The module plain DSPy loads: the one DSPy built-in module ``program`` wraps (e.g.
    ``self.judge = dspy.ChainOfThought(Sig)``); else its one predictor; else None."""
    import dspy

    children = [v for v in vars(program).values() if isinstance(v, dspy.BaseModule)]
    if len(children) == 1 and type(children[0]).__module__.startswith("dspy."):
        return children[0]
    predictors = list(program.named_predictors()) if hasattr(program, "named_predictors") else []
    return predictors[0][1] if len(predictors) == 1 else None


def type_source(tp: Any, names: set[str]) -> str | None:
    """Python source of the annotation ``tp`` from builtins and ``typing`` (adds the ``typing``
    names it uses to ``names``); None when it needs anything else (a pydantic model, an enum)."""
    if tp in _PLAIN:
        return tp.__name__
    if tp is type(None) or tp is None:
        return "None"
    if tp is typing.Any:
        names.add("Any")
        return "Any"
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        if not all(type(a) in (str, int, bool, type(None)) for a in args):
            return None
        names.add("Literal")
        return f"Literal[{', '.join(repr(a) for a in args)}]"
    if origin is typing.Union or origin is types.UnionType:
        parts = [type_source(a, names) for a in args]
        return None if None in parts else " | ".join(parts)
    if origin in (list, dict, tuple, set, frozenset) or tp in (list, dict, tuple, set, frozenset):
        if not args:
            return (origin or tp).__name__
        parts = ["..." if a is Ellipsis else type_source(a, names) for a in args]
        return None if None in parts else f"{origin.__name__}[{', '.join(parts)}]"
    return None


_TAKEN = {"StringSignature", "NeedsPersonalign", "dspy", "json", "os", "warnings", "load", "HERE", "STAGE", "STRATEGY",
          "MODULE", "REFUSAL", "DIFFERS", "Literal", "Any"}  # the names signature.py defines or imports


def _class_name(signature, stage: str) -> str:
    """The signature's class name; else ``<Stage>Signature``; else ``CompiledSignature``."""
    for name in (getattr(signature, "__name__", ""),
                 "".join(p.capitalize() for p in stage.replace("-", "_").replace(".", "_").split("_") if p) + "Signature"):
        if name.isidentifier() and name.isascii() and not keyword.iskeyword(name) and name not in _TAKEN:
            return name
    return "CompiledSignature"


def _class_source(signature, name: str, skip: str | None, names: set[str],
                  strategy: str) -> tuple[str | None, str | None]:
    """``(source of the class, None)`` or ``(None, why it cannot be written)``."""
    lines = [f"class {name}(dspy.Signature):", f"    {signature.instructions!r}", ""]
    for fname, field in signature.fields.items():
        if fname == skip:
            continue
        extra = field.json_schema_extra or {}
        kind = "InputField" if extra.get("__dspy_field_type") == "input" else "OutputField"
        typ = type_source(field.annotation, names)
        if typ is None or not fname.isidentifier() or keyword.iskeyword(fname):
            ann = field.annotation
            what = ann.__name__ if isinstance(ann, type) else re.sub(r"(?:\w+\.)+(\w+)", r"\1", str(ann))
            return None, f"{strategy}'s field {fname!r} has type {what}, which needs personalign"
        args = ", ".join(f"{k}={extra[k]!r}" for k in ("desc", "prefix") if isinstance(extra.get(k), str))
        lines.append(f"    {fname}: {typ} = dspy.{kind}({args})")
    return "\n".join(lines) + "\n", None


def _refusal(program, module, doc: dict, strategy: str) -> tuple[str | None, str | None]:
    """``(why plain DSPy cannot load it, None)`` or ``(None, "Predict" | "ChainOfThought")``."""
    import dspy

    fitted = []
    if getattr(program, "decision_rule", None) or hasattr(program, "threshold") or hasattr(program, "top_fraction"):
        fitted.append("decision rule")
    if hasattr(program, "save_weights"):
        fitted.append("weights")
    what = f"fitted {' and '.join(fitted)}" if fitted else "state"
    if module is None:
        n = len(list(program.named_predictors())) if hasattr(program, "named_predictors") else 0
        if n > 1:
            return f"{strategy} composes {n} DSPy predictors, which plain DSPy cannot load as one module", None
        verb = "needs" if what in ("state", "fitted decision rule") else "need"
        return f"{strategy}'s {what} {verb} personalign (it has no DSPy predictor to load)", None
    if isinstance(module, dspy.ChainOfThought):
        kind, state = "ChainOfThought", doc.get("predict")
    elif type(module) is dspy.Predict:
        kind, state = "Predict", doc
    else:
        return f"{strategy} wraps {type(module).__module__}.{type(module).__qualname__}, which this file does not " \
               "rebuild", None
    if not isinstance(state, dict) or not isinstance(state.get("signature"), dict):
        return f"{strategy}'s state is not at the top of program.json (a key clash), so plain DSPy cannot load it", None
    return None, kind


def _differs(program, rule: dict | None, output: str | None) -> str | None:
    threshold = getattr(program, "threshold", None)
    if not rule and not isinstance(threshold, (int, float)):
        return None
    how = f"its fitted decision rule ({rule.get('kind')} = {rule.get('value')!r})" if rule else \
        f"its fitted threshold ({threshold!r})"
    return (f"plain DSPy predictions differ from `personalign eval`: personalign decides with {how}, plain DSPy "
            f"returns the predictor's own {output or 'output'} field")


def signature_source(program, doc: dict, *, stage: str, strategy: str, rule: dict | None = None) -> str:
    """The text of ``signature.py`` for ``program`` (the strategy, without its decision wrapper),
    saved as ``doc`` (the whole ``program.json`` object); ``rule``: its decision rule, if any."""
    names: set[str] = set()
    cls = differs = module = None
    try:
        module = plain_module(program)
        refusal, kind = _refusal(program, module, doc, strategy)
    except Exception as exc:  # noqa: BLE001 -- a save never fails for its plain-DSPy file
        refusal, kind = f"{strategy}'s state was not written as a plain-DSPy signature ({type(exc).__name__})", None
    if kind is not None:
        predictor = module.predict if kind == "ChainOfThought" else module
        sig = predictor.signature
        outputs = list(sig.output_fields)
        skip = outputs[0] if kind == "ChainOfThought" and outputs and outputs[0] == "reasoning" else None
        name = _class_name(sig, stage)
        cls, why = _class_source(sig, name, skip, names, strategy)
        if cls is None:
            refusal = why
        else:
            differs = _differs(program, rule, next((o for o in outputs if o != skip), None))
    parts = _parts(program, doc, stage, names) if kind is None and module is None else {}
    if refusal is not None:
        more = "; its predictors one by one: predictors()" if parts else ""
        refusal = f"{refusal}: `personalign eval {stage} --program @PROGRAM@ --data FILE`{more}"
        cls, kind = "\n\n".join(parts.values()) or None, None
    about = ["DSPy matches a saved program's fields by position: this class has them in the compiled order",
             "(a hand-written one in another order gets the wrong descriptions). ``load()`` returns the module",
             "with the compiled instructions and demos; configure the model yourself (``dspy.configure(lm=...)``)."]
    if refusal is not None:
        about = ["", "This program does not load into plain DSPy: ``load()`` raises :data:`REFUSAL`."]
        if parts:
            about += ["``predictors()`` gives each DSPy predictor it composes, its saved state loaded (the",
                      "composition is personalign's)."]
    elif module is not program:
        about += ["", "personalign runs this module inside the strategy's own ``forward`` (which may prepare the",
                  "inputs or read the answer); ``load()`` gives the module alone."]
    head = ['"""Plain-DSPy loading of the program saved beside this file (its STRATEGY of STAGE, below).',
            "", "Written by personalign from the program it saved; it imports only dspy and the standard library,",
            "and personalign never imports it.", *about, '"""', "", "import json", "import os", "import warnings"]
    if names:
        head.append(f"from typing import {', '.join(sorted(names))}")
    head += ["", "import dspy", "", "HERE = os.path.dirname(os.path.abspath(__file__))",
             f"STAGE = {stage!r}", f"STRATEGY = {strategy!r}", f"MODULE = {kind!r}",
             f"REFUSAL = {refusal!r}", f"DIFFERS = {differs!r}", "", "", ""]
    body = (cls + "\n\n") if cls else ""
    make = f"dspy.{kind}({name})" if kind else "None"
    table = "".join(f"    {k!r}: {_first_class(v)},\n" for k, v in parts.items())
    tail = _PREDICTORS.replace("@TABLE@", table) if parts else ""
    return "\n".join(head) + body + _LOAD.replace("@MAKE@", make) + tail


def _first_class(source: str) -> str:
    return source.split("(", 1)[0].removeprefix("class ")


def _parts(program, doc: dict, stage: str, names: set[str]) -> dict[str, str]:
    """``{predictor name: class source}`` of each plain ``dspy.Predict`` a composed program holds
    whose state is in ``doc`` and whose types need nothing but dspy (class names made unique)."""
    import dspy

    out: dict[str, str] = {}
    taken: set[str] = set()
    try:
        predictors = list(program.named_predictors()) if hasattr(program, "named_predictors") else []
        for pname, pred in predictors if len(predictors) > 1 else []:
            if type(pred) is not dspy.Predict or not isinstance(doc.get(pname), dict):
                continue
            base = _class_name(pred.signature, "_".join(w for w in pname.replace(".", "_").split("_")
                                                        if w != "predict") or stage)
            name, i = base, 2
            while name in taken:
                name, i = f"{base}{i}", i + 1
            used: set[str] = set()
            cls, _ = _class_source(pred.signature, name, None, used, "")
            if cls is not None:
                taken.add(name)
                names |= used
                out[pname] = cls
    except Exception:  # noqa: BLE001 -- a save never fails for its plain-DSPy file
        return {}
    return out


_PREDICTORS = """

PREDICTORS = {
@TABLE@}


def predictors(path=os.path.join(HERE, "program.json")):
    \"\"\"Each DSPy predictor the program composes (by its name in program.json), its saved state loaded by
    DSPy's own ``load_state``; personalign runs them together, plain DSPy gets them one by one.\"\"\"
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    key = _model_in(doc)
    if key is not None:
        raise ValueError(f"{path}: {key} names a model; a saved program never picks one (dspy.configure(lm=...))")
    return {name: dspy.Predict(cls).load_state(doc[name]) for name, cls in PREDICTORS.items()}
"""


_LOAD = '''class NeedsPersonalign(RuntimeError):
    """This program's state does not load into plain DSPy (:data:`REFUSAL` says why)."""


def _model_in(value, key=""):
    """The key of a model a predictor state names (DSPy's ``load`` would restore it), else None."""
    if not isinstance(value, dict):
        return None
    if "signature" in value and value.get("lm") is not None:
        return f"{key}.lm".lstrip(".")
    inner = (_model_in(v, f"{key}.{k}") for k, v in value.items() if k not in ("metadata", "demos"))
    return next((k for k in inner if k), None)


def load(path=os.path.join(HERE, "program.json")):
    """The compiled module, its saved state loaded by DSPy's own ``.load``.

    Raises:
        NeedsPersonalign: the program's state needs personalign (one line: what and the command).
        ValueError: program.json names a model (choose yours with ``dspy.configure``).
    """
    if REFUSAL is not None:
        raise NeedsPersonalign(REFUSAL.replace("@PROGRAM@", os.path.dirname(os.path.abspath(path))))
    with open(path, encoding="utf-8") as f:
        key = _model_in(json.load(f))
    if key is not None:
        raise ValueError(f"{path}: {key} names a model; a saved program never picks one (dspy.configure(lm=...))")
    program = @MAKE@
    program.load(path)
    if DIFFERS is not None:
        warnings.warn(DIFFERS, stacklevel=2)
    return program
'''

__all__ = ["FILE", "plain_module", "signature_source", "type_source"]
