"""Decision rules of binary programs: the rule that turns a program's scores into its yes/no output.

A score's *level* moves from one prompt to the next (the relevance judge's mean yes/no margin is
0.84 on one prompt and 1.62 on another), while its *ranking inside* a prompt holds. So besides a
raw threshold a rule may first normalize each score inside its **unit** -- the examples that are
decided together: the stage's ``group_key`` (one prompt's pool) or its ``decision_keys`` (one
user's attributes for one prompt) -- using only that unit's own, unlabelled scores:

* ``threshold``: ``score >= value`` (no unit; what a raw threshold does);
* ``top_share``: the top ``ceil(value * n_unit)`` scores of each unit are True (rank);
* ``zscore``: ``(score - mean_unit) / std_unit >= value``;
* ``offset``: ``score - median_unit >= value`` (the unit's own level removed).

**Yes-rate guard (band):** a rule fitted by :func:`personalign.optimizers.decision.fit_decision_rule`
carries ``band = [low, high]``, the share of a unit it may predict True: half to twice the share of
positives in its calibration examples. A unit of at least :data:`MIN_UNIT` examples whose decisions
fall outside it is decided by rank instead: its top ``ceil(low * n)`` scores (at least one) when the
rule selected fewer, its top ``floor(high * n)`` when it selected more. So a new group whose scores
sit at another level never gets an empty (or a flooded) selection while its scores still rank.

**Fallback (no pool):** a unit with fewer than ``min_unit`` scored examples (a single call of
``forward``, ``predict`` on one attribute) cannot be normalized; it is decided by
``score >= fallback``, the raw score at which the rule flips in the *median* calibration unit
(fitted with the rule), and the prediction says so in its ``decision_note`` field
(:func:`fallback_note`: ``"fallback threshold X (no pool of N or more to rank against; batch
prediction uses <kind>@<unit>)"``). A rule without
a fallback (saved before fallbacks existed) keeps the program's own decision there.

:class:`DecidedProgram` (threshold) and :class:`UnitRuleProgram` (the unit rules; decides in
``predict_batch``) wrap the program; the rule is saved in the program JSON (``decision_rule``)
and reapplied on load (:mod:`personalign.programs.saved`). Rules are fitted by leave-one-group-out
cross-validation (:func:`personalign.optimizers.decision.fit_decision_rule`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

import dspy
import numpy as np

from personalign.programs.program_schema import RULE_KINDS

#: Rule kinds; every kind but ``threshold`` works inside a unit.
KINDS = RULE_KINDS
UNIT_KINDS = ("top_share", "zscore", "offset")
#: Smallest unit a unit rule normalizes and the yes-rate guard keeps in its band (smaller units
#: use the rule's fallback threshold, unguarded).
MIN_UNIT = 3


def yes_band(rate: float, factor: float = 2.0) -> list[float]:
    """The yes-rate band of a unit for a calibration positive share ``rate`` in (0, 1]:
    ``[rate / factor, min(1, rate * factor)]``."""
    return [float(rate) / factor, min(1.0, float(rate) * factor)]


@dataclass
class DecisionRule:
    """A fitted decision rule.

    Attributes:
        kind: one of :data:`KINDS`.
        value: the threshold on the (normalized) score, or the share in (0, 1) of each unit
            predicted True (``top_share``).
        cv_objective: the rule's cross-validated objective (mean over held-out groups).
        raw_objective: the program's own decisions' objective on the same folds (None: the
            program has no decisions of its own, e.g. a scorer).
        n, n_groups, n_splits: calibration examples, their fold groups, CV folds.
        unit: example fields whose values form the unit (e.g. ``["prompt_id", "user_id"]``);
            None: the unit the wrapper is given (the stage's ``decision_group``).
        min_unit: smallest unit decided by the rule; smaller ones use ``fallback``.
        fallback: raw-score threshold for units below ``min_unit`` (None: the program's own decision).
        per_group: held-out figures of the chosen rule, one dict per fold group
            (``{"group", "n", "objective", "yes_rate"}``).
        candidates: every candidate rule's cross-validated figures (``{"kind", "unit",
            "cv_objective", "worst", "per_group"}``).
        band: ``[low, high]``, the share of a unit of at least :data:`MIN_UNIT` examples the rule
            may predict True (the module docstring's guard); None: unguarded (a rule saved before
            the guard, or fitted without labels).
        reason: why this rule was chosen over the others (one sentence; None: not recorded).
    """

    kind: str
    value: float
    cv_objective: float
    raw_objective: float | None
    n: int
    n_groups: int
    n_splits: int
    unit: list[str] | None = None
    min_unit: int = 1
    fallback: float | None = None
    per_group: list[dict[str, Any]] = field(default_factory=list)
    candidates: list[dict[str, Any]] = field(default_factory=list)
    band: list[float] | None = None
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"decision rule kind must be one of {KINDS}, got {self.kind!r}")
        if self.unit is not None:
            self.unit = [str(k) for k in self.unit]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "DecisionRule":
        return cls(**{k: raw[k] for k in cls.__dataclass_fields__ if k in raw})

    def unit_of(self, example) -> tuple | None:
        """The unit of ``example`` by this rule's ``unit`` fields (None when the rule names none)."""
        if self.unit is None:
            return None
        return tuple(getattr(example, k, None) for k in self.unit)

    def describe(self) -> str:
        where = f"within each {'+'.join(self.unit)} unit" if self.unit else "within each group"
        if self.kind == "threshold":
            text = f"yes when score >= {self.value:.4g}"
            if self.band is not None:
                text += f"; {self.guard_text(where)}"
            return text
        if self.kind == "top_share":
            text = f"yes for the top {self.value:.0%} of scores {where}"
        elif self.kind == "zscore":
            text = f"yes when the score's z-score {where} >= {self.value:.4g}"
        else:
            text = f"yes when score - the median score {where} >= {self.value:.4g}"
        if self.band is not None and self.kind != "top_share":
            text += f"; {self.guard_text(where)}"
        if self.fallback is not None:
            text += f"; units under {self.min_unit} examples: score >= {self.fallback:.4g}"
        return text

    def guard_text(self, where: str = "within each group") -> str:
        """``"yes-rate kept within 9%-36% within each prompt_id unit (by rank)"``."""
        low, high = self.band or (0.0, 1.0)
        return f"yes-rate kept within {low:.0%}-{high:.0%} {where} (by rank)"


def _units(groups: Sequence[Any]) -> dict[Any, list[int]]:
    by: dict[Any, list[int]] = {}
    for i, g in enumerate(groups):
        by.setdefault(g, []).append(i)
    return by


def normalize(kind: str, scores: Sequence[float], groups: Sequence[Any]) -> np.ndarray:
    """Scores of ``zscore`` / ``offset`` normalized within each unit of ``groups`` (shape (n,);
    a unit whose scores are all equal gets z = 0). ``threshold`` returns the scores as they are.

    Raises:
        ValueError: ``top_share`` (a rank, not a normalized score) or an unknown kind.
    """
    s = np.asarray(scores, dtype=float)
    if kind == "threshold":
        return s.copy()
    if kind not in ("zscore", "offset"):
        raise ValueError(f"normalize: kind must be threshold, zscore or offset, got {kind!r}")
    out = np.zeros(len(s))
    for idx in _units(groups).values():
        v = s[idx]
        if kind == "zscore":
            sd = v.std()
            out[idx] = (v - v.mean()) / sd if sd > 0 else 0.0
        else:
            out[idx] = v - np.median(v)
    return out


def guard(decisions: Sequence[bool], scores: Sequence[float], groups: Sequence[Any],
          band: Sequence[float] | None, min_unit: int = MIN_UNIT) -> list[bool]:
    """``decisions`` with each unit of at least ``min_unit`` examples kept inside the yes-rate
    ``band`` ``[low, high]`` by rank (the module docstring's guard); None: unchanged."""
    out = [bool(d) for d in decisions]
    if band is None:
        return out
    s = np.asarray(scores, dtype=float)
    low, high = float(band[0]), float(band[1])
    for idx in _units(groups).values():
        n = len(idx)
        if n < max(min_unit, MIN_UNIT):
            continue
        k = sum(out[i] for i in idx)
        k_min = max(1, math.ceil(low * n - 1e-9))
        k_max = max(k_min, math.floor(high * n + 1e-9))
        if k_min <= k <= k_max:
            continue
        keep = k_min if k < k_min else k_max
        ranked = sorted(idx, key=lambda i: -s[i])  # stable: ties keep the examples' order
        for j, i in enumerate(ranked):
            out[i] = j < keep
    return out


def apply_rule(kind: str, value: float, scores: Sequence[float], groups: Sequence[Any], *,
               min_unit: int = 1, fallback: float | None = None, band: Sequence[float] | None = None) -> list[bool]:
    """Decisions of a rule on ``scores`` (one per example; ``groups`` = each example's unit).

    Units with fewer than ``min_unit`` examples are decided by ``score >= fallback`` (False when
    ``fallback`` is None; see :func:`fallback_mask` to tell which). With a ``band``, every unit of
    at least :data:`MIN_UNIT` examples is then kept inside it (:func:`guard`)."""
    s = np.asarray(scores, dtype=float)
    if kind == "threshold":
        return guard([bool(x >= value) for x in s], s, groups, band)
    out = [False] * len(s)
    by = _units(groups)
    small = {g for g, idx in by.items() if len(idx) < min_unit}
    if kind == "top_share":
        for g, idx in by.items():
            if g in small:
                continue
            k = math.ceil(value * len(idx) - 1e-9)
            for i in sorted(idx, key=lambda i: -s[i])[:k]:
                out[i] = True
    else:
        z = normalize(kind, s, groups)
        out = [bool(x >= value) for x in z]
    for g in small:
        for i in by[g]:
            out[i] = bool(fallback is not None and s[i] >= fallback)
    return guard(out, s, groups, band, min_unit)


def fallback_mask(rule: DecisionRule, groups: Sequence[Any]) -> list[bool]:
    """True for the examples whose unit is below ``rule.min_unit`` (decided by the fallback)."""
    if rule.kind == "threshold":
        return [False] * len(groups)
    by = _units(groups)
    return [len(by[g]) < rule.min_unit for g in groups]


def fallback_threshold(kind: str, value: float, scores: Sequence[float], groups: Sequence[Any],
                       min_unit: int = 1) -> float:
    """The raw score at which the rule flips in the median unit of ``groups`` (units of at least
    ``min_unit`` examples; all units when none is that large): ``mean + value * std`` (zscore),
    ``median + value`` (offset), the ``ceil(value * n)``-th largest score (top_share), ``value``
    (threshold)."""
    if kind == "threshold":
        return float(value)
    s = np.asarray(scores, dtype=float)
    by = _units(groups)
    units = [idx for idx in by.values() if len(idx) >= min_unit] or list(by.values())
    flips = []
    for idx in units:
        v = np.sort(s[idx])[::-1]
        if kind == "zscore":
            flips.append(v.mean() + value * v.std())
        elif kind == "offset":
            flips.append(np.median(v) + value)
        else:
            flips.append(v[max(0, min(len(v), math.ceil(value * len(v) - 1e-9)) - 1)])
    return float(np.median(flips))


def fallback_note(threshold: float, min_unit: int, kind: str, unit: Sequence[str] | None) -> str:
    """What a prediction decided by a set-level rule's fallback says in its ``decision_note``.

    One line, e.g. ``"fallback threshold 0.412 (no pool of 3 or more to rank against; batch
    prediction uses top_share@prompt_id+user_id)"``: the raw-score ``threshold`` that decided, the
    smallest unit ``min_unit`` the rule works on, and the rule ``kind`` with its ``unit`` fields
    (None: the stage's group) that decides the same example when its unit is passed together.
    Used by :class:`UnitRuleProgram` and by the scorers that rank inside a group
    (:class:`personalign.programs.relevance._scorer.TopShareDecision`)."""
    verb = "rank" if kind == "top_share" else "normalize"
    where = "+".join(unit) if unit else "group"
    return (f"fallback threshold {threshold:.4g} (no pool of {min_unit} or more to {verb} against; "
            f"batch prediction uses {kind}@{where})")


class DecidedProgram(dspy.Module):
    """``program`` with a threshold rule on its predictions' ``score``: ``output = score >= value``
    (a prediction without a score keeps the program's own decision). ``undecided`` is the wrapped
    program (saved as the strategy's state); ``decision_rule`` the rule's dict; ``group_of(example)``
    the unit a unit rule works in (the rule's own ``unit`` fields first, else this function, e.g.
    the stage's ``decision_group``; None: one unit). ``positive`` is the output value of a True
    decision (False for a scorer of *rejected* attributes)."""

    def __init__(self, program, rule: DecisionRule, output: str, group_of: Callable[[Any], Any] | None = None,
                 positive: bool = True) -> None:
        super().__init__()
        self.undecided = program
        self.rule = rule
        self.output = output
        self.group_of = group_of
        self.positive = bool(positive)
        self.uses_lm = getattr(program, "uses_lm", True)

    @property
    def decision_rule(self) -> dict[str, Any]:
        return self.rule.to_dict()

    #: Never read through to the wrapped program: deciding is the wrapper's job.
    _OWN = frozenset({"predict_batch", "decide", "decide_predictions", "forward", "undecided", "rule"})

    def __getattr__(self, name: str):
        """The wrapped program's attributes (``threshold``, ``score_batch``, ``fitted_model``, ...)
        read through the wrapper; never its decisions (:attr:`_OWN`) or private names."""
        inner = self.__dict__.get("undecided")
        if inner is None or name.startswith("_") or name in DecidedProgram._OWN:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(inner, name)

    def _decide(self, pred, decision: bool, note: str | None = None):
        if pred is not None and getattr(pred, "score", None) is not None:
            pred[self.output] = decision if self.positive else not decision
            if note:
                pred["decision_note"] = note
        return pred

    def _unit(self, example) -> Any:
        if self.rule.unit is not None:
            return self.rule.unit_of(example)
        return self.group_of(example) if self.group_of else None

    def forward(self, **kwargs):
        pred = self.undecided(**kwargs)
        score = getattr(pred, "score", None)
        if score is None:
            return pred
        if self.rule.kind == "threshold":
            return self._decide(pred, float(score) >= self.rule.value)
        if self.rule.fallback is None:
            return pred
        return self._decide(pred, float(score) >= self.rule.fallback, self.fallback_note())

    def fallback_note(self) -> str:
        """The ``decision_note`` of a prediction decided by the rule's fallback (:func:`fallback_note`)."""
        return fallback_note(self.rule.fallback, self.rule.min_unit, self.rule.kind, self.rule.unit)


class UnitRuleProgram(DecidedProgram):
    """A :class:`DecidedProgram` with a unit rule (``top_share``, ``zscore``, ``offset``) or a
    guarded threshold (a ``band``): decides per unit in ``predict_batch(examples)``; ``forward`` on
    one example uses the fallback (a threshold: the threshold itself)."""

    def predict_batch(self, examples: Sequence) -> list:
        inner = self.undecided
        if hasattr(inner, "predict_batch"):
            preds = list(inner.predict_batch(examples))
        else:
            preds = [inner(**ex.inputs()) for ex in examples]
        return self.decide_predictions(examples, preds)

    def decide_predictions(self, examples: Sequence, preds: list) -> list:
        """Decide ``preds`` (the wrapped program's, one per example; None for a failed one, left
        as it is) by the rule, unit by unit; returns them. The runner of programs calls it after
        running the wrapped program per example (:func:`personalign.programs.run.run_program`)."""
        r = self.rule
        scored = [i for i, p in enumerate(preds) if p is not None and getattr(p, "score", None) is not None]
        groups = [self._unit(examples[i]) for i in scored]
        decisions = apply_rule(r.kind, r.value, [float(preds[i].score) for i in scored], groups,
                               min_unit=r.min_unit, fallback=r.fallback, band=r.band)
        small = fallback_mask(r, groups)
        for i, d, fb in zip(scored, decisions, small):
            if fb and r.fallback is None:
                continue  # an old rule without a fallback: the program's own decision
            self._decide(preds[i], d, self.fallback_note() if fb else None)
        return preds


#: Former name of :class:`UnitRuleProgram` (top share was the only unit rule).
TopShareProgram = UnitRuleProgram


def with_rule(program, rule: DecisionRule | dict, output: str, group_of: Callable[[Any], Any] | None,
              positive: bool = True):
    """Wrap ``program`` with ``rule`` (a :class:`DecisionRule` or its dict); ``group_of(example)``
    gives a unit rule's unit when the rule names no ``unit`` fields."""
    if isinstance(rule, dict):
        rule = DecisionRule.from_dict(rule)
    cls = DecidedProgram if rule.kind == "threshold" and rule.band is None else UnitRuleProgram
    return cls(program, rule, output, group_of, positive)


__all__ = ["KINDS", "MIN_UNIT", "UNIT_KINDS", "DecisionRule", "guard", "yes_band", "DecidedProgram", "TopShareProgram", "UnitRuleProgram",
           "apply_rule", "fallback_mask", "fallback_note", "fallback_threshold", "normalize", "with_rule"]
