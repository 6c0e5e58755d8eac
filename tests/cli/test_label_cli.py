"""``personalign label merge|next`` through the command line: the happy path writes what the stage's
loader reads; bad input is one ``error:`` line, exit 2, and nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from personalign.cli import main
from tests.conftest import DEMO

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "recenter_relevance"


def _run(argv, capsys):
    with pytest.raises(SystemExit) as ei:
        main(argv)
    out, err = capsys.readouterr()
    return (ei.value.code or 0), out, err


def _rows(tmp_path, annotations):
    base = [json.loads(line) for line in DEMO.read_text().splitlines()[:4]]
    path = tmp_path / "annotated.jsonl"
    path.write_text("".join(json.dumps({**r, "annotations": a}) + "\n" for r, a in zip(base, annotations)))
    return path


GOOD = [{"a": True, "b": True, "c": False}, {"a": False, "b": False, "c": False},
        {"a": True, "b": False, "c": True}, {"a": True, "b": False}]


def test_merge_writes_rows_the_stage_reads(tmp_path, capsys, runs_dir):
    data, out = _rows(tmp_path, GOOD), tmp_path / "merged.jsonl"
    code, stdout, err = _run(["label", "merge", "relevance", str(data), "--out", str(out), "--json"], capsys)
    assert code == 0, err
    summary = json.loads(stdout)
    assert summary["annotated"] == 4 and summary["written"] == 4 and summary["agreement"]["n_annotators"] == 3
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["relevant"] for r in rows] == [True, False, True, False]  # the 1-1 tie: not relevant
    assert [r["n_annotators"] for r in rows] == [3, 3, 3, 2] and rows[2]["human_yes_rate"] == pytest.approx(2 / 3)
    from personalign.stages import resolve_stage as get_stage

    assert len(get_stage("relevance").load(out)) == 4


@pytest.mark.parametrize("annotations, words", [
    ([[True, False]] + GOOD[1:], "annotated.jsonl:1: field 'annotations': expected an object"),
    ([{}] + GOOD[1:], "annotated.jsonl:1: field 'annotations': empty"),
    (GOOD[:2] + [{"a": True, "b": "yes"}] + GOOD[3:], "annotated.jsonl:3: field 'annotations.b': expected a boolean label"),
])
def test_merge_bad_annotations(tmp_path, capsys, runs_dir, annotations, words):
    data, out = _rows(tmp_path, annotations), tmp_path / "merged.jsonl"
    code, stdout, err = _run(["label", "merge", "relevance", str(data), "--out", str(out)], capsys)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and words in err, err
    assert not out.exists() and stdout == ""


@pytest.mark.parametrize("extra, words", [
    (["--ties", "coin"], "--ties must be one of"),
    (["--join", str(DEMO)], "--join is for a raw recenter annotation file"),
])
def test_merge_bad_options(tmp_path, capsys, runs_dir, extra, words):
    data, out = _rows(tmp_path, GOOD), tmp_path / "merged.jsonl"
    code, _, err = _run(["label", "merge", "relevance", str(data), "--out", str(out), *extra], capsys)
    assert code == 2 and words in err and err.count("\n") == 1 and not out.exists()


def test_merge_refuses_a_folder_or_the_input_as_out(tmp_path, capsys, runs_dir):
    data = _rows(tmp_path, GOOD)
    before = data.read_text()
    code, _, err = _run(["label", "merge", "relevance", str(data), "--out", str(tmp_path)], capsys)
    assert code == 2 and "is a directory" in err and err.count("\n") == 1, err
    code, _, err = _run(["label", "merge", "relevance", str(data), "--out", str(data)], capsys)
    assert code == 2 and "is the input file" in err and data.read_text() == before


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data (the recenter raw annotations) is absent")
def test_merge_of_the_recenter_raw_file(tmp_path, capsys, runs_dir):
    raw = SHARED / "raw_task3_annotations.jsonl"
    code, _, err = _run(["label", "merge", "relevance", str(raw), "--out", str(tmp_path / "m.jsonl")], capsys)
    assert code == 2 and "--join" in err and not (tmp_path / "m.jsonl").exists()
    code, stdout, err = _run(["label", "merge", "relevance", str(raw), "--join", str(SHARED / "relevance_labels.jsonl"),
                              "--json"], capsys)
    summary = json.loads(stdout)
    assert code == 0 and summary["joined"]["matched"] == 212 and summary["agreement"]["n_judgments"] == 813
    assert summary["agreement"]["fleiss"]["raters_per_item"] == 4


def _split_files(tmp_path):
    rows = [json.loads(line) for line in DEMO.read_text().splitlines()]
    held = {"demo:p5", "demo:p6", "demo:p7"}
    labelled, pool = tmp_path / "labelled.jsonl", tmp_path / "pool.jsonl"
    labelled.write_text("".join(json.dumps(r) + "\n" for r in rows if r["prompt_id"] not in held))
    pool.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "relevant"}) + "\n"
                            for r in rows if r["prompt_id"] in held))
    return labelled, pool


def test_next_writes_the_chosen_rows(tmp_path, capsys, runs_dir):
    labelled, pool = _split_files(tmp_path)
    out = tmp_path / "next.jsonl"
    code, stdout, err = _run(["label", "next", "relevance", "--labelled", str(labelled), "--pool", str(pool), "--k", "3",
                              "--strategies", "bm25,all-yes", "--folds", "4", "--out", str(out), "--json"], capsys)
    assert code == 0, err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 3 and {r["prompt_id"] for r in rows} == {"demo:p5", "demo:p6", "demo:p7"}
    assert all(0 < r["selection_probability"] <= 1 and "relevant" not in r for r in rows)
    assert json.loads(stdout)["n_chosen"] == 3


@pytest.mark.parametrize("extra, words", [
    (["--k", "0"], "--k must be >= 1"),
    (["--floor", "2"], "--floor must be in (0, 1]"),
    (["--goal", "guess"], "--goal must be compare or compile"),
    (["--strategies", "bm25"], "at least two names"),
    (["--strategies", "bm25,nope"], "nope"),
    (["--goal", "compile"], "--goal compile needs --program"),
])
def test_next_bad_options(tmp_path, capsys, runs_dir, extra, words):
    labelled, pool = _split_files(tmp_path)
    out = tmp_path / "next.jsonl"
    argv = ["label", "next", "relevance", "--labelled", str(labelled), "--pool", str(pool), "--out", str(out)]
    if not any(x == "--strategies" for x in extra):
        argv += ["--strategies", "bm25,all-yes"]
    code, _, err = _run(argv + extra, capsys)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and words in err, err
    assert not out.exists()


@pytest.mark.parametrize("edit, words", [
    (lambda r: {k: v for k, v in r.items() if k != "id"}, "pool.jsonl:1: field 'id': missing"),
    (lambda r: {k: v for k, v in r.items() if k != "attribute"}, "pool.jsonl:1: field 'attribute': missing"),
    (lambda r: {**r, "prompt_id": None}, "pool.jsonl:1: field 'prompt_id': missing"),
])
def test_next_bad_pool_rows(tmp_path, capsys, runs_dir, edit, words):
    labelled, pool = _split_files(tmp_path)
    lines = pool.read_text().splitlines()
    pool.write_text("\n".join([json.dumps(edit(json.loads(lines[0])))] + lines[1:]) + "\n")
    out = tmp_path / "next.jsonl"
    code, _, err = _run(["label", "next", "relevance", "--labelled", str(labelled), "--pool", str(pool), "--out",
                         str(out), "--strategies", "bm25,all-yes"], capsys)
    assert code == 2 and words in err and err.count("\n") == 1, err
    assert not out.exists()


def test_a_second_round_reads_the_first_rounds_rows_and_weights_them(tmp_path, capsys, runs_dir):
    """Round 1 writes rows with their selection records; labelled and appended, the stage's loader reads
    them, and round 2 continues the draws and reports the weighted estimate."""
    labelled, pool = _split_files(tmp_path)
    out1 = tmp_path / "round1.jsonl"
    argv = ["label", "next", "relevance", "--labelled", str(labelled), "--pool", str(pool), "--strategies",
            "bm25,all-yes", "--folds", "4", "--k", "6"]
    assert _run(argv + ["--out", str(out1)], capsys)[0] == 0
    gold = {json.loads(line)["id"]: json.loads(line)["relevant"] for line in DEMO.read_text().splitlines()}
    chosen = [json.loads(line) for line in out1.read_text().splitlines()]
    with labelled.open("a") as fh:
        for row in chosen:
            fh.write(json.dumps({**row, "relevant": gold[row["id"]]}) + "\n")
    code, stdout, err = _run(argv + ["--seed", "1", "--json"], capsys)
    assert code == 0, err
    result = json.loads(stdout)
    assert result["round"] == 2 and len(result["rows"]) == 6
    assert not {r["id"] for r in result["rows"]} & {r["id"] for r in chosen}  # labelled rows are not offered again
    assert "diff" in result["estimate"] and result["estimate"]["n_labels"] == 42


def test_next_goal_compile_picks_rows_near_the_decision_rule(tmp_path, capsys, runs_dir):
    from personalign.compile_service import compile_program
    from personalign.programs.saved import save_program
    from personalign.stages import resolve_stage as get_stage

    st = get_stage("relevance")
    labelled, pool = _split_files(tmp_path)
    program, info = compile_program(st, "bm25", None, st.load(labelled))
    save_program(program, tmp_path / "prog", stage="relevance", strategy="bm25", compile_info=info,
                 signature=st.signature_record())
    code, stdout, err = _run(["label", "next", "relevance", "--labelled", str(labelled), "--pool", str(pool),
                              "--goal", "compile", "--program", str(tmp_path / "prog"), "--k", "6", "--json"], capsys)
    assert code == 0, err
    result = json.loads(stdout)
    assert result["goal"] == "compile" and result["leading"] == ["bm25"] and len(result["rows"]) == 6
    assert all(0 < r["acquisition"] <= 1 and 0 < r["selection_probability"] <= 1 for r in result["rows"])
