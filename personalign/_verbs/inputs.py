"""What every verb does first, once, at the edge: resolve the stage, load the data, parse the
strategies, resolve the model. Nothing below a verb re-resolves any of them.

* **Data** is a path the stage's loader reads, or a list of ``dspy.Example`` (each with a
  ``split``), loaded once into a :class:`Data`: the examples, what the records call it (the path,
  or ``"examples (a list of N)"``) and its sha256.
* **The model** is a model string, a ``dspy.LM`` (used as it is, its settings kept) or None (the
  default, :func:`personalign.lm.default_model`); ``api_base`` / ``lm_kwargs`` go to
  :func:`personalign.lm.make_lm` (no option travels through the environment).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from personalign.errors import ArgumentError, ConfigurationError, DataError


@dataclass
class Data:
    """A verb's labelled data, loaded once.

    Attributes:
        examples: every row (all splits), inputs marked.
        label: how records name it: the path, or ``"examples (a list of N)"`` (errors: :attr:`where`).
        sha256: the file's sha256, or that of the list's rows written as a JSONL file.
        path: the file (None for a list).
    """

    examples: list
    label: str
    sha256: str
    path: Path | None = None

    @property
    def where(self) -> str:
        """How an error names the data: the path, or ``examples`` (a list)."""
        return str(self.path) if self.path is not None else "examples"

    def split(self, name: str) -> list:
        """The rows of split ``name``.

        Raises:
            DataError: none (names the data and the splits present)."""
        from personalign.stages import split_of, splits_present

        rows = [ex for ex in self.examples if split_of(ex) == name]
        if not rows:
            raise DataError(self.where, None, "split",
                            f"no examples in split '{name}' (splits present: {splits_present(self.examples)})")
        return rows

    def rows(self, name: str) -> list:
        """The rows of split ``name``, possibly none."""
        from personalign.stages import split_of

        return [ex for ex in self.examples if split_of(ex) == name]


def check_counts(**counts: int | None) -> None:
    """Refuse a count argument out of its range, before anything is loaded or written: each must be
    an integer >= 1 (None: not given); ``n_boot`` at most :data:`personalign.settings.N_BOOT_MAX`,
    ``n_trials`` at most :data:`~personalign.settings.N_TRIALS_MAX`.

    Raises:
        ArgumentError: naming the argument (the CLI names its flag: ``--n-boot must be ...``).
    """
    from personalign.settings import N_BOOT_MAX, N_TRIALS_MAX

    highest = {"n_boot": N_BOOT_MAX, "n_trials": N_TRIALS_MAX}
    for arg, value in counts.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise ArgumentError(arg, f"must be an integer, got {value!r}")
        if value < 1:
            raise ArgumentError(arg, f"must be >= 1, got {value}")
        if arg in highest and value > highest[arg]:
            raise ArgumentError(arg, f"must be at most {highest[arg]:,}, got {value:,}")


def load_data(stage, data: Any) -> Data:
    """``data`` (a path or a list of ``dspy.Example``) for ``stage``, loaded once.

    Raises:
        ConfigurationError: no data given.
        DataError: an unreadable or malformed file (file, line, field); a list whose row lacks a
            ``split``, an input or the label (``examples[i]``, field).
    """
    if data is None:
        raise ConfigurationError("no data given: a labelled file or a list of dspy.Example")
    if isinstance(data, (list, tuple)):
        return _from_list(stage, list(data))
    from personalign.data.digest import file_sha256
    from personalign.data.files import check_input

    path = check_input(data, allow_dir=True)
    examples = stage.load(path)
    return Data(examples, str(data), file_sha256(path), Path(path))


def _from_list(stage, rows: list) -> Data:
    import dspy

    if not rows:
        raise DataError("examples", None, None, "an empty list")
    out = []
    digest = hashlib.sha256()
    for i, ex in enumerate(rows):
        if isinstance(ex, dict):
            ex = dspy.Example(**ex)
        if not isinstance(ex, dspy.Example):
            raise DataError(f"examples[{i}]", None, None, f"a {type(ex).__name__}, not a dspy.Example")
        for key in ("split", *stage.inputs, stage.label):
            if getattr(ex, key, None) is None and key not in ex:
                raise DataError(f"examples[{i}]", None, key, "missing")
        out.append(ex.with_inputs(*stage.inputs))
        digest.update((json.dumps(dict(ex.toDict()), default=str) + "\n").encode())  # as a JSONL file of them
    return Data(out, f"examples (a list of {len(out)})", digest.hexdigest())


@dataclass
class Model:
    """The model of a run: ``name`` (None when nothing calls a model), the ``dspy.LM`` and the
    calls it keeps in flight (``concurrency``)."""

    name: str | None
    lm: Any = field(default=None, repr=False)
    concurrency: int = 1
    max_cost: float | None = None  # dollars the run may spend (personalign.lm.spend.Budget)


def resolve_model(lm: Any = None, *, needed: bool, api_base: str | None = None, lm_kwargs: dict | None = None,
                  temperature: float | None = None, concurrency: int | None = None,
                  max_cost: float | None = None) -> Model:
    """The run's model, resolved once (the one place a verb chooses it; :func:`entered` enters it).

    ``lm``: a model string, a ``dspy.LM`` (used as it is; ``temperature`` given: a copy at it), or
    None for :func:`personalign.lm.default_model`. ``needed`` False (no strategy calls a model):
    ``Model(None)``, nothing built. ``concurrency``: calls in flight (1..256), None: 1 for the
    embedded engine, 32 for any other model (:func:`personalign.lm.flight.in_flight_default`).
    ``max_cost``: dollars the run may spend (``--max-cost``; :func:`personalign.lm.spend.budget`).

    Raises:
        UnknownModelError / ModelFileError / ConfigurationError: as :func:`personalign.lm.make_lm`;
        ArgumentError: a ``concurrency`` out of range; a ``max_cost`` negative, NaN, infinite or
            not a number.
    """
    from personalign.lm.flight import check_concurrency, in_flight_default
    from personalign.lm.spend import check_max_cost

    asked, budget = check_concurrency(concurrency), check_max_cost(max_cost)
    if not needed:
        return Model(None, concurrency=asked or 1)
    if lm is not None and not isinstance(lm, str):
        name = str(getattr(lm, "model", type(lm).__name__))
        return Model(name, lm if temperature is None else lm.copy(temperature=float(temperature)),
                     asked or in_flight_default(name), budget)
    from personalign.lm import default_model, make_lm

    name = lm or default_model()
    return Model(name, make_lm(name, temperature=temperature, api_base=api_base, **(lm_kwargs or {})),
                 asked or in_flight_default(name), budget)


@contextlib.contextmanager
def entered(model: Model, cost: list | None = None) -> Iterator[Any]:
    """The verb's work with its model entered once (:func:`personalign.lm.use`: the LM, its adapter
    and the calls in flight, which every layer below and every worker thread reads) and its calls
    counted for the model's speed (:func:`personalign._verbs.cost.measured`, ``cost`` as there),
    its dollars held to ``model.max_cost`` (:func:`personalign.lm.spend.budget`); yields the counter."""
    from personalign._verbs.cost import measured
    from personalign.lm import use
    from personalign.lm.spend import budget

    with use(model.lm, concurrency=model.concurrency), budget(model.max_cost, model.name), \
            measured(model.name, cost) as counter:
        yield counter


def parse_strategies(stage, spec: Any) -> list[tuple[str, str | None]]:
    """``"zero-shot,zero-shot@bootstrap,minilm-cosine"`` (or a list of names) as ``(strategy,
    optimizer or None)`` pairs, each checked by :func:`check_design`; None: the stage's defaults.

    Raises:
        ConfigurationError: an empty list, a name listed twice, an unknown strategy or optimizer, an
            optimizer on a strategy it cannot compile (with the closest name when one is close).
    """
    items = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec)] if spec is not None \
        else [s.strip() for s in stage.default_strategies.split(",")]
    items = [s for s in items if s]
    if not items:
        raise ArgumentError("strategies", f"is empty; available: {', '.join(stage.registry.names())}")
    if len(set(items)) != len(items):
        raise ConfigurationError(f"a strategy is listed twice: {','.join(items)}")
    out = []
    for item in items:
        name, _, opt = item.partition("@")
        check_design(stage, name, opt or None, saving=False)
        out.append((name, opt or None))
    return out


def check_design(stage, strategy: str, optimizer: str | None, *, saving: bool) -> Any:
    """The strategy's registry entry, after checking ``optimizer`` can compile it (and, when
    ``saving``, that the compiled program can be saved).

    Raises:
        ConfigurationError: unknown strategy/optimizer (with the closest name); a teleprompter on a
            fitted strategy; an optimizer on an LM-free strategy; an optimizer whose programs
            cannot be saved (``saveable = False``) when ``saving``.
    """
    from personalign.optimizers import OPTIMIZERS

    info = _known(stage.registry, strategy, f"{stage.name} strategy")
    if optimizer is None:
        return info
    entry = _known(OPTIMIZERS, optimizer, "optimizer")
    label = f"{strategy}@{optimizer}"
    if entry.kind == "teleprompter" and info.trainable:
        raise ConfigurationError(f"'{label}': teleprompters compile LLM strategies; '{strategy}' is fitted by its own "
                                 f"optimizer (use '{strategy}')")
    if not info.uses_lm:
        raise ConfigurationError(f"'{label}': '{strategy}' calls no LM; it has nothing for an optimizer to compile")
    if saving and not getattr(OPTIMIZERS.load(optimizer), "saveable", True):
        raise ConfigurationError(f"{optimizer} programs keep their state in memory and cannot be saved; use "
                                 f"`compare --strategies {label}` to evaluate them")
    return info


def _known(registry, name: str, what: str) -> Any:
    import difflib

    try:
        return registry.info(name)
    except ConfigurationError as exc:
        close = difflib.get_close_matches(name, list(registry.names()), n=1)
        if close and name not in registry:
            raise ConfigurationError(f"{exc}; did you mean '{close[0]}'?") from None
        raise


def check_capabilities(stage, strategies, model: "Model") -> None:
    """Before any work: every strategy that reads next-token log-probabilities (its class says
    ``needs_logprobs``) has a model that gives them (an embedded one, or an endpoint whose
    capability check found ``top_logprobs``).

    Raises:
        ConfigurationError: one line naming the strategy, the model and what is missing."""
    if model.name is None:
        return
    from personalign.lm.serving import require_top_logprobs

    for name in strategies:
        if getattr(stage.registry.load(name), "needs_logprobs", False):
            require_top_logprobs(model.name, f"{name} (yes-probability scoring)")


def names_of(specs: Sequence[tuple[str, str | None]]) -> list[str]:
    """``["zero-shot", "zero-shot@bootstrap"]`` of ``(strategy, optimizer)`` pairs."""
    return [f"{n}@{o}" if o else n for n, o in specs]


def with_module(stage, module: Any, name: str | None = None) -> tuple[Any, str]:
    """``(stage', name)``: ``stage`` with the user's ``dspy.Module`` instance added as a strategy
    ``name`` (default: its class name): an LLM strategy unless the module says ``uses_lm = False``,
    not trainable (a teleprompter may compile it)."""
    name = name or type(module).__name__
    return stage.with_strategy(name, lambda: module.deepcopy(), uses_lm=bool(getattr(module, "uses_lm", True)),
                               summary=f"user module {type(module).__name__}"), name


__all__ = ["Data", "Model", "check_capabilities", "check_design", "load_data", "names_of", "parse_strategies", "resolve_model",
           "with_module"]
