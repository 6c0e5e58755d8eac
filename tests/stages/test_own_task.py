"""Issue 25: a user's own task -- a stage file (or file.py:STAGE, or an entry-point package) and a
labelled JSONL written into a temporary folder outside the package -- reaches stage validate,
compare, compile, eval (in a fresh process) and sweep, through the four verbs and the CLI.

LM strategies run on the in-process ``mock`` provider (:mod:`personalign.testing.mock_provider`:
control flow, deterministic answers); yes-prob's margin is a stand-in function here and the real
0.5B model in the one slow test.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

EXAMPLE = ROOT / "examples" / "own_task"
MOCK = "mock/own-task"


@pytest.fixture
def task(tmp_path) -> Path:
    """A folder outside the package with stage.toml, data.jsonl and my_task.py (the example's)."""
    d = tmp_path / "my task"
    d.mkdir()
    for name in ("stage.toml", "data.jsonl", "my_task.py"):
        shutil.copy(EXAMPLE / name, d / name)
    return d


@pytest.fixture
def mock_lm():
    from personalign.testing import mock_provider

    mock_provider.register()
    return MOCK


@pytest.fixture
def entry_point_site(tmp_path, task, monkeypatch) -> Path:
    """A package ``optfollows`` publishing ``option-follows`` under ``personalign.stages``, on
    sys.path through its dist-info (not pip-installed)."""
    site = tmp_path / "site"
    pkg = site / "optfollows"
    pkg.mkdir(parents=True)
    shutil.copy(task / "stage.toml", pkg / "stage.toml")
    (pkg / "__init__.py").write_text("from pathlib import Path\nfrom personalign.stages import "
                                     "load_stage_file\nSTAGE = load_stage_file(Path(__file__).parent / 'stage.toml')\n")
    info = site / "optfollows-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: optfollows\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[personalign.stages]\noption-follows = optfollows:STAGE\n")
    monkeypatch.syspath_prepend(str(site))
    yield site
    sys.modules.pop("optfollows", None)


def _refs(task: Path) -> dict[str, str]:
    return {"toml": str(task / "stage.toml"), "py": f"{task / 'my_task.py'}:STAGE", "entry-point": "option-follows"}


# --- item 1: one resolver --------------------------------------------------------------------

def test_every_form_of_stage_reference_resolves(task, entry_point_site):
    from personalign.stages import Stage, resolve_stage

    builtin = resolve_stage("relevance")
    assert builtin.name == "relevance" and resolve_stage(builtin) is builtin
    assert resolve_stage("relevance") is builtin  # built-in stages are built once

    for form, ref in _refs(task).items():
        st = resolve_stage(ref)
        assert isinstance(st, Stage) and st.name == "option-follows", form
        assert st.inputs == ("preference", "question", "option") and st.output == "follows"
        assert st.signature_class.output_fields["follows"].annotation is bool
        assert st.ref == (ref if form != "toml" else str(Path(ref).resolve()))
    assert "word-overlap" in resolve_stage(_refs(task)["py"]).registry


def test_stages_lists_installed_entry_points_without_importing_them(entry_point_site, capsys):
    from personalign.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["stages", "--json"])
    assert exc.value.code in (0, None)
    rows = {r["stage"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["relevance"]["source"] == "built-in" and "yes-prob" in rows["relevance"]["strategies"]
    assert rows["option-follows"]["source"] == "entry point personalign.stages: optfollows:STAGE"
    assert "optfollows" not in sys.modules, "listing must not import (run) an installed package"


def test_unknown_reference_is_one_clear_error(task):
    from personalign.errors import ConfigurationError
    from personalign.stages.ref import resolve_stage

    with pytest.raises(ConfigurationError, match="unknown stage 'nope'; available: .*relevance"):
        resolve_stage("nope")
    with pytest.raises(ConfigurationError, match="has no attribute 'MISSING'"):
        resolve_stage(f"{task / 'my_task.py'}:MISSING")


# --- item 2: the stage file, its mistakes ----------------------------------------------------

GOOD = (EXAMPLE / "stage.toml").read_text()
BAD = {
    "missing [output]": (GOOD.split("[output]")[0], None, "output", "missing"),
    "unknown type": (GOOD.replace('type = "bool"', 'type = "boolean"'), None, "output.type", "unknown type"),
    "label absent from the data": (GOOD.replace('label = "follows"', 'label = "agrees"'), "data", "agrees",
                                   "missing"),
    "group key absent": (GOOD.replace('group_key = "topic"', 'group_key = "domain"'), "data", "domain", "missing"),
    "duplicate input name": (GOOD.replace('option = "one recommended option"',
                                          'option = "one recommended option"\noption = "again"'), None, None,
                             "invalid TOML"),
    "strategy that does not import": (GOOD + '\n[strategies]\nmine = "no_such_file.py:Judge"\n', None,
                                      "strategies.mine", "no such Python file"),
    "strategy that is a function, not a program class": (GOOD + '\n[strategies]\nmine = "personalign.errors:located"\n',
                                                         None, "strategies.mine", "not a dspy.Module subclass"),
    "strategy naming another module": (GOOD + '\n[strategies]\nmine = "os:system"\n', None,
                                       "strategies.mine", "never another module"),
    "positive given as a string": (GOOD.replace('positive = true', 'positive = "no"'), None,
                                   "positive", "bool"),
    "unknown objective": (GOOD.replace('objective = "f1"', 'objective = "f7-score"'), None, "objective",
                          "unknown objective"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_stage_file_is_one_line_exit_2(case, task, capsys):
    from personalign.cli import main

    text, where, key, problem = BAD[case]
    (task / "stage.toml").write_text(text)
    before = sorted(p.name for p in task.iterdir())
    with pytest.raises(SystemExit) as exc:
        main(["stage", "validate", str(task / "stage.toml"), "--data", str(task / "data.jsonl")])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    named = "data.jsonl:1" if where == "data" else "stage.toml"
    assert named in lines[0] and problem in lines[0], lines[0]
    if key:
        assert f"'{key}'" in lines[0], lines[0]
    if where is None and case != "missing [output]":
        assert "stage.toml:" in lines[0], f"no line number: {lines[0]}"
    assert sorted(p.name for p in task.iterdir()) == before  # nothing written


def test_stage_init_writes_a_valid_template_and_never_overwrites(tmp_path, capsys):
    from personalign.cli import main
    from personalign.stages.ref import resolve_stage

    out = tmp_path / "mine.toml"
    with pytest.raises(SystemExit) as ok:
        main(["stage", "init", "mine", "--out", str(out)])
    assert ok.value.code == 0 and out.is_file()
    assert resolve_stage(str(out)).name == "mine"
    text = out.read_text()
    with pytest.raises(SystemExit) as again:
        main(["stage", "init", "mine", "--out", str(out)])
    assert again.value.code == 2 and "exists" in capsys.readouterr().err
    assert out.read_text() == text
    link, elsewhere = tmp_path / "link.toml", tmp_path / "elsewhere" / "target.toml"
    elsewhere.parent.mkdir()
    link.symlink_to(elsewhere)  # dangling: writing through it would create a file outside the folder
    with pytest.raises(SystemExit) as refused:
        main(["stage", "init", "mine", "--out", str(link)])
    assert refused.value.code == 2 and "(a symlink)" in capsys.readouterr().err
    assert not elsewhere.exists()


def test_stage_validate_reports_the_data(task, capsys):
    from personalign.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["stage", "validate", str(task / "stage.toml"), "--data", str(task / "data.jsonl")])
    out = capsys.readouterr().out
    assert exc.value.code == 0
    assert "stage 'option-follows'" in out and "60 rows" in out and "train 36" in out


def test_multiclass_stage_gets_macro_f1_and_kappa(tmp_path):
    from personalign.stages.ref import resolve_stage

    text = GOOD.replace('kind = "binary"', 'kind = "multiclass"').replace('type = "bool"', 'type = ["yes", "no", '
                                                                          '"partly"]').replace('objective = "f1"',
                                                                                               'objective = "kappa"')
    (tmp_path / "mc.toml").write_text(text)
    rows = [{"id": str(i), "split": "train", "topic": "t", "preference": "p", "question": "q", "option": "o",
             "follows": lab} for i, lab in enumerate(["yes", "no", "partly", "yes"])]
    (tmp_path / "mc.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    st = resolve_stage(str(tmp_path / "mc.toml"))
    examples = st.load(tmp_path / "mc.jsonl")
    assert st.kind == "multiclass" and st.metric_name == "accuracy" and st.objective.name == "kappa"
    assert set(st.registry.names()) == {"majority", "predict", "cot"}  # no bool-only strategies
    assert st.signature_record()["kind"] == "scored"  # as programs saved before the kind existed
    assert st.score(examples, ["yes", "no", "partly", "yes"]) == pytest.approx(1.0)
    assert st.score(examples, ["yes", "yes", "yes", "yes"]) == pytest.approx(0.0)


# --- items 3, 4, 6: the four verbs ---------------------------------------------------------------

def _tracker(tmp_path):
    from personalign.tracking import MLflowCallback

    return [MLflowCallback(f"sqlite:///{tmp_path / 'mlflow.db'}")]


def _run_names(tmp_path) -> list[str]:
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = client.get_experiment_by_name("personalign")
    return [r.info.run_name for r in client.search_runs([exp.experiment_id], max_results=1000)]


@pytest.mark.parametrize("form", ["toml", "py", "entry-point"])
def test_the_four_verbs_on_a_users_stage(form, task, entry_point_site, mock_lm, runs_dir, tmp_path):
    import personalign
    from personalign.programs.saved import read_metadata

    ref = _refs(task)[form]
    full = form == "toml"  # the other forms differ only in how the stage is found: a shorter run
    data = task / "data.jsonl"
    tracker = _tracker(tmp_path)
    names = ["majority", "minilm-logreg", "predict", "predict@bootstrap"] if full else ["majority", "predict"]
    cmp = personalign.compare(ref, ",".join(names), data, split="val", lm=mock_lm, n_boot=50, callbacks=tracker)
    assert [r["name"] for r in cmp.rows] == ["all-yes", *names]  # the positive constant is the reference row
    assert cmp.rows[0]["reference"] is True
    assert cmp.to_dict()["stage"] == "option-follows" and cmp["n"] == 12
    for row in cmp.rows[1:]:
        vs = row["vs_first"]
        assert vs["against"] == "all-yes" and vs["mcnemar"] is not None
        # the val split holds 2 topics: below 5 clusters the difference gets per-topic figures, not a CI
        assert vs["diff"]["ci"] is None and len(vs["diff"]["range"]) == 2
    assert cmp.row("majority")["lm_calls"] == 0 and cmp.row("predict")["failures"] == 0
    if full:
        assert cmp.row("predict@bootstrap")["compile"]["chosen"] is not None  # selected on dev groups of train

    out = tmp_path / f"prog-{form}"
    compiled = personalign.compile(ref, "minilm-logreg", data, out=out, callbacks=tracker)
    assert compiled.info["details"]["threshold"] is not None and compiled.path == out
    meta = read_metadata(out)[1]
    assert meta["stage"] == "option-follows"
    assert meta["stage_ref"] == (ref if form != "toml" else str(Path(ref).resolve()))
    ev = personalign.evaluate(ref, out, data, split="test", n_boot=50, callbacks=tracker)
    assert ev.metric == "f1" and ev["n"] == 12 and 0.0 <= ev.value <= 1.0
    assert ev.ci is None and len(ev["f1_range"]) == 2  # test holds 2 topics: per-topic range, no percentile CI

    runs = _run_names(tmp_path)
    for verb in ("compare", "compile", "eval"):
        assert any(f"{verb} option-follows" in n for n in runs), runs
    if full:
        sw = personalign.sweep(ref, data, n_trials=3, storage=f"sqlite:///{tmp_path / 'optuna.db'}",
                               lm=mock_lm, callbacks=tracker, n_boot=20, export=False)
        assert sw["n_counted"] == min(3, sw["space_size"] or 3) and sw.best is not None  # repeats not counted
        assert sw["stage"] == "option-follows" and sw["study"].startswith("option-follows-")


def test_compile_fits_a_decision_rule_on_yes_prob(task, monkeypatch, runs_dir, tmp_path):
    """yes-prob's threshold is fitted by grouped CV on train; the margin is a stand-in here (the
    slow test runs the real model): log-odds that grow when the option shares no word with what
    the preference rules out."""
    import dspy

    import personalign
    from personalign.lm import scoring

    def margin(model, messages):  # a stand-in score: higher when the option names no ruled-out thing
        text = messages[-1]["content"].lower()
        option = text.split("\noption:")[1].split("\n")[0]
        return -1.0 if any(w in option for w in ("beef", "chicken", "salmon", "cat", "flight", "jump", "run",
                                                  "espresso", "cola", "car", "drive", "horror")) else 2.0

    monkeypatch.setattr(scoring, "cached_yes_no_margin", margin)  # the margin of the shared forward pass
    lm = dspy.LM("local/qwen2.5-coder-0.5b-instruct")  # named only: nothing loads
    compiled = personalign.compile(str(task / "stage.toml"), "yes-prob", task / "data.jsonl", lm=lm,
                                   out=tmp_path / "yp")
    assert compiled.info["optimizer"] == "learned-selector-fit"
    threshold = compiled.info["details"]["threshold"]
    assert -1.0 < threshold <= 2.0  # between the two margins: the rule separates them
    ev = personalign.evaluate(str(task / "stage.toml"), tmp_path / "yp", task / "data.jsonl", split="test", lm=lm,
                              n_boot=20)
    rows = [json.loads(x) for x in (task / "data.jsonl").read_text().splitlines()]
    test = [r for r in rows if r["split"] == "test"]
    expected = [margin(None, [{"content": f"\noption: {r['option'].lower()}\n"}]) >= threshold
                for r in test]
    assert ev["yes_rate"] == pytest.approx(sum(expected) / len(test))
    assert ev["n"] == 12 and ev["failures"] == 0


def test_a_users_module_and_examples_go_straight_in(task, mock_lm, runs_dir):
    import dspy

    import personalign
    from personalign.stages.ref import resolve_stage

    st = resolve_stage(str(task / "stage.toml"))
    examples = st.load(task / "data.jsonl")
    module = dspy.Predict(st.signature_class)
    cmp = personalign.compare(st, ["majority", module], examples, lm=mock_lm, n_boot=20)
    assert [r["name"] for r in cmp.rows] == ["all-yes", "majority", "Predict"]
    compiled = personalign.compile(st, module, examples, optimizer="labeled", lm=mock_lm)
    assert compiled.strategy == "Predict" and compiled.info["chosen"] is not None
    assert cmp["data"] == f"examples (a list of {len(examples)})" and compiled.info["data"] == cmp["data"]


def test_examples_as_a_list_leave_no_file_and_errors_name_the_example(task, runs_dir, monkeypatch, tmp_path):
    import tempfile

    import personalign
    from personalign.errors import DataError
    from personalign.stages.ref import resolve_stage

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    st = resolve_stage(str(task / "stage.toml"))
    examples = st.load(task / "data.jsonl")
    personalign.compare(st, "majority", examples, n_boot=20)
    no_train = [ex.copy(split="val") for ex in examples]
    with pytest.raises(DataError, match=r"^examples: field 'split'"):
        personalign.compare(st, "majority", no_train, n_boot=20)
    assert not list(tmp_path.glob("personalign-*")), "the temporary JSONL outlives the call"


# --- item 5: loading is safe --------------------------------------------------------------------

def test_a_saved_program_never_imports_a_file_on_its_own(task, runs_dir, tmp_path):
    import personalign
    from personalign.errors import ConfigurationError

    ref = _refs(task)["py"]
    out = tmp_path / "prog"
    personalign.compile(ref, "majority", task / "data.jsonl", out=out)
    with pytest.raises(ConfigurationError, match="does not import a file named by a saved program"):
        personalign.load_program(out)
    program = personalign.load_program(out, stage=ref)
    rows = [json.loads(x) for x in (task / "data.jsonl").read_text().splitlines()]
    train = [r["follows"] for r in rows if r["split"] == "train"]
    majority = max(dict.fromkeys(train), key=train.count)  # ties: the first seen, as Counter.most_common
    assert program(preference="p", question="q", option="o").follows is majority


def test_a_users_optimizer_by_reference(task, mock_lm, runs_dir):
    import personalign

    (task / "my_opt.py").write_text(
        "from personalign.optimizers.labeled import LabeledFewShot\n\n\n"
        "class TwoShot(LabeledFewShot):\n    \"\"\"Labeled few-shot, two demos.\"\"\"\n\n"
        "    def __init__(self, *, k: int = 2, **common):\n        super().__init__(k=k, **common)\n")
    spec = f"predict,predict@{task / 'my_opt.py'}:TwoShot"
    cmp = personalign.compare(str(task / "stage.toml"), spec, task / "data.jsonl", lm=mock_lm, n_boot=20)
    row = cmp.row(f"predict@{task / 'my_opt.py'}:TwoShot")
    assert row["compile"]["optimizer"] and row["compile"]["config"]["k"] == 2
    assert row["vs_uncompiled"]["against"] == "predict"


def test_the_stage_files_sweep_section_joins_the_default_space(tmp_path):
    from personalign.stages.ref import resolve_stage
    from personalign.sweeps.defaults import default_space
    from personalign.sweeps.space import SearchSpace

    (tmp_path / "s.toml").write_text(GOOD + '\n[sweep]\nstrategies = ["majority", "minilm-logreg"]\n'
                                            '[sweep.strategy.minilm-logreg]\nC = {low = 0.01, high = 1.0, log = true}\n')
    st = resolve_stage(str(tmp_path / "s.toml"))
    space = default_space(st)
    assert space["strategies"] == ["majority", "minilm-logreg"] and "C" in space["strategy"]["minilm-logreg"]
    SearchSpace.from_dict(st, space)  # a valid space for this stage


def test_data_validate_reads_a_file_with_a_users_stage(task, capsys):
    from personalign.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["data", "validate", str(task / "data.jsonl"), "--kind", str(task / "stage.toml")])
    assert exc.value.code == 0 and "ok: 60" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["data", "stats", str(task / "data.jsonl"), "--kind", str(task / "stage.toml"), "--json"])
    s = json.loads(capsys.readouterr().out)
    assert exc.value.code == 0 and s["n"] == 60 and sum(s["labels"].values()) == 60
    assert s["splits"] == {"train": 36, "val": 12, "test": 12} and s["groups"] == {"topic": 10}
    assert set(s["lengths"]) == {"preference", "question", "option"}


def test_a_false_positive_class_fits_and_scores_that_class(task, runs_dir):
    """``positive = false``: F1 is of the 'does not follow' class, majority still fits."""
    import personalign
    from personalign.stages.ref import resolve_stage

    (task / "neg.toml").write_text(GOOD.replace("positive = true", "positive = false"))
    st = resolve_stage(str(task / "neg.toml"))
    assert st.positive is False and st.positive_name == "not follows"
    compiled = personalign.compile(st, "majority", task / "data.jsonl")
    ev = personalign.evaluate(st, compiled, task / "data.jsonl", split="test", n_boot=20)
    gold_neg = sum(1 for ex in st.load(task / "data.jsonl", "test") if not ex.follows) / 12
    assert ev["gold_yes_rate"] == pytest.approx(gold_neg)
    assert ev["yes_rate"] in (0.0, 1.0)  # one label everywhere
