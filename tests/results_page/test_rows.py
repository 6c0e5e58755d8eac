"""The rows of a results page: the contract compare is to emit, and the fallback that rebuilds it
from the data file for results written before it -- checked against what compare actually
evaluated (captured while it ran), and refused when the data is missing or changed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.results_page.conftest import old_result

from personalign.errors import ConfigurationError, DataError
from personalign.results_page import check_rows, load_result, with_rows


@pytest.mark.parametrize("which", ["single_split", "cv_groups"])
def test_rows_rebuilt_from_the_data_file_are_the_rows_compare_evaluated(which, request):
    """From another folder: the relative stage and data paths the result records are found from
    the result file's place (``runs/compare/`` under the folder the run started in)."""
    contract, path = request.getfixturevalue(which)
    old = old_result(path)
    assert "rows" not in old  # as compare wrote it before the rows contract
    assert not Path(old["data"]).is_absolute() and not Path(old["data"]).exists()
    rebuilt = with_rows(old, result_path=path)
    assert [r["id"] for r in rebuilt["rows"]] == [r["id"] for r in contract["rows"]]
    assert [r["fold"] for r in rebuilt["rows"]] == [r["fold"] for r in contract["rows"]]
    assert [r["inputs"] for r in rebuilt["rows"]] == [r["inputs"] for r in contract["rows"]]
    assert [r["gold"] for r in rebuilt["rows"]] == [r["gold"] for r in contract["rows"]]
    for mine, theirs in zip(rebuilt["strategies"], contract["strategies"]):
        assert mine["correct"] == theirs["correct"]  # right/wrong per row as compare scored it
        assert mine["scores"] is None  # not in an old result: never invented
    assert rebuilt["rows_source"].startswith("rebuilt")


def test_cv_rows_carry_the_fold_they_were_scored_in(cv_groups):
    contract, _ = cv_groups
    assert [r["fold"] for r in contract["rows"]] == [r["group"] for r in contract["rows"]]
    assert list(dict.fromkeys(r["fold"] for r in contract["rows"])) == contract["groups"]
    assert len(contract["rows"]) == contract["n"] == 63


def test_the_contract_result_carries_scores_for_a_scoring_strategy(single_split):
    contract, _ = single_split
    by = {s["name"]: s for s in contract["strategies"]}
    assert all(isinstance(v, float) for v in by["minilm-logreg"]["scores"])
    assert len(set(by["minilm-logreg"]["scores"])) > 1
    check_rows(contract)


def test_a_changed_data_file_is_refused_in_one_line(single_split, tmp_path):
    _, path = single_split
    result = old_result(path)
    data = tmp_path / "data.jsonl"
    shutil.copy(path.parents[2] / result["data"], data)
    result["data"] = str(data)
    with data.open("a") as fh:
        fh.write(json.dumps({"id": "extra", "split": "val", "topic": "pets", "preference": "p", "question": "q",
                             "option": "o", "follows": True}) + "\n")
    with pytest.raises(DataError, match="changed since the run") as err:
        with_rows(result, result_path=path)
    assert "\n" not in str(err.value)


def test_a_missing_data_file_is_refused_and_names_it(single_split, tmp_path):
    _, path = single_split
    result = old_result(path)
    result["data"] = str(tmp_path / "gone.jsonl")
    with pytest.raises(DataError, match="gone.jsonl.*not found"):
        with_rows(result, result_path=path)


def test_a_stage_named_by_code_in_a_result_is_not_imported(single_split, tmp_path):
    """A result someone sent names ``evil.py:STAGE``: viewing it imports nothing (``--stage`` must say so)."""
    _, path = single_split
    result = old_result(path)
    result["stage"] = "not-built-in"
    result["run_record"] = {"command": f"personalign compare {tmp_path / 'evil.py'}:STAGE --data x"}
    (tmp_path / "evil.py").write_text("raise SystemExit('imported')\n")
    with pytest.raises(ConfigurationError, match="pass --stage"):
        with_rows(result, result_path=path)


def test_misaligned_rows_name_the_field(single_split):
    contract, _ = single_split
    bad = json.loads(json.dumps(contract))
    bad["strategies"][1]["scores"] = bad["strategies"][1]["scores"][:-1]
    with pytest.raises(DataError, match=r"strategies\[1\]\.scores"):
        check_rows(bad)


def test_rows_that_do_not_reproduce_the_result_are_refused(single_split, own_task_copy):
    """A result whose predictions were edited no longer matches its data's gold: refused, not shown."""
    _, path = single_split
    result = old_result(path)
    result["strategies"][1]["predictions"][0] = not result["strategies"][1]["predictions"][0]
    with pytest.raises(DataError, match="do not reproduce majority's accuracy"):
        with_rows(result, result_path=path, stage=str(own_task_copy / "stage.toml"))
