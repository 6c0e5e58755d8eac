"""The four verbs: ``personalign.compile``, ``personalign.evaluate``, ``personalign.compare``,
``personalign.sweep``. Objects in, typed results out; the CLI is a thin layer over them.

Each takes a **stage** (a :class:`~personalign.programs.stages.Stage` or any stage reference:
built-in name, ``stage.toml``, ``file.py:ATTR``, ``module:ATTR``, entry-point name;
:func:`personalign.programs.stage_ref.resolve_stage`), a **strategy** (a registry name, ``NAME@OPT``
for compare, or a ``dspy.Module`` of the user's) and **data** (a labelled file the stage's loader
reads, or a list of ``dspy.Example`` with a ``split`` field). Results are dataclasses whose
``to_dict()`` is the JSON the CLI prints with ``--json``.

As Optuna's ``create_study``/``optimize`` and DSPy's ``compile(student, *, trainset)``: nothing is
read from global configuration but the defaults (:func:`personalign.lm.default_model`, the runs
directory); tracking is injected (``tracker=``, a :class:`personalign.tracking.Tracker`).
"""

from __future__ import annotations

import dataclasses
import json
import contextlib
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from personalign.errors import ConfigurationError


@dataclass
class CompiledProgram:
    """What :func:`compile` returns: the program (``program(**inputs)``), where it was saved
    (None: not saved), the stage and strategy names and the compile record
    (:class:`personalign.optimizers.base.CompileResult` as a dict; None: nothing to compile)."""

    program: Any
    stage: str
    strategy: str
    optimizer: str | None
    info: dict | None
    path: Path | None = None
    stage_ref: str | None = None
    lm: str | None = None
    adapter: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "stage_ref": self.stage_ref, "strategy": self.strategy,
                "optimizer": self.optimizer, "program": None if self.path is None else str(self.path),
                "prompt_file": None if self.path is None else str(self.path / "prompt.md"), "lm": self.lm,
                "adapter": self.adapter, "compile": self.info}


@dataclass
class Report:
    """A result of :func:`evaluate`, :func:`compare` or :func:`sweep`: ``data`` is the JSON
    object (``to_dict()``); ``stage`` its stage name."""

    stage: str
    data: dict = field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.data)

    def __getitem__(self, key: str) -> Any:
        return self.data[key]


@dataclass
class EvalReport(Report):
    """:func:`evaluate`'s result: ``metric`` (``f1``, ``accuracy``, ...), its ``value`` and 95% ``ci``."""

    metric: str = ""
    value: float | None = None
    ci: list[float] | None = None


@dataclass
class ComparisonReport(Report):
    """:func:`compare`'s result: one row per strategy (``rows``; ``row(name)``), each with the report,
    the set ``objective`` and, from the second on, ``vs_first`` (paired bootstrap + McNemar)."""

    rows: list[dict] = field(default_factory=list, repr=False)

    def row(self, name: str) -> dict:
        for r in self.rows:
            if r["name"] == name:
                return r
        raise KeyError(name)


@dataclass
class SweepReport(Report):
    """:func:`sweep`'s result: the ``best`` trial (``number``, ``value``, ``params``) and the exported ``program``."""

    best: dict | None = None


def _stage(stage):
    from personalign.programs.stage_ref import resolve_stage

    return resolve_stage(stage)


def with_module(st, module, name: str | None = None):
    """``(stage', name)``: ``st`` with the user's ``dspy.Module`` instance added to its strategies under
    ``name`` (default: the class name), an LLM strategy, not trainable (a teleprompter may compile it)."""
    from personalign.registry import Registry, StrategyInfo

    name = name or type(module).__name__
    info = StrategyInfo(name, lambda: module.deepcopy(), f"user module {type(module).__name__}",
                        uses_lm=bool(getattr(module, "uses_lm", True)), trainable=False)
    entries = [st.registry.info(n) for n in st.registry.names() if n != name] + [info]
    return dataclasses.replace(st, strategies=Registry(st.registry.what, entries)), name


def with_examples(st, examples: list):
    """``(stage', path)``: ``examples`` (``dspy.Example`` with a ``split``) written to a temporary
    JSONL, and ``st`` reading them back as examples with the stage's inputs marked (the file gives
    the run its data sha256)."""
    import dspy

    from personalign.programs.stages import split_of

    if not examples or any(split_of(ex) is None for ex in examples):
        raise ConfigurationError("data as a list needs dspy.Example objects, each with a 'split' field")
    handle = tempfile.NamedTemporaryFile("w", suffix=".jsonl", prefix=f"personalign-{st.name}-", delete=False)
    with handle:
        for ex in examples:
            handle.write(json.dumps(dict(ex.toDict()), default=str) + "\n")
    path = Path(handle.name)

    def load(p):
        from personalign.data.files import iter_jsonl

        return [dspy.Example(**rec).with_inputs(*st.inputs) for _, rec in iter_jsonl(p)]

    return dataclasses.replace(st, loader=load), path


@contextlib.contextmanager
def _inputs(stage, strategy, data):
    """Resolve the stage, the strategy (a name or a module) and the data (a path or examples);
    yields ``(stage, name, path, label)``. A list of examples lives in a temporary JSONL for the
    verb's duration only; an error about it names the example (``examples[i]``), not the file."""
    from personalign.errors import DataError

    st = _stage(stage)
    name = strategy
    if strategy is not None and not isinstance(strategy, str):
        st, name = with_module(st, strategy)
    if data is None:
        raise ConfigurationError("no data given: a labelled file or a list of dspy.Example")
    if not isinstance(data, (list, tuple)):
        yield st, name, Path(data), str(data)
        return
    st, path = with_examples(st, list(data))
    label = f"examples (a list of {len(data)})"
    try:
        yield st, name, path, label
    except DataError as exc:
        if exc.path != str(path):
            raise
        raise DataError("examples" if exc.line is None else f"examples[{exc.line - 1}]", None, exc.field,
                        exc.problem) from None
    finally:
        path.unlink(missing_ok=True)


def _named(result: dict, path: Path, label: str) -> dict:
    """``result`` with its ``data`` entry naming ``label`` rather than a temporary file."""
    if result.get("data") == str(path):
        result = {**result, "data": label}
    return result


def compile(stage, strategy=None, data=None, *, optimizer: str | None = None, train_split: str = "train",
            lm=None, seed: int = 0, out: str | Path | None = None, tracker=None) -> CompiledProgram:
    """Compile ``strategy`` of ``stage`` on the ``train_split`` rows of ``data``
    (:func:`personalign.compile_service.compile_program`: a teleprompter's program is kept only when
    it beats the uncompiled one on a dev split of whole held-out groups; a decision rule is fitted
    where it raises the set objective) and, with ``out``, save it (``program.json`` records the
    ``stage_ref``). ``lm``: a model string or a ``dspy.LM`` (default :func:`personalign.lm.default_model`).
    The compile record (``info``, and ``compile``/``data`` in ``program.json``) names the data --
    its path, or ``"examples (a list of N)"`` -- with its ``data_sha256``.

    Raises:
        ConfigurationError: unknown stage/strategy/optimizer, a teleprompter on a fitted strategy.
        DataError: unreadable data, no train split, a single class where fitting needs two.
    """
    from personalign.programs.stage_ref import stage_ref_of
    from personalign.workflows import compile_and_save

    with _inputs(stage, strategy, data) as (st, name, path, label):
        return compile_and_save(st, name, path, optimizer=optimizer, train_split=train_split, lm=lm, seed=seed,
                                out=out, tracker=tracker, make=CompiledProgram, stage_ref=stage_ref_of(st),
                                data_label=label)


def evaluate(stage, program, data, *, split: str = "val", lm=None, seed: int = 0, n_boot: int = 1000,
             limit: int | None = None, tracker=None, progress: bool = False) -> EvalReport:
    """Score ``program`` -- a saved program directory, a :class:`CompiledProgram` or a
    ``dspy.Module`` -- on the ``split`` rows of ``data`` against their gold labels (binary stages:
    F1, precision, recall, yes-rate with 95% bootstrap CIs; others: the stage metric's mean and CI).

    Raises:
        DataError: a malformed saved program, unreadable data, an empty split.
        ConfigurationError: a program of another stage.
    """
    from personalign.workflows import evaluate_program

    with _inputs(stage, None, data) as (st, _, path, label):
        out = evaluate_program(st, program, path, split=split, lm=lm, seed=seed, n_boot=n_boot, limit=limit,
                               tracker=tracker, progress=progress, data_label=label)
    key = st.metric_name
    return EvalReport(stage=st.name, data=out, metric=key, value=out.get(key), ci=out.get(f"{key}_ci"))


def compare(stage, strategies=None, data=None, *, split: str = "val", train_split: str = "train", lm=None,
            seed: int = 0, n_boot: int = 1000, limit: int | None = None, tracker=None, progress: bool = False,
            out_dir: str | Path | None = None, on_ready=None, cv: str | None = None, repeats: int = 1,
            temperature: float | None = None) -> ComparisonReport:
    """Compare strategies of ``stage`` on one split, or leave-one-group-out with ``cv="groups"``
    (:func:`personalign.compare.compare_stage`; ``repeats``/``temperature`` as ``--repeats``):
    ``strategies`` is a comma-separated string (``"majority,predict,predict@bootstrap"``) or a list
    of names and ``dspy.Module`` objects; every trainable one is compiled on ``train_split`` only.
    ``lm``: a model string (a ``dspy.LM`` is used by its ``model`` string: compare builds its own).

    Raises:
        ConfigurationError / DataError: as :func:`personalign.compare.compare_stage`.
    """
    with _inputs(stage, None, data) as (st, _, path, label):
        result = _compare(st, strategies, path, split=split, train_split=train_split, lm=lm, seed=seed,
                          n_boot=n_boot, limit=limit, tracker=tracker, progress=progress, out_dir=out_dir,
                          on_ready=on_ready, cv=cv, repeats=repeats, temperature=temperature)
    result = _named(result, path, label)
    return ComparisonReport(stage=st.name, data=result, rows=result["strategies"])


def _compare(st, strategies, path, **kwargs) -> dict:
    from personalign.compare import compare_stage

    if isinstance(strategies, (list, tuple)):
        names = []
        for s in strategies:
            if isinstance(s, str):
                names.append(s)
            else:
                st, n = with_module(st, s)
                names.append(n)
        strategies = ",".join(names)
    lm = kwargs.pop("lm", None)
    if lm is not None and not isinstance(lm, str):
        lm = getattr(lm, "model", None) or lm
    return compare_stage(st, data=path, strategies=strategies, lm=lm, **kwargs)


def sweep(stage, data, *, space: str | Path | None = None, n_trials: int = 20, storage: str | None = None,
          study_name: str | None = None, lm: str | None = None, split: str = "dev", train_split: str = "train",
          seed: int = 0, tracker=None, progress: bool = False, **kwargs: Any) -> SweepReport:
    """Run (or resume) an Optuna sweep of ``stage`` (:func:`personalign.sweep.run_sweep`): trials
    compile on train and are scored by the stage's set objective on ``split``; a stage file's
    ``[sweep]`` sections join the default space.

    Raises:
        ConfigurationError / DataError: as :func:`personalign.sweep.run_sweep`.
    """
    from personalign.sweep import run_sweep

    with _inputs(stage, None, data) as (st, _, path, label):
        result = _named(run_sweep(st, data=path, space=space, n_trials=n_trials, storage=storage,
                                  study_name=study_name, lm=lm, split=split, train_split=train_split, seed=seed,
                                  tracker=tracker, progress=progress, **kwargs), path, label)
    return SweepReport(stage=st.name, data=result, best=result.get("best"))


__all__ = ["CompiledProgram", "ComparisonReport", "EvalReport", "Report", "SweepReport", "compare", "compile",
           "evaluate", "sweep", "with_examples", "with_module"]
