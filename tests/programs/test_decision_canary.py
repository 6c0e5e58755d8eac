"""The canary of decision rules on a new prompt: each scored LLM strategy fitted on three of the
four shared relevance prompts (leave-one-prompt-out) never answers nothing, never floods the
held-out prompt, and never does worse than answering yes to every pair there.

A held-out prompt fails the canary when the strategy's yes-rate on it is outside a factor of two
of the human yes-rate of the prompts it was fitted on, or its F1 is below ``all-yes``'s F1 on it.
On the code of c2ca5dc (``decision: auto`` free to pick an absolute threshold on 3 groups) the
default model's ``yes-prob`` and ``lm-probe`` fail it. The same canary runs on a stage declared in a
stage file (a user's own stage over the same labels, 4 groups), where the LM-free learned selector
``minilm-logreg`` is held to the yes-rate band only (its rule must not flood or empty a prompt; its
ranking on a new prompt can be worse than chance, which is its quality, not its rule's).

Slow: one forward pass of the default model per pair and prompt wording (534 pairs, twice: about
3 min each on 2 cores, shared by the strategies of a test; the forward-pass cache serves a rerun).
"""

from __future__ import annotations

import json

import pytest

import personalign
from personalign.lm import DEFAULT_MODEL
from tests.conftest import shared_data_dir

LABELS = shared_data_dir() / "recenter_relevance" / "relevance_labels.jsonl"
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not LABELS.is_file(), reason=f"shared relevance labels not found at {LABELS}")]


def _canary(result: dict, strategies: list[str], positive_rate, *, rate_only: tuple[str, ...] = ()) -> list[str]:
    """The canary's failures in a leave-one-group-out compare result (one line each); a strategy in
    ``rate_only`` is held to the yes-rate band alone (an LM-free learned ranker may rank a new
    prompt worse than chance: that is its quality, not its decision rule)."""
    rows = {r["name"]: r for r in result["strategies"]}
    reference = {g["group"]: g["f1"] for g in rows["all-yes"]["by_group"]}
    failures = []
    for name in [*strategies, *rate_only]:
        for g in rows[name]["by_group"]:
            fitted_rate = positive_rate(g["group"])
            if not fitted_rate / 2 <= g["yes_rate"] <= 2 * fitted_rate:
                failures.append(f"{name} on {g['group']}: yes-rate {g['yes_rate']:.3f} outside a factor of two of "
                                f"the fitted prompts' human yes-rate {fitted_rate:.3f}")
            if name not in rate_only and g["f1"] < reference[g["group"]] - 1e-12:
                failures.append(f"{name} on {g['group']}: F1 {g['f1']:.3f} below all-yes's {reference[g['group']]:.3f}")
    return failures


def _rate_without(rows: list[dict], key: str, label: str):
    """The human yes-rate of every prompt but ``group``'s (named ``...pN``)."""
    def rate(group: str) -> float:
        others = [r for r in rows if f"p{r[key]}" != group.split(":")[-1]]
        return sum(bool(r[label]) for r in others) / len(others)

    return rate


def test_yes_prob_and_lm_probe_on_a_new_prompt_answer_within_the_humans_rate_and_beat_all_yes(tmp_path, monkeypatch):
    monkeypatch.setenv("PERSONALIGN_RUNS_DIR", str(tmp_path / "runs"))
    rows = [json.loads(line) for line in LABELS.read_text().splitlines() if line.strip()]
    result = personalign.compare("relevance", "all-yes,yes-prob,lm-probe", LABELS, cv="groups",
                                 lm=DEFAULT_MODEL, n_boot=100).to_dict()
    assert sorted(result["groups"]) == ["recenter:p0", "recenter:p2", "recenter:p3", "recenter:p4"]
    assert _canary(result, ["yes-prob", "lm-probe"], _rate_without(rows, "prompt_index", "label")) == []


STAGE = """
name = "attribute-matters"
summary = "A user's own stage over the shared relevance labels"
instructions = "Decide whether knowing the user attribute should change how a thoughtful assistant answers the request."
kind = "binary"
label = "relevant"
positive = true
group_key = "prompt"
objective = "f1"

[inputs]
request = "the user's new request"
attribute = "one attribute of the user"

[output]
name = "relevant"
type = "bool"
description = "true only if the answer should differ because of this attribute"
"""


def test_a_declared_stage_with_four_groups_passes_the_same_canary(tmp_path, monkeypatch):
    monkeypatch.setenv("PERSONALIGN_RUNS_DIR", str(tmp_path / "runs"))
    rows = [json.loads(line) for line in LABELS.read_text().splitlines() if line.strip()]
    data = tmp_path / "data.jsonl"
    with data.open("w") as fh:  # a user's copy of the labels, in the canonical format a stage file reads
        for i, r in enumerate(rows):
            fh.write(json.dumps({"id": f"r{i}", "split": r["split"], "request": r["prompt_text"],
                                 "attribute": r["attribute"], "relevant": bool(r["label"]),
                                 "prompt": f"p{r['prompt_index']}"}) + "\n")
    stage = tmp_path / "stage.toml"
    stage.write_text(STAGE)
    # every row: the band's reference is the human yes-rate of exactly the rows each fold fits on
    result = personalign.compare(str(stage), "all-yes,minilm-logreg,yes-prob", data, cv="groups",
                                 lm=DEFAULT_MODEL, n_boot=100).to_dict()
    assert len(result["groups"]) == 4
    failures = _canary(result, ["yes-prob"], _rate_without(rows, "prompt_index", "label"), rate_only=("minilm-logreg",))
    assert failures == [], failures
