"""Decision calibration: **one function fits every decision rule** of a scored binary program.

A binary program whose predictions carry a ``score`` (a yes/no margin, a similarity, a stacked
logit, a learned head's probability; higher = True) decides by one of the rules of
:mod:`personalign.programs.decision`: a raw ``threshold``, or -- so that a decision survives a
prompt nobody has seen, whose scores sit at another level -- a rule that works inside a unit
(``top_share``, within-unit ``zscore``, ``offset`` from the unit's median), the unit being the
stage's ``group_key`` (one prompt's pool) or its ``decision_keys`` (one user's attributes for one
prompt).

:func:`fit_decision_rule` chooses the rule **and** its unit by **leave-one-group-out** CV over
the fold groups (the stage's ``group_key``: whole prompts are held out; scikit-learn
``LeaveOneGroupOut`` up to ``max_folds`` groups, else ``GroupKFold``): in each fold the value that
maximizes the set objective on the other groups is applied to the held-out group, and a candidate
is judged by the **mean of its held-out groups' objectives** (ties: the earlier candidate, in the
order threshold, top_share, zscore, offset and the units as given). When the program has decisions
of its own (``raw``), the rule is kept only if it beats them on the same folds. The final value is
refitted on all examples, and the rule records its per-group figures and every candidate's.

Used by :func:`personalign.compile_service.compile_program` (DSPy programs with a score) and
:class:`personalign.optimizers.learned.LearnedSelectorFit` (scorers that threshold a raw score:
``yes-prob``, ``ensemble``, the learned heads).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from personalign.programs.decision import (KINDS, MIN_UNIT, UNIT_KINDS, DecidedProgram, DecisionRule,
                                            TopShareProgram, UnitRuleProgram, apply_rule, fallback_threshold,
                                            normalize, with_rule, yes_band)

SHARES = tuple(round(0.05 * k, 2) for k in range(1, 20))
#: Fewest fold groups on which an absolute threshold may be chosen over the rules inside a unit
#: (with fewer, leave-one-group-out cannot show that a threshold survives a new group).
MIN_THRESHOLD_GROUPS = 5
#: Group-bootstrap resamples of the paired threshold-vs-unit-rule difference.
N_BOOT = 2000


def _candidates(kind: str, scores: np.ndarray, groups: Sequence[Any]) -> list[float]:
    if kind == "top_share":
        return list(SHARES)
    z = normalize(kind, scores, groups)
    qs = np.unique(np.quantile(z, np.linspace(0.0, 1.0, 41)))
    return [float(q) for q in qs] + [float(z.max()) + 1.0]


def _best_value(kind: str, idx: np.ndarray, scores: np.ndarray, units: list, objective, min_unit: int,
                band: Sequence[float] | None = None) -> float:
    sub_units = [units[i] for i in idx]
    best, best_v = -math.inf, None
    for v in _candidates(kind, scores[idx], sub_units):
        val = objective(idx, apply_rule(kind, v, scores[idx], sub_units, min_unit=min_unit, band=band))
        if val > best + 1e-12:
            best, best_v = val, v
    return float(best_v)


def _ids(values: Sequence[Any]) -> list[int]:
    ids: dict[Any, int] = {}
    return [ids.setdefault(g, len(ids)) for g in values]  # any hashable (tuples too) -> int


def _folds(groups: list[int], n: int, max_folds: int):
    from sklearn.model_selection import GroupKFold, LeaveOneGroupOut

    n_groups = len(set(groups))
    splitter = LeaveOneGroupOut() if n_groups <= max_folds else GroupKFold(n_splits=max_folds)
    return list(splitter.split(np.zeros(n), groups=groups))


def _band(positives: Sequence[bool] | None, idx: np.ndarray) -> list[float] | None:
    if positives is None:
        return None
    rate = float(np.mean([bool(positives[i]) for i in idx])) if len(idx) else 0.0
    return yes_band(rate) if rate > 0 else None


def _paired_interval(diffs: Sequence[float], seed: int = 0) -> tuple[float, float]:
    """95% percentile interval of the mean of per-group differences, resampling groups."""
    from scipy.stats import bootstrap

    d = np.asarray(diffs, dtype=float)
    if np.ptp(d) == 0:
        return float(d[0]), float(d[0])
    ci = bootstrap((d,), np.mean, n_resamples=N_BOOT, method="percentile", random_state=seed).confidence_interval
    return float(ci.low), float(ci.high)


def _choose(table: list[dict], n_groups: int, band: list[float] | None) -> tuple[dict, str]:
    """The chosen candidate of ``table`` and why (see :func:`fit_decision_rule`)."""
    units = [c for c in table if c["kind"] in UNIT_KINDS]
    thresholds = [c for c in table if c["kind"] == "threshold"]
    best_unit = None
    for c in units:
        if best_unit is None or c["cv_objective"] > best_unit["cv_objective"] + 1e-12:
            best_unit = c
    if not thresholds:
        return best_unit, "the highest mean held-out-group objective among the rules inside a unit"
    thr = thresholds[0]
    if best_unit is None:
        return thr, "the only kind asked for"
    name = f"{best_unit['kind']}@{best_unit['unit'] or 'group'}"
    why = f"the highest mean held-out-group objective among the rules inside a unit ({best_unit['cv_objective']:.3f})"
    if n_groups < MIN_THRESHOLD_GROUPS:
        return best_unit, (f"{why}; an absolute threshold is not chosen with {n_groups} groups "
                           f"(< {MIN_THRESHOLD_GROUPS}: leave-one-group-out cannot show it survives a new group)")
    rates = [r["raw_yes_rate"] for r in thr["per_group"]]
    if band is not None and any(not band[0] <= r <= band[1] for r in rates):
        return best_unit, (f"{why}; the threshold's held-out yes-rates spread over {min(rates):.0%}-{max(rates):.0%}, "
                           f"outside {band[0]:.0%}-{band[1]:.0%} (half to twice the calibration positives)")
    by_group = {r["group"]: r["objective"] for r in best_unit["per_group"]}
    diffs = [r["objective"] - by_group[r["group"]] for r in thr["per_group"]]
    low, high = _paired_interval(diffs)
    if low > 0:
        return thr, (f"the threshold beat {name} on held-out groups by {np.mean(diffs):+.3f} "
                     f"(95% interval over groups [{low:+.3f}, {high:+.3f}] above 0)")
    return best_unit, (f"{why}; the threshold's gain over it, {np.mean(diffs):+.3f} [{low:+.3f}, {high:+.3f}] "
                       "(95%, groups resampled), is not above 0")


def fit_decision_rule(scores: Sequence[float], groups: Sequence[Any], raw: Sequence[bool] | None,
                      objective: Callable[[np.ndarray, list[bool]], float], *,
                      units: Mapping[str, Sequence[Any]] | None = None, n_splits: int = 5,
                      kinds: Sequence[str] = KINDS, out_of_fold: list | None = None,
                      min_unit: int = MIN_UNIT, group_names: Sequence[Any] | None = None,
                      positives: Sequence[bool] | None = None) -> DecisionRule | None:
    """Fit a decision rule by leave-one-group-out CV (see the module docstring).

    **Which rule.** Each candidate (kind x unit) is scored by the mean of its held-out groups'
    objectives. The best rule inside a unit (top share, z-score, offset) is chosen unless an
    absolute ``threshold`` shows it survives a new group: at least :data:`MIN_THRESHOLD_GROUPS`
    groups, every held-out group's yes-rate within the yes-rate band, and a paired gain over the
    best unit rule whose 95% interval (groups resampled) lies above 0. The rule's ``reason`` says
    which held. **The guard.** With ``positives``, every rule carries the band ``[p/2, 2p]`` (p:
    the share of positives) and keeps each unit's yes-rate inside it by rank
    (:func:`personalign.programs.decision.guard`), in the folds as in use; a threshold's guard
    works inside the first of ``units``.

    Args:
        scores: one float per example (higher = True).
        groups: one hashable fold group per example (whole groups are held out together; the
            stage's ``group_key``, e.g. the prompt).
        raw: the program's own decisions (one bool per example), or None for a scorer without
            decisions of its own (the best rule is then always returned).
        objective: ``objective(indices, decisions) -> float``: the set objective of ``decisions``
            for the examples at ``indices`` (higher is better, e.g. F1).
        units: candidate units of the unit rules, name -> one hashable unit per example (e.g.
            ``{"prompt_id": [...], "prompt_id+user_id": [...]}``; the name, split on ``+``, is
            saved as the rule's ``unit`` fields). None: ``{"": groups}`` (the unit is the fold group,
            recorded as no fields: the wrapper's ``group_of`` gives it).
        n_splits: folds when there are more groups than that (GroupKFold); up to ``n_splits``
            groups, leave-one-group-out.
        kinds: candidate kinds (:data:`~personalign.programs.decision.KINDS`).
        out_of_fold: when a list, it receives the chosen rule's out-of-fold decisions (one bool
            per example) if a rule is returned -- to score the rule on a subset (e.g. dev).
        min_unit: smallest unit a unit rule normalizes; smaller units use the fitted fallback.
        group_names: a printable name per fold group value (default: ``str`` of ``groups``).
        positives: one bool per example, True where a True decision is right (the labels);
            None: no yes-rate band (the rule is unguarded).

    Returns:
        the rule (with ``per_group``, ``candidates``, ``band`` and ``reason``) when it beats
        ``raw`` on the same folds, else None (also None with fewer than 2 groups, fewer than 4
        examples or constant scores).
    """
    s = np.asarray(scores, dtype=float)
    names = [str(g) for g in (group_names if group_names is not None else groups)]
    gid = _ids(groups)
    n_groups = len(set(gid))
    if len(s) < 4 or n_groups < 2 or np.unique(s).size < 2:
        return None
    units = dict(units) if units is not None else {"": list(groups)}
    unit_ids = {name: _ids(u) for name, u in units.items()}
    folds = _folds(gid, len(s), n_splits)
    everything = np.arange(len(s))
    band = _band(positives, everything)
    guard_unit = next(iter(unit_ids))

    def per_group(decisions: Sequence[bool], unguarded: Sequence[bool] | None = None) -> list[dict]:
        out = []
        for _, test_idx in folds:
            for g in sorted({gid[i] for i in test_idx}):
                idx = np.array([i for i in test_idx if gid[i] == g])
                row = {"group": names[idx[0]], "n": int(len(idx)),
                       "objective": float(objective(idx, [decisions[i] for i in idx])),
                       "yes_rate": float(np.mean([bool(decisions[i]) for i in idx]))}
                if unguarded is not None:
                    row["raw_yes_rate"] = float(np.mean([bool(unguarded[i]) for i in idx]))
                out.append(row)
        return out

    def mean_obj(rows: list[dict]) -> float:
        return float(np.mean([r["objective"] for r in rows]))

    raw_rows = per_group([bool(x) for x in raw]) if raw is not None else None
    raw_obj = mean_obj(raw_rows) if raw_rows is not None else None
    table: list[dict] = []
    oofs: dict[tuple, list[bool]] = {}
    for kind in kinds:
        for uname in ([guard_unit] if kind == "threshold" else list(unit_ids)):
            u = unit_ids[uname]
            oof, bare = [False] * len(s), [False] * len(s)
            for fit_idx, test_idx in folds:
                fold_band = _band(positives, fit_idx)
                v = _best_value(kind, fit_idx, s, u, objective, min_unit, fold_band)
                # the held-out group's units are normalized on its own scores only
                test_units = [u[i] for i in test_idx]
                for i, d, b in zip(test_idx, apply_rule(kind, v, s[test_idx], test_units, min_unit=min_unit,
                                                        band=fold_band),
                                   apply_rule(kind, v, s[test_idx], test_units, min_unit=min_unit)):
                    oof[i], bare[i] = d, b
            rows = per_group(oof, bare)
            entry = {"kind": kind, "unit": None if kind == "threshold" else uname, "cv_objective": mean_obj(rows),
                     "worst": min(r["objective"] for r in rows), "per_group": rows}
            table.append(entry)
            oofs[(kind, entry["unit"])] = oof
    chosen, reason = _choose(table, n_groups, band)
    if chosen is None or (raw_obj is not None and not chosen["cv_objective"] > raw_obj + 1e-12):
        return None
    kind, uname, rows, cv = chosen["kind"], chosen["unit"], chosen["per_group"], chosen["cv_objective"]
    if out_of_fold is not None:
        out_of_fold[:] = oofs[(kind, uname)]
    u = unit_ids[uname if uname is not None else guard_unit]
    value = _best_value(kind, everything, s, u, objective, min_unit, band)
    unit_name = uname if kind in UNIT_KINDS else (guard_unit if band is not None else None)
    unit_fields = None if not unit_name else unit_name.split("+")
    fallback = fallback_threshold(kind, value, s, u, min_unit) if kind in UNIT_KINDS else None
    if raw_obj is not None:
        reason += f"; it beats the program's own decisions ({raw_obj:.3f} -> {cv:.3f})"
    if band is not None:
        reason += (f"; guard: each unit's yes-rate kept within {band[0]:.0%}-{band[1]:.0%} "
                   "(half to twice the calibration positives) by rank")
    return DecisionRule(kind, value, cv, raw_obj, len(s), n_groups, len(folds), unit=unit_fields,
                        min_unit=min_unit if kind in UNIT_KINDS else 1, fallback=fallback, per_group=rows,
                        candidates=table, band=band, reason=reason)


def stage_units(examples: Sequence, group_key: str | None, decision_keys: Sequence[str] | None) -> dict[str, list]:
    """Candidate units of a stage's examples: ``{"<group_key>": [...], "<k1>+<k2>": [...]}`` (each
    a tuple of the fields' values per example; duplicates and empty key sets dropped)."""
    out: dict[str, list] = {}
    for keys in ((group_key,) if group_key else (), tuple(decision_keys or ())):
        if keys and "+".join(keys) not in out:
            out["+".join(keys)] = [tuple(getattr(ex, k, None) for k in keys) for ex in examples]
    return out


__all__ = ["DecisionRule", "DecidedProgram", "TopShareProgram", "UnitRuleProgram", "apply_rule",
           "fit_decision_rule", "stage_units", "with_rule"]
