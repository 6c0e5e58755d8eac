"""Readable export of a compiled DSPy program: each predictor's instructions, fields and demos.

"Compiling optimized prompts" is a use case: the text written here is what a teleprompter
produced, in a form a person can read, diff and paste elsewhere.
"""

from __future__ import annotations

import json
from typing import Any


def _value(v: Any) -> str:
    if hasattr(v, "model_dump"):
        v = v.model_dump()
    if isinstance(v, (dict, list)):
        return json.dumps(v, ensure_ascii=False)
    return str(v)


def prompt_text(program) -> str:
    """Markdown text of every predictor of ``program`` (instructions, input/output fields, demos)
    and its decision rule (a compiled rule, a fitted threshold, or the predictor's own output).

    Programs without predictors or threshold (learned selectors) get a one-line note.
    """
    parts: list[str] = []
    for name, predictor in program.named_predictors():
        sig = predictor.signature
        parts.append(f"## predictor `{name}`\n")
        parts.append("### instructions\n")
        parts.append(sig.instructions.strip() + "\n")
        parts.append("### inputs\n")
        for fname, field in sig.input_fields.items():
            desc = (field.json_schema_extra or {}).get("desc", "")
            parts.append(f"- `{fname}`: {desc}")
        parts.append("\n### outputs\n")
        for fname, field in sig.output_fields.items():
            desc = (field.json_schema_extra or {}).get("desc", "")
            parts.append(f"- `{fname}` ({getattr(field.annotation, '__name__', str(field.annotation))}): {desc}")
        demos = list(predictor.demos or [])
        parts.append(f"\n### demos ({len(demos)})\n")
        keys = list(sig.input_fields) + list(sig.output_fields)
        for i, demo in enumerate(demos, 1):
            d = demo.toDict() if hasattr(demo, "toDict") else dict(demo)
            parts.append(f"{i}. " + "; ".join(f"**{k}**: {_value(d[k])}" for k in keys if k in d))
        parts.append("")
    rule = getattr(program, "decision_rule", None)
    if rule:
        describe = getattr(getattr(program, "rule", None), "describe", None)
        parts.append("## decision rule\n")
        raw = rule.get("raw_objective")
        gain = (f"{raw:.4f} -> " if isinstance(raw, (int, float)) else "") + f"{rule['cv_objective']:.4f}"
        parts.append((describe() if describe else str(rule)) + f" (`{rule['kind']}` = {rule['value']:.6g}; fitted by "
                     f"grouped CV on {rule['n']} dev examples in {rule['n_groups']} groups, out-of-fold objective "
                     f"{gain})\n")
    elif isinstance(getattr(program, "threshold", None), (int, float)):
        parts.append("## decision rule\n")
        parts.append(f"yes when score >= {program.threshold:.6g} (the strategy's fitted threshold)\n")
    elif parts:
        parts.append("## decision rule\n")
        parts.append("the predictor's own output field (no calibrated threshold)\n")
    if not parts:
        return f"`{type(program).__name__}` has no LM prompt (a learned or similarity-based strategy).\n"
    return "\n".join(parts) + "\n"
