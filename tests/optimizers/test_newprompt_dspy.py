"""benchmarks/_newprompt_dspy.py against the mock LM (no model): plain DSPy and personalign's
compile on one leave-one-prompt-out fold, the compile budget, and a stopped job resuming."""

from __future__ import annotations

import sys

import pytest

from tests.conftest import DEMO, ROOT


@pytest.fixture
def bench(monkeypatch):
    from tests.sweep.conftest import load_mock

    load_mock().register()
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    for name in ("_newprompt_dspy", "_newprompt_lm"):
        sys.modules.pop(name, None)
    import _newprompt_dspy
    import _newprompt_lm

    return _newprompt_dspy, _newprompt_lm


def _fold():
    from personalign.programs.relevance.data import load_examples

    rows = [r for r in load_examples(DEMO)]
    prompts = sorted({r.prompt_id for r in rows})
    held = prompts[0]
    return [r for r in rows if r.prompt_id != held], [r for r in rows if r.prompt_id == held], held


def test_compile_subset_caps_each_user_prompt_and_keeps_file_order(bench):
    dspy_rows, _ = bench
    train, _, _ = _fold()
    sub = dspy_rows.compile_subset(train, per_unit=3, seed=0)
    counts: dict = {}
    for ex in sub:
        counts[(ex.prompt_id, ex.user_id)] = counts.get((ex.prompt_id, ex.user_id), 0) + 1
    assert max(counts.values()) == 3 and len(counts) == len({(e.prompt_id, e.user_id) for e in train})
    assert [train.index(e) for e in sub] == sorted(train.index(e) for e in sub)
    assert sub == dspy_rows.compile_subset(train, per_unit=3, seed=0)
    assert dspy_rows.compile_subset(train, per_unit=1000) == train


def test_plain_dspy_and_personalign_rows_run_a_fold_and_resume(bench, tmp_path, monkeypatch):
    dspy_rows, lm_side = bench
    train, test, held = _fold()
    store = lm_side.RowStore(tmp_path / "rows")
    dspy_rows.run_folds(store, {held: (train, test)}, [held], "mock/relevance-0ms")
    for row in dspy_rows.ROWS:
        hit = store.get(row, held, len(test))
        assert hit is not None and len(hit["pred"]) == len(test) and all(isinstance(p, bool) for p in hit["pred"])
        assert hit["facts"]["n_compile"] <= len(train)
    assert store.get("dspy:labeled-k8", held, len(test))["facts"]["demos"] == min(8, len(train))
    assert store.get("zero-shot@labeled", held, len(test))["facts"]["selection"] is not None
    assert sorted(store.names()) == sorted(dspy_rows.ROWS)
    # a second job finds every (row, fold) done and runs nothing
    monkeypatch.setattr(dspy_rows, "run_row", lambda *a, **k: pytest.fail("recomputed a stored fold"))
    dspy_rows.run_folds(store, {held: (train, test)}, [held], "mock/relevance-0ms")


def test_a_passed_deadline_starts_no_fold(bench, tmp_path, monkeypatch):
    dspy_rows, lm_side = bench
    train, test, held = _fold()
    store = lm_side.RowStore(tmp_path / "rows")
    monkeypatch.setattr(dspy_rows, "run_row", lambda *a, **k: pytest.fail("started after the deadline"))
    dspy_rows.run_folds(store, {held: (train, test)}, [held], "mock/relevance-0ms", deadline=0.0)
    assert store.names() == []
