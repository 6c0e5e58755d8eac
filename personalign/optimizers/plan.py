"""What a compile will run, decided before it runs: the dev split held out of train, the configured
optimizer, and the model calls it will make at most (:func:`projected_calls`: the cost announced
before a run, the ``projected_lm_calls`` of its compile record). The compile itself is
:func:`personalign.compile_service.compile_program`."""

from __future__ import annotations

from typing import Any


def dev_split(trainset: list, seed: int, group_key: str | None) -> tuple[list, list | None]:
    """Hold out whole groups of train as the dev set (never the eval split): ``(fit, dev)``;
    dev is None when ``group_key`` is None or train has fewer than 2 groups."""
    from personalign.data.splits import group_split

    if group_key is None:
        return trainset, None
    groups = {getattr(ex, group_key, None) for ex in trainset}
    if len(groups) < 2 or None in groups:
        return trainset, None
    parts = group_split(trainset, by=lambda ex: getattr(ex, group_key), fractions={"fit": 0.75, "dev": 0.25},
                        seed=seed)
    return parts["fit"], parts["dev"] or None


def teleprompter_kwargs(stage, strategy: str, optimizer: str, fit: list, lm, seed: int, settings: dict) -> dict:
    """A teleprompter's settings for ``stage``: the stage's metric class-balanced on ``fit``
    (:func:`personalign.stages.objective.balanced_metric`; its feedback metric too when the
    teleprompter takes one), the label field, ``lm`` and ``seed``, then ``settings``."""
    from personalign.optimizers import OPTIMIZERS
    from personalign.stages.objective import balanced_metric

    kwargs: dict[str, Any] = {**stage.teleprompter_kwargs(), "lm": lm, "seed": seed}
    if stage.metric is not None:
        kwargs["metric"] = balanced_metric(stage, stage.metric_fn(), fit)
    if getattr(OPTIMIZERS.load(optimizer), "needs_feedback", False) and stage.feedback_metric is not None:
        kwargs["feedback_metric"] = balanced_metric(stage, stage.feedback_fn(), fit)
    return {**kwargs, **settings}


def settings_of(optimizer_settings: dict | None) -> tuple[dict, str, str]:
    """``(teleprompter settings, decision_rule, select_by)`` of ``optimizer_settings``, checked."""
    from personalign.errors import ConfigurationError

    settings = dict(optimizer_settings or {})
    rule_mode = settings.pop("decision_rule", "auto")
    select_by = settings.pop("select_by", "objective")
    if select_by not in ("objective", "auc"):
        raise ConfigurationError(f"select_by must be 'objective' or 'auc' (ranking quality of the scores on dev), "
                                 f"got {select_by!r}")
    if rule_mode not in ("auto", "none"):
        raise ConfigurationError(f"decision_rule must be 'auto' (fit one by grouped CV on dev) or 'none', "
                                 f"got {rule_mode!r}")
    return settings, rule_mode, select_by


def make_optimizer(stage, strategy: str, optimizer: str, fit: list, dev: list | None, *, lm, seed: int,
                   settings: dict, select: bool = True):
    """``(optimizer, selecting)``: the configured ``optimizer`` compile runs on ``fit`` (``dev`` its
    valset), and whether the dev selection of step 3 follows (a teleprompter with a dev split)."""
    from personalign.optimizers import OPTIMIZERS

    settings = dict(settings)
    teleprompter = OPTIMIZERS.info(optimizer).kind == "teleprompter"
    selecting = select and dev is not None and teleprompter
    if teleprompter:
        if selecting:
            settings.setdefault("score", False)  # dev is scored after, with the set objective
        return OPTIMIZERS.create(optimizer, **teleprompter_kwargs(stage, strategy, optimizer, fit, lm, seed,
                                                                   settings)), selecting
    # a fit: the stage's label, positive class and group key, as the strategy's own fit gets them
    return OPTIMIZERS.create(optimizer, **stage.fit_kwargs(strategy, OPTIMIZERS.load(optimizer), seed=seed,
                                                           **settings)), selecting


def selection_calls(stage, opt, program, fit: list, dev: list, *, calibrate: bool, expected: bool = False) -> int:
    """Projected model calls of steps 3-4: every candidate on dev, and the fit rows scored for the
    decision rule (binary stages, an LLM strategy, ``calibrate``): at most; ``expected``: without
    retries, and the fit rows only for a program whose predictions carry a score (``gives_score``:
    the rule is fitted on it) less its demos."""
    opt.expecting = expected
    try:
        per_run = opt._calls_per_run(program) if hasattr(opt, "_calls_per_run") else 1
    finally:
        opt.expecting = False
    n_cands = 2 + int(getattr(opt, "max_alternatives", 0) or 0)
    calib = len(fit) * per_run if (calibrate and stage.kind == "binary") else 0
    if expected and calib:
        calib = 0 if not getattr(program, "gives_score", False) else \
            max(0, len(fit) - int(getattr(opt, "max_labeled_demos", getattr(opt, "k", 0)) or 0)) * per_run
    return n_cands * len(dev) * per_run + calib


def compile_fingerprint(stage, strategy: str, optimizer: str | None, trainset: list, *, lm, seed: int = 0,
                        optimizer_settings: dict | None = None, fit_settings: dict | None = None, program=None,
                        select: bool = True, calibrate: bool = True) -> str | None:
    """The name of a compile's generation calls in the cache ledger (:func:`personalign.lm.ledger.unit`):
    a digest of everything that decides them -- the program's state (its signature, instructions
    and demos), the strategy, optimizer and settings, the seed, the model and its settings, the
    rows. None for a compile that makes none (no LM, a forward-pass scorer, an LM-free strategy)."""
    from personalign.lm.ledger import fingerprint, rows_of

    cls = stage.registry.load(strategy)
    if lm is None or not stage.registry.info(strategy).uses_lm or getattr(cls, "needs_logprobs", False):
        return None
    program = program if program is not None else cls()
    try:
        state = program.dump_state()
    except Exception:  # noqa: BLE001 -- a program without a state: its class names it
        state = None
    return fingerprint("compile", stage.name, stage.signature_record(), f"{cls.__module__}.{cls.__qualname__}",
                       state, strategy, optimizer, optimizer_settings, fit_settings, seed, select, calibrate,
                       getattr(lm, "model", None), getattr(lm, "kwargs", None), rows_of(trainset))


def evaluation_fingerprint(compiled: str | None, examples: list, runs: int = 1) -> str | None:
    """The name in the cache ledger of the evaluation, on ``examples`` (``runs`` times), of the
    program the compile ``compiled`` (:func:`compile_fingerprint`) makes; None with no compile."""
    from personalign.lm.ledger import fingerprint, rows_of

    return None if compiled is None else fingerprint("evaluation", compiled, runs, rows_of(examples))


def projected_calls(stage, strategy: str, optimizer: str | None, trainset: list, *, lm=None, seed: int = 0,
                    optimizer_settings: dict | None = None, program=None, select: bool = True,
                    calibrate: bool = True, expected: bool = False) -> int:
    """Model calls :func:`compile_program` will make at most, before it runs (its record's
    ``projected_lm_calls``): a strategy's own fit, one forward pass per training row for an LLM
    scorer (0 LM-free); a teleprompter, its own projection plus steps 3-4; nothing to compile: 0.
    ``expected``: the calls it is expected to make (no retry, a bootstrap that stops once it has
    its demos: :meth:`~personalign.optimizers.base.Optimizer.expected_lm_calls`)."""
    info = stage.registry.info(strategy)
    if not info.uses_lm or (optimizer is None and not info.trainable):
        return 0
    if optimizer is None:
        return len(trainset)
    program = program if program is not None else stage.registry.create(strategy)
    settings, rule_mode, _ = settings_of(optimizer_settings)
    fit, dev = dev_split(trainset, seed, stage.group_key)
    opt, selecting = make_optimizer(stage, strategy, optimizer, fit, dev, lm=lm, seed=seed, settings=settings,
                                    select=select)
    own = (opt.expected_lm_calls if expected else opt.projected_lm_calls)(program, fit, dev)
    own = len(trainset) if own is None else own
    return own + (selection_calls(stage, opt, program, fit, dev, calibrate=calibrate and rule_mode == "auto",
                                  expected=expected) if selecting else 0)


__all__ = ["compile_fingerprint", "dev_split", "evaluation_fingerprint", "make_optimizer", "projected_calls", "selection_calls", "settings_of", "teleprompter_kwargs"]
