"""Compile-and-save and evaluate-a-program, with their tracking: the work behind
``personalign.compile`` / ``personalign.evaluate`` and the ``compile`` / ``eval`` commands.

Every input is checked before anything is written; ``on_ready`` is called then (the CLI points
DSPy's cache there), so bad input leaves no cache, no MLflow run and no half-written program.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from personalign.errors import ConfigurationError


def metric_keys(stage) -> tuple[str, ...]:
    """The report keys logged as MLflow metrics for ``stage``."""
    if stage.kind == "binary":
        return ("f1", "f1_ci", "f1_range", "precision", "precision_ci", "recall", "recall_ci", "yes_rate",
                "yes_rate_ci", "accuracy")
    return (stage.metric_name, f"{stage.metric_name}_ci")


def _lm(lm, uses_lm: bool):
    """``(model string, dspy.LM or None)`` for a model string, a ``dspy.LM`` or None (the default)."""
    from personalign.lm import default_model, make_lm

    if lm is not None and not isinstance(lm, str):
        return str(getattr(lm, "model", type(lm).__name__)), (lm if uses_lm else None)
    model = lm or default_model()
    return model, (make_lm(model) if uses_lm else None)


def _program_lm(st, prog, meta: dict, lm, where: Path | None):
    """``(uses_lm, model string, dspy.LM or None)`` of a loaded program: ``lm`` (a string or an LM),
    else the embedded model a saved program records (:func:`choose_model`: a file never chooses a
    remote model), else the default."""
    strategy = meta["strategy"]
    uses_lm = st.registry.info(strategy).uses_lm if strategy in st.registry else bool(getattr(prog, "uses_lm", True))
    if (isinstance(lm, str) or lm is None) and where is not None:
        from personalign.programs.program_schema import choose_model

        lm = choose_model(meta, lm, where)
    model, lm_obj = _lm(lm, uses_lm)
    return uses_lm, model, lm_obj


def check_strategy(stage, strategy: str, optimizer: str | None):
    """The strategy's registry entry, after checking ``optimizer`` can compile it.

    Raises:
        ConfigurationError: unknown strategy/optimizer; a teleprompter on a fitted strategy; an
            optimizer on an LM-free strategy; ``knn`` (its programs cannot be saved).
    """
    from personalign.optimizers import OPTIMIZERS

    info = stage.registry.info(strategy)
    if optimizer is not None:
        if OPTIMIZERS.info(optimizer).kind == "teleprompter" and info.trainable:
            raise ConfigurationError(f"teleprompters compile LLM strategies; '{strategy}' is fitted by its own "
                                     "optimizer (omit --optimizer)")
        if not info.uses_lm:
            raise ConfigurationError(f"'{strategy}' calls no LM; it has nothing for --optimizer to compile")
        if optimizer == "knn":
            raise ConfigurationError("knn programs keep their neighbour index in memory and cannot be saved; "
                                     "use `compare --strategies NAME@knn` to evaluate them")
    return info


def compile_and_save(st, strategy: str | None, data: Path, *, optimizer: str | None = None,
                     train_split: str = "train", lm=None, seed: int = 0, out: str | Path | None = None,
                     tracker=None, make: Callable = dict, stage_ref: str | None = None,
                     on_ready: Callable[[], None] | None = None, data_label: str | None = None):
    """Compile ``strategy`` of stage ``st`` on the ``train_split`` rows of ``data``; save it to ``out``
    (None: not saved) with ``stage_ref``; log one MLflow run (``tracker``) named after the stage.
    Returns ``make(program=, stage=, strategy=, optimizer=, info=, path=, stage_ref=, lm=, adapter=)``
    (``lm``/``adapter``: the model string and its output adapter, None for LM-free strategies).
    ``info`` (and the saved ``compile_info``) records ``data`` -- ``data_label`` when given (e.g.
    ``"examples (a list of N)"`` for a temporary file that will not outlive the call), else the
    path -- and ``data_sha256``, the file's sha256.

    Raises:
        ConfigurationError: see :func:`check_strategy`; an unusable ``out``.
        DataError: unreadable data, no train split, one class where fitting needs two.
    """
    from personalign._paths import check_out_dir
    from personalign.compile_service import compile_program
    from personalign.data.digest import file_sha256
    from personalign.programs.export import prompt_text
    from personalign.programs.saved import save_program
    from personalign.tracking_native import log_dataset, register_prompt, run_name

    strategy = strategy or st.default_strategies.split(",")[0].strip()
    info = check_strategy(st, strategy, optimizer)
    target = check_out_dir(Path(out)) if out is not None else None
    trainset = st.load(data, train_split)
    if info.trainable:
        st.check_fittable(trainset, data, train_split)
    model, lm_obj = _lm(lm, info.uses_lm)
    name = strategy + (f"@{optimizer}" if optimizer else "")
    if on_ready is not None:
        on_ready()  # every input is valid: only now touch the cache and the tracking store
    if tracker is not None:
        tracker.check()
    record: dict[str, Any] = {}
    made: dict[str, Any] = {}
    data_sha256 = file_sha256(data)

    def work():
        program, info_dict = compile_program(st, strategy, optimizer, trainset, lm=lm_obj, seed=seed)
        record.update(info_dict or {"optimizer": None})
        record.update({"data": data_label or str(data), "data_sha256": data_sha256, "train_split": train_split})
        made["program"] = program
        if target is not None:
            try:
                save_program(program, target, stage=st.name, stage_ref=stage_ref, signature=st.signature_record(),
                             strategy=strategy, lm=model if info.uses_lm else None, compile_info=record,
                             extra_files={"prompt.md": prompt_text(program)})
            except OSError as exc:
                raise ConfigurationError(f"cannot write --out {target}: {exc.strerror or exc}") from None
        if tracker is not None:
            tracker.log_metrics({k: v for k, v in record.items() if isinstance(v, (int, float))})
            if target is not None:
                tracker.log_artifact(target / "program.json")
                tracker.log_artifact(target / "prompt.md")
            prompt = register_prompt(tracker, program, stage=st.name, strategy=strategy, optimizer=optimizer,
                                     lm=model if info.uses_lm else None, run_id=tracker.run_id)
            if prompt:
                record["prompt"] = prompt

    if tracker is not None:
        params = {"stage": st.name, "stage_ref": stage_ref, "strategy": strategy, "optimizer": optimizer,
                  "data": data_label or str(data), "data_sha256": data_sha256, "train_split": train_split,
                  "seed": seed, "lm": model if info.uses_lm else None}
        with tracker.run(run_name("compile", st.name, strategy=name, data=data_label or data, split=train_split,
                                  lm=model if info.uses_lm else None),
                         params=params, tags={"command": "compile", "stage": st.name}):
            log_dataset(tracker, st, trainset, data=data, sha256=params["data_sha256"], split=train_split,
                        context="training")
            work()
    else:
        work()
    from personalign.lm import adapter_name

    return make(program=made["program"], stage=st.name, strategy=strategy, optimizer=optimizer, info=record,
                path=target, stage_ref=stage_ref, lm=model if info.uses_lm else None,
                adapter=adapter_name(model) if info.uses_lm else None)


def evaluate_program(st, program, data: Path, *, split: str = "val", lm=None, seed: int = 0, n_boot: int = 1000,
                     limit: int | None = None, tracker=None, progress: bool = False,
                     on_ready: Callable[[], None] | None = None, data_label: str | None = None) -> dict[str, Any]:
    """Score ``program`` (a saved program directory -- loaded for stage ``st`` -- an object with a
    ``.program``, or a ``dspy.Module``) on the ``split`` rows of ``data``; one MLflow run. The result,
    its warning and the run name ``data`` as ``data_label`` when given (as :func:`compile_and_save`).

    Returns ``{"stage", "program", "strategy", "optimizer", "data", "split", <report>, "lm", "seed"}``
    (``warnings`` when the split holds rows the program was fitted on).

    Raises:
        DataError: a malformed saved program, unreadable data, an empty split.
        ConfigurationError: no saved program there; a program of another stage.
    """
    from personalign.data.digest import file_sha256
    from personalign.evaluation import evaluate_stage
    from personalign.programs.fitted import fitted_rows_warning
    from personalign.programs.saved import load_program
    from personalign.tracking_native import lm_traces, log_dataset, log_predictions, run_name

    meta: dict[str, Any] = {}
    where = None
    if isinstance(program, (str, Path)):
        where = Path(program)
        if not where.exists():
            raise ConfigurationError(f"no saved program at {where}")
        prog, meta = load_program(where, stage=st)
    else:
        prog = getattr(program, "program", program)
        meta = {"strategy": getattr(program, "strategy", None) or type(prog).__name__,
                "compile": getattr(program, "info", None) or {}}
    evalset = st.load(data, split)
    leak = fitted_rows_warning(meta, data, split, shown=data_label) if where is not None else None
    evalset = st.limit(evalset, limit, seed)
    strategy = meta["strategy"]
    uses_lm, model, lm_obj = _program_lm(st, prog, meta, lm, where)
    if on_ready is not None:
        on_ready()
    if tracker is not None:
        tracker.check()
    out: dict[str, Any] = {}

    def work():
        with lm_traces(tracker, tags={"stage": st.name, "strategy": strategy}):
            report = evaluate_stage(st, prog, evalset, lm=lm_obj, n_boot=n_boot, seed=seed, progress=progress,
                                    description=strategy)
        hidden = {"correct", "gold_positive", "predicted_positive", "scores", "predictions", "errors", "cluster_levels"}
        out.update({"stage": st.name, "program": None if where is None else str(where), "strategy": strategy,
                    **({"warnings": [leak]} if leak else {}),
                    "optimizer": (meta.get("compile") or {}).get("optimizer"), "data": data_label or str(data),
                    "split": split,
                    **{k: v for k, v in report.items() if k not in hidden},
                    "lm": model if uses_lm else None, "seed": seed})
        if tracker is not None:
            tracker.log_metrics({k: out[k] for k in (*metric_keys(st), "lm_calls", "failures", "seconds") if k in out})
            log_predictions(tracker, st, evalset, report)

    if tracker is not None:
        params = {"stage": st.name, "program": str(where), "strategy": strategy, "data": data_label or str(data),
                  "data_sha256": file_sha256(data), "split": split, "seed": seed, "lm": model if uses_lm else None,
                  "evaluated_on_fitted_rows": bool(leak)}
        optimizer = (meta.get("compile") or {}).get("optimizer")
        label = strategy + (f"@{optimizer}" if optimizer else "")
        with tracker.run(run_name("eval", st.name, strategy=label, data=data_label or data, split=split,
                                  lm=model if uses_lm else None),
                         params=params, tags={"command": "eval", "stage": st.name}):
            log_dataset(tracker, st, evalset, data=data, sha256=params["data_sha256"], split=split)
            work()
    else:
        work()
    return out


def _unit_fields(st, prog) -> tuple[str, ...]:
    """The fields a loaded program's unit rule decides within (empty for a threshold or no rule)."""
    from personalign.programs.decision import UnitRuleProgram

    if not isinstance(prog, UnitRuleProgram):
        return ()
    return tuple(prog.rule.unit or st.decision_fields)


def _rule_text(prog) -> str | None:
    """The program's compiled decision rule in words (a unit rule decides each row among the other
    rows of its unit in the same file), or None."""
    from personalign.programs.decision import DecidedProgram

    return prog.rule.describe() if isinstance(prog, DecidedProgram) else None


def _check_out(out: str | Path, data: Path, program: Path, st) -> Path:
    """``out`` checked (:func:`~personalign.data.files.check_output`) and never one of the run's own
    inputs: the data, a file of the saved program, or the stage's file."""
    from personalign.data.files import check_output

    target = check_output(out)
    if target == Path(data).resolve():
        raise ConfigurationError(f"--out {out} is the input file; give another path")
    if Path(program).resolve() in target.parents:
        raise ConfigurationError(f"--out {out} is inside the saved program {program}; give another path")
    ref = str(st.ref or "")
    stage_file = ref.rsplit(":", 1)[0] if ".py:" in ref else ref
    if stage_file.endswith((".toml", ".py")) and target == Path(stage_file).resolve():
        raise ConfigurationError(f"--out {out} is the stage file; give another path")
    return target


def predict_file(st, program: str | Path, data: str | Path, *, out: str | Path | None = None, lm=None,
                 progress: bool = False, on_ready: Callable[[], None] | None = None) -> dict[str, Any]:
    """Run a saved program of stage ``st`` on every row of the unlabelled JSONL ``data``
    (:func:`personalign.data.inputs.read_inputs`) and write one JSON object per row to ``out``,
    atomically (a failed or interrupted run writes nothing). The model is chosen as by
    :func:`evaluate_program` (``lm``, else the program's embedded model; never a remote one the file names).

    Returns:
        ``{"stage", "program", "strategy", "data", "data_sha256", "out", "n", "positives" (binary
        stages: the count predicted positive), "failures", "lm_calls", "seconds", "lm",
        "rule" (the compiled decision rule in words, None when the program has none), "predictions"}``;
        ``predictions`` holds per row ``{"line", "id", <the signature's output
        field>, "score", "decision", "error"}`` (output None and ``error`` set for an LM failure
        after retries; ``decision`` says when a unit rule's fallback threshold decided).

    Raises:
        ConfigurationError: no saved program there; a program of another stage; ``out`` the input
            file, inside the program, the stage file, not a regular file, or in a folder where no file can be created
            (:func:`personalign.data.files.check_output`).
        DataError: a malformed saved program; a bad row (file, line, field).
    """
    from personalign.data.digest import file_sha256
    from personalign.data.inputs import read_inputs
    from personalign.evaluation import output_values
    from personalign.programs.run import run_program
    from personalign.programs.saved import load_program

    where = Path(program)
    if not where.exists():
        raise ConfigurationError(f"no saved program at {where}")
    prog, meta = load_program(where, stage=st)
    rows = read_inputs(data, st, unit_fields=_unit_fields(st, prog))
    target = None if out is None else _check_out(out, Path(data), where, st)  # str: a trailing slash kept
    strategy = meta["strategy"]
    uses_lm, model, lm_obj = _program_lm(st, prog, meta, lm, where)
    if on_ready is not None:
        on_ready()
    examples = [ex for _, ex in rows]
    outcome = run_program(prog, examples, inputs=st.inputs, output=None, lm=lm_obj, description=strategy,
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
            raise ConfigurationError(f"--out {out}: cannot write ({exc.strerror or exc})") from None
    result = {"stage": st.name, "program": str(where), "strategy": strategy, "data": str(data),
              "data_sha256": file_sha256(data), "out": None if out is None else str(out), "n": len(preds),
              "failures": outcome.failures, "lm_calls": outcome.lm_calls, "seconds": round(outcome.seconds, 3),
              "lm": model if uses_lm else None, "rule": _rule_text(prog), "predictions": preds}
    if st.kind == "binary":
        result["positives"] = sum(p[field] == st.positive for p in preds)  # None (a failure) equals neither
    return result


__all__ = ["check_strategy", "compile_and_save", "evaluate_program", "metric_keys", "predict_file"]
