"""Stages: a name, a typed signature, a metric, a loader and a registry of strategies.

A stage lives in a package ``personalign/programs/<stage>/`` whose ``__init__`` defines
``STRATEGIES`` (a :class:`personalign.registry.Registry` of :class:`~personalign.registry.StrategyInfo`)
and ``STAGE`` (a :class:`Stage`). :func:`get_stage` and :func:`all_stages` discover them, so
``compare``, ``compile``, ``eval`` and ``sweep`` work for every stage without stage-specific CLI code.

Importing this module is light (dataclasses only): stage packages import it at import time, and
name their signature, loader and metric as ``"module:attr"`` strings resolved on first use.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from personalign.registry import resolve

KINDS = ("binary", "scored")


@dataclass(frozen=True, kw_only=True)
class Stage:
    """One personalization stage.

    Attributes:
        name: CLI name (``personalign compare NAME``).
        summary: one line for --help and tracking.
        signature: the stage's ``dspy.Signature`` class, or its ``"module:Class"`` (imported on
            first use, so that stage packages stay light at import). Its input fields are
            :attr:`inputs` (every strategy is called as ``program(**inputs)``), its first output
            field is :attr:`output`: the one declaration of the stage's field names.
        strategies: the stage's strategy :class:`~personalign.registry.Registry` (or its
            ``"module:ATTR"``); each entry declares ``uses_lm``, ``trainable`` and its fit optimizer.
        default_strategies: comma-separated strategies ``compare`` runs by default.
        loader: ``"module:function"``: ``(path: Path) -> list[dspy.Example]``; every example has a
            ``split`` field and :attr:`inputs` marked (:meth:`mark_inputs`); raises
            :class:`~personalign.errors.DataError`.
        label: field of the example holding the gold.
        kind: ``"binary"`` (booleans: F1, precision, recall, positive rate with 95% CIs, McNemar)
            or ``"scored"`` (per-example ``metric`` in [0, 1]: mean with a 95% CI).
        positive: binary stages: the label value counted as the positive class (verification:
            False, i.e. scores are of detecting *rejected* attributes).
        positive_name: what a positive prediction means ("relevant", "rejected"): labels the
            ``yes_rate`` column.
        metric: ``"module:function"`` DSPy metric ``(example, pred, trace=None)``; teleprompters
            optimize it, and scored stages report its mean.
        metric_name: name of the main metric in reports (``f1`` for binary stages).
        group_key: example field grouping examples (teleprompters' dev split and grouped CV hold
            out whole groups); None: no groups.
        decision_keys: example fields whose values together form the unit a compiled binary
            program's decision rule works in: a ``top_share`` rule ranks within it and the rule's
            grouped CV folds hold whole units out (relevance: one user's attributes for one prompt,
            ``("prompt_id", "user_id")``). None: ``(group_key,)``.
        strata_key: example field ``--limit N`` stratifies its seeded sample over
            (:func:`personalign.data.sample.stratified_limit`); None: ``group_key``. MCQ: ``topic``
            (its prompt groups hold one question each).
        ref: the stage reference it was resolved from (:mod:`personalign.programs.stage_ref`), which
            saved programs record as ``stage_ref``; None: a built-in stage (its name).
        sweep_space: sections added to the stage's default sweep space (a stage file's ``[sweep]``).
        feedback_metric: ``"module:function"`` GEPA feedback metric (optional).
        objective: the **set-level** objective compiles maximize on their dev split
            (:mod:`personalign.objectives`): ``"f1"`` or ``"fbeta:B"`` of the positive class
            (binary stages), ``"mean"`` of ``metric`` (extraction recall, MCQ accuracy, win rate),
            or ``"module:function"`` ``(examples, predictions) -> float`` (judge: kappa). None:
            ``"f1"`` for binary stages, ``"mean"`` otherwise.
    """

    name: str
    summary: str
    signature: Any
    strategies: Any
    default_strategies: str
    loader: str
    label: str
    kind: str = "binary"
    positive: bool = True
    positive_name: str = "yes"
    metric: str | None = None
    metric_name: str = "f1"
    group_key: str | None = "prompt_id"
    feedback_metric: str | None = None
    objective: str | None = None
    decision_keys: tuple[str, ...] | None = None
    strata_key: str | None = None
    ref: str | None = None
    sweep_space: dict | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        validate_spec(objective_spec(self), self.kind)
        if self.kind not in KINDS:
            raise ValueError(f"stage {self.name}: kind must be one of {KINDS}, got {self.kind!r}")
        if self.kind == "scored" and self.metric is None:
            raise ValueError(f"stage {self.name}: a scored stage needs a metric")

    def decision_group(self, example) -> Any:
        """The decision-rule unit of ``example`` (see ``decision_keys``): a tuple of its field
        values (None for a missing field)."""
        return tuple(getattr(example, k, None) for k in self.decision_fields)

    @property
    def decision_fields(self) -> tuple[str, ...]:
        """The example fields of the decision-rule unit: ``decision_keys``, else ``(group_key,)``,
        else none (one unit)."""
        return tuple(self.decision_keys or ((self.group_key,) if self.group_key else ()))

    @property
    def limit_key(self) -> str | None:
        """The field ``--limit`` stratifies over: ``strata_key``, else ``group_key``."""
        return self.strata_key or self.group_key

    def limit(self, examples: list, n: int | None, seed: int = 0) -> list:
        """``--limit n``: a seeded random sample of ``examples`` stratified over :attr:`limit_key`,
        in file order (:func:`personalign.data.sample.limit_examples`); None: all.

        Raises:
            ConfigurationError: ``n < 1``.
        """
        from personalign.data.sample import limit_examples

        return limit_examples(self, examples, n, seed)

    # --- resolved parts (imported on first use) ---
    @property
    def signature_class(self) -> type:
        """The stage's ``dspy.Signature`` class (imports it)."""
        return resolve(self.signature)

    @property
    def inputs(self) -> tuple[str, ...]:
        """The signature's input fields, in signature order: a program is called as
        ``program(**{k: example[k] for k in inputs})``."""
        return tuple(self.signature_class.input_fields)

    def signature_record(self) -> dict[str, Any]:
        """What a saved program records of the signature it was compiled for, and is checked against
        when loaded (:func:`personalign.programs.stage_ref.stage_for_program`): ``{"inputs": [...],
        "output": name, "output_type": e.g. "bool" or "typing.Literal['low', 'high']", "kind",
        "positive"}`` (``positive``: the output value a binary stage counts as its positive class)."""
        ann = self.signature_class.output_fields[self.output].annotation
        typ = ann.__name__ if isinstance(ann, type) else str(ann)
        return {"inputs": list(self.inputs), "output": self.output, "output_type": typ, "kind": self.kind,
                "positive": self.positive}

    @property
    def output(self) -> str:
        """The signature's first output field: the field of a program's ``dspy.Prediction``
        compared with the gold :attr:`label`."""
        return next(iter(self.signature_class.output_fields))

    def mark_inputs(self, example):
        """``example`` (a ``dspy.Example``) with :attr:`inputs` marked as its inputs."""
        return example.with_inputs(*self.inputs)

    @property
    def registry(self):
        """The stage's strategy :class:`~personalign.registry.Registry`."""
        return resolve(self.strategies)

    def metric_fn(self) -> Callable | None:
        return None if self.metric is None else resolve(self.metric)

    def feedback_fn(self) -> Callable | None:
        return None if self.feedback_metric is None else resolve(self.feedback_metric)

    def load(self, path: str | Path, split: str | None = None) -> list:
        """Examples of ``path`` (all, or those of ``split``).

        Raises:
            DataError: the file is missing or malformed, or ``split`` has no examples (the message
                lists the splits present).
        """
        from personalign.data.files import check_input
        from personalign.errors import DataError

        path = check_input(path, allow_dir=True)  # never opens a pipe or device
        examples = list(resolve(self.loader)(path))
        if split is None:
            return examples
        chosen = [ex for ex in examples if split_of(ex) == split]
        if not chosen:
            raise DataError(path, None, "split",
                            f"no examples in split '{split}' (splits present: {splits_present(examples)})")
        return chosen

    def check_fittable(self, examples: list, path: str | Path, split: str) -> None:
        """A binary stage's learned strategies fit on both classes: check ``examples`` (the train
        split of ``path``) has both before any fitting starts.

        Raises:
            DataError: every example of ``split`` has the same label (names the file and the split).
        """
        from personalign.errors import DataError

        if self.kind != "binary" or not examples:
            return
        seen = {self.is_positive(self.gold(ex)) for ex in examples} - {None}
        if len(seen) < 2:
            only = self.positive_name if True in seen else f"not {self.positive_name}"
            raise DataError(path, None, "split", f"split '{split}' has only '{only}' examples; learned strategies "
                                                 f"need both classes to fit")

    def gold(self, example) -> Any:
        return getattr(example, self.label)

    def is_positive(self, value) -> bool | None:
        """Binary stages: whether a label/prediction value is the positive class (None stays None)."""
        if value is None:
            return None
        from personalign.metrics.dspy_metrics import to_bool

        b = to_bool(value)
        return None if b is None else (b == self.positive)

    def default_optimizer(self, strategy: str, *, seed: int = 0, **settings: Any):
        """The strategy's own fit (None when its registry entry names none), configured by
        :meth:`fit_kwargs`.

        Raises:
            ConfigurationError: unknown strategy; a fit that cannot serve this stage.
        """
        cls = self.registry.load(strategy, "optimizer")
        return None if cls is None else cls(**self.fit_kwargs(strategy, cls, seed=seed, **settings))

    def fit_kwargs(self, strategy: str, optimizer_cls, **settings: Any) -> dict[str, Any]:
        """Keyword arguments of the fit optimizer ``optimizer_cls`` for ``strategy`` of this stage:
        the stage's ``label``, ``positive``, ``group_key`` and ``decision_keys``, overridden by the strategy class's
        ``optimizer_kwargs``, each kept only where the optimizer's ``__init__`` takes it; then
        ``settings`` (all passed on, so an unknown setting is still the optimizer's TypeError).

        Raises:
            ConfigurationError: the stage's positive class is a False label and the optimizer has
                no ``positive`` setting (it would fit the threshold of the wrong class).
        """
        import inspect

        from personalign.errors import ConfigurationError

        params = inspect.signature(optimizer_cls.__init__).parameters
        facts = {"label": self.label, "positive": self.positive, "group_key": self.group_key,
                 "decision_keys": self.decision_keys}
        facts = {k: v for k, v in facts.items() if v is not None}
        derived = {**facts, **(getattr(self.registry.load(strategy), "optimizer_kwargs", {}) or {})}
        if derived.get("positive", True) is not True and "positive" not in params:
            raise ConfigurationError(f"{optimizer_cls.__name__} fits the threshold of {derived.get('label')}=True, but "
                                     f"stage '{self.name}' predicts {derived.get('label')}=False; use a fit with a "
                                     "'positive' setting (learned-selector-fit)")
        return {**{k: v for k, v in derived.items() if k in params}, **settings}

    def teleprompter_kwargs(self) -> dict[str, Any]:
        """Settings every teleprompter wrapper needs for this stage (metric and label field)."""
        out: dict[str, Any] = {}
        if self.metric is not None:
            out["metric"] = self.metric_fn()
        out["label_field"] = self.label if self.kind == "binary" else None
        return out


def objective_spec(stage) -> str:
    """The stage's objective spec (default: ``"f1"`` for binary stages, ``"mean"`` otherwise)."""
    spec = getattr(stage, "objective", None)
    return spec or ("f1" if stage.kind == "binary" else "mean")


def validate_spec(spec: str, kind: str) -> None:
    """Raise ValueError when ``spec`` is not a valid objective for a stage of ``kind``."""
    if spec in ("f1",) or spec.startswith("fbeta:"):
        if kind != "binary":
            raise ValueError(f"objective '{spec}' needs a binary stage")
        if spec.startswith("fbeta:"):
            beta = float(spec.split(":", 1)[1])
            if not beta > 0:
                raise ValueError(f"objective '{spec}': beta must be > 0")
        return
    if spec == "mean" or (":" in spec and all(spec.partition(":")[::2])):
        return
    raise ValueError(f"unknown objective '{spec}' (f1, fbeta:B, mean or module:function)")


def split_of(example) -> str | None:
    value = getattr(example, "split", None)
    if value is None and hasattr(example, "get"):
        value = example.get("split")
    return None if value is None else str(value)


def splits_present(examples) -> str:
    """The splits of ``examples`` for an error message: sorted names, comma-separated; rows without
    a split show as ``(no 'split' field)``, an empty list as ``none``."""
    names = {split_of(ex) for ex in examples}
    shown = sorted(n for n in names if n is not None) + (["(no 'split' field)"] if None in names else [])
    return ", ".join(shown) or "none"


def all_stages() -> dict[str, Stage]:
    """Every stage defined by a ``personalign.programs.<package>`` (name -> Stage), sorted by name."""
    import personalign.programs as programs

    found: dict[str, Stage] = {}
    for mod in pkgutil.iter_modules(programs.__path__):
        if not mod.ispkg:
            continue
        stage = getattr(importlib.import_module(f"personalign.programs.{mod.name}"), "STAGE", None)
        if isinstance(stage, Stage):
            found[stage.name] = stage
    return dict(sorted(found.items()))


def builtin_stage(name: str) -> Stage | None:
    """The built-in stage called ``name`` (a package ``personalign.programs.<name>``), or None."""
    if name.isidentifier():  # the usual layout: the stage's package has the stage's name
        try:
            stage = getattr(importlib.import_module(f"personalign.programs.{name}"), "STAGE", None)
        except ModuleNotFoundError as exc:
            if exc.name != f"personalign.programs.{name}":
                raise
            stage = None
        if isinstance(stage, Stage) and stage.name == name:
            return stage
    return all_stages().get(name)


def get_stage(ref) -> Stage:
    """The stage ``ref`` names: a built-in name, a :class:`Stage`, ``module:ATTR``,
    ``file.py:ATTR``, a stage ``.toml`` or an entry-point name
    (:func:`personalign.programs.stage_ref.resolve_stage`).

    Raises:
        ConfigurationError: unknown stage (the message lists the available ones); DataError: a
            malformed stage file.
    """
    from personalign.programs.stage_ref import resolve_stage

    return resolve_stage(ref)


__all__ = ["Stage", "all_stages", "builtin_stage", "get_stage", "KINDS", "objective_spec", "validate_spec"]
