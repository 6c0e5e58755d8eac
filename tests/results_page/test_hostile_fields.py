"""``personalign view`` with a result whose fields have the wrong type (a string for ``row_fields``,
a list for ``f1_by_group``, ...) or whose ``--out`` is a file of the run the result names (its data
file, its stage file, its chart) -- security review 2: each crashed with a traceback or overwrote
the file. Now each is one line ``error: ...``, exit 2, nothing written or changed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from personalign.errors import ArgumentError, DataError
from personalign.results_page import check_result
from personalign.results_page.checks import check_not_an_input, page_inputs
from tests.results_page.test_hostile import _refused, _snapshot
from tests.results_page.test_page import _run_view


def _set(path: str, value):
    """An edit of a result: set the dotted ``path`` (``strategies.0.warnings``) to ``value``."""
    def edit(result: dict) -> None:
        *parents, last = path.split(".")
        obj = result
        for p in parents:
            obj = obj[int(p)] if isinstance(obj, list) else obj[p]
        obj[last] = value
    return edit


@pytest.mark.parametrize("field,value,problem", [
    ("row_fields", "inputs", "expected an object or null, got a string"),
    ("row_fields", [1, 2], "expected an object or null, got a list"),
    ("row_fields.inputs", [1, 2], "field 'row_fields.inputs.0': expected text, got a whole number"),
    ("row_fields.gold", ["x"], "expected text or null, got a list"),
    ("run_record", "compare x", "expected an object or null, got a string"),
    ("run_record.command", {"a": 1}, "expected text or null, got an object"),
    ("strategies.1.f1_by_group", [0.5], "expected an object or null, got a list"),
    ("strategies.0.accuracy_by_group", "x", "expected an object or null, got a string"),
    ("strategies.0.row_errors", 3, "expected an object or null, got a whole number"),
    ("strategies.0.resampling.unit", None, "expected text, got null"),
    ("strategies.0.f1", 1e308, "is beyond ±1e+15"),
    ("strategies.0.resampling.unit", ["prompt_id"], "expected text, got a list"),
    ("strategies.0.name", "x" * 100_000, "longer than 200 characters"),
    ("strategies.0.warnings", "careful", "expected a list or null, got a string"),
    ("strategies.1.errors", {"0": "boom"}, "expected a list or null, got an object"),
    ("strategies.0.scores", "high", "expected a list or null, got a string"),
    ("strategies.0.vs_first", [1], "expected an object or null, got a list"),
    ("stage", None, "expected text, got null"),
    ("stage", ["a"], "expected text, got a list"),
    ("strategy_names", "a,b", "expected a list or null, got a string"),
    ("split", 3, "expected text or null, got a whole number"),
    ("n_boot", 1e308, "is beyond ±1e+15"),
    ("n_boot", "10", "expected a number or null, got a string"),
])
def test_a_field_of_the_wrong_type_is_one_line_naming_the_dotted_field(single_split, field, value, problem):
    result = json.loads(json.dumps(single_split[0]))
    _set(field, value)(result)
    with pytest.raises(DataError) as exc:
        check_result(result, "r.json")
    assert exc.value.field == field or problem.startswith(f"field '{exc.value.field}'"), exc.value
    assert problem.split(": ", 1)[-1] in str(exc.value), str(exc.value)


@pytest.mark.parametrize("field,value", [("row_fields", "inputs"), ("strategies.0.errors", {"0": "boom"}),
                                         ("run_record", "x")])
def test_the_cli_refuses_a_field_of_the_wrong_type_in_one_line(single_split, tmp_path, field, value):
    result = json.loads(json.dumps(single_split[0]))
    _set(field, value)(result)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(result))
    before = _snapshot(tmp_path)
    _refused(_run_view(path.name, cwd=tmp_path), f"error: {path.name}: field '{field}': expected")
    assert _snapshot(tmp_path) == before


def test_the_fields_of_real_results_pass_the_types(single_split, cv_groups):
    for result, _ in (single_split, cv_groups):
        assert check_result(json.loads(json.dumps(result))) is not None
    # a run on an OpenAI-compatible endpoint records it as an object (the fresh attack: `--html` with
    # `--api-base` ran the whole compare, then refused its own result)
    endpoint = {"model": "openai/x", "api_base": "http://127.0.0.1:9/v1", "adapter": "json"}
    assert check_result({**json.loads(json.dumps(single_split[0])), "endpoint": endpoint}) is not None


@pytest.fixture
def run_folder(single_split, own_task_copy, tmp_path) -> Path:
    """A run laid out as compare leaves it: ``stage.toml`` and ``data.jsonl`` in ``tmp_path``, the
    result (carrying rows, so the page reads neither) and its chart under ``runs/compare/``, the
    result naming the data and the stage by paths relative to ``tmp_path``."""
    for name in ("stage.toml", "data.jsonl", "my_task.py"):
        shutil.copy(own_task_copy / name, tmp_path / name)
    folder = tmp_path / "runs" / "compare"
    folder.mkdir(parents=True)
    (folder / "run.png").write_bytes(b"\x89PNG the chart")
    result = json.loads(json.dumps(single_split[0]))
    result.update(data="data.jsonl", stage_ref="stage.toml", chart_file=str(folder / "run.png"),
                  result_file=str(folder / "run.json"))
    (folder / "run.json").write_text(json.dumps(result))
    (tmp_path / "elsewhere").mkdir()
    return tmp_path


@pytest.mark.parametrize("cwd,out", [
    (".", "data.jsonl"), (".", "stage.toml"), (".", "runs/compare/run.png"),
    ("elsewhere", "../data.jsonl"), ("elsewhere", "../stage.toml"), ("elsewhere", "../runs/compare/run.png"),
])
def test_out_that_is_the_runs_data_stage_or_chart_is_refused(run_folder, cwd, out):
    """The result carries its rows (the page reads no data file), its data and stage recorded
    relative to the folder the run started in: ``--out`` naming any of them, from that folder or
    another, is refused; so is a hard link to the data file."""
    before = _snapshot(run_folder)
    result = str(run_folder / "runs" / "compare" / "run.json")
    _refused(_run_view(result, "--out", out, cwd=run_folder / cwd), f"error: --out {out} is", "a file the page reads")
    assert _snapshot(run_folder) == before


def test_out_that_is_a_hard_link_to_the_data_or_the_builtin_stage_is_refused(run_folder):
    import os

    os.link(run_folder / "data.jsonl", run_folder / "elsewhere" / "page.html")
    result = json.loads((run_folder / "runs" / "compare" / "run.json").read_text())
    source = run_folder / "runs" / "compare" / "run.json"
    with pytest.raises(ArgumentError):
        check_not_an_input(run_folder / "elsewhere" / "page.html", page_inputs(result, source))
    # a result of a built-in stage names it by name: its stage.toml in the package is the stage file
    from personalign.stages.ref import BUILTIN_DIR

    with pytest.raises(ArgumentError):
        check_not_an_input(BUILTIN_DIR / "relevance" / "stage.toml", page_inputs({"stage": "relevance"}, None))
    with pytest.raises(ArgumentError):  # --stage naming a file.py:ATTR
        check_not_an_input(run_folder / "my_task.py", page_inputs({"stage": "x"}, None,
                                                                  stage=str(run_folder / "my_task.py") + ":Stage"))
    check_not_an_input(run_folder / "elsewhere" / "other.html", page_inputs(result, source))  # another path: fine
