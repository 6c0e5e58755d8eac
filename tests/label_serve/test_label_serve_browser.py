"""End to end in a real browser: headless Debian Chromium, driven by Selenium, labels three rows of
``personalign label serve`` with the keyboard only (with a skip and an undo on the way), then the
store is checked. A screenshot is taken mid-labelling (``PERSONALIGN_SCREENSHOT_DIR=docs/img`` keeps
it as ``label-serve.png``: the one in the docs)."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import pytest

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
         "--window-size=1100,900", "--hide-scrollbars", "--force-device-scale-factor=1")

pytestmark = pytest.mark.skipif(not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
                                reason="needs Debian's chromium and chromium-driver (/usr/bin/chromium, "
                                       "/usr/bin/chromedriver): apt-get install chromium chromium-driver")


@pytest.fixture
def browser(tmp_path):
    webdriver = pytest.importorskip("selenium.webdriver", reason="needs selenium (the dev extra)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)  # no Selenium Manager: offline
    yield driver
    driver.quit()


def test_three_rows_labelled_with_the_keyboard(browser, demo_rows, tmp_path, start_server):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    db = tmp_path / "labels.db"
    server = start_server(demo_rows, "relevance", f"sqlite:///{db}")
    wait = WebDriverWait(browser, 15)
    text = lambda element_id: browser.find_element(By.ID, element_id).text  # noqa: E731

    def press(key: str, count: str, row: str | None = None) -> None:
        ActionChains(browser).send_keys(key).perform()
        wait.until(lambda _: text("count") == count and (row is None or f"id {row}" in text("meta")))

    browser.get(server.url + "/")
    name = wait.until(lambda d: d.find_element(By.ID, "name"))
    wait.until(lambda d: d.switch_to.active_element == name)  # the page focuses the name field ...
    ActionChains(browser).send_keys("alice", Keys.ENTER).perform()  # ... so typing and Enter start labelling
    wait.until(lambda _: "id demo-000" in text("meta"))
    assert text("count") == "alice: 0 / 6 labelled"
    headings = [h.text for h in browser.find_elements(By.CSS_SELECTOR, "#fields h2")]
    assert headings == ["PROMPT", "ATTRIBUTE"] and text("question") == "Relevant?"

    press("y", "alice: 1 / 6 labelled", "demo-001")
    press("n", "alice: 2 / 6 labelled", "demo-002")
    assert text("status") == "Saved No for demo-001 \u00b7 u undoes"
    shot = tmp_path / "label-serve.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    if os.environ.get("PERSONALIGN_SCREENSHOT_DIR"):
        shutil.copy(shot, Path(os.environ["PERSONALIGN_SCREENSHOT_DIR"]) / "label-serve.png")
    press("s", "alice: 2 / 6 labelled \u00b7 1 skipped", "demo-003")
    press("u", "alice: 2 / 6 labelled", "demo-002")  # undo the skip: the row is back
    press("y", "alice: 3 / 6 labelled", "demo-003")

    with sqlite3.connect(db) as conn:
        stored = conn.execute("SELECT annotator, row_id, value FROM personalign_labels ORDER BY id").fetchall()
    assert stored == [("alice", "demo-000", "true"), ("alice", "demo-001", "false"), ("alice", "demo-002", "true")]
    errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert errors == []
