"""What a run will cost, projected before its first model call: the
:class:`~personalign._verbs.cost.Cost` of ``compare``, ``compile``, ``eval`` / ``predict`` and
``sweep``.

What is counted:

* **expected calls, not the worst case**: no retry (an adapter's fallback call, a failed call
  tried again), a bootstrap that stops once it has its demos
  (:meth:`personalign.optimizers.base.Optimizer.expected_lm_calls`), a decision rule's extra
  scoring only for a program whose predictions carry a score; a sweep's trials at the mean of its
  space's configurations. The worst case is kept apart as the upper bound.
* **a forward pass once**: the strategies that read the embedded model's yes/no pass of a row
  (``yes-prob``, ``yes-prob-rank``, ``ensemble-rank``, ``lm-probe``, a stage's generic ``yes-prob``)
  share it (:mod:`personalign.lm.forward` keeps it for the run): the first strategy that reads a
  row's pass, in any fold, counts it; the later ones count it as shared.
* **what a cache holds, apart**: each pass looked up by its key in memory and in the forward-pass
  cache (:func:`personalign.lm.scoring.margin_lookup`); each generation call of a program known
  before the run (an uncompiled strategy, a saved program) by a probe of DSPy's cache that stops
  at the lookup (:func:`personalign.lm.ledger.first_call_cached`); a compile, the evaluation of a
  compiled program and a sweep trial by the keys they asked for when they last ran on this cache
  (:func:`personalign.lm.ledger.lookup`). Calls that cannot be looked up are new at most.
"""

from __future__ import annotations

import itertools
import json
from typing import Sequence

from personalign._verbs.cost import Cost, StrategyCost
from personalign.lm.ledger import rows_of


def _inner(program):
    """A program under its decision rule (:class:`personalign.programs.decision.DecidedProgram`)."""
    while getattr(program, "undecided", None) is not None:
        program = program.undecided
    return program


def row_calls(program, lm, examples: Sequence = (), *, expected: bool = True) -> tuple[int, str]:
    """``(calls per row, kind)`` of ``program`` (a class or an instance): a scorer reading
    next-token log-probabilities makes one forward pass; a DSPy program its predictor calls, times
    the adapter's factor when not ``expected`` (a retry: :func:`personalign.optimizers.budget.calls_per_run`)."""
    from personalign.optimizers.budget import calls_per_run, lm_adapter_factor

    if getattr(_inner(program), "needs_logprobs", False):
        return 1, "forward"
    return calls_per_run(program, 1 if expected else lm_adapter_factor(lm), examples=examples), "generation"


class Passes:
    """The forward passes of one run: each counted by the first strategy that reads it, looked up
    in the caches once."""

    def __init__(self, model: str | None, lm) -> None:
        self.model, self.lm = model, lm
        self.owner: dict = {}  # pass key -> the strategy that counts it
        self._shared: set = set()  # (strategy, pass key) counted as shared
        self._known: dict[str, tuple] = {}

    def _lookup(self, program, example) -> tuple:
        from personalign.lm.scoring import margin_lookup

        messages = getattr(_inner(program), "messages", None)
        if callable(messages) and self.model:
            try:
                asked = messages(example)
                memo = json.dumps(asked, sort_keys=True, default=str)
                if memo not in self._known:
                    self._known[memo] = margin_lookup(self.model, asked, self.lm)
                return self._known[memo]
            except Exception:  # noqa: BLE001 -- a prompt that cannot be rendered: one pass, not cached
                pass
        row = example.toDict() if hasattr(example, "toDict") else example
        return (type(_inner(program)).__qualname__, json.dumps(row, sort_keys=True, default=str)), False

    def count(self, label: str, program, examples: Sequence) -> tuple[int, int, int]:
        """``(passes first read here, of them cached, passes another strategy reads first)`` of
        ``program`` (of strategy ``label``) over ``examples``."""
        first = cached = shared = 0
        for ex in examples:
            key, hit = self._lookup(program, ex)
            owner = self.owner.get(key)
            if owner is None:
                self.owner[key] = label
                first += 1
                cached += bool(hit)
            elif owner != label and (label, key) not in self._shared:
                self._shared.add((label, key))
                shared += 1
        return first, cached, shared


def _probe_rows(inputs: Sequence[str], program, examples: Sequence, lm) -> tuple[int, int]:
    """``(rows whose first call DSPy's cache holds, rows that cannot be looked up)``."""
    from personalign.lm.ledger import first_call_cached

    hits = unknown = 0
    for ex in examples:
        found = first_call_cached(program, {k: getattr(ex, k, None) for k in inputs}, lm)
        hits += found is True
        unknown += found is None
    return hits, unknown


def _known(out: StrategyCost, name: str | None, estimate: int, checked: bool) -> int:
    """The calls of a unit of work (:func:`personalign.lm.ledger.lookup` of ``name``): those it
    made when it last ran here, the cached ones added to ``out``; else ``estimate``, unchecked
    unless the ledger could be read (``checked``: a unit never run here makes new calls)."""
    from personalign.lm.ledger import lookup

    found = lookup(name)
    if found is None:
        out.unchecked += 0 if checked else estimate
        return estimate
    out.cached += found[0]
    return found[0] + found[1]


def _strategy(stage, name: str, optimizer: str | None, folds: Sequence, *, lm, seed: int, passes: Passes,
              repeats: int = 1, settings: dict | None = None) -> StrategyCost:
    """One strategy over ``folds`` (``.train``, ``.test``): each fold's fit or compile, then its
    evaluation (``repeats`` runs when the LM samples)."""
    from personalign.lm.ledger import checkable
    from personalign.optimizers.plan import compile_fingerprint, evaluation_fingerprint, projected_calls

    label = f"{name}@{optimizer}" if optimizer else name
    runs = repeats if float((getattr(lm, "kwargs", None) or {}).get("temperature") or 0.0) > 0 else 1
    info = stage.registry.info(name)
    if not info.uses_lm:
        return StrategyCost(label)
    program = stage.registry.create(name)
    per_row, kind = row_calls(program, lm, [ex for f in folds for ex in f.test])
    out = StrategyCost(label, kind=kind)
    fits = bool(optimizer or info.trainable)
    phase = "compiling" if optimizer and not info.trainable else "fitting"
    if kind == "forward":
        out.tokens = _tokens(program, [ex for f in folds for ex in (f.test or f.train)], lm, label)
        for f in folds:
            for rows, where in (((f.train if fits else []), phase), (f.test, "evaluation")):
                first, cached, shared = passes.count(label, program, rows)
                setattr(out, where, getattr(out, where) + first)
                out.cached, out.shared = out.cached + cached, out.shared + shared
        return out
    out.tokens = _tokens(program, [ex for f in folds for ex in (f.test or f.train)], lm, label)
    checked, upper = checkable(lm), 0
    for f in folds:
        unit = None
        if fits and f.train:
            kw = dict(lm=lm, seed=seed, optimizer_settings=settings)
            unit = compile_fingerprint(stage, name, optimizer, f.train, **kw)
            calls = _known(out, unit, projected_calls(stage, name, optimizer, f.train, expected=True, **kw), checked)
            setattr(out, phase, getattr(out, phase) + calls)
            upper += max(calls, projected_calls(stage, name, optimizer, f.train, **kw))
        calls = len(f.test) * per_row * runs
        if unit is not None:
            calls = _known(out, evaluation_fingerprint(unit, f.test, repeats), calls, checked)
        elif runs == 1:
            hits, unknown = _probe_rows(stage.inputs, program, f.test, lm)
            out.cached += hits * per_row
            out.unchecked += unknown * per_row
        elif not checked:
            out.unchecked += calls
        out.evaluation += calls
        upper += max(calls, len(f.test) * row_calls(program, lm, f.test, expected=False)[0] * runs)
    out.upper_bound = upper
    return out


def _tokens(program, examples: Sequence, lm, label: str = "") -> dict | None:
    """The tokens of one call of ``program`` (:func:`personalign.lm.spend.sample_tokens`; its output
    at the mean an earlier run of the strategy, else of the model, measured), None when they cannot
    be counted."""
    from personalign._verbs.cost import speed_key
    from personalign.lm.speed import known_speed
    from personalign.lm.spend import sample_tokens

    model = getattr(lm, "model", None)
    known = [((known_speed(k) or {}).get("generation") or {}).get("output_tokens_per_call")
             for k in (speed_key(model, label), model) if k]
    try:
        return sample_tokens(program, examples, model, lm, next((m for m in known if m is not None), None))
    except Exception:  # noqa: BLE001 -- a count is an estimate: never a reason to stop the run
        return None


def _own_speeds(rows: list[StrategyCost], model: str | None) -> list[StrategyCost]:
    """Each row with its strategy's own speed on ``model``, when it ran there before."""
    from personalign._verbs.cost import speed_key
    from personalign.lm.speed import known_speed

    for row in rows:
        row.speed = known_speed(speed_key(model, row.name)) if model else None
    return rows


def project_compare(stage, specs, folds, *, lm, model: str | None, seed: int, repeats: int = 1) -> Cost:
    """The calls of :func:`personalign.compare`: per strategy, each fold's fit or compile and its
    evaluation (``repeats`` runs when the LM samples); a forward pass once in the run, by the first
    strategy that reads it (:class:`Passes`)."""
    from personalign.lm.speed import known_speed

    passes = Passes(model, lm)
    rows = [_strategy(stage, name, opt, folds, lm=lm, seed=seed, passes=passes, repeats=repeats) for name, opt in specs]
    return _remembered(Cost("compare", model, _own_speeds(rows, model), speed=known_speed(model)), stage, lm, seed,
                       repeats,
                       [list(s) for s in specs], [[rows_of(f.train), rows_of(f.test)] for f in folds])


def _remembered(cost: Cost, stage, lm, *parts) -> Cost:
    """``cost`` named for its command (the stage, the model and ``parts``), with the seconds of
    other work the same command took when it last ran here (:func:`personalign.lm.ledger.seconds_of`)."""
    from personalign.lm.ledger import fingerprint, seconds_of

    cost.name = fingerprint(cost.verb, stage.name, stage.signature_record(), getattr(lm, "model", None),
                            getattr(lm, "kwargs", None), *parts)
    cost.work = seconds_of(cost.name)
    return cost


class _Rows:
    def __init__(self, train: list, test: list) -> None:
        self.train, self.test = train, test


def project_compile(stage, strategy: str, optimizer: str | None, trainset: list, *, lm, model: str | None,
                    seed: int) -> Cost:
    """The calls of :func:`personalign.compile`: the strategy's fit or its teleprompter's compile."""
    from personalign.lm.speed import known_speed

    row = _strategy(stage, strategy, optimizer, [_Rows(trainset, [])], lm=lm, seed=seed, passes=Passes(model, lm))
    return _remembered(Cost("compile", model, _own_speeds([row], model), speed=known_speed(model)), stage, lm, seed,
                       strategy, optimizer, rows_of(trainset))


def project_run(verb: str, label: str, program, examples: list, *, lm, model: str | None,
                inputs: Sequence[str] = ()) -> Cost:
    """The calls of running a loaded ``program`` over ``examples`` (``eval``, ``predict``); each
    row looked up in the caches (``inputs``: the stage's input fields)."""
    from personalign.lm.speed import known_speed

    if model is None:
        return Cost(verb, None, [StrategyCost(label)])
    per_row, kind = row_calls(program, lm, examples)
    out = StrategyCost(label, evaluation=len(examples) * per_row, kind=kind,
                       upper_bound=len(examples) * row_calls(program, lm, examples, expected=False)[0])
    if kind == "forward":
        out.evaluation, out.cached, _ = Passes(model, lm).count(label, program, examples)
    elif inputs:
        hits, unknown = _probe_rows(inputs, program, examples, lm)
        out.cached, out.unchecked = hits * per_row, unknown * per_row
    out.tokens = _tokens(program, examples, lm, label)
    return Cost(verb, model, [out], speed=known_speed(model))


def project_sweep(stage, space, trainset: list, evalset: list, trials: int, *, lm, model: str | None,
                  seed: int, first: int = 0, history: list | None = None) -> Cost:
    """The calls of a sweep's ``trials`` (numbered from ``first``): those a trial made when the same
    sweep ran on this cache before (:func:`personalign.sweeps.objective.trial_fingerprint`); else
    the configurations the default sampler will pick, replayed from the study's ``history`` (its
    finished trials; :func:`sampled_configs`: seeded per trial, so the same ones), a configuration
    already scored costing nothing; without a history (another sampler), each strategy's expected
    share, the sampler picking among the space's strategies alike, each at the mean of its
    optimizers and settings (the ends of each range). A forward pass counts once in the sweep. The
    upper bound: every trial at the most costly configuration."""
    from personalign.lm.ledger import lookup
    from personalign.lm.speed import known_speed
    from personalign.sweeps.objective import trial_fingerprint

    speed = known_speed(model)
    names = [trial_fingerprint(stage, space, trainset, evalset, seed, lm, n) for n in range(first, first + trials)]
    before = [lookup(n) for n in names] if lm is not None else []
    if before and all(b is not None for b in before):  # this sweep ran here: its trials' calls are known
        cached, new = sum(b[0] for b in before), sum(b[1] for b in before)
        return _remembered(Cost("sweep", model, [StrategyCost("trials run here before", evaluation=cached + new,
                                                              cached=cached)], trials=trials, speed=speed),
                           stage, lm, names)
    rows, worst, passes = [], 0, Passes(model, lm)
    strategies = list(space.strategies)
    forward = [n for n in strategies if getattr(stage.registry.load(n), "needs_logprobs", False)]
    picked = 1 - (1 - len(forward) / max(1, len(strategies))) ** trials  # a forward strategy is picked at least once
    for name in strategies:
        costs = [_strategy(stage, name, opt, [_Rows(trainset, evalset)], lm=lm, seed=seed, passes=Passes(model, lm),
                           settings=settings) for opt, settings in _configurations(stage, space, name)]
        worst = max([worst, *(c.bound for c in costs)])
        if history is None:
            row = _strategy(stage, name, None, [_Rows(trainset, evalset)], lm=lm, seed=seed, passes=passes) \
                if name in forward else _mean(name, costs)
            rows.append(_scaled(row, picked if name in forward else trials / max(1, len(strategies))))
    if history is not None:
        rows = _replayed(stage, space, trainset, evalset, trials, history, lm=lm, seed=seed, passes=passes)
    return _remembered(Cost("sweep", model, _own_speeds(rows, model), trials=trials, speed=speed,
                            upper_bound=trials * worst), stage, lm, names)


def _configurations(stage, space, name: str) -> list[tuple[str | None, dict]]:
    """``(optimizer, settings)`` of a strategy that bound what a trial of it can cost: each
    optimizer choice, each end of each setting's range (at most 64 per optimizer)."""
    info = stage.registry.info(name)
    optimizers = [None]
    if info.uses_lm and not info.trainable and space.optimizers is not None:
        optimizers = [None if o in (None, "none") else str(o) for o in space.optimizers.candidates()]
    out = []
    for opt in optimizers:
        dims = space.optimizer_settings.get(opt or "", [])
        for values in itertools.islice(itertools.product(*(d.candidates() for d in dims)), 64):
            out.append((opt, {d.name.split(".", 1)[1]: v for d, v in zip(dims, values)}))
    return out


def sampled_configs(space, history: list, trials: int, seed: int) -> list:
    """The :class:`~personalign.sweeps.space.TrialConfig` of the next ``trials`` trials the default
    sampler (:func:`personalign.sweeps.sampler.default_sampler`, seeded per trial) proposes after
    ``history`` (the study's trials), replayed in a study in memory; each told a placeholder value
    (TPE's first trials are random draws from their own seed: exact; after them, close)."""
    import optuna

    from personalign.sweeps.sampler import default_sampler

    level = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study = optuna.create_study(direction="maximize", sampler=default_sampler(seed))
        study.add_trials([t for t in history if t.state.is_finished()])
        out = []
        for _ in range(trials):
            trial = study.ask()
            out.append((space.configure(lambda dim: dim.sample(trial)), dict(trial.params)))
            study.tell(trial, 0.0)
        return out
    finally:
        optuna.logging.set_verbosity(level)


def _replayed(stage, space, trainset, evalset, trials, history, *, lm, seed, passes) -> list[StrategyCost]:
    """One row per strategy of the configurations :func:`sampled_configs` replays, a configuration
    already scored (earlier in the study or the replay) costing nothing, as the sweep reuses it."""
    scored = [t.params for t in history if t.state.name == "COMPLETE"]
    rows: dict[str, StrategyCost] = {}
    for config, params in sampled_configs(space, history, trials, seed):
        if params in scored:
            continue
        scored.append(params)
        trial_lm = lm if lm is None or config.temperature is None else lm.copy(temperature=float(config.temperature))
        row = _strategy(stage, config.strategy, config.optimizer, [_Rows(trainset, evalset)], lm=trial_lm, seed=seed,
                        passes=passes, settings=config.optimizer_settings or None)
        rows[config.name] = rows[config.name].add(row) if config.name in rows else row
    return list(rows.values())


def _mean(name: str, costs: list[StrategyCost]) -> StrategyCost:
    total = costs[0]
    for c in costs[1:]:
        total = total.add(c)
    return _scaled(StrategyCost(name, **{k: getattr(total, k) for k in (
        "fitting", "compiling", "evaluation", "kind", "cached", "shared", "unchecked", "tokens")}), 1 / len(costs))


def _scaled(row: StrategyCost, share: float) -> StrategyCost:
    """``row`` times ``share`` (an expected share of trials), each count rounded."""
    out = StrategyCost(row.name, kind=row.kind, tokens=row.tokens)
    for k in ("fitting", "compiling", "evaluation", "cached", "shared", "unchecked"):
        setattr(out, k, round(getattr(row, k) * share))
    out.cached = min(out.cached, out.total)
    return out


__all__ = ["Passes", "project_compare", "project_compile", "project_run", "project_sweep", "row_calls"]
