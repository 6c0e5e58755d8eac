"""The gold label and the verdict on each traced row, as MLflow 3 assessments of its trace.

An evaluation's traces (:func:`personalign.tracking.native.lm_traces`: one trace per top-level
program call, capped) show a row's inputs and the program's output. :func:`assess_traces` adds
what a reader needs to judge it without leaving the trace:

* an **expectation** named after the stage's output field (e.g. ``follows``) holding the row's
  gold label (``mlflow.log_expectation``; source ``HUMAN``, the data file's name);
* a **feedback** ``correct`` (bool; binary and multiclass stages) or ``score`` (float in [0, 1];
  scored stages) with the prediction and gold as its rationale (``mlflow.log_feedback``;
  source ``CODE``, ``personalign``); metadata: the row's ``id``, the ``strategy`` and ``split``.

A traced call is matched to its row by its inputs (the stage's input fields), in call order: rows
with identical inputs are taken in file order, and a call that raised (retried on the same row)
gets the expectation but no feedback -- its row's verdict belongs to the call that answered.
Cost: two writes to the tracking store per trace (about 0.05 s together on SQLite), so at most
``2 x PERSONALIGN_MAX_TRACES`` per evaluated strategy.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

SOURCE_ID = "personalign"


def _key(values: dict) -> str:
    return json.dumps(values, sort_keys=True, default=str, ensure_ascii=False)


def _plain(value: Any) -> Any:
    """A JSON value MLflow stores as an assessment value (objects and tuples as JSON)."""
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    return json.loads(json.dumps(value, default=str))


def trace_rows(calls: Sequence[dict], examples: Sequence, inputs: Sequence[str]) -> list[tuple[dict, int]]:
    """Match traced calls to the rows they ran on.

    Args:
        calls: ``{"trace_id", "inputs", "raised"}`` per traced call, in call order (``lm_traces``).
        examples: the evaluated rows, in evaluation order.
        inputs: the stage's input fields.

    Returns:
        ``(call, row index)`` for every call whose inputs are those of a row (others are left
        out). Rows sharing inputs are taken in order (wrapping round for repeated evaluations);
        a call that raised stays on its row (the retry runs the same row).
    """
    rows: dict[str, list[int]] = defaultdict(list)
    for i, ex in enumerate(examples):
        rows[_key({k: getattr(ex, k, None) for k in inputs})].append(i)
    seen: dict[str, int] = defaultdict(int)
    out = []
    for call in calls:
        key = _key({k: (call.get("inputs") or {}).get(k) for k in inputs})
        if key not in rows:
            continue
        out.append((call, rows[key][seen[key] % len(rows[key])]))
        if not call.get("raised"):
            seen[key] += 1
    return out


def verdict_name(stage) -> str:
    """``score`` for scored stages (a value in [0, 1]), else ``correct`` (bool)."""
    return "score" if stage.kind == "scored" else "correct"


def assess_traces(tracker, stage, calls: Sequence[dict], examples: Sequence, *, correct: Sequence | None,
                  predictions: Sequence | None, data: str | None, split: str | None, strategy: str) -> int:
    """Log the gold label (expectation) and the verdict (feedback) on each traced row's trace.

    Args:
        calls: the traced calls (``stats["calls"]`` of :func:`~personalign.tracking.native.lm_traces`).
        examples: the rows evaluated, in order; ``correct`` / ``predictions``: per row, aligned
            with ``examples`` (the report's ``correct``: 0/1, or a score in [0, 1]; None: unscored).
        data: the data file (its name is the expectation's source); split, strategy: metadata.

    Returns:
        the number of traces assessed. Rows without a gold label (unlabelled data) get nothing.
    """
    import mlflow
    from mlflow.entities import AssessmentSource, AssessmentSourceType

    tracker.check()
    human = AssessmentSource(source_type=AssessmentSourceType.HUMAN,
                             source_id=Path(str(data)).name if data else "gold labels")
    code = AssessmentSource(source_type=AssessmentSourceType.CODE, source_id=SOURCE_ID)
    name = verdict_name(stage)
    done = 0
    for call, i in trace_rows(calls, examples, stage.inputs):
        ex = examples[i]
        try:
            gold = _plain(stage.gold(ex))
        except Exception:  # noqa: BLE001 -- an unlabelled row has no gold to show
            continue
        meta = {"id": str(getattr(ex, "id", None) or i), "strategy": strategy, "split": str(split)}
        mlflow.log_expectation(trace_id=call["trace_id"], name=stage.output, value=gold, source=human, metadata=meta)
        done += 1
        ok = None if correct is None or i >= len(correct) else correct[i]
        if call.get("raised") or ok is None:
            continue
        pred = None if predictions is None or i >= len(predictions) else _plain(predictions[i])
        value = bool(ok) if name == "correct" else float(ok)
        why = f"predicted {json.dumps(pred, ensure_ascii=False)}, gold {json.dumps(gold, ensure_ascii=False)}"
        mlflow.log_feedback(trace_id=call["trace_id"], name=name, value=value, source=code, metadata=meta,
                            rationale=why + ("" if pred is not None else " (the call failed: scored as wrong)"))
    return done


__all__ = ["assess_traces", "trace_rows", "verdict_name"]
