"""Headless Debian Chromium for the browser tests (Selenium), and a page on another loopback port.

:func:`chromium` starts the browser through Debian's chromedriver (no Selenium Manager: offline);
:data:`needs_chromium` skips a module without them or Selenium. :func:`other_origin` serves a blank
page from another port of 127.0.0.1 -- another origin to the browser, the same machine -- for the
tests of what a page elsewhere can do to a local server, and :func:`fetches` runs ``fetch`` calls
in the page the browser shows and returns what each one saw.
"""

from __future__ import annotations

import contextlib
import http.server
import importlib.util
import threading
from pathlib import Path
from typing import Iterator

import pytest

CHROMIUM, DRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
         "--hide-scrollbars", "--force-device-scale-factor=1")

needs_chromium = pytest.mark.skipif(
    not (CHROMIUM.exists() and DRIVER.exists()) or importlib.util.find_spec("selenium") is None,
    reason="needs Debian chromium and chromium-driver (/usr/bin/chromium, /usr/bin/chromedriver; "
           "apt-get install chromium chromium-driver) and selenium (the dev extra)")


def chromium(profile: Path, *flags: str):
    """A headless Chromium WebDriver with its profile in ``profile`` and ``flags`` added; the
    browser's console log is kept (``driver.get_log("browser")``)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={profile}", *flags):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(str(DRIVER)))


PAGE = b"<!doctype html><html><head><title>elsewhere</title></head><body><p>another origin</p></body></html>"


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # http.server's name for a GET handler
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *args) -> None:
        pass


@contextlib.contextmanager
def other_origin() -> Iterator[str]:
    """A blank HTML page served from a free port of 127.0.0.1, in a thread: yields its URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


FETCHES = """
const [attempts, done] = [arguments[0], arguments[arguments.length - 1]];
const seen = {};
for (const [name, url, opts] of attempts) {
  try {
    const resp = await fetch(url, opts);
    seen[name] = {status: resp.status, type: resp.type, body: resp.type === "opaque" ? null : await resp.text()};
  } catch (e) {
    seen[name] = {error: String(e)};
  }
}
done(seen);
"""


def fetches(driver, attempts: list[tuple[str, str, dict]]) -> dict[str, dict]:
    """Run ``fetch(url, opts)`` for each ``(name, url, opts)`` in turn, from the page the browser
    shows (its origin): ``{name: {"status", "type", "body"}}`` (``body`` None for an opaque
    response) or ``{name: {"error": "TypeError: Failed to fetch"}}`` when the browser refused it."""
    driver.set_script_timeout(30)
    return driver.execute_async_script("(async () => {" + FETCHES + "})();", attempts)
