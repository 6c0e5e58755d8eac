"""End to end in a real browser: headless Debian Chromium, driven by Selenium, labels three rows of
``personalign label serve`` with the keyboard only (with a skip and an undo on the way), then the
store is checked. A screenshot is taken mid-labelling (``PERSONALIGN_SCREENSHOT_DIR=docs/img`` keeps
it as ``label-serve.png``: the one in the docs). A page on another loopback port can neither read
the rows nor post a label; bidirectional control characters in a row are shown, not applied (the
screenshot ``label-serve-bidi.png``)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.browser import chromium, fetches, needs_chromium, other_origin
from tests.label_serve.conftest import write_rows

pytestmark = needs_chromium


@pytest.fixture
def browser(tmp_path):
    driver = chromium(tmp_path / "chromium-profile", "--window-size=1100,900")
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


def _stored(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT annotator, row_id, value FROM personalign_labels ORDER BY id").fetchall()


def test_a_page_on_another_loopback_port_cannot_read_rows_or_write_a_label(browser, demo_rows, tmp_path, start_server):
    from selenium.webdriver.support.ui import WebDriverWait

    db = tmp_path / "labels.db"
    server = start_server(demo_rows, "relevance", f"sqlite:///{db}")
    label = json.dumps({"annotator": "mallory", "row_id": "demo-000", "value": True})
    with other_origin() as elsewhere:
        browser.get(elsewhere)
        seen = fetches(browser, [
            ("read-task", server.url + "/api/task", {}),
            ("read-state", server.url + "/api/state?annotator=alice", {}),
            ("label", server.url + "/api/label",
             {"method": "POST", "headers": {"Content-Type": "application/json"}, "body": label}),
            ("label-no-cors", server.url + "/api/label",
             {"method": "POST", "mode": "no-cors", "headers": {"Content-Type": "text/plain"}, "body": label}),
            ("undo-no-cors", server.url + "/api/undo", {"method": "POST", "mode": "no-cors", "body": label}),
        ])
        for name in ("read-task", "read-state", "label"):
            assert seen[name] == {"error": "TypeError: Failed to fetch"}, (name, seen[name])  # no CORS allowance
        for name in ("label-no-cors", "undo-no-cors"):
            assert seen[name] == {"status": 0, "type": "opaque", "body": None}, (name, seen[name])
        browser.execute_script("""
            const form = document.createElement("form");
            form.method = "POST"; form.action = arguments[0]; form.enctype = "text/plain";
            const field = document.createElement("input");
            field.name = arguments[1].slice(0, -1) + ', "x": "'; field.value = '"}';
            form.append(field); document.body.append(form); form.submit();""", server.url + "/api/label", label)
        refused = WebDriverWait(browser, 15).until(
            lambda d: d.current_url.startswith(server.url) and d.find_element("tag name", "body").text)
        assert "cross-origin request refused" in refused
    assert _stored(db) == []

    browser.get(server.url + "/")  # the page's own origin: the same label is taken
    own = fetches(browser, [("label", server.url + "/api/label",
                             {"method": "POST", "headers": {"Content-Type": "application/json"}, "body": label})])
    assert own["label"]["status"] == 200, own
    assert _stored(db) == [("mallory", "demo-000", "true")]


BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def test_bidi_controls_in_a_row_are_shown_not_applied(browser, tmp_path, start_server):
    """Issue 46: a right-to-left override in a row made the page show text in an order other than
    the one stored (``NAIRATEGEV TON`` read as ``NOT VEGETARIAN``)."""
    from selenium.webdriver.support.ui import WebDriverWait

    rows = write_rows(tmp_path / "rows.jsonl", [
        {"id": "r\u202e1", "prompt": "Suggest a dinner for \u2067my family\u2069 tonight.",
         "attribute": "The user is \u202eNAIRATEGEV TON\u202c and eats anything."},
        {"id": "r2", "prompt": "Every control: " + BIDI, "attribute": "plain"}])
    server = start_server(rows, "relevance", f"sqlite:///{tmp_path / 'labels.db'}", "--annotator", "alice")
    browser.get(server.url + "/")
    WebDriverWait(browser, 15).until(lambda d: "NAIRATEGEV" in d.find_element("id", "fields").text)
    fields = browser.find_element("id", "fields")
    assert "The user is U+202ENAIRATEGEV TONU+202C and eats anything." in fields.text
    assert "Suggest a dinner for U+2067my familyU+2069 tonight." in fields.text
    assert "U+202E" in browser.find_element("id", "meta").text
    shown = browser.execute_script("return document.body.textContent")
    assert not set(shown) & set(BIDI)  # every control was replaced by its mark
    # the stored order is the order on screen: N is left of the final N of "NAIRATEGEV TON"
    left, right = browser.execute_script("""
        const walker = document.createTreeWalker(document.getElementById("fields"), NodeFilter.SHOW_TEXT);
        let node;
        while ((node = walker.nextNode()) && !node.data.startsWith("NAIRATEGEV")) {}
        const at = (i) => { const r = document.createRange(); r.setStart(node, i); r.setEnd(node, i + 1);
                            return r.getBoundingClientRect().left; };
        return [at(0), at(node.data.indexOf(" TON") + 3)];""")
    assert left < right
    shot = tmp_path / "label-serve-bidi.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    if os.environ.get("PERSONALIGN_SCREENSHOT_DIR"):
        shutil.copy(shot, Path(os.environ["PERSONALIGN_SCREENSHOT_DIR"]) / shot.name)
    browser.find_element("tag name", "body").send_keys("n")
    WebDriverWait(browser, 15).until(lambda d: "Every control" in d.find_element("id", "fields").text)
    assert browser.find_element("id", "fields").text.count("U+") == len(BIDI)
    errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert errors == []
