"""``personalign ui`` answers its own page only: a page on another loopback port, open in headless
Debian Chromium (Selenium), can neither read nor write the MLflow store behind it.

MLflow's own security middleware lets every loopback origin through on any port (issue 46: a page
served from 127.0.0.1:18100 listed every experiment, created one and deleted a run). Here a store
holds an experiment and a run, ``personalign ui`` serves it, and a blank page served from another
free port of 127.0.0.1 runs ``fetch``: a CORS read and writes (refused by the browser: the server
answers 403 with no CORS allowance, preflights included), ``no-cors`` simple POSTs (opaque) and an
HTML form POST (its page shows the refusal). The store is then read with ``mlflow.MlflowClient``:
unchanged. From the UI's own origin the same requests succeed.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from tests.browser import chromium, fetches, needs_chromium, other_origin
from tests.cli.test_ui import running_ui
from tests.conftest import cli_env

pytestmark = [needs_chromium, pytest.mark.slow]  # the MLflow server (~10-30 s to start)

API = "/ajax-api/2.0/mlflow"


def _store(uri: str) -> tuple[list, list]:
    """The store as the tests compare it: (experiment names and stages, runs with their stage)."""
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=uri)
    experiments = client.search_experiments(view_type=3)  # ViewType.ALL: deleted ones too
    runs = client.search_runs([e.experiment_id for e in experiments], run_view_type=3)
    return (sorted((e.name, e.lifecycle_stage) for e in experiments),
            sorted((r.info.run_id, r.info.lifecycle_stage) for r in runs))


def _json_post(body: dict) -> dict:
    return {"method": "POST", "headers": {"Content-Type": "application/json"}, "body": json.dumps(body)}


def _simple_post(body: dict, content_type: str) -> dict:
    """A ``no-cors`` POST: a simple request, sent without a preflight; its answer is opaque."""
    return {"method": "POST", "mode": "no-cors", "headers": {"Content-Type": content_type}, "body": json.dumps(body)}


def _status(url: str, **headers: str) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_a_page_on_another_loopback_port_can_neither_read_nor_write_the_store(tmp_path):
    import mlflow

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow.MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("personalign")
    run_id = client.create_run(experiment, run_name="secret-run").info.run_id
    before = _store(uri)
    browser = chromium(tmp_path / "chromium-profile", "--window-size=1100,800")
    try:
        with running_ui("--tracking-uri", uri, cwd=tmp_path, env=cli_env(tmp_path / "runs"),
                        log=tmp_path / "ui.log") as base, other_origin() as elsewhere:
            browser.get(elsewhere)
            seen = fetches(browser, [
                ("list", f"{base}{API}/experiments/search?max_results=100", {}),
                ("list-post", f"{base}{API}/experiments/search", _json_post({"max_results": 100})),
                ("list-api", f"{base}/api/2.0/mlflow/experiments/search?max_results=100", {}),
                ("create", f"{base}{API}/experiments/create", _json_post({"name": "created-elsewhere"})),
                ("delete-run", f"{base}{API}/runs/delete", _json_post({"run_id": run_id})),
                ("create-no-cors", f"{base}{API}/experiments/create",
                 _simple_post({"name": "simple-elsewhere"}, "text/plain")),
                ("delete-no-cors", f"{base}{API}/runs/delete", _simple_post({"run_id": run_id}, "text/plain")),
                ("delete-form-encoded", f"{base}{API}/runs/delete",
                 _simple_post({"run_id": run_id}, "application/x-www-form-urlencoded")),
            ])
            for name in ("list", "list-post", "list-api", "create", "delete-run"):
                assert seen[name] == {"error": "TypeError: Failed to fetch"}, (name, seen[name])  # no CORS allowance
            for name in ("create-no-cors", "delete-no-cors", "delete-form-encoded"):
                assert seen[name] == {"status": 0, "type": "opaque", "body": None}, (name, seen[name])
            browser.execute_script("""
                const form = document.createElement("form");
                form.method = "POST"; form.action = arguments[0]; form.enctype = "text/plain";
                const field = document.createElement("input");
                field.name = '{"run_id": "' + arguments[1] + '", "x": "'; field.value = '"}';
                form.append(field); document.body.append(form); form.submit();""", f"{base}{API}/runs/delete", run_id)
            from selenium.webdriver.support.ui import WebDriverWait

            refused = WebDriverWait(browser, 30).until(
                lambda d: d.current_url.startswith(base) and d.find_element("tag name", "body").text)
            assert "cross-origin request refused" in refused and run_id not in refused
            assert _store(uri) == before  # nothing created, nothing deleted

            # what a page cannot forge, sent by a program: another name, another origin, an <img>'s request
            search = f"{base}{API}/experiments/search?max_results=100"
            assert _status(search, Host=f"localhost:{base.rsplit(':', 1)[1]}") == 400
            assert _status(search, Origin="http://127.0.0.1:18100") == 403
            assert _status(search, Origin="http://localhost:18100") == 403
            assert _status(search, **{"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "no-cors"}) == 403
            assert _status(search) == 200  # a program on this machine (no browser headers): answered

            browser.get(f"{base}/health")  # the UI's own origin: the same requests succeed
            own = fetches(browser, [
                ("list", f"{base}{API}/experiments/search?max_results=100", {}),
                ("create", f"{base}{API}/experiments/create", _json_post({"name": "created-by-the-ui"})),
            ])
            assert own["list"]["status"] == 200 and "personalign" in own["list"]["body"], own
            assert own["create"]["status"] == 200, own
        experiments, runs = _store(uri)
        assert experiments == sorted([*before[0], ("created-by-the-ui", "active")]) and runs == before[1]
    finally:
        browser.quit()
