"""The results page file: self-contained and offline, user text escaped, the tables as the CLI
prints them, large results fast enough; ``personalign view``'s bad input is one line, exit 2,
nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from personalign.results_page import render_results_page
from personalign.results_page.page import page_html
from personalign._verbs.render import comparison_renderables, render_table
from personalign._verbs.reports import ComparisonReport
from personalign.results_page.tables import summary_table
from tests.conftest import ROOT

EVIL = '</script><script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'


def evil_result(contract: dict) -> dict:
    """``contract`` with markup in the first row's id and an input (text a user could have labelled)."""
    result = json.loads(json.dumps(contract))
    row = result["rows"][0]
    row["id"] = "<b>bold-id</b>"
    row["inputs"][result["row_fields"]["inputs"][-1]] = EVIL
    return result


def big_result(contract: dict, n: int = 5000) -> dict:
    """``contract``'s rows repeated to ``n`` rows (ids made unique), predictions and scores with them."""
    result = json.loads(json.dumps(contract))
    m = len(result["rows"])
    result["rows"] = [{**result["rows"][i % m], "id": f"{result['rows'][i % m]['id']}-{i}"} for i in range(n)]
    for s in result["strategies"]:
        for key in ("predictions", "scores", "correct"):
            s[key] = [s[key][i % m] for i in range(n)]
    result["n"] = n
    return result


@pytest.mark.parametrize("which", ["single_split", "cv_groups"])
def test_the_page_is_self_contained_and_makes_no_request(which, request, tmp_path):
    contract, _ = request.getfixturevalue(which)
    text = render_results_page(contract, tmp_path / "page.html").read_text(encoding="utf-8")
    assert "http:" not in text and "https:" not in text and "file:" not in text
    assert "<link" not in text and "@import" not in text and "url(" not in text
    assert text.count("<script") == 2  # the JSON block and the page's own (nonce'd) script
    assert "default-src 'none'" in text and 'src="data:image/png;base64,' in text
    for strategy in contract["strategies"]:
        assert text.count(f'<th class="name">{strategy["name"]}</th>') == 2  # the summary and group tables name every strategy


def test_user_text_is_escaped_everywhere(single_split, tmp_path):
    text = page_html(evil_result(single_split[0]))
    assert "<script>window.__pwned" not in text and "<b>bold-id" not in text and "onerror=" not in text.replace(
        "onerror=\\", "")
    assert "\\u003cscript\\u003ewindow.__pwned=1" in text  # the grid's data block holds it as escaped JSON text


def test_summary_table_has_the_cli_columns_and_figures(single_split, cv_groups):
    single = summary_table(single_split[0])
    assert single["columns"][:2] == ["strategy", "f1 [95% CI]"]
    assert {"precision", "recall", "follows-rate", "LM calls eval+compile", "seconds", "failures"} <= set(
        single["columns"])
    # the p column names its test, as the command line's header does (one formatter: metrics/paired.py)
    assert single["columns"][-1] == "p (paired permutation of f1 over topics)"
    assert render_table(single_split[0]).columns[-1].header == single["columns"][-1]
    reference, first, second = single["rows"]  # compare puts the stage's reference strategy first
    assert reference[0]["text"] in ("all-yes", "all-no") and first[0]["text"] == "majority"
    assert second[-2]["text"].startswith(("+", "-"))
    test = single_split[0]["strategies"][2]["vs_first"]["paired_test"]
    assert second[-1]["text"] == f"{test.get('p_holm', test['p_value']):.3g}" and "min" in second[-1]["sub"]
    assert test["unit"] == "topic" and test["statistic"] == "f1"
    assert any(n.startswith("p: paired permutation test of the f1 difference") for n in single["notes"])
    cv = summary_table(cv_groups[0])
    assert cv["columns"][1] == "mean per-prompt f1 (headline)" and "worst prompt" in cv["columns"]
    assert cv["columns"][-1] == "p (sign-flip of per-prompt f1 differences)"
    cli = comparison_renderables(cv_groups[0])[0]
    assert cli.columns[5].header == cv["columns"][-1]
    assert f"{cv_groups[0]['strategies'][-1]['vs_first']['permutation']['p_value']:.3g}" in str(
        ComparisonReport("relevance", cv_groups[0]))
    style = cv["rows"][-1]
    assert style[1]["text"] == f"{cv_groups[0]['strategies'][-1]['headline']['value']:.3f}"


def test_lm_calls_and_the_cv_notes_are_the_command_lines(single_split, cv_groups):
    """The LM-calls cell shows the cached count as the command line does, and the leave-one-group-out
    notes under the page's table are the ones it prints (one formatter each)."""
    from personalign.results_page.tables import cv_notes

    for contract in (single_split[0], cv_groups[0]):
        result = json.loads(json.dumps(contract))
        result["strategies"][1].update(lm_calls=20, compile_lm_calls=511, cached_lm_calls=30, compile_cached_lm_calls=10)
        page = summary_table(result)
        col = page["columns"].index("LM calls eval+compile")
        first = result["strategies"][0]
        assert page["rows"][0][col]["text"] == f"{first['lm_calls']}+{first['compile_lm_calls']}"  # no cache, no "+0"
        assert page["rows"][1][col]["text"] == "20+511 (+40 cached)"
        cli = comparison_renderables(result)[0]
        assert list(next(c for c in cli.columns if c.header == "LM calls eval+compile").cells)[:2] == [
            page["rows"][0][col]["text"], "20+511 (+40 cached)"]
    cli = " ".join(str(ComparisonReport("relevance", cv_groups[0])).split())
    page_notes = summary_table(cv_groups[0])["notes"]
    shared = cv_notes(cv_groups[0])
    assert any(n.startswith("reproducible:") for n in shared) and any("MDE" in n for n in shared)
    for note in shared:
        assert " ".join(note.split()) in cli
        assert any(n.startswith(note) for n in page_notes), note  # the page's pooled line adds what its rates are of


def test_five_thousand_rows_render_quickly_and_stay_small(single_split, tmp_path):
    result = big_result(single_split[0])
    t0 = time.perf_counter()
    page = render_results_page(result, tmp_path / "big.html")
    seconds = time.perf_counter() - t0
    size = page.stat().st_size
    assert seconds < 15, seconds  # about 1 s here (the chart is most of it); generous for a shared 2-core machine
    assert size < 4_000_000, size  # about 1.2 MB: the rows as columnar JSON; the grid pages them in the browser


def _run_view(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PERSONALIGN_RUNS_DIR": str(cwd / "runs")}
    return subprocess.run([sys.executable, "-m", "personalign", "view", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("content,expected", [
    ('{"stage": "relevance", "n": 3,', "invalid JSON"),
    ("[1, 2]", "not a compare result"),
    ('{"stage": "relevance", "n": 3, "split": "val", "strategies": [{"name": "a", "n": 3}]}',
     "'strategies[0].predictions': missing"),
    ('{"rows": []}', "'stage': missing"),
])
def test_bad_result_files_are_one_line_exit_2_nothing_written(content, expected, tmp_path):
    bad = tmp_path / "result.json"
    bad.write_text(content)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    proc = _run_view(str(bad), cwd=tmp_path)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:") and expected in lines[0], proc.stderr
    assert str(bad) in lines[0]
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_view_writes_the_page_beside_the_result(single_split, own_task_copy, tmp_path):
    contract, _ = single_split
    result = tmp_path / "run.json"
    result.write_text(json.dumps(contract))
    proc = _run_view(str(result), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    page = tmp_path / "run.html"
    assert proc.stdout.strip() == f"results page: {page.resolve()}"
    assert 'id="grid"' in page.read_text(encoding="utf-8")
    missing = _run_view(str(tmp_path / "none.json"), cwd=tmp_path)
    assert missing.returncode == 2 and "result file not found" in missing.stderr


def scored_result(contract: dict) -> dict:
    """``contract`` read as a scored stage (metric ``accuracy``): a partly right row, a failed row."""
    result = json.loads(json.dumps(contract))
    result.update(kind="scored", metric="accuracy")
    s = result["strategies"][1]
    s["correct"][0] = 0.5
    s["predictions"][2] = None
    s["row_errors"] = {"2": "TimeoutError: the model did not answer"}
    s["scores"][3] = float("nan")  # a NaN score is shown as none, not a broken page
    return result


def test_many_groups_turn_the_group_table_on_its_side(single_split):
    from personalign.results_page.tables import WIDE_GROUPS, group_table

    result = json.loads(json.dumps(single_split[0]))
    for s in result["strategies"]:
        s["f1_by_group"] = {f"g{i}": i / 20 for i in range(WIDE_GROUPS + 1)}
    table = group_table(result)
    names = [s["name"] for s in result["strategies"]]
    assert table["tall"] and table["columns"] == ["topic", *names] and names[-2:] == ["majority", "minilm-logreg"]
    assert [r[0]["text"] for r in table["rows"]][:2] == ["g0", "g1"] and len(table["rows"]) == WIDE_GROUPS + 1


def test_out_that_is_a_folder_is_refused_before_anything_is_written(single_split, tmp_path):
    result = tmp_path / "run.json"
    result.write_text(json.dumps(single_split[0]))
    proc = _run_view(str(result), "--out", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith("error: --out") and len(proc.stderr.splitlines()) == 1
    assert not list(tmp_path.glob("*.html"))


def test_compare_html_writes_the_page_beside_the_result(tmp_path):
    example = ROOT / "examples" / "own_task"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PERSONALIGN_RUNS_DIR": str(tmp_path / "runs")}
    proc = subprocess.run([sys.executable, "-m", "personalign", "compare", str(example / "stage.toml"), "--data",
                           str(example / "data.jsonl"), "--strategies", "majority", "--no-track", "--html", "--json"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    page = Path(out["results_page"])
    assert page == Path(out["result_file"]).with_suffix(".html") and page.exists()
    assert "majority" in page.read_text(encoding="utf-8")
