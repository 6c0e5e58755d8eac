"""Issue 36, one path: a built-in stage and a user's stage are the same kind of value, read by the
same code, and get the same generic strategies, reference row, compile and sweep path; programs
saved by the layout before the redesign still load and score the same.

The saved programs under ``tests/fixtures/saved_v0/`` were compiled by commit f376499 (the layout
before the redesign: ``personalign.api``, ``programs/<stage>/__init__.py`` declaring STAGE); their
val figures from that commit are in ``expected.json``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT

EXAMPLE = ROOT / "examples" / "own_task"
SAVED = ROOT / "tests" / "fixtures" / "saved_v0"
DEMO = ROOT / "examples" / "relevance_demo.jsonl"


@pytest.fixture
def task(tmp_path) -> Path:
    d = tmp_path / "task"
    d.mkdir()
    for name in ("stage.toml", "data.jsonl"):
        shutil.copy(EXAMPLE / name, d / name)
    return d


def test_built_in_and_user_stages_are_read_by_the_same_schema(task):
    from personalign.stages import StageSpec, resolve_stage
    from personalign.stages.strategies import GENERIC

    builtin, own = resolve_stage("relevance"), resolve_stage(str(task / "stage.toml"))
    assert type(builtin.spec) is type(own.spec) is StageSpec
    assert (ROOT / "personalign" / "programs" / "relevance" / "stage.toml").exists()
    for st in (builtin, own):  # every binary stage gets every generic strategy (or its own of that name)
        assert set(GENERIC["binary"]) <= set(st.registry), st.name
        assert st.reference == "all-yes"


def test_a_python_declared_binary_stage_with_a_false_positive_class_runs_every_verb(task, runs_dir, tmp_path):
    """declare_stage in Python, positive = False: the reference row is the constant that predicts
    the scored class (all-no); compile, evaluate, predict and sweep run on it."""
    import personalign
    from personalign import declare_stage

    st = declare_stage(
        name="option-breaks", summary="does the option break the preference?", kind="binary", label="follows",
        positive=False, group_key="topic", objective="f1",
        inputs={"preference": "the user's stated preference", "question": "the user's request",
                "option": "one recommended option"},
        output={"name": "follows", "type": "bool", "description": "true if the option follows the preference"},
        instructions="Decide whether the recommended option respects the user's stated preference.")
    data = task / "data.jsonl"
    assert st.reference == "all-no" and st.positive is False

    cmp = personalign.compare(st, "majority,minilm-logreg", data, split="val", n_boot=50)
    assert [r["name"] for r in cmp.rows] == ["all-no", "majority", "minilm-logreg"]
    assert cmp.rows[0]["reference"] is True
    gold_neg = [not ex.follows for ex in st.load(data, "val")]
    all_no = cmp.row("all-no")
    assert all_no["recall"] == pytest.approx(1.0) and all_no["yes_rate"] == pytest.approx(1.0)  # every row 'breaks'
    assert all_no["f1"] == pytest.approx(2 * (sum(gold_neg) / len(gold_neg)) / (1 + sum(gold_neg) / len(gold_neg)))

    out = tmp_path / "prog"
    compiled = personalign.compile(st, "minilm-logreg", data, out=out)
    assert compiled.path == out and (out / "program.json").exists()
    ev = personalign.evaluate(st, out, data, split="test", n_boot=50)
    assert ev.metric == "f1" and ev["n"] == 12
    new = tmp_path / "new.jsonl"
    new.write_text("".join(json.dumps({k: ex[k] for k in ("id", "preference", "question", "option", "topic")}) + "\n"
                           for ex in st.load(data, "test")))
    pred = personalign.predict(st, out, new, out=tmp_path / "pred.jsonl")
    rows = [json.loads(line) for line in (tmp_path / "pred.jsonl").read_text().splitlines()]
    assert len(rows) == 12 and all(isinstance(r["follows"], bool) for r in rows) and pred is not None

    sw = personalign.sweep(st, data, n_trials=2, storage=f"sqlite:///{tmp_path / 'optuna.db'}", n_boot=20,
                           export=False, space=_lm_free_space(tmp_path))
    assert sw["n_counted"] == 2 and sw["n_distinct"] == 2 and sw["stage"] == "option-breaks"  # repeats reused, not counted


def _lm_free_space(tmp_path: Path) -> Path:
    space = tmp_path / "space.toml"
    space.write_text('strategies = ["minilm-logreg", "majority"]\n[pruner]\nkind = "none"\n')
    return space


def test_a_sweep_on_unfittable_data_is_refused_before_the_first_trial(task, runs_dir, tmp_path):
    """One label in train: no trial could fit; the sweep says so in one error before any trial."""
    import personalign
    from personalign.errors import PersonalignError

    rows = [json.loads(line) for line in (task / "data.jsonl").read_text().splitlines()]
    for r in rows:
        if r["split"] == "train":
            r["follows"] = True
    bad = tmp_path / "one-label.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in rows))
    storage = tmp_path / "optuna.db"
    with pytest.raises(PersonalignError, match="(?i)train|label|class") as err:
        personalign.sweep(str(task / "stage.toml"), bad, n_trials=2, storage=f"sqlite:///{storage}", n_boot=20,
                          export=False, space=_lm_free_space(tmp_path))
    assert "\n" not in str(err.value)
    if storage.exists():  # nothing was asked of Optuna
        import optuna

        for summary in optuna.get_all_study_summaries(f"sqlite:///{storage}"):
            assert summary.n_trials == 0


@pytest.mark.parametrize("name,stage,data,lm", [
    ("relevance-minilm-logreg", "relevance", DEMO, None),
    ("relevance-zero-shot-labeled", "relevance", DEMO, "mock/relevance-0ms"),
    ("option-follows-majority", str(EXAMPLE / "stage.toml"), EXAMPLE / "data.jsonl", None),
])
def test_programs_saved_by_the_previous_layout_load_and_score_the_same(name, stage, data, lm, runs_dir):
    import personalign
    from personalign.testing import mock_provider

    mock_provider.register()
    expected = json.loads((SAVED / "expected.json").read_text())[name]
    program = personalign.load_program(SAVED / name, stage=stage)
    assert program is not None
    ev = personalign.evaluate(stage, SAVED / name, data, split="val", lm=lm, n_boot=200, seed=0)
    got = ev.to_dict()
    for key in ("n", "f1", "precision", "recall", "yes_rate"):
        assert got[key] == pytest.approx(expected[key]), key
    assert got["f1_by_group"] == pytest.approx(expected["f1_by_group"])
