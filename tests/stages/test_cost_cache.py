"""The cost line counts what is shared and cached (issue 43 item 5): a forward pass several
strategies read is projected once; what a cache already holds is shown apart (``N new + M
cached``), looked up before the run without a model call; retries are not projected as calls.

The embedded model is :mod:`tests.fake_engine` (the real engine methods, provider, JSON adapter,
forward-pass cache and counting over a stand-in for llama.cpp).
"""

from __future__ import annotations

from types import SimpleNamespace

from tests.conftest import ROOT
from tests.stages.test_cost import TINY, engines  # noqa: F401  (the fixture: fake engines, a fresh cache)
from tests.stages.test_own_task import task  # noqa: F401  (the fixture: the example's files in a folder of their own)

DEMO = ROOT / "examples" / "relevance_demo.jsonl"
FORWARD = "yes-prob,yes-prob-rank,lm-probe"  # three strategies reading one pass per pair


def _compare(costs: list):
    import personalign

    return personalign.compare("relevance", FORWARD, DEMO, split="val", limit=9, train_limit=12, lm=TINY, n_boot=20,
                               on_cost=costs.append)


def test_a_compare_of_forward_pass_strategies_projects_each_pass_once_and_a_warm_cache_none_new(engines):
    from personalign.lm import forward

    costs: list = []
    report = _compare(costs)
    (cost,) = costs
    rows = {s.name: s for s in cost.strategies}
    assert (rows["yes-prob"].fitting, rows["yes-prob"].evaluation, rows["yes-prob"].cached) == (12, 9, 0)
    for name in ("yes-prob-rank", "lm-probe"):  # the same passes (margin, hidden state): shared, not counted again
        assert rows[name].total == 0 and rows[name].shared == 21
    assert (cost.new, cost.cached, cost.total) == (21, 0, 21)
    made = sum(r["lm_calls"] + r["compile_lm_calls"] for r in report.rows)
    assert made == 21  # what the projection said: each pass made once
    assert "cost: 21 model calls on" in cost.line() and "yes-prob-rank none, 21 passes shared" in cost.line()
    projected = report.to_dict()["projected_lm_calls"]
    assert (projected["total"], projected["new"], projected["cached"], projected["upper_bound"]) == (21, 21, 0, 21)

    forward.clear_memory()  # a new process: the passes are on disk only
    again = _compare(costs)
    warm = costs[-1]
    assert (warm.new, warm.cached) == (0, 21) and warm.call_seconds == 0.0
    assert warm.line().startswith("cost: 0 new + 21 cached model calls on")
    assert sum(r["lm_calls"] + r["compile_lm_calls"] for r in again.rows) == 0


def test_across_the_folds_of_a_leave_one_group_out_compare_a_pass_counts_once(engines):
    """Every pair is read by every strategy in 7 folds (6 fits, 1 evaluation): 63 passes in all."""
    from personalign._verbs.folds import group_folds
    from personalign._verbs.inputs import load_data
    from personalign._verbs.projection import project_compare
    from personalign.lm import make_lm
    from personalign.stages import resolve_stage

    st = resolve_stage("relevance")
    specs = [(n, None) for n in FORWARD.split(",")]
    folds, _ = group_folds(st, load_data(st, DEMO), specs, limit=None, seed=0)
    cost = project_compare(st, specs, folds, lm=make_lm(TINY), model=TINY, seed=0)
    rows = {s.name: s for s in cost.strategies}
    # yes-prob reads every pass first: fold 1's fit (54) and its held-out prompt (9); nothing after
    assert (rows["yes-prob"].fitting, rows["yes-prob"].evaluation) == (54, 9)
    assert cost.total == 63 and rows["lm-probe"].shared == rows["yes-prob-rank"].shared == 63


def test_a_warm_cache_shows_generation_calls_cached_and_none_new(task, engines, tmp_path):
    """Evaluation of an uncompiled strategy is probed row by row (the first call stops at DSPy's
    cache lookup); a compile and its program's evaluation are known by the keys they asked for."""
    import personalign
    from personalign.lm import CallCounter, configure_cache

    stage, data = str(task / "stage.toml"), task / "data.jsonl"
    costs: list = []
    args = dict(split="val", train_limit=24, lm=TINY, n_boot=20, on_cost=costs.append)
    with CallCounter() as cold:
        personalign.compare(stage, "predict,predict@labeled", data, **args)
    first = costs[-1]
    assert first.cached == 0 and first.new == cold.calls  # a fresh cache: every call new, as projected
    configure_cache(tmp_path / "runs" / "cache")  # a new process's DSPy cache: its memory empty, its disk kept
    with CallCounter() as warm:
        personalign.compare(stage, "predict,predict@labeled", data, **args)
    again = costs[-1]
    assert (again.new, again.cached) == (0, first.total) and warm.calls == 0
    assert again.line().startswith(f"cost: 0 new + {first.total} cached model calls")
    assert first.work is None and again.work is not None and again.seconds == again.work  # the rest of the work, as
    assert "of other work (as this command took it last)" in again.line()  # the same command took it on this cache
    rows = {s.name: s for s in again.strategies}
    assert rows["predict"].cached == rows["predict"].evaluation == 12 and rows["predict@labeled"].unchecked == 0


def test_a_probe_never_calls_the_model(task, engines):
    from personalign.lm import CallCounter, make_lm
    from personalign.lm.ledger import first_call_cached
    from personalign.stages import resolve_stage

    st = resolve_stage(str(task / "stage.toml"))
    program = st.registry.create("predict")
    with CallCounter() as counter:
        found = first_call_cached(program, {"preference": "vegan", "question": "dinner?", "option": "steak"},
                                  make_lm(TINY))
    assert found is False and counter.calls == 0 and counter.cached == 0


def test_retries_are_not_projected_as_calls(task):
    """A ChatAdapter model retries a call it cannot parse with JSONAdapter: a retry, in the upper
    bound only; a bootstrap stops once it has its demos: expected below its upper bound."""
    from personalign._verbs.projection import project_run, row_calls
    from personalign.optimizers.plan import projected_calls
    from personalign.stages import resolve_stage

    st = resolve_stage(str(task / "stage.toml"))
    program = st.registry.create("predict")
    chat = SimpleNamespace(model="openai/some-model", kwargs={}, cache=False)  # ChatAdapter: its factor is 2
    assert row_calls(program, chat) == (1, "generation") and row_calls(program, chat, expected=False)[0] == 2
    rows = st.load(task / "data.jsonl", "val")
    cost = project_run("eval", "predict", program, rows, lm=chat, model=chat.model)
    (row,) = cost.strategies
    assert (row.evaluation, row.bound) == (len(rows), 2 * len(rows))
    assert cost.new == len(rows) and f"(up to {2 * len(rows)})" in cost.line()
    train = st.load(task / "data.jsonl", "train")
    expected = projected_calls(st, "predict", "bootstrap", train, lm=chat, expected=True)
    assert expected < projected_calls(st, "predict", "bootstrap", train, lm=chat)
