"""``personalign.predict``: a saved program of any stage on unlabelled rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from personalign._verbs.cost import announce
from personalign._verbs.projection import project_run
from personalign._verbs.evaluate import load_program, program_model
from personalign._verbs.inputs import entered
from personalign._verbs.reports import PredictReport
from personalign.errors import ArgumentError


def _unit_fields(st, prog) -> tuple[str, ...]:
    """The fields a loaded program's unit rule decides within (empty for a threshold or no rule)."""
    from personalign.programs.decision import UnitRuleProgram

    if not isinstance(prog, UnitRuleProgram):
        return ()
    return tuple(prog.rule.unit or st.decision_fields)


def _rule_text(prog) -> str | None:
    """The program's compiled decision rule in words, or None."""
    from personalign.programs.decision import DecidedProgram

    return prog.rule.describe() if isinstance(prog, DecidedProgram) else None


def _check_out(out: str | Path, data: Path, program: Path, st) -> Path:
    """``out`` checked (:func:`~personalign.data.files.check_output`) and never one of the run's own
    inputs: the data, a file of the saved program, or the stage's file."""
    from personalign.data.files import check_output

    target = check_output(out)
    if target == Path(data).resolve():
        raise ArgumentError("out", f"{out} is the input file; give another path")
    if Path(program).resolve() in target.parents:
        raise ArgumentError("out", f"{out} is inside the saved program {program}; give another path")
    ref = str(st.ref or "")
    stage_file = ref.rsplit(":", 1)[0] if ".py:" in ref else ref
    if stage_file.endswith((".toml", ".py")) and target == Path(stage_file).resolve():
        raise ArgumentError("out", f"{out} is the stage file; give another path")
    return target


def predict(stage, program: str | Path, data: str | Path, *, out: str | Path | None = None, lm: Any = None,
            api_base: str | None = None, lm_kwargs: dict | None = None, callbacks: Any = (),
            progress: bool = False, on_cost: Any = None, concurrency: int | None = None,
            max_cost: float | None = None) -> PredictReport:
    """Run a saved program of ``stage`` on every row of the unlabelled JSONL ``data`` and, with
    ``out``, write one JSON object per row there atomically (a failed or interrupted run writes
    nothing). Rows need the signature's inputs (and a unit rule's unit fields), an optional string
    ``id``, no label (:func:`personalign.data.inputs.read_inputs`). The model is chosen as by
    :func:`personalign.evaluate` (``lm``, else the program's embedded model; never a remote one
    the file names). An LM failure is a row with an ``error``, after retries. ``concurrency``: as
    :func:`personalign.compile` (rows in flight; the output keeps the input order).

    Returns:
        :class:`PredictReport`: ``rows`` (per row ``{"line", "id", <output field>, "score",
        "decision", "error"}``), and in ``data``: ``stage, program, strategy, data, data_sha256, out,
        n, positives`` (binary stages), ``failures, lm_calls, seconds, lm, rule`` (the compiled
        decision rule in words, None without one). ``progress``: the cost line and a progress bar on
        stderr; ``on_cost``: called with the projected model calls (:class:`personalign.Cost`)
        before the first one, instead of the line.

    Raises:
        ConfigurationError: no saved program there; a program of another stage; ``out`` the input
            file, inside the program, the stage file, or not writable.
        DataError: a malformed saved program; a bad row (file, line, field).
    """
    from personalign.data.digest import file_sha256
    from personalign.data.files import check_input
    from personalign.data.inputs import read_inputs
    from personalign.evaluation import output_values
    from personalign.programs.run import run_program
    from personalign.stages import resolve_stage
    from personalign.tracking.callbacks import Callbacks, RunInfo

    st = resolve_stage(stage)
    where = Path(program)
    prog, meta = load_program(where, stage=st, with_metadata=True)
    data = check_input(data)
    rows = read_inputs(data, st, unit_fields=_unit_fields(st, prog))
    target = None if out is None else _check_out(out, Path(data), where, st)
    strategy = meta["strategy"]
    model = program_model(st, prog, meta, lm, where, api_base=api_base, lm_kwargs=lm_kwargs, concurrency=concurrency,
                          max_cost=max_cost)
    cbs = Callbacks(callbacks)
    sha = file_sha256(data)
    run = RunInfo("predict", st, params={"stage": st.name, "program": str(where), "strategy": strategy,
                                         "data": str(data), "data_sha256": sha, "lm": model.name},
                  data=str(data), data_sha256=sha, lm=model.name, strategy=strategy)
    cbs.check(run)
    examples = [ex for _, ex in rows]
    result: dict[str, Any] = {}
    with cbs.run(run, result), entered(model):
        announce(project_run("predict", strategy, prog, examples, lm=model.lm, model=model.name,
                             inputs=st.inputs), on_cost, progress)
        outcome = run_program(prog, examples, inputs=st.inputs, output=None, lm=model.lm, description=strategy,
                              progress=progress)
        field = st.output
        values = output_values(st, [None if p is None else getattr(p, field, None) for p in outcome.predictions])
        preds = []
        for i, ((line, ex), pred, value) in enumerate(zip(rows, outcome.predictions, values)):
            score = None if pred is None else getattr(pred, "score", None)
            preds.append({"line": line, "id": getattr(ex, "id", None), field: value,
                          "score": None if score is None else float(score),
                          "decision": None if pred is None else getattr(pred, "decision_note", None),
                          "error": outcome.error_at.get(i) if pred is None else None})
        if target is not None:
            from personalign.data.files import write_jsonl

            try:
                write_jsonl(target, preds)
            except OSError as exc:
                raise ArgumentError("out", f"{out}: cannot write ({exc.strerror or exc})") from None
            cbs.on_artifact(run, target)
        result.update({"stage": st.name, "program": str(where), "strategy": strategy, "data": str(data),
                       "data_sha256": sha, "out": None if out is None else str(out), "n": len(preds),
                       "failures": outcome.failures, "lm_calls": outcome.lm_calls,
                       "cached_lm_calls": outcome.cached_calls,
                       "seconds": round(outcome.seconds, 3), "lm": model.name, "rule": _rule_text(prog),
                       "predictions": preds})
        if st.kind == "binary":
            result["positives"] = sum(p[field] == st.positive for p in preds)  # None (a failure) equals neither
            result["positive_name"] = st.positive_name
    return PredictReport(stage=st.name, data=result, rows=preds)


__all__ = ["predict"]
