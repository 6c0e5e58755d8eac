"""The LM-call projection of the teleprompter wrappers: an upper bound announced before compiling.

Conventions (shared by every wrapper; each wrapper documents its own formula in terms of them):

* one *program run* (a forward pass on one example) costs at most ``c = predictor_calls x
  adapter_factor`` LM calls (:func:`calls_per_run`), where ``predictor_calls`` is what the program
  declares in its ``lm_calls_per_run`` attribute (programs that call a predictor more than once
  per forward: both orders of a pairwise judge per attribute, one answer per perspective; an int,
  or a method of the example, maximized over the compile's train and val examples), else
  ``len(program.predictors())``; and ``adapter_factor`` (:func:`adapter_factor`) is 2 for DSPy's
  ChatAdapter (on a parse error it retries once with JSONAdapter) and 1 for JSONAdapter (the
  embedded models);
* a prompt-model call (instruction proposal, reflection) costs ``p = adapter_factor`` calls;
* a ``dspy.Predict(..., n=k)`` call is one LM call (one request returning k completions);
* scoring the input program before and the compiled one after costs ``len(valset) x c`` each.

Cache hits are not LM calls (``personalign.lm.CallCounter`` counts calls that reached a model), so
the actual count of a repeated run is usually far below the projection.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence


def adapter_factor(adapter) -> int:
    """LM calls one predictor call may cost with ``adapter``: 2 for ChatAdapter with its JSON
    fallback (a parse failure is retried once with JSONAdapter), 1 otherwise (None: the active
    adapter, ChatAdapter when none is set)."""
    import dspy

    if adapter is None:
        adapter = dspy.settings.adapter or dspy.ChatAdapter()
    if isinstance(adapter, dspy.JSONAdapter):
        return 1
    if isinstance(adapter, dspy.ChatAdapter) and getattr(adapter, "use_json_adapter_fallback", True):
        return 2
    return 1


def lm_adapter_factor(lm) -> int:
    """:func:`adapter_factor` of the adapter :func:`personalign.lm.adapter_for` picks for ``lm``
    (None: the active LM; no LM or an unknown model: the active adapter's factor)."""
    import dspy

    try:
        from personalign.lm import adapter_for

        lm = lm if lm is not None else dspy.settings.lm
        adapter = adapter_for(lm.model) if lm is not None else None
    except Exception:  # noqa: BLE001 -- any model string: fall back to the active adapter
        adapter = None
    return adapter_factor(adapter)


def predictor_calls(program, declared: int | None = None, examples: Sequence = ()) -> int:
    """Predictor calls of one forward pass of ``program`` (at least 1): ``declared``, else the
    program's ``lm_calls_per_run`` -- an int, or a method ``lm_calls_per_run(example) -> int`` for
    programs whose calls depend on the input (one call per attribute), taken as the maximum over
    ``examples`` -- else ``len(program.predictors())``. A method with no examples falls back to
    ``len(program.predictors())``."""
    if declared is None:
        declared = getattr(program, "lm_calls_per_run", None)
    if callable(declared):
        declared = max((int(declared(ex)) for ex in examples), default=None)
    if declared is not None:
        return max(1, int(declared))
    return max(1, len(program.predictors()))


def calls_per_run(program, factor: int, declared: int | None = None, examples: Sequence = ()) -> int:
    """LM calls of one forward pass: :func:`predictor_calls` x ``factor`` (the adapter factor)."""
    return predictor_calls(program, declared, examples) * int(factor)


@dataclass
class Projection:
    """Projected LM calls of one compile, by phase.

    Attributes:
        score_before: scoring the input program on valset.
        teleprompter_parts: the teleprompter's own calls by part (e.g. bootstrap, proposals).
        score_after: scoring the compiled program on valset.
    """

    score_before: int
    score_after: int
    teleprompter_parts: dict[str, int] = field(default_factory=dict)

    @property
    def teleprompter(self) -> int:
        return sum(self.teleprompter_parts.values())

    @property
    def total(self) -> int:
        return self.score_before + self.teleprompter + self.score_after

    def phases(self) -> dict[str, int]:
        """``{"score_before", "teleprompter", "score_after"}``."""
        return {"score_before": self.score_before, "teleprompter": self.teleprompter,
                "score_after": self.score_after}

    def as_dict(self) -> dict[str, Any]:
        """``{"score_before", "teleprompter", "score_after", "teleprompter_parts", "total"}``."""
        return {**self.phases(), "teleprompter_parts": dict(self.teleprompter_parts), "total": self.total}

    def overruns(self, actual_by_phase: dict[str, int]) -> list[str]:
        """One line per phase whose actual calls exceed the projection (empty: within budget)."""
        projected = self.phases()
        return [f"{k}: {actual_by_phase[k]} calls > {projected[k]} projected"
                for k in projected if actual_by_phase.get(k, 0) > projected[k]]


__all__ = ["Projection", "adapter_factor", "calls_per_run", "lm_adapter_factor", "predictor_calls"]
