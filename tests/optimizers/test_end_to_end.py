"""End to end on the real embedded model: BootstrapFewShot compiles the zero-shot relevance judge."""

from __future__ import annotations

import pytest

from personalign.optimizers import OPTIMIZERS
from personalign.programs.relevance.judges import ZeroShotJudge
from tests.optimizers.conftest import REL


@pytest.mark.slow
def test_bootstrap_compiles_zero_shot_judge_on_smollm(relevance_sets):
    from personalign.lm import make_lm

    train, val = relevance_sets
    train, val = train[:8], val[:8]
    lm = make_lm("local/smollm2-135m-instruct")
    events = []
    opt = OPTIMIZERS.create("bootstrap", **REL, lm=lm, seed=0, max_bootstrapped_demos=2, max_labeled_demos=2,
                            on_event=lambda kind, payload: events.append((kind, payload)))
    program = ZeroShotJudge()
    compiled, result = opt.compile(program, trainset=train, valset=val)

    assert [k for k, _ in events] == ["projected", "actual"]
    # JSONAdapter for embedded models: one call per program run; 8 before + <= 8 bootstrap + 8 after
    assert result.projected_lm_calls == 24
    assert result.actual_lm_calls <= result.projected_lm_calls, result.details
    assert 0 < len(compiled.judge.demos) <= 2 and program.judge.demos == []
    assert 0.0 <= result.score_before <= 1.0 and 0.0 <= result.score_after <= 1.0
    lo, hi = result.score_after_ci
    assert lo <= result.score_after <= hi
    assert result.details["val_after"]["report"]["n"] == 8
    assert result.details["val_after"]["failures"] == 0
