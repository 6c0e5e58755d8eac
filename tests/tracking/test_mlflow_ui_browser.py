"""MLflow's pages as a reader sees them: an LM-free ``personalign compare`` fills a store,
``personalign ui`` serves it on loopback, and headless Debian Chromium (Selenium) opens the URL the
command prints -- the runs list with its metric columns -- then a child run, the summary table
and a trace with its gold label and verdict. What the pages show is read back from the DOM, and
the same facts from the REST API of that server (``MlflowClient(tracking_uri=<the UI's URL>)``).

Skips with the reason when Chromium, its driver or Selenium is missing. With
``PERSONALIGN_SCREENSHOTS=DIR`` the screenshots of docs/tracking.md are written to DIR
(``PERSONALIGN_SCREENSHOTS=docs/img pytest -m slow tests/tracking/test_mlflow_ui_browser.py``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.browser import chromium, needs_chromium
from tests.cli.test_ui import running_ui
from tests.conftest import ROOT, cli_env

pytestmark = [needs_chromium, pytest.mark.slow]  # a compare (~30 s) and the MLflow server (~10-30 s to start)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """``(compare result, runs page URL printed by personalign ui, server base URL)``."""
    tmp = tmp_path_factory.mktemp("mlflow-ui")
    runs = tmp / "runs"
    env = cli_env(runs)
    # from the checkout, with the paths a user types (results and store go to PERSONALIGN_RUNS_DIR)
    proc = subprocess.run([sys.executable, "-m", "personalign", "compare", "examples/own_task/stage.toml", "--data",
                           "examples/own_task/data.jsonl", "--strategies", "majority,minilm-logreg", "--json"],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    # the result file holds the rows (ids, gold) too; --json prints the summary
    result = {**result, **json.loads(Path(result["result_file"]).read_text())}
    log = tmp / "ui.log"
    with running_ui(cwd=tmp, env=env, log=log, timeout=120) as base:
        printed = re.search(r"http://127\.0\.0\.1:\d+/\S*", log.read_text())
        yield result, printed.group(0) if printed else None, base


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    driver = chromium(tmp_path_factory.mktemp("chromium-profile"), "--window-size=1500,800")
    yield driver
    driver.quit()


def _body_with(text: str):
    """A wait condition: the page's text once it contains ``text``."""
    return lambda d: (lambda body: body if text in body else None)(d.find_element("tag name", "body").text)


def _wait(driver, condition, timeout: float = 60):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.5).until(lambda d: condition(d))


def _tidy(driver) -> None:
    """Close MLflow's Assistant panel and dismiss its feature tips (both open on a first visit);
    clicked from script: a tip's overlay would intercept a pointer click."""
    for button in driver.find_elements("css selector", "[data-component-id='mlflow.assistant.chat_panel.close']"):
        driver.execute_script("arguments[0].click()", button)
    for button in driver.find_elements("css selector", "button"):
        if button.text.strip() == "Got it":
            driver.execute_script("arguments[0].click()", button)


def _shot(driver, name: str, tmp_path: Path, width: int = 1500, height: int = 800) -> None:
    """Screenshot to tmp (checked non-empty) and, with PERSONALIGN_SCREENSHOTS, to that folder."""
    driver.set_window_size(width, height)
    _tidy(driver)
    time.sleep(1.5)  # the panel's closing animation, the grid's relayout
    path = tmp_path / name
    driver.save_screenshot(str(path))
    assert path.stat().st_size > 10_000
    if os.environ.get("PERSONALIGN_SCREENSHOTS"):
        shutil.copy(path, Path(os.environ["PERSONALIGN_SCREENSHOTS"]) / name)
    driver.set_window_size(1500, 800)


def _grid(driver) -> dict[str, dict[str, str]]:
    """The runs list as ``{run name: {column id: cell text}}`` (AG Grid: the pinned name column and
    the scrolling columns are separate row containers, joined on ``row-index``)."""
    names = {}
    for row in driver.find_elements("css selector", ".ag-pinned-left-cols-container .ag-row"):
        link = row.find_elements("css selector", "[col-id='attributes.`Run Name`'] a")  # the name links its run
        if link and link[0].text.strip():
            names[row.get_attribute("row-index")] = link[0].text.strip()
    cells: dict[str, dict[str, str]] = {}
    for row in driver.find_elements("css selector", ".ag-center-cols-container .ag-row"):
        name = names.get(row.get_attribute("row-index"))
        if name:
            cells[name] = {c.get_attribute("col-id"): c.text.strip()
                           for c in row.find_elements("css selector", ".ag-cell")}
    return cells


def _client(base: str):
    import mlflow

    return mlflow.MlflowClient(tracking_uri=base)  # the REST API of the UI's server


def test_ui_opens_the_runs_list_with_metric_columns(served, browser, tmp_path):
    result, printed, base = served
    exp = _client(base).get_experiment_by_name("personalign")
    assert printed == f"{base}/#/experiments/{exp.experiment_id}/runs?workflowType=machine_learning" \
                      "&viewStateShareKey=personalign"
    browser.get(printed)
    rows = _wait(browser, lambda d: (lambda g: g if len(g) == 4 else None)(_grid(d)))
    by_name = {r["name"]: r for r in result["strategies"]}
    children = {name.split(" · ")[0]: cells for name, cells in rows.items() if " · compare " in name}
    assert set(children) == set(by_name) == {"all-yes", "majority", "minilm-logreg"}  # expanded under the parent
    header = [h.get_attribute("col-id") for h in browser.find_elements("css selector", ".ag-header-cell")]
    assert {"tags.`strategy`", "metrics.`f1`", "metrics.`best_f1`"} <= set(header)
    for name, cells in children.items():
        assert cells["tags.`strategy`"] == name
        assert float(cells["metrics.`f1`"]) == pytest.approx(by_name[name]["f1"])
    parent = next(cells for name, cells in rows.items() if name.startswith("compare option-follows"))
    assert float(parent["metrics.`best_f1`"]) == pytest.approx(max(r["f1"] for r in result["strategies"]))
    assert browser.title.startswith("Runs") and "/runs?" in browser.current_url  # not the GenAI overview
    _shot(browser, "mlflow-runs.png", tmp_path)


def test_a_child_run_carries_model_adapter_data_and_split(served, browser, tmp_path):
    result, _, base = served
    client = _client(base)
    exp = client.get_experiment_by_name("personalign")
    parent = client.get_run(result["mlflow_run_id"])
    child = client.search_runs([exp.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}' "
                                                    "and tags.strategy = 'majority'")[0]
    tags = child.data.tags
    assert {k: tags[k] for k in ("strategy", "model", "adapter", "split", "data_sha256")} == \
           {"strategy": "majority", "model": "none", "adapter": "none", "split": "val",
            "data_sha256": result["data_sha256"]}
    assert tags["data"].endswith("data.jsonl") and child.data.metrics["f1"] == pytest.approx(
        next(r["f1"] for r in result["strategies"] if r["name"] == "majority"))
    browser.get(f"{base}/#/experiments/{exp.experiment_id}/runs/{child.info.run_id}?workflowType=machine_learning")
    body = _wait(browser, _body_with("data_sha256"))
    assert "majority · compare option-follows" in body and result["data_sha256"][:12] in body
    _shot(browser, "mlflow-child-run.png", tmp_path, height=960)  # down to the run's tags


def test_the_parent_shows_the_summary_table(served, browser, tmp_path):
    result, _, base = served
    exp = _client(base).get_experiment_by_name("personalign")
    browser.get(f"{base}/#/experiments/{exp.experiment_id}/runs/{result['mlflow_run_id']}/artifactPath/"
                "summary_table.json?workflowType=machine_learning")
    _wait(browser, _body_with("View as table"))

    def table(d):
        rows = [[c.text for c in r.find_elements("css selector", "[role=cell], [role=columnheader]")]
                for r in d.find_elements("css selector", "[role=table] [role=row]")]
        return rows if len(rows) == 1 + len(result["strategies"]) else None

    header, *rows = _wait(browser, table)
    assert header[:2] == ["strategy", "f1"] and "f1 range" in header  # 2 topics in val: a range, no interval
    assert [r[0] for r in rows] == [s["name"] for s in result["strategies"]]
    assert [float(r[1]) for r in rows] == pytest.approx([round(s["f1"], 4) for s in result["strategies"]])
    _shot(browser, "mlflow-summary-table.png", tmp_path)


def test_traces_carry_the_gold_label_and_whether_the_answer_was_right(served, browser, tmp_path):
    result, _, base = served
    client = _client(base)
    exp = client.get_experiment_by_name("personalign")
    majority = next(r for r in result["strategies"] if r["name"] == "majority")
    rows = {row["id"]: (row["gold"], majority["predictions"][i], majority["correct"][i])
            for i, row in enumerate(result["rows"])}
    traces = client.search_traces(locations=[exp.experiment_id], max_results=100)
    assert len(traces) == len(rows) == 12  # majority runs per row (traced); the others predict in batch
    for trace in traces:
        found = {a.name: a for a in trace.info.assessments}
        assert set(found) == {"follows", "correct"}
        gold, pred, correct = rows[found["follows"].metadata["id"]]
        assert found["follows"].value == gold and found["correct"].value is (correct == 1.0) is (pred == gold)
        assert found["follows"].source.source_type == "HUMAN" and found["correct"].source.source_type == "CODE"
    browser.get(f"{base}/#/experiments/{exp.experiment_id}/traces")
    _wait(browser, _body_with("correct"))  # the feedback's column, once the assessments load
    _shot(browser, "mlflow-traces.png", tmp_path, width=1900)  # wide enough for the assessment columns

    wrong = next(t for t in traces if not {a.name: a for a in t.info.assessments}["correct"].value)
    browser.get(f"{base}/#/experiments/{exp.experiment_id}/traces?selectedEvaluationId={wrong.info.trace_id}")
    toggle = _wait(browser, lambda d: next(iter(d.find_elements(
        "css selector", "[data-component-id='shared.model-trace-explorer.assessments-pane-toggle']")), None))
    _tidy(browser)
    browser.execute_script("arguments[0].click()", toggle)
    pane = _wait(browser, _body_with("Expectations"))
    assert "Feedback (1)" in pane and "Expectations (1)" in pane and "data.jsonl" in pane
    _shot(browser, "mlflow-trace.png", tmp_path)
