"""Tiny tasks for the conformance suites: the packaged relevance demo, and an imbalanced task with
an LM that rewards a constant answer.

* :func:`relevance_task` -- train/val :class:`dspy.Example` lists from the relevance demo shipped
  in the package (``personalign/resources/relevance_demo.jsonl``; both labels in each split).
* :func:`imbalanced_examples` / :class:`CollapsingLM` -- an 80-example relevance task with 20%
  positives, and a dummy LM that answers the relevance signature from the hidden gold: for the
  program as written (the original instructions, no demos) it is right on 90% of the examples
  (one negative in ten is called relevant) -- a non-constant program with a real F1; for any
  *changed* program (demos, or instructions a teleprompter rewrote) it answers the majority label
  always: ~80% accurate, so DSPy's mean metric likes it, and its F1 is 0. With
  ``better_with_demos=True`` a changed program is right on every example instead.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from personalign.testing.dummies import SchemaDummyLM, SchemaEngine

DEMO = Path(__file__).resolve().parents[1] / "resources" / "relevance_demo.jsonl"

N, GROUPS = 80, 8
GOLD = {i: (i % 5 == 0) for i in range(N)}  # 20% positive


def relevance_task(n_train: int = 8, n_val: int = 6) -> tuple[list, list]:
    """The first ``n_train`` train and ``n_val`` val examples of the packaged relevance demo
    (inputs ``attribute``, ``prompt``; label ``relevant``)."""
    from personalign.data import load_relevance

    rows = load_relevance(DEMO)
    train = [r.to_dspy() for r in rows if r.split == "train"]
    val = [r.to_dspy() for r in rows if r.split == "val"]
    return train[:n_train], val[:n_val]


def imbalanced_examples() -> list:
    """:data:`N` relevance examples, 20% positive (:data:`GOLD`), in :data:`GROUPS` prompt groups."""
    import dspy

    return [dspy.Example(attribute=f"The user has trait attr-{i}.", prompt=f"Request number {i % GROUPS}.",
                         relevant=GOLD[i], prompt_id=f"p{i % GROUPS}", split="train").with_inputs("attribute", "prompt")
            for i in range(N)]


class CollapsingEngine(SchemaEngine):
    """Answers the relevance signature as described in the module docstring; other signatures
    (the teleprompters' proposers) get the schema placeholders."""

    better_with_demos = False

    def _complete_messages(self, messages):
        from personalign.signatures.relevance import RelevanceSignature

        system = next((m["content"] for m in messages if m["role"] == "system"), "")
        last = messages[-1]["content"] if messages else ""
        m = re.search(r"attr-(\d+)", last)
        if "`relevant`" not in system or m is None:
            return super()._complete_messages(messages)  # proposers' own signatures
        i = int(m.group(1))
        changed = len(messages) > 2 or RelevanceSignature.instructions not in system
        if changed and not self.better_with_demos:
            answer = False  # the majority label, always
        else:
            right = changed or i % 10 != 3  # as written: one negative in ten is called relevant
            answer = GOLD[i] if right else not GOLD[i]
        return self._answer(system, answer)

    def _answer(self, system, answer):
        from dspy.lm15 import Message, Response, TextPart, Usage

        if "Outputs will be a JSON object" in system:
            text = json.dumps({"relevant": answer})
        else:
            text = f"[[ ## relevant ## ]]\n{answer}\n\n[[ ## completed ## ]]\n"
        return Response(id=None, model="dummy", message=Message.assistant([TextPart(text)]), finish_reason="stop",
                        usage=Usage(input_tokens=1, output_tokens=1, total_tokens=2))


class CollapsingLM(SchemaDummyLM):
    """:class:`SchemaDummyLM` with :class:`CollapsingEngine` (see the module docstring)."""

    engine_class = CollapsingEngine

    def __init__(self, better_with_demos: bool = False):
        self.better_with_demos = better_with_demos
        super().__init__()
        self._engine_spec.better_with_demos = better_with_demos

    def copy(self, **kwargs):
        copied = super().copy(**kwargs)
        copied.better_with_demos = self.better_with_demos
        copied._engine_spec.better_with_demos = self.better_with_demos
        return copied


def check_no_constant_winner(stage, optimizer: str, settings: dict) -> dict:
    """Compile ``zero-shot`` of ``stage`` (a relevance-like binary stage) with ``optimizer`` on
    :func:`imbalanced_examples` under :class:`CollapsingLM` through the compile service, and
    assert that the returned program is not constant on dev and never worse than the uncompiled
    one on the stage's objective; returns the compile info.

    Raises:
        AssertionError: a constant program won, the dev objective dropped, or the compile made
            more LM calls than it projected.
    """
    import warnings

    from personalign.compile_service import compile_program, dev_split, score_on

    train = imbalanced_examples()
    lm = CollapsingLM()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program, info = compile_program(stage, "zero-shot", optimizer, train, lm=lm, seed=0,
                                        optimizer_settings=settings)
    _, dev = dev_split(train, 0, stage.group_key)
    sel = info["details"]["selection"]
    assert info["objective"] == stage.objective.name
    assert sel["candidates"][0]["name"] == "uncompiled" and not sel["candidates"][0]["constant"]
    final = score_on(stage, program, dev, lm=lm)
    assert not final["constant"], sel
    assert final["objective"] >= info["dev_objective_before"] - 1e-9
    assert info["dev_objective_after"] >= info["dev_objective_before"]
    assert info["chosen"] and info["reason"]
    assert sel["inner_metric"] == "balanced_relevance_accuracy"
    assert set(sel["class_weights"]) == {"positive", "negative"}
    if sel["candidates"][1]["constant"]:
        assert info["chosen"] == "uncompiled"
        assert any("single class on dev" in str(w.message) for w in caught)
    assert info["actual_lm_calls"] <= info["projected_lm_calls"]
    return info


__all__ = ["CollapsingEngine", "CollapsingLM", "DEMO", "GOLD", "GROUPS", "N", "check_no_constant_winner",
           "imbalanced_examples", "relevance_task"]
