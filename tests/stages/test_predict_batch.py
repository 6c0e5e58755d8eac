"""``personalign predict batch`` / :func:`personalign.predict`: a saved program of a
user's own stage (the example's stage.toml) on unlabelled rows. The LM is the in-process ``mock``
provider (no model loaded); failures come from a ``DummyLM`` whose answers do not parse."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from personalign.errors import ConfigurationError, DataError
from tests.conftest import cli_env

MOCK = "mock/own-task"


@pytest.fixture
def setup(own_task, runs_dir):
    """``(stage, program dir, unlabelled rows file, the rows)``: ``predict`` compiled on the mock LM,
    the test split without label or split, with a blank line (line numbers must skip it)."""
    import personalign
    from personalign.stages.ref import resolve_stage
    from personalign.testing import mock_provider

    mock_provider.register()
    stage_file = own_task / "stage.toml"
    prog = own_task / "prog"
    personalign.compile(str(stage_file), "predict", str(own_task / "data.jsonl"), lm=MOCK, out=str(prog))
    rows = []
    for line in (own_task / "data.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec.pop("split") == "test":
            rec.pop("follows")
            rows.append(rec)
    new = own_task / "new.jsonl"
    lines = [json.dumps(r) for r in rows]
    new.write_text("\n".join(lines[:3] + [""] + lines[3:]) + "\n")
    return resolve_stage(str(stage_file)), prog, new, rows


def test_batch_predictions_are_the_programs_own_row_by_row(setup, tmp_path):
    import personalign
    from personalign.lm import make_lm, use
    from tests.stages.conftest import predict_file

    st, prog, new, rows = setup
    out = tmp_path / "sub" / "preds.jsonl"
    res = predict_file(st, prog, new, out=out, lm=MOCK)
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert written == res["predictions"] and res["n"] == len(rows) == 12
    assert [p["id"] for p in written] == [r["id"] for r in rows]
    assert [p["line"] for p in written] == [1, 2, 3, *range(5, 14)]  # the blank line 4 is skipped
    program = personalign.load_program(prog, stage=st)
    with use(make_lm(MOCK)):
        direct = [bool(program(**{k: r[k] for k in st.inputs}).follows) for r in rows]
    assert [p["follows"] for p in written] == direct
    assert 0 < sum(direct) < 12  # the mock says yes to some rows, not all: the comparison can fail
    assert res["positives"] == sum(direct) and res["failures"] == 0 and res["lm_calls"] <= 12  # DSPy cache hits
    assert res["lm"] == MOCK and res["stage"] == "option-follows" and res["strategy"] == "predict"


def test_lm_failures_are_rows_with_an_error_not_a_crash(setup, tmp_path):
    from dspy.utils import DummyLM

    from tests.stages.conftest import predict_file

    st, prog, new, rows = setup
    res = predict_file(st, prog, new, out=tmp_path / "p.jsonl", lm=DummyLM([{"follows": "perhaps"}] * 500))
    assert res["failures"] == len(rows) and res["positives"] == 0
    assert all(p["follows"] is None and p["error"] for p in res["predictions"])


@pytest.mark.parametrize("row, field", [({"question": "q", "option": "o"}, "preference"),
                                        ({"preference": 3, "question": "q", "option": "o"}, "preference"),
                                        ({"id": 7, "preference": "p", "question": "q", "option": "o"}, "id")])
def test_a_bad_row_names_file_line_and_field_and_writes_nothing(setup, tmp_path, row, field):
    from tests.stages.conftest import predict_file

    st, prog, new, _ = setup
    bad = tmp_path / "bad.jsonl"
    bad.write_text(new.read_text() + json.dumps(row) + "\n")
    out = tmp_path / "p.jsonl"
    out.write_text("earlier\n")
    with pytest.raises(DataError) as err:
        predict_file(st, prog, bad, out=out, lm=MOCK)
    assert err.value.line == 14 and err.value.field == field and err.value.path.endswith("bad.jsonl")
    assert out.read_text() == "earlier\n"  # loses nothing
    with pytest.raises(ConfigurationError, match="is the input file"):
        predict_file(st, prog, new, out=new, lm=MOCK)
    with pytest.raises(ConfigurationError, match="is a directory"):
        predict_file(st, prog, new, out=tmp_path, lm=MOCK)


def test_a_unit_rule_program_needs_its_unit_fields(own_task):
    """A program deciding within units (top share per topic) cannot rank rows that do not say their unit."""
    import dspy

    from personalign.data.inputs import read_inputs
    from personalign.programs.decision import DecisionRule, with_rule
    from personalign.stages.ref import resolve_stage
    from personalign._verbs.predict import _unit_fields

    st = resolve_stage(str(own_task / "stage.toml"))
    rule = DecisionRule(kind="top_share", value=0.5, cv_objective=0.5, raw_objective=None, n=10, n_groups=2,
                        n_splits=2)
    assert _unit_fields(st, with_rule(dspy.Predict(st.signature_class), rule, "follows", None)) == ("topic",)
    threshold = DecisionRule(kind="threshold", value=0.5, cv_objective=0.5, raw_objective=None, n=10, n_groups=2,
                             n_splits=2)
    assert _unit_fields(st, with_rule(dspy.Predict(st.signature_class), threshold, "follows", None)) == ()
    rows = own_task / "rows.jsonl"
    rows.write_text(json.dumps({"preference": "p", "question": "q", "option": "o", "topic": "t"}) + "\n"
                    + json.dumps({"preference": "p", "question": "q", "option": "o"}) + "\n")
    with pytest.raises(DataError) as err:
        read_inputs(rows, st, unit_fields=("topic",))
    assert (err.value.line, err.value.field) == (2, "topic")
    assert len(read_inputs(rows, st)) == 2


def test_the_cli_prints_jsonl_rows_or_writes_them(setup, tmp_path):
    st, prog, new, rows = setup
    stage_file = str(prog.parent / "stage.toml")
    env = cli_env(tmp_path / "runs")

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "personalign.testing.mock_provider", "predict", "batch",
                               stage_file, "--program", str(prog), "--lm", MOCK, *args], capture_output=True,
                              text=True, env=env, cwd=tmp_path, timeout=600)

    shown = cli("--data", str(new))
    assert shown.returncode == 0, shown.stderr[-2000:]
    printed = [json.loads(line) for line in shown.stdout.splitlines()]  # stdout is pure JSONL
    assert [p["id"] for p in printed] == [r["id"] for r in rows]
    assert "on 12 rows" in shown.stderr and "failures 0" in shown.stderr
    out = tmp_path / "p.jsonl"
    written = cli("--data", str(new), "--out", str(out), "--json")
    assert written.returncode == 0, written.stderr[-2000:]
    summary = json.loads(written.stdout)
    assert summary["n"] == 12 and "predictions" not in summary and summary["out"] == str(out)
    assert [json.loads(line) for line in out.read_text().splitlines()] == printed
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "question": "q"}\n')
    dash = cli("--data", str(new), "--out", "-")
    assert dash.returncode == 0 and [json.loads(line) for line in dash.stdout.splitlines()] == printed
    assert not (tmp_path / "-").exists()
    refused = cli("--data", str(bad), "--out", str(tmp_path / "never.jsonl"))
    assert refused.returncode == 2 and not (tmp_path / "never.jsonl").exists()
    assert refused.stderr.strip().splitlines()[-1] == (
        f"error: {bad}:1: field 'preference': missing (an input of stage option-follows: preference, question, option)")


def test_out_is_a_regular_file_checked_before_any_prediction(setup, tmp_path, monkeypatch):
    """``--out`` is checked before the first model call: a pipe, a device or a folder that is a file
    are refused; a symlink is followed (the link stays); the written file has the usual mode."""
    import os
    import stat

    from tests.stages.conftest import predict_file

    st, prog, new, _ = setup

    def refuse(out, match):
        calls = []
        monkeypatch.setattr("personalign.programs.run.run_program", lambda *a, **k: calls.append(1))
        with pytest.raises(ConfigurationError, match=match):
            predict_file(st, prog, new, out=out, lm=MOCK)
        monkeypatch.undo()
        assert calls == []

    loop = tmp_path / "loop1"
    loop.symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(loop)
    refuse(loop, "loop")
    refuse(f"{tmp_path / 'newdir'}/", "names a folder")
    refuse(prog / "program.json", "inside the saved program")
    refuse(prog.parent / "stage.toml", "is the stage file")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    refuse(fifo, "is a named pipe")
    refuse("/dev/null", "is a device")
    (tmp_path / "afile").write_text("x")
    refuse(tmp_path / "afile" / "p.jsonl", "is a file, not a folder")
    assert stat.S_ISFIFO(fifo.stat().st_mode) and (tmp_path / "afile").read_text() == "x"

    real = tmp_path / "real.jsonl"
    real.write_text("old\n")
    real.chmod(0o640)
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    predict_file(st, prog, new, out=link, lm=MOCK)
    assert link.is_symlink() and len(real.read_text().splitlines()) == 12
    assert stat.S_IMODE(real.stat().st_mode) == 0o640  # the replaced file's mode is kept
    old = os.umask(0o022)
    try:
        predict_file(st, prog, new, out=tmp_path / "fresh.jsonl", lm=MOCK)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "fresh.jsonl").stat().st_mode) == 0o644  # not mkstemp's 0o600


def test_a_null_input_is_named_as_null(own_task):
    from personalign.data.inputs import read_inputs
    from personalign.stages.ref import resolve_stage

    st = resolve_stage(str(own_task / "stage.toml"))
    rows = own_task / "rows.jsonl"
    rows.write_text(json.dumps({"preference": "p", "question": None, "option": "o"}) + "\n")
    with pytest.raises(DataError, match="null; every input needs a value") as err:
        read_inputs(rows, st)
    assert (err.value.line, err.value.field) == (1, "question")
    rows.write_text(json.dumps({"id": None, "preference": "p", "question": "q", "option": "o"}) + "\n")
    with pytest.raises(DataError, match="null; give a string id") as err:
        read_inputs(rows, st)
    assert err.value.field == "id"


@pytest.mark.parametrize("edit, shown", [
    ([('option = "one recommended option"', 'choice = "one recommended option"')],
     "inputs preference, question, option -> preference, question, choice"),
    ([("positive = true", "positive = false")], "positive True -> False"),
    ([('type = "bool"', 'type = ["yes", "no"]'), ('kind = "binary"', 'kind = "multiclass"'),
      ('objective = "f1"', 'objective = "accuracy"')],
     "output_type bool -> typing.Literal['yes', 'no']"),
])
def test_a_program_of_an_edited_stage_is_refused(own_task, runs_dir, edit, shown):
    """The saved program records the signature it was compiled for; a stage file edited since (an
    input renamed, the output's type or labels changed) no longer loads it, in every verb."""
    import personalign
    from personalign.stages.ref import resolve_stage
    from tests.stages.conftest import predict_file

    stage_file = own_task / "stage.toml"
    prog = own_task / "prog"
    personalign.compile(str(stage_file), "majority", str(own_task / "data.jsonl"), out=str(prog))
    assert personalign.load_program(prog, stage=str(stage_file)) is not None
    text = stage_file.read_text()
    for old, new in edit:
        assert old in text
        text = text.replace(old, new)
    stage_file.write_text(text)
    st = resolve_stage(str(stage_file))
    with pytest.raises(ConfigurationError, match="compiled for another signature") as err:
        personalign.load_program(prog, stage=st)
    assert shown in str(err.value)
    rows = own_task / "rows.jsonl"
    rows.write_text(json.dumps({"preference": "p", "question": "q", "option": "o", "choice": "o"}) + "\n")
    with pytest.raises(ConfigurationError, match="compiled for another signature"):
        predict_file(st, prog, rows)
