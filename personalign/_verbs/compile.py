"""``personalign.compile``: compile one strategy of a stage on its train rows, and save it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from personalign._verbs.cost import announce, calls_bar, measured, speed_key
from personalign._verbs.inputs import (check_capabilities, check_counts, check_design, entered, load_data, resolve_model,
                                      with_module)
from personalign._verbs.projection import project_compile
from personalign._verbs.reports import CompiledProgram
from personalign.errors import ArgumentError
from personalign.lm.spend import spent_fields


def compile(stage, strategy: Any = None, data: Any = None, *, optimizer: str | None = None,
            train_split: str = "train", lm: Any = None, api_base: str | None = None, lm_kwargs: dict | None = None,
            seed: int = 0, out: str | Path | None = None, callbacks: Any = (), train_limit: int | None = None,
            progress: bool = False, on_cost: Any = None, concurrency: int | None = None,
            max_cost: float | None = None) -> CompiledProgram:
    """Compile ``strategy`` of ``stage`` on the ``train_split`` rows of ``data`` and, with ``out``,
    save it (``program.json``, weights, a readable ``prompt.md``).

    The one compile path (:func:`personalign.compile_service.compile_program`): a trainable
    strategy is fitted by its own optimizer; with ``optimizer`` (a teleprompter) an LLM strategy is
    compiled on a dev split of whole held-out groups of train and **kept only when it beats the
    uncompiled program there** (by the stage's set objective); a decision rule is fitted where it
    raises that objective.

    Args:
        stage: a stage reference: a built-in name, a :class:`~personalign.stages.Stage`, a stage
            ``.toml``, ``file.py:ATTR``, ``module:ATTR`` or an entry-point name.
        strategy: a strategy name of the stage (default: its first default strategy), or a
            ``dspy.Module`` of your own.
        data: the labelled rows: a file the stage reads, or a list of ``dspy.Example`` with a ``split``.
        optimizer: a teleprompter (``labeled``, ``bootstrap``, ``mipro``, ...) for an LLM strategy.
        lm: a model string or a ``dspy.LM`` (default :func:`personalign.lm.default_model`);
            ``api_base`` / ``lm_kwargs``: its server and litellm settings.
        concurrency: model calls kept in flight (1-256; teleprompters evaluate with as many
            threads); None: 1 for the embedded engine, 32 for a hosted or served model.
        max_cost: dollars the run may spend (litellm's bundled prices; None: no limit): the call
            that would pass it is not made -- :class:`~personalign.errors.BudgetExceeded`, nothing
            written; a negative, NaN or infinite value is an :class:`~personalign.errors.ArgumentError`.
        out: a directory to save the program in (must not exist or be empty).
        callbacks: :class:`personalign.tracking.RunCallback` objects (an MLflow run, ...).
        train_limit: compile on a seeded sample of that many ``train_split`` rows, stratified over
            the stage's groups (recorded as ``train_limit`` in the compile record).
        progress: the cost line and a progress bar of the compile's model calls on stderr.
        on_cost: called with the projected model calls (:class:`personalign.Cost`) before the
            first one, instead of printing its line.

    Returns:
        :class:`CompiledProgram` (``program``, ``path``, ``info``: the compile record).

    Raises:
        ConfigurationError: an unknown stage, strategy or optimizer; a teleprompter on a fitted
            strategy; an ``out`` that is not an empty, writable directory (:class:`ArgumentError`).
        DataError: unreadable data, no train split, a single class where fitting needs two.
    """
    from personalign._paths import check_out_dir
    from personalign.compile_service import compile_program
    from personalign.stages import resolve_stage
    from personalign.tracking.callbacks import Callbacks, Candidate

    check_counts(train_limit=train_limit)
    st = resolve_stage(stage)
    if strategy is not None and not isinstance(strategy, str):
        st, strategy = with_module(st, strategy)
    strategy = strategy or st.default_strategies.split(",")[0].strip().partition("@")[0]
    info = check_design(st, strategy, optimizer, saving=out is not None)
    target = check_out_dir(Path(out)) if out is not None else None
    ds = load_data(st, data)
    trainset = st.limit(ds.split(train_split), train_limit, seed)
    if info.trainable:
        st.check_fittable(trainset, ds.where, train_split, train_limit=train_limit)
    model = resolve_model(lm, needed=info.uses_lm, api_base=api_base, lm_kwargs=lm_kwargs, concurrency=concurrency,
                          max_cost=max_cost)
    check_capabilities(st, [strategy], model)
    name = strategy + (f"@{optimizer}" if optimizer else "")
    cbs = Callbacks(callbacks)
    run = _run_info(st, name, ds, train_split, model.name, seed, trainset, train_limit)
    cbs.check(run)
    made: dict[str, Any] = {}
    announced: list = []
    with cbs.run(run, made), entered(model, announced) as counter:
        cost = project_compile(st, strategy, optimizer, trainset, lm=model.lm, model=model.name, seed=seed)
        announced.append(cost)
        announce(cost, on_cost, progress)  # the run's inputs and cache checked; no model call yet
        phase = "compiling" if optimizer else "fitting"
        with calls_bar(f"{name} {phase} (model calls)", cost.total, progress), measured(speed_key(model.name, name)):
            program, record = compile_program(st, strategy, optimizer, trainset, lm=model.lm, seed=seed)
        record = {**(record or {"optimizer": None}), "data": ds.label, "data_sha256": ds.sha256,
                  "train_split": train_split, **({"train_limit": train_limit} if train_limit is not None else {})}
        counter.snapshot()
        record.update(spent_fields(counter.tokens))  # tokens and dollars from the responses' usage
        if target is not None:
            _save(st, program, target, strategy, model.name, record)
        result = CompiledProgram(program=program, stage=st.name, strategy=strategy, optimizer=optimizer, info=record,
                                 path=target, stage_ref=st.ref or st.name, lm=model.name,
                                 adapter=_adapter(model.name))
        made.update(result.to_dict())
        cbs.on_candidate_end(run, Candidate(name, params={"strategy": strategy, "optimizer": optimizer},
                                            metrics={k: v for k, v in record.items() if isinstance(v, (int, float))},
                                            row=result.to_dict(), program=program))
        for f in ((target / "program.json", target / "prompt.md", target / "signature.py") if target is not None else ()):
            cbs.on_artifact(run, f)
    return result


def _run_info(st, name: str, ds, train_split: str, model: str | None, seed: int, trainset: list,
              train_limit: int | None):
    from personalign.tracking.callbacks import RunInfo

    params = {"stage": st.name, "stage_ref": st.ref or st.name, "strategy": name.partition("@")[0],
              "optimizer": name.partition("@")[2] or None, "data": ds.label, "data_sha256": ds.sha256,
              "train_split": train_split, "seed": seed, "lm": model,
              **({"train_limit": train_limit} if train_limit is not None else {})}
    return RunInfo("compile", st, params=params, datasets=[(trainset, train_split, "training")], data=ds.label,
                   data_sha256=ds.sha256, lm=model, split=train_split, strategy=name)


def _adapter(model: str | None) -> str | None:
    if model is None:
        return None
    from personalign.lm import adapter_name

    return adapter_name(model)


def _save(st, program, target: Path, strategy: str, model: str | None, record: dict) -> None:
    from personalign.programs.export import prompt_text
    from personalign.programs.saved import save_program

    try:
        save_program(program, target, stage=st.name, stage_ref=st.ref or st.name, signature=st.signature_record(),
                     strategy=strategy, lm=model, compile_info=record, extra_files={"prompt.md": prompt_text(program)})
    except OSError as exc:
        raise ArgumentError("out", f"{target}: cannot write ({exc.strerror or exc})") from None


__all__ = ["compile"]
