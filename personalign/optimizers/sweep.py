"""Optuna sweeps over the strategies of a stage: resumable, parallel, prunable, tracked.

A sweep searches one stage's strategies (and, per strategy, the teleprompter and its demo counts,
the LM temperature, the settings of a trainable strategy's fit and its constructor arguments) for
the best main metric (F1 for binary stages) on a labelled split. Each trial:

1. samples its parameters from the search space (:class:`SearchSpace`, a TOML/YAML file; the
   defaults are :data:`DEFAULT_SPACE`, also in ``examples/sweep_relevance.toml``), define-by-run,
   so a parameter is sampled only where it applies (``labeled.k`` only when the optimizer is
   ``labeled``);
2. builds the strategy from the stage registry and compiles it on the train split
   (:func:`personalign.compile_service.compile_program`: a teleprompter on a dev set held out from train
   by group, or the strategy's own fit) -- nothing is fitted on the evaluation split;
3. evaluates it on the evaluation split in minibatches (fixed order), reporting the running
   metric after each minibatch (``trial.report``) so that Optuna's ``MedianPruner`` stops trials
   that are below the median of earlier trials at the same step;
4. scores the full split with :func:`personalign.evaluation.stage_report` (metric with 95%
   bootstrap CIs) and records it in the trial's user attributes and in an MLflow child run; the
   trial's value is the stage's **set objective** (F1, F2, kappa: :mod:`personalign.objectives`).
   The default split is ``dev``: whole groups held out of train, so the study never selects on val.

Storage (``--storage``): ``sqlite:///runs/optuna.db`` (default), ``journal:PATH`` (Optuna
JournalStorage on a JournalFileBackend: an append-only log with file locks, good for several
processes on one machine or a shared file system) or any SQLAlchemy URL such as
``postgresql://user@host/db`` (the way to run many workers on many machines). SQLite is *not*
meant for many concurrent writers: it locks the whole database on every write; use it for one
process (threads included), journal files or PostgreSQL for several.

Resuming: rerunning the same command loads the study (``load_if_exists``) and runs only the
trials missing to reach ``n_trials`` COMPLETE + PRUNED trials, counting trials that live workers
are running. A killed worker leaves its trial RUNNING; it is detected as stale (a) at once when
the worker ran on this machine and its process is gone (host, boot id, pid and process start time
are recorded per trial), (b) for RDB storages by Optuna's heartbeat (``heartbeat_interval``,
``grace_period``) and (c) for journal storages by a heartbeat this module writes into the
trial's system attributes. A stale trial is set to FAIL and re-queued once with the same
parameters (:class:`RetryStaleTrial`, built on Optuna's ``RetryHeartbeatStaleTrialCallback``), and
its MLflow run is closed as KILLED. A worker never starts a trial beyond the budget: before each
trial it counts finished trials and trials running ahead of it; a trial that loses a race between
two processes is failed at once with ``user_attrs["surplus"] = True`` before doing any work.

Threads: ``n_jobs`` trials run in threads of ``study.optimize(n_jobs=...)``; every LM call is made
inside :func:`personalign.lm.use` (``dspy.context``), never ``dspy.configure``.

View the storage with ``optuna-dashboard sqlite:///runs/optuna.db`` (``pip install
optuna-dashboard``, in personalign's ``dev`` extra) and the runs with ``mlflow ui``.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import inspect
import json
import os
import socket
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from personalign.errors import ConfigurationError, DataError, PersonalignError, find_personalign_error

DEFAULT_STORAGE = "sqlite:///runs/optuna.db"
HEARTBEAT_INTERVAL = 10  # seconds between heartbeats of a running trial
GRACE_PERIOD = 40  # seconds without a heartbeat after which a trial of an unknown worker is stale

WORKER_ATTR = "personalign:worker"  # system attr: "host|boot_id|pid|start_ticks" of the worker process
HEARTBEAT_ATTR = "personalign:heartbeat"  # system attr (journal storages): unix time of the last heartbeat
_BOOKKEEPING = (WORKER_ATTR, HEARTBEAT_ATTR)
_RESULT_ATTRS = ("mlflow_run_id", "report", "lm_calls", "failures", "seconds", "compile", "surplus", "error")

def objective_name(stage, split: str) -> str:
    """The objective's name shown by Optuna (``study.metric_names``): ``"<metric> (<split>)"``,
    e.g. ``"f1 (val)"``."""
    return f"{stage.metric_name} ({split})"


# ----------------------------------------------------------------------------------------------
# Search space
# ----------------------------------------------------------------------------------------------

DEFAULT_SPACE: dict[str, Any] = {
    "strategies": ["zero-shot", "criteria", "minilm-cosine", "minilm-logreg", "bm25"],
    "evaluation": {"minibatch_size": 8},
    "pruner": {"kind": "median", "n_startup_trials": 4, "n_warmup_steps": 1},
    "lm": {"temperature": {"low": 0.0, "high": 1.0}, "optimizer": ["none", "labeled", "bootstrap"]},
    "optimizer": {
        "labeled": {"k": {"low": 0, "high": 8}},
        "bootstrap": {"max_bootstrapped_demos": {"low": 0, "high": 4}, "max_labeled_demos": {"low": 0, "high": 4},
                      "max_rounds": 1},
    },
    "fit": {"beta": {"low": 0.5, "high": 2.0}},
    "strategy": {"minilm-logreg": {"C": {"low": 0.001, "high": 1.0, "log": True}}},
}
"""The default search space of the relevance stage (= ``examples/sweep_relevance.toml``).

Other stages get the same sections with their registry's default strategies."""

_TOP_KEYS = {"strategies", "evaluation", "pruner", "lm", "optimizer", "fit", "strategy"}
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

    @classmethod
    def load(cls, stage, path: str | Path | None) -> "SearchSpace":
        """Read ``path`` (``.toml``, ``.yaml``/``.yml``) or, when None, the stage's default space.

        Raises:
            DataError: unreadable or unparsable file (with the line when the parser gives one).
            ConfigurationError: unknown section, key, strategy or optimizer; bad range.
        """
        if path is None:
            return cls.from_dict(stage, default_space(stage), "the default search space")
        from personalign.data._io import read_text

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
        if set(pruner) - {"kind", "n_startup_trials", "n_warmup_steps", "interval_steps", "n_min_trials"}:
            raise ConfigurationError(f"{source}: [pruner] unknown key(s) "
                                     f"{sorted(set(pruner) - {'kind', 'n_startup_trials', 'n_warmup_steps', 'interval_steps', 'n_min_trials'})}")

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
                                             f"none, {', '.join(OPTIMIZERS.names('teleprompter'))}")
            optimizers = _dimension(source, "optimizer", list(choices))

        opt_settings: dict[str, list[Dimension]] = {}
        for opt_name, settings in section("optimizer").items():
            if opt_name not in OPTIMIZERS or OPTIMIZERS.info(opt_name).kind != "teleprompter":
                raise ConfigurationError(f"{source}: [optimizer.{opt_name}]: not a teleprompter; known: "
                                         f"{', '.join(OPTIMIZERS.names('teleprompter'))}")
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
                opt_cls = _default_optimizer_class(registry, name)
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
            opt_cls = _default_optimizer_class(registry, strategy)
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


def _default_optimizer_class(registry, strategy: str):
    target = registry.info(strategy).optimizer
    if not target:
        return None
    import importlib

    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(module), cls)


def default_space(stage) -> dict[str, Any]:
    """The default search space of ``stage``: :data:`DEFAULT_SPACE` for relevance; for other
    stages the same LM/teleprompter/fit sections over the stage's default strategies."""
    if stage.name == "relevance":
        return copy.deepcopy(DEFAULT_SPACE)
    registry = stage.registry
    strategies = [s.strip() for s in stage.default_strategies.split(",") if s.strip()]
    space = {k: copy.deepcopy(v) for k, v in DEFAULT_SPACE.items() if k not in ("strategies", "strategy", "fit")}
    space["strategies"] = strategies
    accepted: set[str] = set()
    for name in strategies:
        opt_cls = _default_optimizer_class(registry, name)
        if opt_cls is not None:
            accepted |= _init_params(opt_cls)
    if "beta" in accepted:
        space["fit"] = copy.deepcopy(DEFAULT_SPACE["fit"])
    return space


# ----------------------------------------------------------------------------------------------
# Storage and worker liveness
# ----------------------------------------------------------------------------------------------

def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (safe to print and log)."""
    if url.startswith("journal:") or "://" not in url:
        return url
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 -- not a SQLAlchemy URL: leave as is, it has no password part
        return url


def open_storage(url: str, *, heartbeat_interval: int = HEARTBEAT_INTERVAL, grace_period: int = GRACE_PERIOD,
                 on_stale: Callable | None = None):
    """Optuna storage for ``url``.

    * ``journal:PATH`` -> ``JournalStorage(JournalFileBackend(PATH))`` (no Optuna heartbeat: this
      module writes its own, see :func:`stale_running_trials`);
    * ``sqlite:///PATH``, ``postgresql://...``, ``mysql://...`` -> ``RDBStorage`` with Optuna's
      heartbeat (``heartbeat_interval``, ``grace_period``) and ``on_stale`` as its
      ``heartbeat_stale_trial_callback`` (the new name of ``failed_trial_callback``).

    Raises:
        ConfigurationError: unsupported URL, missing database driver, unreachable database.
    """
    import optuna

    if url.startswith("journal:"):
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend

        path = Path(url[len("journal:"):]).expanduser()
        if not str(path) or str(path) == ".":
            raise ConfigurationError("--storage journal:PATH needs a file path, e.g. journal:runs/optuna.journal")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            return JournalStorage(JournalFileBackend(str(path)))
        except OSError as exc:
            raise ConfigurationError(f"cannot use journal file {path}: {exc.strerror or exc}") from None
    if "://" not in url:
        raise ConfigurationError(f"unsupported --storage '{url}': use sqlite:///PATH, journal:PATH or "
                                 "postgresql://USER@HOST/DB")
    engine_kwargs: dict[str, Any] = {}
    if url.startswith("sqlite:"):
        db = url.split("sqlite:///", 1)[-1] if url.startswith("sqlite:///") else ""
        if db and db != ":memory:":
            Path(db).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine_kwargs["connect_args"] = {"timeout": 60}  # threads wait for SQLite's lock instead of failing
    else:
        engine_kwargs["pool_pre_ping"] = True
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs, heartbeat_interval=heartbeat_interval,
                                              grace_period=grace_period, heartbeat_stale_trial_callback=on_stale)
    except ImportError as exc:
        raise ConfigurationError(f"cannot open --storage {redact_url(url)}: database driver missing ({exc}); for "
                                 "PostgreSQL: pip install 'personalign[postgres]' (psycopg)") from None
    except Exception as exc:  # noqa: BLE001 -- SQLAlchemy raises many types for bad URLs / servers
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise ConfigurationError(f"cannot open --storage {redact_url(url)}: {type(exc).__name__}: {first}") from None


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()[:8]
    except OSError:
        return "-"


def _start_ticks(pid: int) -> str:
    """Start time of process ``pid`` in clock ticks since boot ("-" where /proc is missing)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "-"


def worker_id() -> str:
    """``host|boot_id|pid|start_ticks`` of this process: unique even when pids are reused."""
    return f"{socket.gethostname()}|{_boot_id()}|{os.getpid()}|{_start_ticks(os.getpid())}"


def worker_alive(worker: str | None) -> bool | None:
    """True/False for a worker of this machine (its process exists / is gone), None for another
    machine or an unparsable id (liveness then comes from heartbeats)."""
    if not worker:
        return None
    try:
        host, boot, pid_s, ticks = worker.split("|")
        pid = int(pid_s)
    except ValueError:
        return None
    if host != socket.gethostname() or boot != _boot_id():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state in ("Z", "X"):
            return False
    except (OSError, IndexError):
        pass
    return ticks == "-" or _start_ticks(pid) == ticks


def _has_optuna_heartbeat(storage) -> bool:
    from optuna.storages._heartbeat import is_heartbeat_enabled

    return is_heartbeat_enabled(storage)


def is_stale(trial, storage, *, grace_period: int = GRACE_PERIOD, now: float | None = None) -> bool:
    """Whether a RUNNING trial's worker is dead: known dead on this machine, or (journal storages)
    no heartbeat for ``grace_period`` seconds. RDB storages leave the latter to Optuna's heartbeat."""
    alive = worker_alive(trial.system_attrs.get(WORKER_ATTR))
    if alive is not None:
        return not alive
    if _has_optuna_heartbeat(storage):
        return False
    now = time.time() if now is None else now
    last = trial.system_attrs.get(HEARTBEAT_ATTR)
    if last is None and trial.datetime_start is not None:
        last = trial.datetime_start.timestamp()
    return last is not None and now - float(last) > grace_period


class RetryStaleTrial:
    """Called for a trial whose worker died (after it was set to FAIL): close its MLflow run as
    KILLED and re-queue it once (WAITING, same parameters) with Optuna's
    ``RetryHeartbeatStaleTrialCallback``; bookkeeping and result attributes are not copied."""

    def __init__(self, tracker=None, max_retry: int = 3) -> None:
        from optuna.storages import RetryHeartbeatStaleTrialCallback

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._retry = RetryHeartbeatStaleTrialCallback(max_retry=max_retry)
        self.tracker = tracker
        self.retried: list[int] = []
        self.closed_runs: list[str] = []

    def __call__(self, study, trial) -> None:
        run_id = trial.user_attrs.get("mlflow_run_id")
        if self.tracker is not None and run_id:
            try:
                self.tracker.end_run_by_id(run_id, "KILLED")
                self.closed_runs.append(run_id)
            except Exception as exc:  # noqa: BLE001 -- tracking must not stop the sweep
                print(f"warning: cannot close MLflow run {run_id}: {exc}", file=sys.stderr)
        clean = copy.deepcopy(trial)
        clean.user_attrs = {k: v for k, v in trial.user_attrs.items() if k not in _RESULT_ATTRS}
        clean.system_attrs = {k: v for k, v in trial.system_attrs.items() if k not in _BOOKKEEPING}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._retry(study, clean)
        self.retried.append(trial.number)


def fail_stale_trials(study, on_stale: RetryStaleTrial, *, grace_period: int = GRACE_PERIOD,
                      trials: list | None = None) -> list[int]:
    """Set every stale RUNNING trial of ``study`` to FAIL and call ``on_stale`` for it (once per
    trial: when another process failed it first, the state update is refused). Returns their numbers.
    ``trials``: a snapshot of ``study.get_trials()`` to reuse."""
    import optuna
    from optuna.trial import TrialState

    storage = study._storage
    failed = []
    now = time.time()
    trials = study.get_trials(deepcopy=False) if trials is None else trials
    for t in trials:
        if t.state != TrialState.RUNNING or not is_stale(t, storage, grace_period=grace_period, now=now):
            continue
        try:
            if not storage.set_trial_state_values(t._trial_id, state=TrialState.FAIL):
                continue
        except optuna.exceptions.UpdateFinishedTrialError:
            continue
        on_stale(study, storage.get_trial(t._trial_id))
        failed.append(t.number)
    return failed


@contextlib.contextmanager
def _journal_heartbeat(storage, trial_id: int, interval: int):
    """Write ``HEARTBEAT_ATTR`` every ``interval`` seconds while the block runs (journal storages)."""
    stop = threading.Event()

    def beat():
        while True:
            try:
                storage.set_trial_system_attr(trial_id, HEARTBEAT_ATTR, time.time())
            except Exception:  # noqa: BLE001 -- the trial may have finished meanwhile
                return
            if stop.wait(interval):
                return

    thread = threading.Thread(target=beat, name=f"heartbeat-{trial_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


# ----------------------------------------------------------------------------------------------
# The sweep
# ----------------------------------------------------------------------------------------------

class _Surplus(Exception):
    """This trial would exceed the budget (lost a race with another worker): failed without work."""


class TrialFailed(Exception):
    """A trial failed for a reason other than configuration (recorded as FAIL; the sweep continues)."""


def _counts(trials: list) -> dict[str, int]:
    from optuna.trial import TrialState

    out = {s.name: 0 for s in TrialState}
    for t in trials:
        out[t.state.name] += 1
    return out


def _finished(trials: list) -> int:
    from optuna.trial import TrialState

    return sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in trials)


def _live_running(trials: list, storage, grace_period: int, exclude_number: int | None = None,
                  below: int | None = None) -> list:
    """RUNNING trials of live workers (optionally only those numbered below ``below``)."""
    from optuna.trial import TrialState

    out = []
    now = time.time()
    for t in trials:
        if t.state != TrialState.RUNNING or t.number == exclude_number or (below is not None and t.number >= below):
            continue
        if not is_stale(t, storage, grace_period=grace_period, now=now):
            out.append(t)
    return out


def default_study_name(stage: str, data: Path, split: str, space: SearchSpace) -> str:
    return f"{stage}-{Path(data).stem}-{split}-{space.sha256[:8]}"


class Sweep:
    """One invocation of a sweep (see the module docstring). Use :func:`run_sweep`."""

    on_ready = None  # called once the inputs are validated, before anything is written

    def __init__(self, *, stage, space: SearchSpace, data: Path, split: str, train_split: str, n_trials: int,
                 storage: str, study_name: str, n_jobs: int, seed: int, lm: str | None, tracker, limit: int | None,
                 n_boot: int, progress: bool, heartbeat_interval: int, grace_period: int, export: bool,
                 max_failures: int | None):
        self.stage, self.space, self.data, self.split, self.train_split = stage, space, Path(data), split, train_split
        self.n_trials, self.storage_url, self.study_name = n_trials, storage, study_name
        self.n_jobs, self.seed, self.lm_name, self.tracker = n_jobs, seed, lm, tracker
        self.limit, self.n_boot, self.progress = limit, n_boot, progress
        self.heartbeat_interval, self.grace_period, self.export = heartbeat_interval, grace_period, export
        self.max_failures = max_failures if max_failures is not None else max(3, n_trials // 2)
        self.worker = worker_id()
        self.parent_run_id: str | None = None
        self._lock = threading.Lock()
        self._best: tuple[float, int, Any, dict] | None = None  # (value, number, program, compile_info)
        self._failures = 0
        self._ran: list[int] = []
        self._lm_calls = 0
        self._tracking_errors: list[str] = []
        self._surplus_seen = False

    # --- data, LM ---
    def _prepare_data(self) -> None:
        from personalign.compare import file_sha256

        self.data_sha256 = file_sha256(self.data)
        examples = self.stage.load(self.data)
        from personalign.stages import _split_of

        present = sorted({str(_split_of(ex)) for ex in examples})
        self.evalset = [ex for ex in examples if _split_of(ex) == self.split]
        self.trainset = [ex for ex in examples if _split_of(ex) == self.train_split]
        if self.split == "dev" and not self.evalset:  # whole groups of train, fixed (seed 0) for every worker
            from personalign.compile_service import dev_split

            self.trainset, self.evalset = dev_split(self.trainset, 0, self.stage.group_key)
            self.evalset = self.evalset or []
        if not self.evalset:
            raise DataError(self.data, None, "split", f"no examples in split '{self.split}' (splits present: "
                                                      f"{', '.join(present)})")
        if not self.trainset:
            raise DataError(self.data, None, "split", f"sweeps compile on the '{self.train_split}' split, which has "
                                                      f"no examples (splits present: {', '.join(present)})")
        if any(self.stage.registry.info(s).trainable for s in self.space.strategies):
            self.stage.check_fittable(self.trainset, self.data, self.train_split)
        # fixed order (independent of --seed, so every worker and every resume prunes on the same minibatches)
        # --limit: a sample stratified over the stage's groups, seed 0 for the same reason
        import random

        self.evalset = self.stage.limit(self.evalset, self.limit, 0)
        order = list(range(len(self.evalset)))
        random.Random(0).shuffle(order)
        self.evalset = [self.evalset[i] for i in order]
        self.uses_lm = any(self.stage.registry.info(s).uses_lm for s in self.space.strategies)
        if self.uses_lm:
            from personalign.lm import default_model

            self.lm_name = self.lm_name or default_model()

    def _prepare_lm(self) -> None:
        """Build (and for embedded models load and verify) the LM once, in the main thread."""
        self.lm_obj = None
        if self.uses_lm:
            from personalign.lm import make_lm

            self.lm_obj = make_lm(self.lm_name)

    # --- study ---
    def _open_study(self):
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.on_stale = RetryStaleTrial(self.tracker)
        storage = open_storage(self.storage_url, heartbeat_interval=self.heartbeat_interval,
                               grace_period=self.grace_period, on_stale=self.on_stale)
        self.storage = storage
        pruner = optuna.pruners.NopPruner()
        if self.space.pruner["kind"] == "median":
            kw = {k: v for k, v in self.space.pruner.items() if k != "kind"}
            pruner = optuna.pruners.MedianPruner(**kw)
        # The sampler is seeded per trial (seed + trial number; trial numbers are unique in a study):
        # concurrent workers and threads never replay one random stream, and a single worker with the
        # same seed and history proposes the same parameters (see personalign.optimizers._sampler).
        # multivariate TPE with group=True: the conditional space (parameters that exist only for some
        # strategies) is decomposed into groups of co-occurring parameters; constant_liar keeps
        # parallel workers from proposing the same point while a trial runs.
        from personalign.optimizers._sampler import PerTrialSeedSampler

        def tpe(seed: int):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True, constant_liar=True)

        sampler = PerTrialSeedSampler(tpe, seed=self.seed)
        try:
            study = optuna.create_study(study_name=self.study_name, storage=storage, direction="maximize",
                                        sampler=sampler, pruner=pruner, load_if_exists=True)
        except Exception as exc:  # noqa: BLE001
            ours = find_personalign_error(exc)
            if ours:
                raise ours from None
            raise ConfigurationError(f"cannot open study '{self.study_name}' in {redact_url(self.storage_url)}: "
                                     f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}") from None
        identity = {"stage": self.stage.name, "data_sha256": self.data_sha256, "split": self.split,
                    "train_split": self.train_split, "space_sha256": self.space.sha256, "limit": self.limit,
                    "lm": self.lm_name if self.uses_lm else None}
        attrs = study.user_attrs
        if "identity" in attrs and attrs["identity"] != identity:
            diff = sorted(k for k in identity if attrs["identity"].get(k) != identity[k])
            raise ConfigurationError(f"study '{self.study_name}' in {redact_url(self.storage_url)} was created with a "
                                     f"different {', '.join(diff)}; pass another --study-name to start a new study")
        if not study.metric_names:  # the dashboard's axis: "f1 (val)", not "Objective 0"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                study.set_metric_names([objective_name(self.stage, self.split)])
        if "identity" not in attrs:
            study.set_user_attr("identity", identity)
            study.set_user_attr("data", str(self.data))
            study.set_user_attr("space", self.space.raw)
            study.set_user_attr("lm", self.lm_name)
        return study

    # --- one trial ---
    def _claim(self, study, trial) -> list:
        """Raise :class:`_Surplus` when the budget is already taken by finished trials and trials
        running ahead of this one, or when this is a second retry of the same killed trial; else
        return the snapshot of the study's trials it looked at."""
        from optuna.trial import TrialState

        trials = study.get_trials(deepcopy=False)
        me = next(t for t in trials if t.number == trial.number)
        origin = me.system_attrs.get("failed_trial")
        if origin is not None:
            for t in trials:
                if (t.number < trial.number and t.system_attrs.get("failed_trial") == origin
                        and t.state in (TrialState.RUNNING, TrialState.COMPLETE, TrialState.PRUNED)):
                    raise _Surplus(f"trial {origin} is already being retried by trial {t.number}")
        ahead = _live_running(trials, study._storage, self.grace_period, exclude_number=trial.number,
                              below=trial.number)
        if _finished(trials) + len(ahead) >= self.n_trials:
            raise _Surplus(f"the budget of {self.n_trials} trials is taken")
        return trials

    def _compile(self, config: TrialConfig, lm):
        from personalign.compile_service import compile_program

        program = self.stage.registry.create(config.strategy, **config.strategy_kwargs)
        return compile_program(self.stage, config.strategy, config.optimizer, self.trainset, lm=lm, seed=self.seed,
                               optimizer_settings=config.optimizer_settings, fit_settings=config.fit_settings,
                               program=program)

    def _trial_lm(self, config: TrialConfig):
        if self.lm_obj is None or not self.stage.registry.info(config.strategy).uses_lm:
            return None
        if config.temperature is None:
            return self.lm_obj
        return self.lm_obj.copy(temperature=float(config.temperature))

    def objective(self, study, trial) -> float:
        import optuna

        storage = study._storage
        storage.set_trial_system_attr(trial._trial_id, WORKER_ATTR, self.worker)
        beat = (_journal_heartbeat(storage, trial._trial_id, self.heartbeat_interval)
                if not _has_optuna_heartbeat(storage) else contextlib.nullcontext())
        with beat:
            try:
                trials = self._claim(study, trial)
            except _Surplus as exc:
                trial.set_user_attr("surplus", True)
                trial.set_user_attr("error", str(exc))
                self._surplus_seen = True
                study.stop()
                raise
            return self._run_trial(study, trial, optuna, trials)

    def _run_trial(self, study, trial, optuna, trials: list) -> float:
        from personalign.evaluation import run_program, stage_report
        from personalign.objectives import objective_name, objective_score

        start = time.perf_counter()
        config = self.space.configure(lambda dim: dim.sample(trial))
        metric = objective_name(self.stage)
        same = self._same_params(trials, trial)
        retry_of = study._storage.get_trial(trial._trial_id).system_attrs.get("failed_trial")
        run_id = self._tracking(lambda: self.tracker.start_run_by_id(
            f"trial-{trial.number}", parent_run_id=self.parent_run_id,
            params={"trial": trial.number, **trial.params, "config": config.to_dict(),
                    **({"retry_of": retry_of} if retry_of is not None else {})},
            tags={"personalign.study": self.study_name, "personalign.worker": self.worker,
                  "personalign.trial": trial.number, "command": "sweep-trial", "stage": self.stage.name}))
        if run_id:
            trial.set_user_attr("mlflow_run_id", run_id)
        if same is not None:
            # identical parameters were scored already (deterministic for a given seed): reuse the
            # result instead of spending LM calls on it again
            report = {**(same.user_attrs.get("report") or {}), "lm_calls": 0, "seconds": 0.0}
            trial.set_user_attr("same_as", same.number)
            trial.set_user_attr("report", report)
            self._tracking(lambda: self.tracker.end_run_by_id(run_id, "FINISHED", metrics=report, tags={
                "optuna.state": "COMPLETE", "same_as_trial": same.number}))
            return float(same.value)
        status, end_metrics, end_tags = "FAILED", {}, {}
        lm = self._trial_lm(config)
        lm_calls = 0
        try:
            program, compile_info = self._compile(config, lm)
            lm_calls += int((compile_info or {}).get("actual_lm_calls") or (compile_info or {}).get("lm_calls") or 0)
            if compile_info:
                trial.set_user_attr("compile", {k: compile_info.get(k) for k in ("optimizer", "config", "train_score",
                                                                                  "actual_lm_calls", "seconds")})
            preds: list[Any] = []
            errors: list[str] = []
            size = self.space.minibatch_size
            for step, lo in enumerate(range(0, len(self.evalset), size)):
                batch = self.evalset[lo: lo + size]
                outcome = run_program(program, batch, inputs=self.stage.inputs, output=self.stage.output, lm=lm,
                                      description=config.name, progress=False)
                preds.extend(outcome.predictions)
                errors.extend(f"{e} (minibatch {step})" for e in outcome.errors)
                lm_calls += outcome.lm_calls
                running = objective_score(self.stage, self.evalset[: len(preds)], preds)
                trial.report(float(running), step)
                if len(preds) < len(self.evalset) and trial.should_prune():
                    seconds = round(time.perf_counter() - start, 3)
                    trial.set_user_attr("report", {f"{metric}_running": running, "n_scored": len(preds),
                                                   "lm_calls": lm_calls, "seconds": seconds})
                    status = "FINISHED"
                    end_metrics = {f"{metric}_running": running, "n_scored": len(preds), "lm_calls": lm_calls,
                                   "seconds": seconds}
                    end_tags = {"optuna.state": "PRUNED", "pruned_at_step": step}
                    raise optuna.TrialPruned(f"{metric} {running:.3f} after {len(preds)} examples")
            report = stage_report(self.stage, self.evalset, preds, n_boot=self.n_boot, seed=self.seed)
            summary = {k: v for k, v in report.items() if not isinstance(v, list) or (len(v) == 2 and k.endswith("_ci"))}
            value = objective_score(self.stage, self.evalset, preds)  # the stage's set objective (F1, F2, kappa)
            summary.update({"lm_calls": lm_calls, "failures": sum(p is None for p in preds), "objective": metric,
                            metric: value, "seconds": round(time.perf_counter() - start, 3)})
            trial.set_user_attr("report", summary)
            self._tracking(lambda: self.tracker.log_dict_to(run_id, {"predictions": [_plain(p) for p in preds],
                                                                     "errors": errors[:50]}, "predictions.json"))
            with self._lock:
                self._lm_calls += lm_calls
                if self._best is None or value > self._best[0]:
                    self._best = (value, trial.number, program, compile_info)
            status, end_metrics, end_tags = "FINISHED", summary, {"optuna.state": "COMPLETE"}
            return value
        except optuna.TrialPruned:
            with self._lock:
                self._lm_calls += lm_calls
            raise
        except PersonalignError:
            raise
        except Exception as exc:  # noqa: BLE001 -- a broken configuration fails this trial, not the sweep
            ours = find_personalign_error(exc)
            if ours is not None:
                raise ours from None
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            trial.set_user_attr("error", f"{type(exc).__name__}: {first}")
            end_tags = {"optuna.state": "FAIL", "error": f"{type(exc).__name__}: {first}"}
            raise TrialFailed(f"{config.name}: {type(exc).__name__}: {first}") from exc
        except BaseException:
            status = "KILLED"
            raise
        finally:
            self._tracking(lambda: self.tracker.end_run_by_id(run_id, status, metrics=end_metrics, tags=end_tags))

    @staticmethod
    def _same_params(trials: list, trial):
        """A COMPLETE trial of the snapshot ``trials`` with exactly this trial's parameters, or None."""
        from optuna.trial import TrialState

        params = trial.params
        for t in trials:
            if t.state == TrialState.COMPLETE and t.number != trial.number and t.params == params:
                return t
        return None

    def _tracking(self, fn):
        """Run one tracking call; failures are reported and counted, never fatal to the sweep."""
        if self.tracker is None:
            return None
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001
            msg = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"
            with self._lock:
                self._tracking_errors.append(msg)
            print(f"warning: MLflow tracking failed: {msg}", file=sys.stderr)
            return None

    # --- callbacks ---
    def _after_trial(self, study, frozen) -> None:
        from optuna.trial import TrialState

        with self._lock:
            self._ran.append(frozen.number)
            if frozen.state == TrialState.FAIL and not frozen.user_attrs.get("surplus"):
                self._failures += 1
            failures = self._failures
        if self.progress:
            self._print_trial(frozen)
        trials = study.get_trials(deepcopy=False)
        if fail_stale_trials(study, self.on_stale, grace_period=self.grace_period, trials=trials):
            trials = study.get_trials(deepcopy=False)
        if _finished(trials) + len(_live_running(trials, study._storage, self.grace_period)) >= self.n_trials:
            study.stop()
        elif failures > self.max_failures:
            print(f"stopping: {failures} failed trials in this run (limit {self.max_failures})", file=sys.stderr)
            study.stop()

    def _print_trial(self, t) -> None:
        metric = self.stage.metric_name
        report = t.user_attrs.get("report") or {}
        value = f"{metric} {t.value:.3f}" if t.value is not None else ""
        ci = report.get(f"{metric}_ci")
        if ci:
            value += f" [{ci[0]:.2f}, {ci[1]:.2f}]"
        extra = t.user_attrs.get("error", "")
        if "same_as" in t.user_attrs:
            extra = f"(same parameters as trial {t.user_attrs['same_as']}: result reused)"
        params = ", ".join(f"{k}={_short(v)}" for k, v in t.params.items())
        print(f"trial {t.number} {t.state.name} {value} {params} {extra}".rstrip(), file=sys.stderr, flush=True)

    # --- the whole invocation ---
    def run(self) -> dict[str, Any]:
        import optuna
        from optuna.trial import TrialState

        t0 = time.perf_counter()
        self._prepare_data()
        if self.on_ready is not None:
            self.on_ready()  # inputs valid: the caller may now create caches (before the study is opened)
        study = self._open_study()
        if self.tracker is not None:
            self.tracker.check()  # a bad tracking URI fails here, before any LM is loaded
        self._prepare_lm()
        closed_runs: list[str] = []
        if self.tracker is not None:
            def dead(tags):
                return worker_alive(tags.get("personalign.worker")) is False

            closed_runs = self._tracking(lambda: self.tracker.close_stale_runs(
                {"personalign.study": self.study_name}, dead)) or []
        reaped = fail_stale_trials(study, self.on_stale, grace_period=self.grace_period)
        trials = study.get_trials(deepcopy=False)
        before = _counts(trials)
        missing = self.n_trials - _finished(trials) - len(_live_running(trials, study._storage, self.grace_period))
        params = {"stage": self.stage.name, "data": str(self.data), "data_sha256": self.data_sha256,
                  "split": self.split, "train_split": self.train_split, "n_trials": self.n_trials,
                  "n_jobs": self.n_jobs, "seed": self.seed, "lm": self.lm_name, "study": self.study_name,
                  "storage": redact_url(self.storage_url), "space": self.space.raw, "limit": self.limit}

        def body():
            # Rounds of study.optimize(n_trials=missing): within one process exactly the missing
            # trials are created (never more, whatever the order in which threads finish); after a
            # round with failed trials the next round replaces them, up to max_failures. Across
            # processes, _after_trial stops a round once finished + live running trials reach the
            # budget, and _claim turns a trial that lost a race into a (workless) surplus FAIL.
            todo = missing
            optuna.logging.set_verbosity(optuna.logging.WARNING)
            while todo > 0 and self._failures <= self.max_failures:
                ran_before = len(self._ran)
                # teleprompters print to stdout: keep stdout for the result (--json). Redirected once
                # here, in the main thread, never inside worker threads.
                with contextlib.redirect_stdout(sys.stderr), warnings.catch_warnings():
                    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                    study.optimize(lambda trial: self.objective(study, trial), n_trials=todo,
                                   n_jobs=max(1, min(self.n_jobs, todo)), catch=(TrialFailed, _Surplus),
                                   callbacks=[self._after_trial], gc_after_trial=False, show_progress_bar=False)
                if len(self._ran) == ran_before or self._surplus_seen:
                    break
                snapshot = study.get_trials(deepcopy=False)
                todo = self.n_trials - _finished(snapshot) - len(_live_running(snapshot, study._storage,
                                                                                self.grace_period))

        tags = {"command": "sweep", "stage": self.stage.name, "personalign.study": self.study_name,
                "personalign.worker": self.worker}
        result: dict[str, Any] = {}
        if self.tracker is not None:
            with self.tracker.run(f"sweep-{self.study_name}", params=params, tags=tags):
                self.parent_run_id = getattr(self.tracker, "run_id", None)
                body()
                result = self._result(study, before, reaped, closed_runs, missing, t0)
                self._tracking(lambda: self.tracker.log_metrics(
                    {k: result[k] for k in ("n_complete", "n_pruned", "n_fail", "ran", "seconds", "lm_calls")}))
                if result.get("best"):
                    self._tracking(lambda: self.tracker.log_metrics({"best_" + k: v for k, v in result["best"].get(
                        "report", {}).items() if k != "n"}))
                for key in ("program_json", "prompt_file"):
                    if result.get(key):
                        self._tracking(lambda: self.tracker.log_artifact(result[key]))
        else:
            body()
            result = self._result(study, before, reaped, closed_runs, missing, t0)
        result["mlflow_parent_run_id"] = self.parent_run_id
        result["tracking_errors"] = self._tracking_errors[:20]
        return result

    def _result(self, study, before, reaped, closed_runs, missing, t0) -> dict[str, Any]:
        from optuna.trial import TrialState

        trials = study.get_trials(deepcopy=False)
        counts = _counts(trials)
        out: dict[str, Any] = {
            "stage": self.stage.name, "study": self.study_name, "storage": redact_url(self.storage_url),
            "data": str(self.data), "split": self.split, "n": len(self.evalset), "n_train": len(self.trainset),
            "metric": self.stage.metric_name, "n_trials": self.n_trials, "n_jobs": self.n_jobs, "seed": self.seed,
            "lm": self.lm_name if self.uses_lm else None, "worker": self.worker,
            "at_start": {k.lower(): v for k, v in before.items() if v}, "missing_at_start": max(0, missing),
            "ran": len(self._ran), "ran_trials": sorted(self._ran),
            "n_complete": counts["COMPLETE"], "n_pruned": counts["PRUNED"], "n_fail": counts["FAIL"],
            "n_running": counts["RUNNING"], "n_waiting": counts["WAITING"],
            "surplus": sum(1 for t in trials if t.user_attrs.get("surplus")),
            "stale_failed": sorted(set(reaped) | set(self.on_stale.retried)),
            "mlflow_runs_closed": sorted(set(closed_runs) | set(self.on_stale.closed_runs)),
            "lm_calls": self._lm_calls, "seconds": round(time.perf_counter() - t0, 3),
            "dashboard": f"optuna-dashboard {redact_url(self.storage_url)}" if "://" in self.storage_url else
                         f"optuna-dashboard {self.storage_url[len('journal:'):]}",
            "best": None,
        }
        complete = [t for t in trials if t.state == TrialState.COMPLETE]
        if complete:
            best = max(complete, key=lambda t: (t.value, -t.number))
            out["best"] = {"number": best.number, "value": best.value, "params": best.params,
                           "report": best.user_attrs.get("report")}
            if self.export:
                try:
                    out.update(self._export(best))
                except PersonalignError:
                    raise
                except Exception as exc:  # noqa: BLE001 -- the sweep's results stand without the export
                    out["export_error"] = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:300]}"
                    print(f"warning: could not export the best program: {out['export_error']}", file=sys.stderr)
        return out

    def _export(self, best) -> dict[str, Any]:
        """Save the best trial's program under ``runs/programs/`` (program.json + weights + prompt.md).

        The program compiled by this process is saved as is; a best trial run by another worker
        (or an earlier invocation) is recompiled from its parameters with the same seed."""
        import shutil

        from personalign.programs._export import prompt_text
        from personalign.programs._saved import PROGRAM_FILE, save_program
        from personalign.settings import runs_dir

        target = runs_dir() / "programs" / f"{self.stage.name}-sweep-{self.study_name}-trial{best.number}"
        out = {"program": str(target), "program_json": str(target / PROGRAM_FILE), "prompt_file": str(target / "prompt.md")}
        if (target / PROGRAM_FILE).exists() and (target / "prompt.md").exists():
            out["program_reused"] = True
            return out
        config = self.space.configure(lambda dim: dim.fixed(best.params))
        with self._lock:
            cached = self._best if self._best is not None and self._best[1] == best.number else None
        if cached is not None:
            program, compile_info = cached[2], cached[3]
            recompiled = False
        else:
            with contextlib.redirect_stdout(sys.stderr):
                program, compile_info = self._compile(config, self._trial_lm(config))
            recompiled = True
        info = dict(compile_info or {"optimizer": None})
        info.update({"data": str(self.data), "train_split": self.train_split, "sweep": {
            "study": self.study_name, "trial": best.number, "params": best.params, "recompiled": recompiled,
            "storage": redact_url(self.storage_url)}})
        uses_lm = self.stage.registry.info(config.strategy).uses_lm
        tmp = target.parent / f".{target.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        save_program(program, tmp, stage=self.stage.name, strategy=config.strategy,
                     lm=self.lm_name if uses_lm else None, compile_info=info, metrics=best.user_attrs.get("report"))
        (tmp / "prompt.md").write_text(prompt_text(program))
        if target.exists() and not (target / PROGRAM_FILE).exists():
            shutil.rmtree(target, ignore_errors=True)  # an unfinished export of a killed worker
        try:
            tmp.rename(target)
        except OSError:  # another worker exported it first
            shutil.rmtree(tmp, ignore_errors=True)
        out["program_recompiled"] = recompiled
        return out


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "model_dump"):
        return value.model_dump()
    return str(value)


def _short(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def run_sweep(stage: str, *, data: str | Path, space: str | Path | None = None, n_trials: int = 20,
              storage: str | None = None, study_name: str | None = None, n_jobs: int = 1, seed: int = 0,
              lm: str | None = None, split: str = "dev", train_split: str = "train", tracker=None,
              limit: int | None = None, n_boot: int = 1000, progress: bool = True,
              heartbeat_interval: int = HEARTBEAT_INTERVAL, grace_period: int = GRACE_PERIOD, export: bool = True,
              max_failures: int | None = None, on_ready=None) -> dict[str, Any]:
    """Run (or resume) an Optuna sweep of ``stage`` and return its summary (JSON-serializable).

    Args:
        stage: a stage name (:func:`personalign.stages.get_stage`).
        data: labelled JSONL of the stage with train and evaluation splits.
        space: search space file (TOML/YAML); None: the stage's default space.
        n_trials: total COMPLETE + PRUNED trials wanted in the study (a rerun adds only the missing).
        storage: Optuna storage URL (default ``sqlite:///<runs>/optuna.db``), ``journal:PATH`` or an
            RDB URL such as ``postgresql://user@127.0.0.1:5432/optuna``.
        study_name: default ``<stage>-<data stem>-<split>-<space sha256[:8]>``.
        n_jobs: trials run in parallel threads of this process.
        seed: seed of the TPE sampler (offset by the trials already in the study), of the
            optimizers and of the bootstrap CIs.
        lm: model string for LLM strategies (default ``local/smollm2-135m-instruct``).
        split: the split trials are scored on; ``"dev"`` (default, when the data has no ``dev``
            split): whole groups held out of ``train_split`` (seed 0), trials compile on the rest.
            Trial values are the stage's set objective (:mod:`personalign.objectives`).
        tracker: a :class:`personalign.tracking.Tracker` (None: no MLflow).
        limit: evaluate on a sample of ``limit`` examples of the split, stratified over the stage's
            groups (``Stage.limit_key``) and drawn with seed 0 whatever ``seed`` is (every worker
            and resume sees the same rows).
        heartbeat_interval / grace_period: seconds; see :func:`open_storage` and :func:`is_stale`.
        export: save the best trial's program under ``runs/programs/`` at the end.
        max_failures: stop this invocation after this many failed trials (default max(3, n_trials // 2)).
        on_ready: called once the inputs are validated, before the study or any cache is written.

    Returns:
        ``{"stage", "study", "storage", "n_trials", "n_complete", "n_pruned", "n_fail", "ran",
        "best": {"number", "value", "params", "report"}, "program", "prompt_file", ...}``.

    Raises:
        ConfigurationError: bad flag, space, storage or model; a study created with other data.
        DataError: unreadable data or an empty split.
    """
    from personalign.settings import runs_dir
    from personalign.stages import get_stage

    if n_trials < 1:
        raise ConfigurationError(f"--n-trials must be >= 1, got {n_trials}")
    if n_jobs < 1:
        raise ConfigurationError(f"--n-jobs must be >= 1, got {n_jobs}")
    if limit is not None and limit < 1:
        raise ConfigurationError(f"--limit must be >= 1, got {limit}")
    if heartbeat_interval < 1 or grace_period <= heartbeat_interval:
        raise ConfigurationError("the grace period must be longer than the heartbeat interval (both >= 1 s)")
    st = get_stage(stage)
    from personalign.data._io import check_input

    data = check_input(data, allow_dir=True)
    sp = SearchSpace.load(st, space)
    url = storage or f"sqlite:///{runs_dir() / 'optuna.db'}"
    name = study_name or default_study_name(st.name, data, split, sp)
    sweep = Sweep(stage=st, space=sp, data=data, split=split, train_split=train_split, n_trials=n_trials, storage=url,
                  study_name=name, n_jobs=n_jobs, seed=seed, lm=lm, tracker=tracker, limit=limit, n_boot=n_boot,
                  progress=progress, heartbeat_interval=heartbeat_interval, grace_period=grace_period, export=export,
                  max_failures=max_failures)
    sweep.on_ready = on_ready
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return {"started": started, **sweep.run()}


__all__ = ["DEFAULT_SPACE", "DEFAULT_STORAGE", "SearchSpace", "TrialConfig", "RetryStaleTrial", "open_storage",
           "fail_stale_trials", "is_stale", "worker_alive", "worker_id", "redact_url", "run_sweep",
           "default_study_name"]
