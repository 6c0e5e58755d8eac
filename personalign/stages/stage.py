"""The :class:`Stage`: a name, a typed signature, a loader, an objective and a registry of
strategies -- built only from a :class:`~personalign.stages.spec.StageSpec`, for a built-in stage,
a user's stage file and :func:`personalign.declare_stage` alike (:meth:`Stage.from_spec`).

Every stage gets the **generic strategies** its kind allows, bound to its signature
(:func:`personalign.programs.common.generic.bind_generic`, imported when one is first used):

=============  ====================================================  =========================
name           what it does                                          stages
=============  ====================================================  =========================
``all-yes``    LM-free: the output is true for every row             binary
``all-no``     LM-free: the output is false for every row            binary
``majority``   LM-free: the most frequent train label                binary, multiclass, scored
                                                                     with a scalar output
``predict``    LLM: ``dspy.Predict`` on the signature                all
``cot``        LLM: ``dspy.ChainOfThought``                          all
``yes-prob``   log p(Yes) - log p(No), threshold by grouped CV       binary
``minilm-logreg`` LM-free: logistic head on MiniLM features          binary
=============  ====================================================  =========================

A stage's own ``[strategies]`` come after, replacing a generic one of the same name. A strategy is
a ``dspy.Module`` class whose class attributes say what it needs: ``uses_lm`` (default true) and
``optimizer`` (``"module:Class"`` of its own fit; set = trainable). Nothing is imported until a
strategy is used (:class:`personalign.registry.Deferred`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from personalign.data.splits import split_of, splits_present  # noqa: F401  (re-exported)
from personalign.errors import ConfigurationError, DataError
from personalign.registry import Registry, StrategyInfo, param_names, resolve, resolve_callable
from personalign.stages.objective import Objective, get_objective
from personalign.stages.strategies import GENERIC, default_names, reference_strategy, strategy_entries, strategy_info  # noqa: F401



@dataclass(frozen=True, kw_only=True)
class Stage:
    """One personalization stage, built from its spec (:meth:`from_spec`).

    Attributes:
        spec: the :class:`~personalign.stages.spec.StageSpec` it was built from.
        name: the stage's name (``relevance``, ``option-follows``).
        summary: one line shown by ``personalign stages``.
        kind: ``binary``, ``multiclass`` or ``scored``.
        label: the gold field of a row.
        positive: binary: the label value counted as the positive class (verification: False, i.e.
            its scores are of *rejected* attributes).
        positive_name: the positive class's name in reports ("relevant", "rejected").
        signature: the ``dspy.Signature`` class or its ``"module:Class"`` (imported on first use):
            its input fields are :attr:`inputs`, its first output field :attr:`output`.
        strategies: the strategy :class:`~personalign.registry.Registry` (generic + own).
        default_strategies: comma-separated strategies ``compare`` runs by default.
        loader: ``(path) -> list[dspy.Example]`` or its ``"module:function"``; each example has a
            ``split`` and :attr:`inputs` marked. Raises DataError.
        metric: DSPy metric ``(example, pred, trace=None)`` or its reference; metric_name: the
            headline of reports (``f1`` for binary stages).
        objective: the :class:`~personalign.stages.objective.Objective` compile and sweep maximize.
        group_key: the field grouping examples (dev split, grouped CV and intervals hold out whole
            groups); ``id`` when undeclared (every row its own group).
        decision_keys: the fields whose values form a compiled binary program's decision unit (a
            ``top_share`` rule ranks within it); None: ``(group_key,)``.
        strata_key: the field ``--limit`` stratifies over; None: ``group_key``.
        feedback_metric: GEPA's feedback metric (or its reference), optional.
        ref: the reference the stage was resolved from (a file's absolute path; a name for built-ins).
        sweep_space: sections added to the stage's default sweep space (``[sweep]``).
    """

    spec: Any = field(repr=False, compare=False)
    name: str
    summary: str
    kind: str
    label: str
    signature: Any = field(repr=False)
    strategies: Any = field(repr=False)
    default_strategies: str
    loader: Any = field(repr=False)
    objective: Objective = field(repr=False)
    positive: bool = True
    positive_name: str = "yes"
    metric: Any = field(default=None, repr=False)
    metric_name: str = "f1"
    group_key: str = "id"
    decision_keys: tuple[str, ...] | None = None
    strata_key: str | None = None
    feedback_metric: Any = field(default=None, repr=False)
    ref: str | None = None
    sweep_space: dict | None = field(default=None, compare=False, repr=False)

    # --- construction -------------------------------------------------------------------------
    @classmethod
    def from_spec(cls, spec, *, base_dir: str | Path | None = None, ref: str | None = None, source: Any = "stage",
                  extra_strategies: dict[str, Any] | None = None) -> "Stage":
        """The stage ``spec`` declares. Code references are checked, not imported
        (:func:`personalign.stages.ref.check_ref`, relative to ``base_dir``); ``extra_strategies``:
        strategy classes given in Python (:func:`personalign.declare_stage`).

        Raises:
            DataError: a reference that breaks the rules, an unknown default strategy (names
                ``source`` and the key).
        """
        from personalign.stages import canonical
        from personalign.stages.coderef import check_ref

        base = Path(base_dir) if base_dir is not None else Path.cwd()
        try:
            def code(key: str, value: str | None, kind: str = "object") -> str | None:
                return None if value is None else check_ref(value, base, key=key, kind=kind)

            signature = code("signature", spec.signature, "class") or canonical.make_signature(spec)
            loader = code("loader", spec.loader) or canonical.loader_for(spec)
            metric = code("metric", spec.metric) or canonical.exact_match(spec)
            objective_spec = spec.objective
            if objective_spec and ":" in objective_spec and not objective_spec.startswith("fbeta:"):
                objective_spec = check_ref(objective_spec, base, key="objective")
            metric_name = spec.metric_name or ("f1" if spec.kind == "binary" else "accuracy"
                                               if spec.kind == "multiclass" else str(metric).rpartition(":")[2])
            objective = get_objective(objective_spec, spec.kind, metric_name=metric_name)
            holder: dict[str, Stage] = {}
            entries = strategy_entries(spec, base, extra_strategies or {}, holder)
            feedback = code("feedback_metric", spec.feedback_metric)
        except (ConfigurationError, ValueError) as exc:
            text = str(exc)
            key = text.split(" = ", 1)[0] if " = " in text else None
            raise DataError(source, None, key, text.split(": ", 1)[-1] if key else text) from None
        names = [e.name for e in entries]
        default = spec.default_strategies or ",".join(n for n in default_names(spec.kind) if n in names)
        canonical.check_defaults(default, names, source)
        binary = spec.kind == "binary"
        positive_name = spec.positive_name or (
            (spec.output.name if spec.positive else f"not {spec.output.name}") if spec.output else "yes")
        stage = cls(spec=spec, name=spec.name, summary=spec.summary or spec.instructions or spec.name,
                   kind=spec.kind, label=spec.label, signature=signature,
                   strategies=Registry(f"{spec.name} strategy", entries), default_strategies=default, loader=loader,
                   objective=objective, positive=spec.positive, positive_name=positive_name if binary else "yes",
                   metric=metric, metric_name=metric_name, group_key=spec.group_key or "id",
                   decision_keys=tuple(spec.decision_keys) if spec.decision_keys else None, strata_key=spec.strata_key,
                   feedback_metric=feedback, ref=ref, sweep_space=spec.sweep)
        holder["stage"] = stage  # the generic strategies bind to the stage when first used
        return stage

    def with_strategy(self, name: str, factory: Callable[[], Any], *, uses_lm: bool, summary: str) -> "Stage":
        """This stage with one more LLM strategy ``name`` built by ``factory()`` (a user's module
        instance in Python: not trainable; a teleprompter may compile it)."""
        info = StrategyInfo(name, factory, summary, uses_lm=uses_lm, trainable=False)
        return dataclasses.replace(self, strategies=self.registry.with_entry(info))

    # --- fields -------------------------------------------------------------------------------
    @property
    def signature_class(self) -> type:
        """The stage's ``dspy.Signature`` class (imports it)."""
        return resolve(self.signature)

    @property
    def inputs(self) -> tuple[str, ...]:
        """The signature's input fields, in order: a program is called as ``program(**inputs)``."""
        return tuple(self.signature_class.input_fields)

    @property
    def output(self) -> str:
        """The signature's first output field: compared with the gold :attr:`label`."""
        return next(iter(self.signature_class.output_fields))

    def signature_record(self) -> dict[str, Any]:
        """What a saved program records of the signature it was compiled for (and is checked against
        when loaded): ``{"inputs", "output", "output_type", "kind", "positive"}``. A multiclass
        stage records kind ``scored``, as programs saved before the kind existed do."""
        ann = self.signature_class.output_fields[self.output].annotation
        typ = ann.__name__ if isinstance(ann, type) else str(ann)
        kind = "binary" if self.kind == "binary" else "scored"
        return {"inputs": list(self.inputs), "output": self.output, "output_type": typ, "kind": kind,
                "positive": self.positive}

    def mark_inputs(self, example):
        """``example`` with :attr:`inputs` marked as its inputs."""
        return example.with_inputs(*self.inputs)

    @property
    def registry(self) -> Registry:
        """The stage's strategy registry."""
        return self.strategies

    @property
    def reference(self) -> str | None:
        """:func:`reference_strategy` of this stage."""
        return reference_strategy(self)

    def metric_fn(self) -> Callable | None:
        return None if self.metric is None else resolve_callable(self.metric, "metric")

    def feedback_fn(self) -> Callable | None:
        return None if self.feedback_metric is None else resolve_callable(self.feedback_metric, "feedback_metric")

    def score(self, examples, predictions, *, scores=None, lm=None) -> float:
        """The stage's set objective of ``predictions`` on ``examples`` (:class:`Objective`)."""
        return self.objective(self, examples, predictions, scores=scores, lm=lm)

    # --- units and groups ---------------------------------------------------------------------
    @property
    def decision_fields(self) -> tuple[str, ...]:
        """The fields of the decision-rule unit: ``decision_keys``, else ``(group_key,)``."""
        return tuple(self.decision_keys or ((self.group_key,) if self.group_key else ()))

    def decision_group(self, example) -> Any:
        """The decision-rule unit of ``example``: a tuple of its field values (None when missing)."""
        return tuple(getattr(example, k, None) for k in self.decision_fields)

    @property
    def limit_key(self) -> str | None:
        """The field ``--limit`` stratifies over: ``strata_key``, else ``group_key``."""
        return self.strata_key or self.group_key

    def limit(self, examples: list, n: int | None, seed: int = 0) -> list:
        """``--limit n``: a seeded sample of ``examples`` stratified over :attr:`limit_key`, in file
        order (:func:`personalign.data.sample.limit_examples`); None: all.

        Raises:
            ConfigurationError: ``n < 1``.
        """
        from personalign.data.sample import limit_examples

        return limit_examples(self, examples, n, seed)

    # --- data ---------------------------------------------------------------------------------
    def load(self, path: str | Path, split: str | None = None) -> list:
        """Examples of ``path`` (all, or those of ``split``).

        Raises:
            DataError: the file is missing or malformed, or ``split`` has no examples (the message
                lists the splits present).
        """
        from personalign.data.files import check_input

        path = check_input(path, allow_dir=True)  # never opens a pipe or device
        examples = list(resolve_callable(self.loader, "loader")(path))
        if split is None:
            return examples
        chosen = [ex for ex in examples if split_of(ex) == split]
        if not chosen:
            raise DataError(path, None, "split",
                            f"no examples in split '{split}' (splits present: {splits_present(examples)})")
        return chosen

    def gold(self, example) -> Any:
        return getattr(example, self.label)

    def is_positive(self, value) -> bool | None:
        """Binary stages: whether a label/prediction value is the positive class (None stays None)."""
        if value is None:
            return None
        from personalign.metrics.dspy_metrics import to_bool

        b = to_bool(value)
        return None if b is None else (b == self.positive)

    def check_fittable(self, examples: list, path: Any, split: str, *, train_limit: int | None = None) -> None:
        """A binary stage's learned strategies fit on both classes: check ``examples`` has both.

        Raises:
            DataError: every example of ``split`` (or of the sample ``--train-limit`` kept of it) has
                the same label (names the data and the split).
        """
        if self.kind != "binary" or not examples:
            return
        seen = {self.is_positive(self.gold(ex)) for ex in examples} - {None}
        if len(seen) < 2:
            only = self.positive_name if True in seen else f"not {self.positive_name}"
            if train_limit is not None:  # the sample has one class, not (necessarily) the data
                raise DataError(path, None, "split", f"the {len(examples)} rows --train-limit {train_limit} kept of "
                                                     f"split '{split}' are all '{only}'; learned strategies need both "
                                                     "classes to fit: raise --train-limit")
            raise DataError(path, None, "split", f"split '{split}' has only '{only}' examples; learned strategies "
                                                 f"need both classes to fit")

    # --- fitting ------------------------------------------------------------------------------
    def default_optimizer(self, strategy: str, *, seed: int = 0, **settings: Any):
        """The strategy's own fit (None when it has none), configured by :meth:`fit_kwargs`."""
        cls = self.registry.load(strategy, "optimizer")
        return None if cls is None else cls(**self.fit_kwargs(strategy, cls, seed=seed, **settings))

    def fit_facts(self, optimizer_cls) -> dict[str, Any]:
        """What a fit optimizer is told of this stage: its ``label``, ``positive``, ``group_key``,
        ``decision_keys`` and, for an F-beta objective, ``beta``, each only where the optimizer's settings take it
        (:func:`personalign.registry.param_names`). A generic fit has no stage's defaults of its own."""
        params = set(param_names(optimizer_cls))
        facts = {"label": self.label, "positive": self.positive, "group_key": self.group_key,
                 "decision_keys": self.decision_keys}
        if self.objective.spec.startswith("fbeta:"):  # the threshold maximizes the stage's own F-beta
            from personalign.stages.objective import fbeta_beta

            facts["beta"] = fbeta_beta(self.objective.spec)
        return {k: v for k, v in facts.items() if v is not None and k in params}

    def fit_kwargs(self, strategy: str, optimizer_cls, **settings: Any) -> dict[str, Any]:
        """Keyword arguments of the fit optimizer ``optimizer_cls`` for ``strategy``: :meth:`fit_facts`,
        overridden by the strategy class's ``optimizer_kwargs``, then ``settings``.

        Raises:
            ConfigurationError: a False positive class and an optimizer with no ``positive`` setting.
        """
        params = set(param_names(optimizer_cls))
        derived = {"positive": self.positive, **(getattr(self.registry.load(strategy), "optimizer_kwargs", {}) or {})}
        if derived["positive"] is not True and "positive" not in params:
            raise ConfigurationError(f"{optimizer_cls.__name__} fits the threshold of {self.label}=True, but "
                                     f"stage '{self.name}' predicts {self.label}=False; use a fit with a "
                                     "'positive' setting (learned-selector-fit)")
        own = {k: v for k, v in derived.items() if k in params}
        return {**self.fit_facts(optimizer_cls), **own, **settings}

    def teleprompter_kwargs(self) -> dict[str, Any]:
        """Settings every teleprompter wrapper needs for this stage (metric and label field)."""
        out: dict[str, Any] = {"label_field": self.label if self.kind == "binary" else None}
        if self.metric is not None:
            out["metric"] = self.metric_fn()
        return out


__all__ = ["GENERIC", "Stage", "reference_strategy", "split_of", "splits_present", "strategy_info"]
