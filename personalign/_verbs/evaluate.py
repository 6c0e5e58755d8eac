"""``personalign.evaluate``: score one program on a labelled split; ``personalign.load_program``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from personalign._verbs.cost import announce
from personalign._verbs.inputs import Model, check_counts, entered, load_data, resolve_model
from personalign._verbs.projection import project_run
from personalign._verbs.reports import EvalReport
from personalign.errors import ArgumentError, ConfigurationError
from personalign.lm.spend import spent_fields

HIDDEN = frozenset({"correct", "gold_positive", "predicted_positive", "scores", "predictions", "errors",
                    "cluster_levels"})
"""Report keys kept out of a verb's JSON (per-row arrays and internals)."""


def load_program(path: str | Path, *, stage: Any = None, with_metadata: bool = False):
    """Load a program saved by ``compile``, ``predict relevance --save`` or a sweep's export.

    Args:
        path: the saved program's directory, or its ``program.json``.
        stage: a stage reference (a name, a ``Stage``, ``stage.toml``, ``file.py:ATTR``, ...): refuse
            a program of another stage. Needed for a program of a stage declared in a file or module
            (a saved program never makes personalign import code on its own); built-in and
            entry-point stages load without it.
        with_metadata: also return the metadata (stage, strategy, lm, compile info, metrics, state).

    Returns:
        the ``dspy.Module`` with its decision rule, demos, instructions and weights, ready to call;
        ``(program, metadata)`` when ``with_metadata``.

    Raises:
        DataError: a missing, malformed or tampered ``program.json`` or weights file (names the file
            and the key), or one that carries an LM, client configuration or any key outside its
            schema (:mod:`personalign.programs.program_schema`): loading never restores them.
        ConfigurationError: a program of another stage; an unknown strategy; a program compiled for
            a stage declared in a file the caller did not pass; one compiled for another signature.
    """
    from personalign.programs.saved import load_program as load

    where = Path(path)
    if not where.exists():
        raise ArgumentError("program", f"{where}: no saved program there")
    program, meta = load(where, stage=stage)
    return (program, meta) if with_metadata else program


def program_model(st, program, meta: dict, lm: Any, where: Path | None, *, api_base=None, lm_kwargs=None,
                  concurrency: int | None = None, max_cost: float | None = None) -> Model:
    """The model a loaded program runs with: ``lm`` (a string or an LM), else the embedded model a
    saved program records (:func:`personalign.programs.program_schema.choose_model`: a file never
    chooses a remote model), else the default; ``Model(None)`` for an LM-free program."""
    strategy = meta["strategy"]
    uses_lm = st.registry.info(strategy).uses_lm if strategy in st.registry else bool(getattr(program, "uses_lm", True))
    if (isinstance(lm, str) or lm is None) and where is not None:
        from personalign.programs.program_schema import choose_model

        lm = choose_model(meta, lm, where)
    return resolve_model(lm, needed=uses_lm, api_base=api_base, lm_kwargs=lm_kwargs, concurrency=concurrency,
                         max_cost=max_cost)


def evaluate(stage, program: Any, data: Any, *, split: str = "val", lm: Any = None, api_base: str | None = None,
             lm_kwargs: dict | None = None, seed: int = 0, n_boot: int = 1000, limit: int | None = None,
             callbacks: Any = (), progress: bool = False, on_cost: Any = None,
             concurrency: int | None = None, max_cost: float | None = None) -> EvalReport:
    """Score ``program`` -- a saved program directory, a :class:`CompiledProgram` or a
    ``dspy.Module`` -- on the ``split`` rows of ``data`` against their gold labels: binary stages
    F1, precision, recall, yes-rate; others the stage metric's mean; each with a 95% interval that
    resamples the stage's groups (below 5 groups: their range instead).

    Args:
        stage, data, lm, api_base, lm_kwargs, callbacks, concurrency, max_cost: as
            :func:`personalign.compile`.
        split: the split scored. limit: a seeded sample of that many rows, stratified over the
            stage's groups. n_boot: bootstrap resamples. seed: of the sample and the bootstrap.
        progress: the cost line and a progress bar on stderr. on_cost: called with the projected
            model calls (:class:`personalign.Cost`) before the first one, instead of the line.

    Returns:
        :class:`EvalReport` (``metric``, ``value``, ``ci``; ``data``: every figure, ``warnings``
        when the split holds rows a saved program was fitted on, and where rows carry annotations
        from >= 3 people ``human`` -- the human ceiling, :func:`personalign.labels.human_ceiling`
        -- and ``share_of_human``, the program's objective on those rows as a share of it).

    Raises:
        DataError: a malformed saved program, unreadable data, an empty split.
        ConfigurationError: no saved program there; a program of another stage.
    """
    from personalign._verbs.human import human_fields, human_on_rows, share_on_rows
    from personalign.evaluation import evaluate_stage
    from personalign.programs.fitted import fitted_rows_warning
    from personalign.stages import resolve_stage
    from personalign.tracking.callbacks import Callbacks, Candidate, RunInfo

    st = resolve_stage(stage)
    check_counts(n_boot=n_boot)
    where = Path(program) if isinstance(program, (str, Path)) else None
    if where is not None:
        prog, meta = load_program(where, stage=st, with_metadata=True)
    else:
        prog = getattr(program, "program", program)
        meta = {"strategy": getattr(program, "strategy", None) or type(prog).__name__,
                "compile": getattr(program, "info", None) or {}}
    ds = load_data(st, data)
    evalset = st.limit(ds.split(split), limit, seed)
    leak = fitted_rows_warning(meta, ds.where, split, shown=ds.label, sha256=ds.sha256) if where is not None else None
    strategy = meta["strategy"]
    optimizer = (meta.get("compile") or {}).get("optimizer")
    model = program_model(st, prog, meta, lm, where, api_base=api_base, lm_kwargs=lm_kwargs, concurrency=concurrency,
                          max_cost=max_cost)
    cbs = Callbacks(callbacks)
    label = strategy + (f"@{optimizer}" if optimizer else "")
    run = RunInfo("eval", st, params={"stage": st.name, "program": str(where), "strategy": strategy, "data": ds.label,
                                      "data_sha256": ds.sha256, "split": split, "seed": seed, "lm": model.name,
                                      "evaluated_on_fitted_rows": bool(leak)},
                  datasets=[(evalset, split, "evaluation")], data=ds.label, data_sha256=ds.sha256, lm=model.name,
                  split=split, strategy=label)
    cbs.check(run)
    out: dict[str, Any] = {}
    with cbs.run(run, out), entered(model) as counter:
        announce(project_run("eval", label, prog, evalset, lm=model.lm, model=model.name,
                             inputs=st.inputs), on_cost, progress)
        with cbs.tracing(run, label) as traces:
            report = evaluate_stage(st, prog, evalset, lm=model.lm, n_boot=n_boot, seed=seed, progress=progress,
                                    description=strategy)
        human = human_on_rows(st, evalset, n_boot=n_boot, seed=seed)  # None: no row annotated by >= 3 people
        out.update({"stage": st.name, "program": None if where is None else str(where), "strategy": strategy,
                    **({"warnings": [leak]} if leak else {}), "optimizer": optimizer, "data": ds.label,
                    "split": split, **{k: v for k, v in report.items() if k not in HIDDEN}, "lm": model.name,
                    "seed": seed, **human_fields(human, share_on_rows(st, human, evalset, report))})
        counter.snapshot()
        out.update(spent_fields(counter.tokens))  # tokens and dollars from the responses' usage
        cbs.on_candidate_end(run, Candidate(label, params={"strategy": strategy}, row=out, examples=evalset,
                                            report=report, traces=traces,
                                            metrics={k: v for k, v in out.items() if k.startswith("spent_")}))
    key = st.metric_name
    return EvalReport(stage=st.name, data=out, metric=key, value=out.get(key), ci=out.get(f"{key}_ci"), kind=st.kind,
                      positive_name=st.positive_name)


__all__ = ["HIDDEN", "evaluate", "load_program", "program_model"]
