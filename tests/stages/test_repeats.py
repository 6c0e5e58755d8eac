"""--repeats: sampling strategies run N times with distinct cache keys; deterministic ones run once."""

from __future__ import annotations


import dspy
import pytest

from tests.conftest import DEMO


def _val():
    from personalign.stages import resolve_stage as get_stage

    st = get_stage("relevance")
    return st, [ex for ex in st.load(DEMO) if ex.split == "val"]


class _Alternating(dspy.LM):
    """Control flow only: an LM whose answer depends on its rollout_id (as a sampled LM's would)."""

    def __init__(self, temperature):
        super().__init__("dummy/alternating", temperature=temperature, cache=False)
        self.calls = []

    def forward(self, prompt=None, messages=None, **kwargs):
        raise NotImplementedError

    def __call__(self, prompt=None, messages=None, **kwargs):
        rid = self.kwargs.get("rollout_id")
        self.calls.append(rid)
        return ['[[ ## relevant ## ]]\n' + ("True" if (rid or 0) % 2 else "False") + '\n\n[[ ## completed ## ]]']

    def copy(self, **kwargs):
        new = _Alternating(self.kwargs.get("temperature"))
        new.kwargs.update(kwargs)
        new.calls = self.calls
        return new


def test_sampling_lm_runs_each_repeat_with_its_own_rollout_id():
    from personalign.evaluation import evaluate_repeats
    from personalign.programs.relevance.judges import ZeroShotJudge

    st, val = _val()
    lm = _Alternating(temperature=0.7)
    rep = evaluate_repeats(st, ZeroShotJudge(), val, lm=lm, repeats=3, n_boot=100, progress=False)
    assert rep["repeats"] == 3 and "rollout_id 0..2" in rep["repeat_note"]
    assert sorted(set(lm.calls)) == [0, 1, 2] and len(lm.calls) == 3 * len(val)
    # runs 0 and 2 say no to everything, run 1 yes: the figure is the mean over runs
    assert rep["yes_rate"] == pytest.approx(1 / 3)
    assert rep["resampling"]["repeats"] == 3 and len(rep["predictions_by_repeat"]) == 3


@pytest.mark.parametrize("temperature, note", [(0.0, "deterministic (temperature 0)"), (None, "deterministic (no LM)")])
def test_deterministic_strategies_run_once_and_say_so(temperature, note):
    from personalign.evaluation import evaluate_repeats
    from personalign.programs.relevance.judges import ZeroShotJudge

    st, val = _val()
    if temperature is None:
        rep = evaluate_repeats(st, st.registry.create("all-yes"), val, lm=None, repeats=4, n_boot=50, progress=False)
    else:
        lm = _Alternating(temperature=temperature)
        rep = evaluate_repeats(st, ZeroShotJudge(), val, lm=lm, repeats=4, n_boot=50, progress=False)
        assert lm.calls == [None] * len(val)
    assert rep["repeats"] == 1 and rep["repeat_note"] == f"{note}: ran once, not 4 times"
