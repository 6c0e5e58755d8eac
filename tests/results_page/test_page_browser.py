"""The results page in a real browser: headless Debian Chromium through Selenium opens the page from
disk (file://), and the grid's rows, cells, filters and sorting are read back from the DOM.

Skips with the reason when Chromium, its driver or Selenium is missing (``.ci/run`` installs
Chromium). With ``PERSONALIGN_SCREENSHOTS=DIR`` the screenshots of the docs are written to DIR
(``PERSONALIGN_SCREENSHOTS=docs/img pytest tests/results_page/test_page_browser.py``).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from personalign.results_page import render_results_page
from tests.results_page.test_page import EVIL, big_result, evil_result, scored_result

CHROMIUM, DRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run")

pytestmark = pytest.mark.skipif(
    not (CHROMIUM.exists() and DRIVER.exists()) or importlib.util.find_spec("selenium") is None,
    reason="needs Debian chromium and chromium-driver (/usr/bin/chromium, /usr/bin/chromedriver; "
           "apt-get install chromium chromium-driver) and selenium (the dev extra)")


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="personalign-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={profile}", "--window-size=1400,1000"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(str(DRIVER)))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _open(driver, page: Path) -> None:
    driver.get(page.resolve().as_uri())
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []  # no script error, no request the page's policy refused


def _count(driver) -> int:
    return int(driver.find_element("id", "grid-count").get_attribute("data-count"))


def _rows(driver) -> list:
    return driver.find_elements("css selector", "#grid tbody tr[data-index]")


def _select(driver, element_id: str, value: str) -> None:
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element("id", element_id)).select_by_value(value)


def _shot(driver, name: str, tmp_path: Path, element: str | None = None, height: int | None = None) -> None:
    """Screenshot to tmp (checked non-empty) and, with PERSONALIGN_SCREENSHOTS, to that folder."""
    if height is None:
        height = driver.execute_script("return document.documentElement.scrollHeight") + 40
    driver.set_window_size(1400, min(height, 4000))
    driver.execute_script("window.scrollTo(0, 0)")
    path = tmp_path / name
    (driver.find_element("id", element).screenshot if element else driver.save_screenshot)(str(path))
    assert path.stat().st_size > 10_000
    target = os.environ.get("PERSONALIGN_SCREENSHOTS")
    if target:
        shutil.copy(path, Path(target) / name)
    driver.set_window_size(1400, 1000)


def test_grid_rows_cells_and_filters_read_back_from_the_dom(browser, single_split, tmp_path):
    result, _ = single_split
    page = render_results_page(result, tmp_path / "single.html")
    _open(browser, page)
    rows, strategies = result["rows"], result["strategies"]
    assert _count(browser) == len(_rows(browser)) == len(rows) == 12
    first = _rows(browser)[0]
    assert first.find_element("css selector", "td.id").text == rows[0]["id"]
    last = len(strategies) - 1  # minilm-logreg, after the reference row and majority
    cell = first.find_elements("css selector", "td.out")[last]
    right = strategies[last]["correct"][0] == 1.0
    assert ("ok" in cell.get_attribute("class")) is right and cell.text.startswith("✓" if right else "✗")
    assert str(strategies[last]["predictions"][0]).lower() in cell.text

    disagree = sum(len(set(outputs)) > 1 for outputs in zip(*(s["predictions"] for s in strategies)))
    browser.find_element("id", "f-disagree").click()
    assert 0 < disagree < len(rows) and _count(browser) == len(_rows(browser)) == disagree
    browser.find_element("id", "f-disagree").click()

    _select(browser, "f-errors", str(last))
    wrong = [i for i, c in enumerate(strategies[last]["correct"]) if c < 1]
    assert [int(r.get_attribute("data-index")) for r in _rows(browser)] == wrong

    _select(browser, "sort", f"score:{last}:desc")
    scores = strategies[last]["scores"]
    shown = [int(r.get_attribute("data-index")) for r in _rows(browser)]
    assert shown == sorted(wrong, key=lambda i: (-scores[i], i))  # the confident mistakes first
    _shot(browser, "results-page-wrong-rows.png", tmp_path, element="rows")

    browser.find_element("id", "f-reset").click()
    _select(browser, "f-group", "pets")
    assert _count(browser) == sum(r["group"] == "pets" for r in rows)
    browser.find_element("id", "f-reset").click()
    assert _count(browser) == len(rows)
    _shot(browser, "results-page-single.png", tmp_path)


def test_cv_page_filters_a_held_out_group(browser, cv_groups, tmp_path):
    result, _ = cv_groups
    _open(browser, render_results_page(result, tmp_path / "cv.html"))
    assert _count(browser) == len(_rows(browser)) == 63
    _select(browser, "f-group", "demo:p3")
    assert {r.find_elements("css selector", "td.id")[1].text for r in _rows(browser)} == {"demo:p3"}
    assert _count(browser) == sum(r["fold"] == "demo:p3" for r in result["rows"]) == 9
    browser.find_element("id", "f-reset").click()
    _shot(browser, "results-page-cv.png", tmp_path, height=1450)


def test_markup_in_user_text_shows_as_text_and_never_runs(browser, single_split, tmp_path):
    result = evil_result(single_split[0])
    _open(browser, render_results_page(result, tmp_path / "evil.html"))
    assert browser.execute_script("return window.__pwned === undefined")
    first = _rows(browser)[0]
    assert first.find_element("css selector", "td.id").text == "<b>bold-id</b>"
    assert first.find_elements("css selector", "td.text")[-1].get_attribute("textContent") == EVIL
    assert browser.find_elements("css selector", "#grid img, #grid b") == []


def test_five_thousand_rows_page_and_filter_quickly(browser, single_split, tmp_path):
    result = big_result(single_split[0])
    _open(browser, render_results_page(result, tmp_path / "big.html"))
    assert _count(browser) == 5000 and len(_rows(browser)) == 100  # paged: 100 rows in the DOM
    browser.find_element("id", "page-next").click()
    assert _rows(browser)[0].find_element("css selector", "td.idx").text == "101"
    ms = browser.execute_script(
        "var t = performance.now(); document.getElementById('f-disagree').click(); return performance.now() - t;")
    disagree = sum(len(set(outputs)) > 1 for outputs in zip(*(s["predictions"] for s in result["strategies"])))
    assert _count(browser) == disagree and ms < 1000, ms


def test_scored_stage_shows_partly_right_and_failed_rows(browser, single_split, tmp_path):
    result = scored_result(single_split[0])
    _open(browser, render_results_page(result, tmp_path / "scored.html"))
    cells = [r.find_elements("css selector", "td.out")[1] for r in _rows(browser)]
    assert cells[0].text.startswith("~") and "metric 0.500" in cells[0].text and "part" in cells[0].get_attribute("class")
    assert cells[2].text.startswith("⚠") and "fail" in cells[2].get_attribute("class")
    _rows(browser)[2].click()  # opening the row shows the failure's message
    assert "TimeoutError: the model did not answer" in cells[2].text
    _select(browser, "sort", "correct:1:asc")
    assert int(_rows(browser)[0].get_attribute("data-index")) in {
        i for i, c in enumerate(result["strategies"][1]["correct"]) if c == 0.0}
