"""The annotation server's HTTP API in process (Starlette's TestClient): labels, refusals with
the reason, host and content-type checks, a store that refuses, and the page's offline shape."""

from __future__ import annotations

import re
import sqlite3

import pytest
from starlette.testclient import TestClient

from personalign.labels import store as store_mod
from personalign.labels.serve import CSP, build_app, open_queue


@pytest.fixture
def served(demo_rows, tmp_path):
    queue = open_queue(demo_rows, "relevance", f"sqlite:///{tmp_path / 'labels.db'}")
    client = TestClient(build_app(queue, annotator="alice", export_hint="personalign label export ..."),
                        base_url="http://127.0.0.1")
    yield client, queue, tmp_path / "labels.db"
    queue.store.close()


def post(client, path, **body):
    resp = client.post(path, json=body)
    return resp.status_code, resp.json()


def test_the_page_is_one_offline_html_file(served):
    client, _, _ = served
    resp = client.get("/")
    assert resp.status_code == 200 and resp.headers["content-security-policy"] == CSP
    html = resp.text
    assert "connect-src 'self'" in CSP and "default-src 'none'" in CSP
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)  # no CDN, no web font, no remote asset
    assert "@import" not in html and "url(" not in html and "fonts.googleapis" not in html


def test_task_describes_the_stage_signature(served):
    client, _, _ = served
    task = client.get("/api/task").json()
    assert [(f["name"], f["title"]) for f in task["inputs"]] == [("prompt", "Prompt"), ("attribute", "Attribute")]
    assert task["inputs"][0]["description"] == "the user's new request"
    assert task["output"]["title"] == "Relevant"
    assert [(c["value"], c["key"], c["text"]) for c in task["choices"]] == [(True, "y", "Yes"), (False, "n", "No")]
    assert task["keys"] == {"skip": "s", "undo": "u"} and task["total"] == 6 and task["annotator"] == "alice"


def test_labelling_skipping_and_undoing_over_http(served):
    client, queue, _ = served
    s = client.get("/api/state", params={"annotator": "alice"}).json()
    assert s["row"]["id"] == "demo-000" and s["progress"] == {"done": 0, "skipped": 0, "total": 6}
    status, s = post(client, "/api/label", annotator="alice", row_id="demo-000", value=True)
    assert status == 200 and s["row"]["id"] == "demo-001" and s["last"] == {"row_id": "demo-000", "value": True,
                                                                                "skipped": False}
    status, s = post(client, "/api/skip", annotator="alice", row_id="demo-001")
    assert s["row"]["id"] == "demo-002" and s["progress"]["skipped"] == 1
    status, s = post(client, "/api/undo", annotator="alice")
    assert s["row"]["id"] == "demo-001" and s["undone"]["skipped"] is True
    post(client, "/api/label", annotator="bob", row_id="demo-003", value=False)
    assert [(lab.annotator, lab.row_id, lab.value) for lab in queue.store.labels("relevance")] == [
        ("alice", "demo-000", True), ("bob", "demo-003", False)]
    assert client.get("/api/task").json()["annotators"] == [{"name": "alice", "done": 1, "skipped": 0},
                                                            {"name": "bob", "done": 1, "skipped": 0}]


def test_bad_requests_get_400_with_the_reason_and_store_nothing(served):
    client, queue, _ = served
    cases = [
        (dict(annotator="alice", row_id="demo-000", value="maybe"),
         "unknown label value \"maybe\" for 'relevant' (allowed: true, false)"),
        (dict(annotator="alice", row_id="demo-999", value=True), "row id 'demo-999' is not in rows.jsonl"),
        (dict(annotator="a b", row_id="demo-000", value=True), "annotator name 'a b'"),
        (dict(annotator="alice", row_id="demo-000"), "missing value"),
    ]
    for body, message in cases:
        status, data = post(client, "/api/label", **body)
        assert status == 400 and message in data["error"], data
    resp = client.post("/api/label", content=b'{"annotator": "alice"', headers={"Content-Type": "application/json"})
    assert resp.status_code == 400 and "not valid JSON" in resp.json()["error"]
    resp = client.post("/api/label", data={"annotator": "alice", "row_id": "demo-000", "value": "true"})
    assert resp.status_code == 415  # a cross-site HTML form cannot post a label
    assert client.get("/api/task", headers={"Host": "attacker.example"}).status_code == 400  # DNS rebinding
    assert queue.store.labels() == []


def test_only_the_pages_own_origin_is_answered(served):
    """Issue 46: a page on another loopback port is another origin; it gets 403 and no CORS allowance."""
    client, queue, _ = served
    label = dict(annotator="alice", row_id="demo-000", value=True)
    for origin in ("http://127.0.0.1:18100", "http://localhost", "http://attacker.example", "null"):
        resp = client.post("/api/label", json=label, headers={"Origin": origin})
        assert resp.status_code == 403 and "cross-origin request refused" in resp.json()["error"], origin
        resp = client.get("/api/task", headers={"Origin": origin})
        assert resp.status_code == 403 and "access-control-allow-origin" not in resp.headers
        resp = client.options("/api/label", headers={"Origin": origin, "Access-Control-Request-Method": "POST"})
        assert resp.status_code == 403 and "access-control-allow-origin" not in resp.headers  # preflight
    img = {"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "no-cors"}  # an <img>/<script> elsewhere: no Origin
    assert client.get("/api/state", params={"annotator": "alice"}, headers=img).status_code == 403
    assert queue.store.labels() == []
    link = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}  # a link followed from elsewhere
    assert client.get("/", headers=link).status_code == 200
    own = {"Origin": "http://127.0.0.1", "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors"}
    assert client.post("/api/label", json=label, headers=own).status_code == 200
    assert client.get("/api/task", headers={"Host": "localhost:8765", "Origin": "http://localhost:8765"}).status_code == 200
    assert client.get("/api/task", headers={"Host": "localhost:8765", "Origin": "http://127.0.0.1:8765"}).status_code == 403
    assert [lab.row_id for lab in queue.store.labels()] == ["demo-000"]


def test_a_body_over_the_bound_is_413_and_deep_json_is_400(served):
    """Issue 46: 200 MB was buffered and accepted; deeply nested JSON was a 500 with a traceback."""
    from personalign.labels.serve import MAX_BODY

    client, queue, _ = served
    json_type = {"Content-Type": "application/json"}
    resp = client.post("/api/label", content=b" " * (MAX_BODY + 1), headers=json_type)
    assert resp.status_code == 413 and resp.json() == {"error": "the request body is over 1024 KiB"}

    def chunked():  # no Content-Length: read up to the bound, then refused
        yield from (b" " * (MAX_BODY // 4) for _ in range(8))

    assert client.post("/api/label", content=chunked(), headers=json_type).status_code == 413
    label = b'{"annotator": "alice", "row_id": "demo-000", "value": true}'
    assert client.post("/api/label", content=label + b" " * (MAX_BODY - len(label)), headers=json_type).status_code == 200
    for depth in (100, 900, 100_000):
        for body in ("[" * depth + "]" * depth, '{"annotator": "alice", "row_id": "demo-001", "value": '
                     + "[" * depth + "]" * depth + "}", '{"annotator": ' + '{"a": ' * depth + "1" + "}" * depth + "}"):
            resp = client.post("/api/label", content=body.encode(), headers=json_type)
            assert resp.status_code == 400 and resp.json()["error"], (depth, resp.text[:200])
    assert [lab.row_id for lab in queue.store.labels()] == ["demo-000"]


def test_a_locked_store_answers_503_and_the_label_can_be_resent(served, monkeypatch):
    client, queue, db = served
    queue.store.close()
    monkeypatch.setattr(store_mod, "BUSY_TIMEOUT_S", 0.3)
    queue.store = store_mod.LabelStore(queue.store.url)  # engine made with the short busy timeout
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    status, data = post(client, "/api/label", annotator="alice", row_id="demo-000", value=True)
    assert status == 503 and data["error"].startswith("not saved: label store") and "locked" in data["error"]
    other.execute("ROLLBACK")
    other.close()
    status, data = post(client, "/api/label", annotator="alice", row_id="demo-000", value=True)
    assert status == 200 and data["progress"]["done"] == 1


def test_a_label_list_stage_over_http_and_in_the_export(tmp_path, multiclass_stage):
    from personalign.labels.export import merge_labels
    from tests.label_serve.conftest import OWN_TASK

    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join((OWN_TASK / "data.jsonl").read_text().splitlines(keepends=True)[:3]))
    url = f"sqlite:///{tmp_path / 'labels.db'}"
    queue = open_queue(rows, str(multiclass_stage), url)
    client = TestClient(build_app(queue), base_url="http://127.0.0.1")
    task = client.get("/api/task").json()
    assert [(c["value"], c["key"]) for c in task["choices"]] == [("follows", "1"), ("partly", "2"), ("ignores", "3")]
    assert [f["title"] for f in task["inputs"]] == ["Preference", "Question", "Option"]
    status, data = post(client, "/api/label", annotator="ann", row_id="food-1", value="partly")
    assert status == 200 and data["row"]["id"] == "food-2"
    status, data = post(client, "/api/label", annotator="ann", row_id="food-2", value=True)
    assert status == 400 and 'allowed: "follows", "partly", "ignores"' in data["error"]
    queue.store.close()
    assert merge_labels(rows, store_url=url).rows[0]["annotations"] == {"ann": "partly"}
