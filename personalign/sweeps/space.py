"""The search-space language of a sweep: dimensions, a validated :class:`SearchSpace`, a trial's
:class:`TrialConfig`.

A space file (TOML or YAML) lists, per section, what a trial may sample: every value is a list (a
categorical choice), ``{low, high[, log][, step]}`` (an int range when both bounds are integers,
else a float range) or anything else (a fixed value). Sampling is define-by-run
(:meth:`SearchSpace.configure`): a parameter is sampled only where it applies. The default space
of each stage is data in :mod:`personalign.sweeps.defaults`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from personalign.errors import ConfigurationError
from personalign.sweeps.space_check import TELEPROMPTER_COMMON, check_name, check_setting, init_params
from personalign.sweeps.space_schema import FixedSpec, RangeSpec, read_space_file, validate_space


@dataclass
class Dimension:
    """One entry of the space: a categorical choice, an int/float range, or a fixed value."""

    name: str
    kind: str  # "categorical" | "int" | "float" | "fixed"
    choices: list | None = None
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    value: Any = None

    def sample(self, trial) -> Any:
        if self.kind == "fixed":
            return self.value
        if self.kind == "categorical":
            return trial.suggest_categorical(self.name, self.choices)
        if self.kind == "int":
            return trial.suggest_int(self.name, int(self.low), int(self.high), step=int(self.step or 1), log=self.log)
        return trial.suggest_float(self.name, float(self.low), float(self.high), step=self.step, log=self.log)

    def fixed(self, params: dict[str, Any]) -> Any:
        """The value of this dimension in the params of a finished trial."""
        return self.value if self.kind == "fixed" else params[self.name]

    def holds(self, value: Any) -> bool:
        """Whether ``value`` is a point of this dimension: one of the choices (same type), an int or
        a finite float inside the range and on its step, the fixed value."""
        import math

        if self.kind == "fixed":
            return value == self.value
        if self.kind == "categorical":
            return any(type(value) is type(c) and value == c for c in self.choices)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return False
        if self.kind == "int" and not isinstance(value, int):
            return False
        if not self.low <= value <= self.high:
            return False
        if self.step:
            k = (value - self.low) / self.step
            return abs(k - round(k)) < 1e-6
        return True

    def distribution(self):
        """The Optuna distribution :meth:`sample` suggests (None for a fixed value)."""
        from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

        if self.kind == "categorical":
            return CategoricalDistribution(self.choices)
        if self.kind == "int":
            return IntDistribution(int(self.low), int(self.high), log=self.log, step=int(self.step or 1))
        if self.kind == "float":
            return FloatDistribution(float(self.low), float(self.high), log=self.log, step=self.step)
        return None

    def candidates(self) -> list:
        """Values that bound what a trial can get: each choice, both ends of a range, the fixed value."""
        if self.kind == "categorical":
            return list(self.choices)
        if self.kind == "fixed":
            return [self.value]
        return [self.low, self.high]



def _setting_dims(source: str, section: str, prefix: str, settings: dict, accepted: set, names: tuple[str, str],
                  cls) -> list[Dimension]:
    """The dimensions of one ``section`` of settings (``[optimizer.X]``, ``[strategy.Y]``): each key
    must be one ``cls`` accepts (``names``: what a key is, what the list is called) and each candidate
    value must construct ``cls``; ``decision_rule`` takes ``auto`` or ``none``.

    Raises:
        ConfigurationError: one line naming the file, the section and the key.
    """
    dims = []
    for key, value in settings.items():
        label = f"{section} {key}"
        if key not in accepted:
            raise ConfigurationError(f"{source}: {label}: '{key}' is not {names[0]}; "
                                     f"{names[1]}: {', '.join(sorted(accepted)) or 'none'}")
        dim = _dimension(f"{prefix}.{key}", value)
        if key == "decision_rule":
            for v in dim.candidates():
                if v not in ("auto", "none"):
                    raise ConfigurationError(f"{source}: {label} = {v!r}: must be 'auto' or 'none'")
        else:
            check_setting(source, label, cls, key, dim.candidates(), lambda kw, c=cls: c(**kw))
        dims.append(dim)
    return dims

def _dimension(name: str, spec: Any, *, real: bool = False) -> Dimension:
    """A :class:`Dimension` of a schema-validated ``spec`` (``real``: a range is a float range even
    with integer bounds, e.g. the temperature)."""
    if isinstance(spec, list):
        return Dimension(name, "categorical", choices=list(spec))
    if isinstance(spec, RangeSpec):
        kind = "int" if spec.is_int and not real else "float"
        return Dimension(name, kind, low=spec.low, high=spec.high, log=spec.log, step=spec.step)
    return Dimension(name, "fixed", value=spec.value if isinstance(spec, FixedSpec) else spec)


@dataclass
class SearchSpace:
    """A validated search space for one stage.

    File format (TOML or YAML; every value is a list = categorical choice, ``{low, high[, log][,
    step]}`` = an int range when both bounds are integers, else a float range, anything else =
    a fixed value)::

        strategies = ["zero-shot", "minilm-logreg"]          # registry names of the stage
        [evaluation]
        minibatch_size = 8                                   # examples per pruning step
        [pruner]
        kind = "median"                                      # or "none"
        n_startup_trials = 4                                 # MedianPruner settings
        n_warmup_steps = 1
        [lm]                                                 # strategies that call the LM
        temperature = { low = 0.0, high = 1.0 }
        optimizer = ["none", "labeled", "bootstrap"]         # teleprompters for LLM strategies
        [optimizer.bootstrap]                                # settings of one teleprompter
        max_bootstrapped_demos = { low = 0, high = 4 }
        [fit]                                                # settings of a trainable strategy's own
        beta = { low = 0.5, high = 2.0 }                     # optimizer, where it accepts them
        [strategy.minilm-logreg]                             # constructor arguments of a strategy
        C = { low = 0.001, high = 1.0, log = true }

    Optuna parameter names: ``strategy``, ``optimizer``, ``temperature``, ``<optimizer>.<name>``,
    ``fit.<name>``, ``<strategy>.<name>``.

    Raises (from :meth:`from_dict`): ConfigurationError naming the file and the key.
    """

    stage: Any
    source: str
    raw: dict[str, Any]
    strategies: list[str]
    minibatch_size: int
    pruner: dict[str, Any]
    temperature: Dimension | None
    optimizers: Dimension | None
    optimizer_settings: dict[str, list[Dimension]] = field(default_factory=dict)
    fit_settings: list[Dimension] = field(default_factory=list)
    strategy_settings: dict[str, list[Dimension]] = field(default_factory=dict)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(json.dumps(self.raw, sort_keys=True, default=str).encode()).hexdigest()

    def make_pruner(self):
        """The Optuna pruner of the ``[pruner]`` section: ``MedianPruner(n_startup_trials,
        n_warmup_steps, ...)`` for ``kind = "median"`` (the default), ``NopPruner`` for ``"none"``."""
        import optuna

        if self.pruner["kind"] == "none":
            return optuna.pruners.NopPruner()
        return optuna.pruners.MedianPruner(**{k: v for k, v in self.pruner.items() if k != "kind"})

    @classmethod
    def load(cls, stage, path: str | Path | None) -> "SearchSpace":
        """Read ``path`` (``.toml``, ``.yaml``/``.yml``) or, when None, the stage's default space.

        Raises:
            DataError: unreadable, too large or unparsable file (with the line when the parser gives one).
            ConfigurationError: a key, value, strategy, teleprompter or setting the space language
                or the stage does not accept (one line: file, key, value).
        """
        if path is None:
            from personalign.sweeps.defaults import default_space

            return cls.from_dict(stage, default_space(stage), "the default search space")
        return cls.from_dict(stage, read_space_file(path), str(path))

    @classmethod
    def from_dict(cls, stage, raw: dict[str, Any], source: str = "search space") -> "SearchSpace":
        """Validate ``raw`` with the schema (:class:`~personalign.sweeps.space_schema.SpaceFile`),
        then against ``stage`` (:mod:`personalign.sweeps.space_check`)."""
        from personalign.optimizers import OPTIMIZERS

        spec = validate_space(raw, source)
        registry = stage.registry
        strategies = spec.strategies
        if strategies is None:  # absent: the stage's defaults
            strategies = stage.default_strategies
        if isinstance(strategies, str):
            strategies = [s.strip() for s in strategies.split(",") if s.strip()]
        if not strategies:
            raise ConfigurationError(f"{source}: strategies = {spec.strategies!r}: empty; list at least one of "
                                     f"{', '.join(registry.names())} (or omit it for the stage's defaults)")
        for name in strategies:
            check_name(source, "strategies", name, registry.__contains__,
                       lambda: f"unknown {registry.what}; available: {', '.join(registry.names())}")
        if len(set(strategies)) != len(strategies):
            raise ConfigurationError(f"{source}: strategies = {strategies!r}: lists a strategy twice")

        teleprompters = OPTIMIZERS.names(kind="teleprompter")

        def teleprompter(key: str, name: str) -> None:
            check_name(source, key, name, lambda n: n in teleprompters,
                       lambda: f"not a teleprompter; choose from none, {', '.join(teleprompters)}")

        temperature = None if spec.lm.temperature is None else _dimension("temperature", spec.lm.temperature,
                                                                          real=True)
        optimizers = None
        if spec.lm.optimizer is not None:
            choices = spec.lm.optimizer if isinstance(spec.lm.optimizer, list) else [spec.lm.optimizer]
            for name in choices:
                if name != "none":
                    teleprompter("[lm] optimizer", name)
            optimizers = _dimension("optimizer", list(choices))

        opt_settings: dict[str, list[Dimension]] = {}
        for opt_name, settings in spec.optimizer.items():
            teleprompter(f"[optimizer.{opt_name}]", opt_name)
            opt_cls = OPTIMIZERS.load(opt_name)
            accepted = (init_params(opt_cls) - TELEPROMPTER_COMMON) | {"decision_rule"}
            opt_settings[opt_name] = _setting_dims(source, f"[optimizer.{opt_name}]", opt_name, settings, accepted,
                                                   (f"a setting of {opt_name}", "settings"), opt_cls)

        fit_dims = []
        if spec.fit:
            fits = {name: registry.load(name, "optimizer") for name in registry.names()}  # a space may list only some
            fits = {name: c for name, c in fits.items() if c is not None}
            for key, value in spec.fit.items():
                dim = _dimension(f"fit.{key}", value)
                takers = [c for c in fits.values() if key in init_params(c) - {"seed"}]
                if not takers:
                    accepted_any = sorted(set().union(*(init_params(c) - {"seed"} for c in fits.values())))
                    raise ConfigurationError(f"{source}: [fit] {key}: accepted by no fit of a {stage.name} strategy; "
                                             f"accepted: {', '.join(accepted_any) or 'none'}")
                for fit_cls in dict.fromkeys(takers):
                    check_setting(source, f"[fit] {key}", fit_cls, key, dim.candidates(),
                                  lambda kw, c=fit_cls: c(**{**stage.fit_facts(c), **kw}))
                fit_dims.append(dim)

        strat_settings: dict[str, list[Dimension]] = {}
        for name, settings in spec.strategy.items():
            check_name(source, f"[strategy.{name}]", name, registry.__contains__,
                       lambda: f"unknown {registry.what}; available: {', '.join(registry.names())}")
            strat_cls = registry.load(name)
            strat_settings[name] = _setting_dims(source, f"[strategy.{name}]", name, settings, init_params(strat_cls),
                                                 (f"an argument of {name}", "arguments"), strat_cls)

        normalized = dict(raw)
        normalized["strategies"] = list(strategies)
        return cls(stage=stage, source=source, raw=normalized, strategies=list(strategies),
                   minibatch_size=spec.evaluation.minibatch_size, pruner=spec.pruner.model_dump(),
                   temperature=temperature, optimizers=optimizers, optimizer_settings=opt_settings,
                   fit_settings=fit_dims, strategy_settings=strat_settings)

    def dimensions(self) -> list[Dimension]:
        """Every dimension a trial may sample (the strategy first)."""
        dims = [Dimension("strategy", "categorical", choices=self.strategies)]
        dims += [d for d in (self.temperature, self.optimizers) if d is not None]
        for group in (*self.optimizer_settings.values(), self.fit_settings, *self.strategy_settings.values()):
            dims += group
        return dims

    # --- define-by-run sampling; the same function rebuilds a finished trial's configuration ---
    def configure(self, pick: Callable[[Dimension], Any]) -> "TrialConfig":
        """The configuration of one trial; ``pick(dimension)`` samples (``dim.sample(trial)``) or
        looks up (``dim.fixed(params)``) each dimension that applies."""
        registry = self.stage.registry
        strategy = pick(Dimension("strategy", "categorical", choices=self.strategies))
        info = registry.info(strategy)
        optimizer = None
        optimizer_settings: dict[str, Any] = {}
        fit_settings: dict[str, Any] = {}
        temperature = None
        if info.uses_lm and self.temperature is not None:
            temperature = pick(self.temperature)
        if info.uses_lm and not info.trainable and self.optimizers is not None:
            chosen = pick(self.optimizers)
            optimizer = None if chosen in (None, "none") else str(chosen)
            for dim in self.optimizer_settings.get(optimizer or "", []):
                optimizer_settings[dim.name.split(".", 1)[1]] = pick(dim)
        if info.trainable and self.fit_settings:
            opt_cls = registry.load(strategy, "optimizer")
            accepted = init_params(opt_cls) if opt_cls is not None else set()
            for dim in self.fit_settings:
                key = dim.name.split(".", 1)[1]
                if key in accepted:
                    fit_settings[key] = pick(dim)
        strategy_kwargs = {dim.name.split(".", 1)[1]: pick(dim) for dim in self.strategy_settings.get(strategy, [])}
        return TrialConfig(strategy, optimizer, optimizer_settings, fit_settings, strategy_kwargs, temperature)


@dataclass
class TrialConfig:
    """What one trial builds: strategy (+ constructor kwargs), its optimizer and settings, LM temperature."""

    strategy: str
    optimizer: str | None
    optimizer_settings: dict[str, Any]
    fit_settings: dict[str, Any]
    strategy_kwargs: dict[str, Any]
    temperature: float | None

    @property
    def name(self) -> str:
        return self.strategy + (f"@{self.optimizer}" if self.optimizer else "")

    def to_dict(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "optimizer": self.optimizer, "optimizer_settings": self.optimizer_settings,
                "fit_settings": self.fit_settings, "strategy_kwargs": self.strategy_kwargs,
                "temperature": self.temperature}

