"""Fold plans of a comparison, and the one loop that fits and scores a strategy on them.

A single split is one fold (compile on ``train_split``, score on ``split``); leave-one-group-out
is one fold per group of the stage's ``group_key`` (compile on every other group, all splits
pooled, score on the group). :func:`run_folds` is the same for both: compile each fold's
program on its train rows by the one compile path
(:func:`personalign.compile_service.compile_program`), then score it on the fold's held-out rows
(:func:`personalign.evaluation.evaluate_repeats`). Nothing is ever fitted on the rows it is scored on.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Any

from personalign.errors import DataError


@dataclass
class Fold:
    """One fold: ``name`` (the split, or the held-out group), its ``train`` and ``test`` rows."""

    name: str
    train: list
    test: list


@dataclass
class FoldResult:
    """What one strategy did on one fold: its report, the compile record and its summary, the
    warnings raised while compiling, the program, seconds."""

    fold: str
    report: dict
    compile_info: dict | None
    compile_summary: dict | None
    warnings: list[str] = field(default_factory=list)
    program: Any = None
    seconds: float = 0.0
    traces: Any = None


def split_folds(stage, ds, specs, *, split: str, train_split: str, limit: int | None, seed: int,
                train_limit: int | None = None) -> list[Fold]:
    """The single-split plan: one fold (``train_split`` -> ``split``, ``limit`` rows of it; ``train_limit``
    rows of ``train_split``, each a seeded sample stratified over the stage's groups).

    Raises:
        DataError: an empty evaluation split; a strategy that needs training rows and none in
            ``train_split``; one class in train where a learned strategy needs two.
    """
    from personalign.stages import splits_present

    evalset = stage.limit(ds.split(split), limit, seed)
    trainset = stage.limit(ds.rows(train_split), train_limit, seed)
    needs = [f"{n}@{o}" if o else n for n, o in specs if o or stage.registry.info(n).trainable]
    if needs and not trainset:
        raise DataError(ds.where, None, "split", f"{', '.join(needs)} need a '{train_split}' split to compile on "
                                                 f"(splits present: {splits_present(ds.examples)})")
    if any(stage.registry.info(n).trainable for n, _ in specs):
        stage.check_fittable(trainset, ds.where, train_split, train_limit=train_limit)
    return [Fold(split, trainset, evalset)]


def group_folds(stage, ds, specs, *, limit: int | None, seed: int,
                train_limit: int | None = None) -> tuple[list[Fold], list[str]]:
    """The leave-one-group-out plan over every labelled row (all splits pooled; ``limit``: a
    seeded sample first): one fold per group, in file order, each fold's training rows a seeded
    sample of ``train_limit`` (stratified over the groups). Returns ``(folds, groups)``.

    Raises:
        ArgumentError: no group key, every row its own group, fewer than 3 groups.
        DataError: a row without a group; a training fold with one class for a learned strategy.
    """
    from personalign._verbs.groups import groups_of

    examples = stage.limit(ds.examples, limit, seed)
    groups = groups_of(stage, examples, ds.where)
    key = stage.group_key
    folds = [Fold(g, stage.limit([ex for ex in examples if str(getattr(ex, key)) != g], train_limit, seed),
                  [ex for ex in examples if str(getattr(ex, key)) == g]) for g in groups]
    if any(stage.registry.info(n).trainable for n, _ in specs):
        for f in folds:
            stage.check_fittable(f.train, ds.where, f"all but {key}={f.name}")
    return folds, groups


def _library_noise(w: warnings.WarningMessage) -> bool:
    """Warnings dependencies raise about their own code (pydantic on litellm's TypedDicts)."""
    return "site-packages" in str(w.filename)


def run_folds(stage, strategy: str, optimizer: str | None, folds: list[Fold], *, lm, seed: int, n_boot: int,
              repeats: int, label: str, progress: bool, tracing, on_fold=None, fit_calls: int = 0) -> list[FoldResult]:
    """Compile ``strategy`` (``@optimizer``) on each fold's train rows and score it on its test rows.

    Args:
        lm: the run's ``dspy.LM`` (None when no strategy calls one); an LM-free strategy runs without.
        tracing: ``tracing(name)`` -> context manager around each evaluation (the callbacks' LM traces).
        on_fold: called with ``(k, fold)`` before each fold (a progress display).
        progress: a progress bar per evaluation (single split), and one of the fit or compile in
            model calls (``fit_calls``: their projection) when it calls a model.

    Returns:
        one :class:`FoldResult` per fold, in order.
    """
    from personalign._verbs.cost import calls_bar
    from personalign.compile_service import compile_program
    from personalign.compile_service import summary as compile_summary
    from personalign.evaluation import evaluate_repeats
    from personalign.lm.ledger import unit
    from personalign.optimizers.plan import compile_fingerprint, evaluation_fingerprint

    uses_lm = stage.registry.info(strategy).uses_lm
    out = []
    for k, fold in enumerate(folds):
        if on_fold is not None:
            on_fold(k, fold)
        t0 = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            many = len(folds) > 1
            phase = "compiling" if optimizer else "fitting"
            with calls_bar(f"{label} {phase} (model calls)", fit_calls, progress and not many):
                program, info = compile_program(stage, strategy, optimizer, fold.train, lm=lm, seed=seed)
            compiled = compile_fingerprint(stage, strategy, optimizer, fold.train, lm=lm, seed=seed) \
                if info is not None else None
            with tracing(label) as traces, unit(evaluation_fingerprint(compiled, fold.test, repeats)):
                report = evaluate_repeats(stage, program, fold.test, lm=lm if uses_lm else None, n_boot=n_boot,
                                          seed=seed, progress=progress and not many,
                                          description=f"{label} [{fold.name}]" if many else label, repeats=repeats)
        notes = sorted({(f"{fold.name}: " if many else "") + str(w.message) for w in caught if not _library_noise(w)})
        out.append(FoldResult(fold.name, report, info, compile_summary(info), notes, program,
                              round(time.perf_counter() - t0, 3), traces))
    return out


def compile_calls(info: dict | None) -> int:
    """LM calls a compile made (its ``actual_lm_calls``, else ``lm_calls``; 0 for none)."""
    return int((info or {}).get("actual_lm_calls") or (info or {}).get("lm_calls") or 0)


def compile_cached(info: dict | None) -> int:
    """Model calls a cache answered while compiling (its ``cached_lm_calls``; 0 for none)."""
    return int((info or {}).get("cached_lm_calls") or 0)


__all__ = ["Fold", "FoldResult", "compile_cached", "compile_calls", "group_folds", "run_folds", "split_folds"]
