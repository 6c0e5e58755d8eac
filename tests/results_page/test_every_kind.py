"""The results page and ``personalign view`` of a result of every kind of strategy -- constant
(``all-yes``, ``majority``), learned and scored with a fitted decision rule (``minilm-logreg``),
compiled (``zero-shot@labeled`` on the in-process ``mock`` LM), leave-one-group-out, and a result
file of the older format (issue 43, item 3) -- each result made by the real ``compare``; and a
compare whose page, table or chart fails keeps its result file and names it in its one error line
(a compiled strategy's result once exited 2 with no table and no page:
``compile_summary.objective: expected a number or null, got a string``)."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from personalign.compile_service import summary_line
from personalign.results_page.tables import decision_lines
from tests.conftest import DEMO
from tests.results_page.conftest import old_result

COMPILED = ["compare", "relevance", "--data", str(DEMO), "--strategies", "zero-shot@labeled", "--lm",
            "mock/relevance-0ms", "--limit", "12", "--n-boot", "50", "--no-track", "--no-cache", "--html"]
MAJORITY = ["--strategies", "majority", "--n-boot", "50", "--no-track", "--no-cache"]


def _cli(argv: list[str], capsys) -> tuple[int, str, str]:
    """``personalign ARGV`` in this process: (exit code, stdout, stderr)."""
    from personalign.cli import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    return exc.value.code or 0, out, err


def _one_error(err: str) -> str:
    """The one ``error:`` line of ``err``, its last line (after the cost line and progress bars)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert [line for line in lines if "error" in line] == lines[-1:] and lines[-1].startswith("error: "), err
    return lines[-1]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> tuple[dict, Path, Path]:
    """``compare relevance --strategies zero-shot@labeled --html --json`` on the mock LM, through the
    command line: (its JSON output, the result file, the page it wrote)."""
    import contextlib
    import io

    from personalign.cli import main
    from personalign.testing import mock_provider

    mock_provider.register()
    runs, out = tmp_path_factory.mktemp("compiled") / "runs", io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exc:
        mp.setenv("PERSONALIGN_RUNS_DIR", str(runs))
        main([*COMPILED, "--json"])
    assert exc.value.code in (0, None)
    result = json.loads(out.getvalue())
    return result, Path(result["result_file"]), Path(result["results_page"])


def _kinds(request, tmp_path) -> dict[str, Path]:
    single = request.getfixturevalue("single_split")[1]
    old = request.getfixturevalue("own_task_copy") / tmp_path.name / "old.json"  # beside the run's data file
    old.parent.mkdir()
    old.write_text(json.dumps(old_result(single)))  # no rows: the page rebuilds them from the data file
    return {"single split: all-yes, majority, minilm-logreg": single, "--cv groups: all-yes, style-rank":
            request.getfixturevalue("cv_groups")[1], "zero-shot@labeled": request.getfixturevalue("compiled")[1],
            "older format": old}


@pytest.mark.parametrize("kind", ["single split: all-yes, majority, minilm-logreg", "--cv groups: all-yes, style-rank",
                                  "zero-shot@labeled", "older format"])
def test_view_renders_the_page_of_every_kind_of_result(kind, request, tmp_path, capsys):
    from personalign.results_page import load_result

    path = _kinds(request, tmp_path)[kind]
    page = tmp_path / "page.html"
    code, out, err = _cli(["view", str(path), "--out", str(page)], capsys)
    assert code == 0 and out.strip() == f"results page: {page}", err
    text = html.unescape(page.read_text(encoding="utf-8"))
    result = load_result(path)
    for row in result["strategies"]:
        assert f'<th class="name">{row["name"]}</th>' in text
        line = summary_line(row["name"], row.get("compile"))
        if line:  # a compiled strategy: what its compile chose, as the command line says it
            assert line in text
    for line in decision_lines(result):  # a fitted decision rule: the rule and why, among the notes
        assert line in text
    if kind.startswith("single"):
        assert decision_lines(result), "minilm-logreg fits a decision rule: its result carries it"
    if kind == "zero-shot@labeled":
        row = result["strategies"][-1]
        assert row["compile_summary"]["objective"] == "f1" and summary_line(row["name"], row["compile"])


def test_compare_html_of_a_compiled_strategy_writes_its_page(compiled):
    result, path, page = compiled
    assert path.is_file() and page == path.with_suffix(".html") and page.is_file()
    row = result["strategies"][-1]
    assert row["name"] == "zero-shot@labeled" and row["compile_summary"]["chosen"]
    assert summary_line(row["name"], row["compile"]) in html.unescape(page.read_text(encoding="utf-8"))


def test_a_page_that_refuses_the_result_leaves_the_table_and_the_result_file(runs_dir, capsys, monkeypatch):
    """The reported failure, put back: the page's check reads ``compile_summary.objective`` (a name)
    as a figure. The table and the files are shown, the result file stays, the one error line names it."""
    from personalign.results_page import checks, load_result
    from personalign.testing import mock_provider

    mock_provider.register()
    monkeypatch.setattr(checks, "_COMPARISONS", frozenset({"vs_first", "vs_uncompiled"}))
    code, out, err = _cli(COMPILED, capsys)
    [path] = list((runs_dir / "compare").glob("*.json"))
    line = _one_error(err)
    assert code == 2 and line.startswith(f"error: {path}: field 'strategies.1.compile_summary.objective': "
                                         "expected a number or null, got a string"), line
    assert "zero-shot@labeled" in out and f"results: {path}" in out and "results page" not in out
    assert not list((runs_dir / "compare").glob("*.html"))
    monkeypatch.undo()
    assert [r["name"] for r in load_result(path)["strategies"]] == ["all-yes", "zero-shot@labeled"]
    page = path.with_suffix(".html")
    assert _cli(["view", str(path)], capsys)[:2] == (0, f"results page: {page}\n") and page.is_file()


@pytest.mark.parametrize("json_out", [False, True])
def test_a_page_that_fails_is_one_line_naming_the_kept_result(own_task_copy, runs_dir, capsys, monkeypatch, json_out):
    import personalign.results_page.page as page_module

    def broken(*args, **kwargs):
        raise KeyError("a bug in the page")

    monkeypatch.setattr(page_module, "page_html", broken)
    code, out, err = _cli(["compare", str(own_task_copy / "stage.toml"), "--data", str(own_task_copy / "data.jsonl"),
                           *MAJORITY, "--html", *(["--json"] if json_out else [])], capsys)
    [path] = list((runs_dir / "compare").glob("*.json"))
    assert code == 2 and _one_error(err) == (f"error: {path}: the results page failed: KeyError: 'a bug in the page'")
    shown = json.loads(out)["result_file"] if json_out else out
    assert str(path) in shown and json.loads(path.read_text())["strategies"][-1]["name"] == "majority"
    assert not list((runs_dir / "compare").glob("*.html"))
    code, _, err = _cli(["view", str(path)], capsys)
    assert code == 2 and _one_error(err) == f"error: {path}: the results page failed: KeyError: 'a bug in the page'"


def test_a_chart_that_cannot_be_drawn_keeps_the_result_and_names_it(own_task_copy, runs_dir, capsys, monkeypatch):
    import personalign._verbs.results as results

    def broken(result, path):
        raise ValueError("cannot draw\nthis")

    monkeypatch.setattr(results, "plot_result", broken)
    code, out, err = _cli(["compare", str(own_task_copy / "stage.toml"), "--data", str(own_task_copy / "data.jsonl"),
                           *MAJORITY], capsys)
    [path] = list((runs_dir / "compare").glob("*.json"))
    assert code == 2 and _one_error(err) == (f"error: {path}: field 'chart_file': the chart could not be drawn: "
                                             "ValueError: cannot draw")
    saved = json.loads(path.read_text())
    assert saved["chart_file"] is None and saved["chart_error"] == "ValueError: cannot draw"
    assert "majority" in out and f"results: {path}" in out
    assert not list((runs_dir / "compare").glob("*.png"))
