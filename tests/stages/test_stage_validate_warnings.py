"""``personalign stage validate FILE --data DATA`` warns (exit 0, one line each on stderr, counted in
the summary) on data that loads but is probably a mistake: duplicate ids, an unknown split (with the
closest known one), a single-example group of the stage's ``group_key``."""

from __future__ import annotations

import json

import pytest

from tests.stages.conftest import OWN_TASK as EXAMPLE


def _edit(own_task, edits: dict[int, dict], extra: list[dict] = ()) -> None:
    """Rewrite data.jsonl with row ``i`` (0-based) updated by ``edits[i]`` and ``extra`` rows appended."""
    path = own_task / "data.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for i, change in edits.items():
        rows[i].update(change)
    path.write_text("".join(json.dumps(r) + "\n" for r in [*rows, *extra]))


def _validate(own_task, capsys, *extra: str):
    from personalign.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["stage", "validate", str(own_task / "stage.toml"), "--data", str(own_task / "data.jsonl"), *extra])
    out, err = capsys.readouterr()
    return exc.value.code, out, [line for line in err.splitlines() if line.strip()]


def test_clean_data_has_no_warnings(own_task, capsys):
    code, out, err = _validate(own_task, capsys)
    assert code == 0 and err == [] and "60 rows" in out and out.rstrip().endswith("; 0 warnings")


CASES = {
    "duplicate id": ({5: {"id": "food-1"}}, [], "data.jsonl:6: field 'id': 'food-1' is the id of 2 rows: lines 1, 6"),
    "misspelt split": ({3: {"split": "tran"}}, [], "data.jsonl:4: field 'split': 'tran' (1 row: line 4) is not one "
                       "of the known splits (train, val, test); did you mean 'train'?"),
    "single-example group": ({}, [{"id": "x-1", "split": "train", "topic": "lonely", "preference": "p",
                                   "question": "q", "option": "o", "follows": True}],
                             "data.jsonl:61: field 'topic': group 'lonely' has a single example"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_problem_is_one_warning_line_and_exit_0(case, own_task, capsys):
    edits, extra, expected = CASES[case]
    _edit(own_task, edits, extra)
    code, out, err = _validate(own_task, capsys)
    assert code == 0, err
    assert len(err) == 1 and err[0].startswith("warning: ") and expected in err[0], err
    assert str(own_task / "data.jsonl") in err[0] and "Traceback" not in err[0]
    assert out.rstrip().endswith("; 1 warning")


def test_warnings_add_up_and_a_bad_row_still_fails(own_task, capsys):
    _edit(own_task, {5: {"id": "food-1"}, 3: {"split": "tran"}, 7: {"split": "tran"}, 9: {"split": "xyzzy"}})
    code, out, err = _validate(own_task, capsys)
    assert code == 0 and len(err) == 3 and out.rstrip().endswith("; 3 warnings"), err
    assert "'tran' (2 rows: lines 4, 8)" in err[1] and "did you mean" not in err[2]  # nothing close to 'xyzzy'
    _edit(own_task, {10: {"follows": "yes"}})
    code, out, err = _validate(own_task, capsys)
    assert code == 2 and len(err) == 1 and err[0].startswith("error: ") and "data.jsonl:11" in err[0], err
    assert "'follows'" in err[0]


def test_the_train_split_is_known_and_groups_need_a_group_key(own_task, capsys):
    _edit(own_task, {i: {"split": "fit"} for i in range(60) if json.loads(
        (EXAMPLE / "data.jsonl").read_text().splitlines()[i])["split"] == "train"})
    code, out, err = _validate(own_task, capsys, "--train-split", "fit")
    assert code == 0 and err == [], err
    toml = own_task / "stage.toml"
    toml.write_text("\n".join(l for l in toml.read_text().splitlines() if not l.startswith("group_key")) + "\n")
    _edit(own_task, {}, [{"id": "x-1", "split": "fit", "topic": "lonely", "preference": "p", "question": "q",
                      "option": "o", "follows": True}])
    code, out, err = _validate(own_task, capsys, "--train-split", "fit")
    assert code == 0 and err == [], err  # no group_key: no group to be alone in


def test_data_validate_with_a_stage_kind_gives_the_same_warnings(own_task, capsys):
    from personalign.cli import main

    _edit(own_task, {3: {"split": "tran"}, 5: {"id": "food-1"}})
    with pytest.raises(SystemExit) as exc:
        main(["data", "validate", str(own_task / "data.jsonl"), "--kind", str(own_task / "stage.toml")])
    out, err = capsys.readouterr()
    warnings = [line for line in err.splitlines() if line.strip()]
    assert exc.value.code == 0 and out.rstrip().endswith("; 2 warnings"), out
    assert len(warnings) == 2 and all(w.startswith("warning: ") for w in warnings)
    assert any("did you mean 'train'?" in w for w in warnings) and any("'food-1' is the id of 2 rows" in w for w in warnings)
