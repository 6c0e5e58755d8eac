"""The search-space language of a sweep: dimensions, a validated :class:`SearchSpace`, a trial's
:class:`TrialConfig`.

A space file (TOML or YAML) lists, per section, what a trial may sample: every value is a list (a
categorical choice), ``{low, high[, log][, step]}`` (an int range when both bounds are integers,
else a float range) or anything else (a fixed value). Sampling is define-by-run
(:meth:`SearchSpace.configure`): a parameter is sampled only where it applies. The default space
of each stage is data in :mod:`personalign.sweep.defaults`.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from personalign.errors import ConfigurationError, DataError

_TOP_KEYS = {"strategies", "evaluation", "pruner", "lm", "optimizer", "fit", "strategy"}
_PRUNER_KEYS = {"kind", "n_startup_trials", "n_warmup_steps", "interval_steps", "n_min_trials"}
_TELEPROMPTER_COMMON = {"metric", "lm", "seed", "num_threads", "calls_per_run", "score", "label_field", "n_boot",
                        "on_event", "feedback_metric"}


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


def _dimension(source: str, name: str, spec: Any) -> Dimension:
    where = f"{source}: '{name}'"
    if isinstance(spec, list):
        if not spec:
            raise ConfigurationError(f"{where}: an empty list of choices")
        if not all(v is None or isinstance(v, (bool, int, float, str)) for v in spec):
            raise ConfigurationError(f"{where}: choices must be strings, numbers, booleans or null")
        return Dimension(name, "categorical", choices=list(spec))
    if isinstance(spec, dict):
        unknown = set(spec) - {"low", "high", "log", "step"}
        if unknown or not {"low", "high"} <= set(spec):
            raise ConfigurationError(f"{where}: a range is {{low, high[, log][, step]}}, got keys {sorted(spec)}")
        low, high = spec["low"], spec["high"]
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high)):
            raise ConfigurationError(f"{where}: low and high must be numbers")
        if low > high:
            raise ConfigurationError(f"{where}: low ({low}) > high ({high})")
        log = bool(spec.get("log", False))
        if log and low <= 0:
            raise ConfigurationError(f"{where}: a log range needs low > 0")
        kind = "int" if isinstance(low, int) and isinstance(high, int) else "float"
        return Dimension(name, kind, low=low, high=high, log=log, step=spec.get("step"))
    return Dimension(name, "fixed", value=spec)


def _init_params(cls) -> set[str]:
    """Keyword parameters of ``cls.__init__`` (not ``self``/``**kwargs``)."""
    sig = inspect.signature(cls.__init__)
    return {n for n, p in sig.parameters.items()
            if n != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}


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
            DataError: unreadable or unparsable file (with the line when the parser gives one).
            ConfigurationError: unknown section, key, strategy or optimizer; bad range.
        """
        if path is None:
            from personalign.sweep.defaults import default_space

            return cls.from_dict(stage, default_space(stage), "the default search space")
        from personalign.data.files import read_text

        path = Path(path)
        text = read_text(path, what="search space file", max_bytes=1024**2)
        if path.suffix.lower() == ".toml":
            import tomllib

            try:
                raw = tomllib.loads(text)
            except tomllib.TOMLDecodeError as exc:
                import re

                m = re.search(r"\s*\(at line (\d+), column (\d+)\)", str(exc))
                line = getattr(exc, "lineno", None) or (int(m.group(1)) if m else None)
                msg = str(exc)[: m.start()] + f" (column {m.group(2)})" if m else str(exc)
                raise DataError(path, line, None, f"invalid TOML: {msg}") from None
            except (RecursionError, ValueError) as exc:  # nesting too deep, an integer too long
                raise DataError(path, None, None, f"invalid TOML: {type(exc).__name__}") from None
        elif path.suffix.lower() in (".yaml", ".yml"):
            import yaml

            try:
                raw = yaml.safe_load(text) or {}
            except yaml.YAMLError as exc:
                mark = getattr(exc, "problem_mark", None)
                raise DataError(path, None if mark is None else mark.line + 1, None,
                                f"invalid YAML: {getattr(exc, 'problem', exc)}") from None
            except (RecursionError, ValueError) as exc:
                raise DataError(path, None, None, f"invalid YAML: {type(exc).__name__}") from None
        else:
            raise ConfigurationError(f"{path}: a search space is a .toml or .yaml file")
        if not isinstance(raw, dict):
            raise DataError(path, None, None, "the search space must be a mapping of sections")
        return cls.from_dict(stage, raw, str(path))

    @classmethod
    def from_dict(cls, stage, raw: dict[str, Any], source: str = "search space") -> "SearchSpace":
        from personalign.optimizers import OPTIMIZERS

        unknown = set(raw) - _TOP_KEYS
        if unknown:
            raise ConfigurationError(f"{source}: unknown section(s) {sorted(unknown)}; known: {sorted(_TOP_KEYS)}")
        registry = stage.registry
        strategies = raw.get("strategies")
        if strategies is None:  # absent: the stage's defaults
            strategies = [s.strip() for s in stage.default_strategies.split(",") if s.strip()]
        if isinstance(strategies, str):
            strategies = [s.strip() for s in strategies.split(",") if s.strip()]
        if not isinstance(strategies, list) or not all(isinstance(s, str) for s in strategies):
            raise ConfigurationError(f"{source}: 'strategies' must be a list of strategy names, got "
                                     f"{type(strategies).__name__} {strategies!r:.60}")
        if not strategies:
            raise ConfigurationError(f"{source}: 'strategies' is empty; list at least one of "
                                     f"{', '.join(registry.names())} (or omit it for the stage's defaults)")
        for name in strategies:
            try:
                registry.info(name)
            except ConfigurationError as exc:
                raise ConfigurationError(f"{source}: 'strategies': {exc}") from None
        if len(set(strategies)) != len(strategies):
            raise ConfigurationError(f"{source}: 'strategies' lists a strategy twice")

        def section(name: str) -> dict:
            value = raw.get(name) or {}
            if not isinstance(value, dict):
                raise ConfigurationError(f"{source}: [{name}] must be a table")
            return value

        evaluation = section("evaluation")
        if set(evaluation) - {"minibatch_size"}:
            raise ConfigurationError(f"{source}: [evaluation] knows only 'minibatch_size'")
        minibatch = evaluation.get("minibatch_size", 8)
        if not isinstance(minibatch, int) or minibatch < 1:
            raise ConfigurationError(f"{source}: [evaluation] minibatch_size must be an integer >= 1")
        pruner = {"kind": "median", "n_startup_trials": 4, "n_warmup_steps": 1, **section("pruner")}
        if pruner["kind"] not in ("median", "none"):
            raise ConfigurationError(f"{source}: [pruner] kind must be 'median' or 'none'")
        if set(pruner) - _PRUNER_KEYS:
            raise ConfigurationError(f"{source}: [pruner] unknown key(s) {sorted(set(pruner) - _PRUNER_KEYS)}")

        lm = section("lm")
        if set(lm) - {"temperature", "optimizer"}:
            raise ConfigurationError(f"{source}: [lm] knows only 'temperature' and 'optimizer'")
        temperature = _dimension(source, "temperature", lm["temperature"]) if "temperature" in lm else None
        optimizers = None
        if "optimizer" in lm:
            choices = lm["optimizer"] if isinstance(lm["optimizer"], list) else [lm["optimizer"]]
            for name in choices:
                if name != "none" and (name not in OPTIMIZERS or OPTIMIZERS.info(name).kind != "teleprompter"):
                    raise ConfigurationError(f"{source}: [lm] optimizer '{name}' is not a teleprompter; choose from "
                                             f"none, {', '.join(OPTIMIZERS.names(kind='teleprompter'))}")
            optimizers = _dimension(source, "optimizer", list(choices))

        opt_settings: dict[str, list[Dimension]] = {}
        for opt_name, settings in section("optimizer").items():
            if opt_name not in OPTIMIZERS or OPTIMIZERS.info(opt_name).kind != "teleprompter":
                raise ConfigurationError(f"{source}: [optimizer.{opt_name}]: not a teleprompter; known: "
                                         f"{', '.join(OPTIMIZERS.names(kind='teleprompter'))}")
            if not isinstance(settings, dict):
                raise ConfigurationError(f"{source}: [optimizer.{opt_name}] must be a table")
            accepted = (_init_params(OPTIMIZERS.load(opt_name)) - _TELEPROMPTER_COMMON) | {"decision_rule"}
            for key in settings:
                if key not in accepted:
                    raise ConfigurationError(f"{source}: [optimizer.{opt_name}] '{key}' is not a setting of "
                                             f"{opt_name}; settings: {', '.join(sorted(accepted))}")
            opt_settings[opt_name] = [_dimension(source, f"{opt_name}.{k}", v) for k, v in settings.items()]

        fit = section("fit")
        fit_dims = [_dimension(source, f"fit.{k}", v) for k, v in fit.items()]
        if fit:
            accepted_any: set[str] = set()
            for name in registry.names():  # every strategy of the stage: a space may list only some
                opt_cls = registry.load(name, "optimizer")
                if opt_cls is not None:
                    accepted_any |= _init_params(opt_cls) - {"seed"}
            bad = sorted(set(fit) - accepted_any)
            if bad:
                raise ConfigurationError(f"{source}: [fit] '{bad[0]}' is accepted by no fit of a {stage.name} "
                                         f"strategy; accepted: {', '.join(sorted(accepted_any)) or 'none'}")

        strat_settings: dict[str, list[Dimension]] = {}
        for name, settings in section("strategy").items():
            try:
                registry.info(name)
            except ConfigurationError as exc:
                raise ConfigurationError(f"{source}: [strategy.{name}]: {exc}") from None
            if not isinstance(settings, dict):
                raise ConfigurationError(f"{source}: [strategy.{name}] must be a table")
            accepted = _init_params(registry.load(name))
            for key in settings:
                if key not in accepted:
                    raise ConfigurationError(f"{source}: [strategy.{name}] '{key}' is not an argument of {name}; "
                                             f"arguments: {', '.join(sorted(accepted)) or 'none'}")
            strat_settings[name] = [_dimension(source, f"{name}.{k}", v) for k, v in settings.items()]

        normalized = dict(raw)
        normalized["strategies"] = list(strategies)
        return cls(stage=stage, source=source, raw=normalized, strategies=list(strategies), minibatch_size=minibatch,
                   pruner=pruner, temperature=temperature, optimizers=optimizers, optimizer_settings=opt_settings,
                   fit_settings=fit_dims, strategy_settings=strat_settings)

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
            accepted = _init_params(opt_cls) if opt_cls is not None else set()
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
