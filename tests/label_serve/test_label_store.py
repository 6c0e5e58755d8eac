"""The label store and each annotator's queue: one label per (stage, row, annotator), undo,
skips coming back, resuming from the store, and one-line errors when the store refuses."""

from __future__ import annotations

import sqlite3
import time

import pytest

from personalign.errors import ConfigurationError, DataError
from personalign.labels import store as store_mod
from personalign.labels.queue import LabelQueue
from personalign.labels.rowfile import read_rows
from personalign.labels.spec import LabelValueError, label_spec
from personalign.labels.store import LabelStore, StoreError
from personalign.stages import resolve_stage
from tests.label_serve.conftest import write_rows


def _count(db, where: str = "1=1") -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute(f"SELECT COUNT(*) FROM personalign_labels WHERE {where}").fetchone()[0]


def _count_url(url: str, where: str = "1=1") -> int:
    """Rows of the labels table, counted with plain SQL on the store's own database."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text(f"SELECT COUNT(*) FROM personalign_labels WHERE {where}")).scalar()
    finally:
        engine.dispose()


def _queue(rows_path, url, stage="relevance") -> LabelQueue:
    st = resolve_stage(stage)
    spec = label_spec(st)
    return LabelQueue(spec, read_rows(rows_path, st, spec), LabelStore(url))


def test_a_label_is_stored_once_and_a_resubmission_replaces_it(store_url):
    import sqlalchemy as sa

    store = LabelStore(store_url)
    first = store.put("relevance", "r1", "alice", True, "sha-a")
    again = store.put("relevance", "r1", "alice", False, "sha-b")
    store.put("relevance", "r1", "bob", True, "sha-a")
    store.put("violation", "r1", "alice", True, "sha-c")  # another stage: another label
    assert again.id > first.id  # the replacement is the newest action
    assert _count_url(store_url) == 3
    assert _count_url(store_url, "row_id='r1' AND annotator='alice' AND stage='relevance'") == 1
    [alice] = store.labels("relevance", "alice")
    assert (alice.value, alice.rows_sha256, alice.time.tzinfo is not None) == (False, "sha-b", True)
    with store.engine.begin() as conn, pytest.raises(sa.exc.IntegrityError):  # the database itself refuses
        conn.execute(sa.text("INSERT INTO personalign_labels (stage,row_id,annotator,value,rows_sha256,time) "
                             "VALUES ('relevance','r1','alice','true','x','2024-01-01')"))
    assert store.stages() == ["relevance", "violation"]


def test_undo_deletes_the_latest_action_of_that_annotator_only(store_url):
    store = LabelStore(store_url)
    store.put("s", "r1", "alice", True, "h")
    store.put("s", "r2", "alice", None, "h")  # a skip
    store.put("s", "r9", "alice", True, "h")  # a row of another file
    store.put("s", "r3", "bob", False, "h")
    gone = store.undo_last("s", "alice", row_ids={"r1", "r2", "r3"})
    assert (gone.row_id, gone.skipped) == ("r2", True)
    assert store.undo_last("s", "alice", row_ids={"r1", "r2", "r3"}).row_id == "r1"
    assert store.undo_last("s", "alice", row_ids={"r1", "r2", "r3"}) is None
    assert [(lab.row_id, lab.annotator) for lab in store.labels("s")] == [("r9", "alice"), ("r3", "bob")]


def test_queues_resume_per_annotator_and_skips_come_back_last(demo_rows, store_url):
    url = store_url
    q = _queue(demo_rows, url)
    ids = [f"demo-00{i}" for i in range(6)]
    assert q.state("alice")["row"]["id"] == ids[0]
    q.label("alice", ids[0], True)
    s = q.skip("alice", ids[1])
    assert s["row"]["id"] == ids[2] and s["progress"] == {"done": 1, "skipped": 1, "total": 6}
    q.label("alice", ids[2], False)
    q.label("bob", ids[0], False)
    q.store.close()

    q = _queue(demo_rows, url)  # a restarted server: each annotator continues where they stopped
    assert q.state("alice")["row"]["id"] == ids[3] and q.state("bob")["row"]["id"] == ids[1]
    assert q.state("carol")["progress"]["done"] == 0
    for rid in ids[3:]:
        q.label("alice", rid, True)
    assert q.state("alice")["row"]["id"] == ids[1]  # only the skipped row is left
    q.label("alice", ids[1], True)
    done = q.state("alice")
    assert done["row"] is None and done["progress"] == {"done": 6, "skipped": 0, "total": 6}
    undone = q.undo("alice")
    assert undone["undone"]["row_id"] == ids[1] and undone["row"]["id"] == ids[1]
    assert undone["progress"]["done"] == 5
    assert q.annotators() == [{"name": "alice", "done": 5, "skipped": 0}, {"name": "bob", "done": 1, "skipped": 0}]


def test_the_page_never_sees_the_gold_label_or_others_annotations(demo_rows, tmp_path):
    q = _queue(demo_rows, f"sqlite:///{tmp_path / 'l.db'}")
    assert set(q.state("alice")["row"]["inputs"]) == {"prompt", "attribute"}


def test_skipping_again_rotates_the_skipped_rows(demo_rows, tmp_path):
    q = _queue(demo_rows, f"sqlite:///{tmp_path / 'l.db'}")
    for i in range(6):
        q.skip("al", f"demo-00{i}")
    assert q.state("al")["row"]["id"] == "demo-000"
    q.skip("al", "demo-000")
    assert q.state("al")["row"]["id"] == "demo-001"


def test_bad_values_rows_and_names_store_nothing(demo_rows, tmp_path):
    db = tmp_path / "l.db"
    q = _queue(demo_rows, f"sqlite:///{db}")
    with pytest.raises(LabelValueError, match=r"unknown label value \"yes\" for 'relevant' \(allowed: true, false\)"):
        q.label("alice", "demo-000", "yes")
    with pytest.raises(LabelValueError, match="unknown label value 1 "):
        q.label("alice", "demo-000", 1)  # type-exact: 1 is not true
    with pytest.raises(LabelValueError, match="row id 'nope' is not in rows.jsonl"):
        q.label("alice", "nope", True)
    for name in ("", "a b", "x" * 65, "-lead", None):
        with pytest.raises(LabelValueError, match="annotator name"):
            q.label(name, "demo-000", True)
    assert _count(db) == 0


def test_a_label_list_stage(tmp_path, multiclass_stage):
    spec = label_spec(resolve_stage(str(multiclass_stage)))
    assert [(c.value, c.key) for c in spec.choices] == [("follows", "1"), ("partly", "2"), ("ignores", "3")]
    assert [f.title for f in spec.inputs] == ["Preference", "Question", "Option"]
    assert spec.check("partly") == "partly" and spec.from_text("IGNORES") == "ignores"
    with pytest.raises(LabelValueError, match='allowed: "follows", "partly", "ignores"'):
        spec.check("maybe")


def test_a_stage_without_buttons_is_refused():
    with pytest.raises(ConfigurationError, match="stage 'mcq': its output 'answer_index' is int"):
        label_spec(resolve_stage("mcq"))


def test_rows_that_do_not_fit_the_stage(tmp_path):
    good = {"id": "a", "prompt": "p", "attribute": "x"}
    st = resolve_stage("relevance")
    cases = [
        ([good, {"id": "b", "prompt": "p"}], r"rows.jsonl:2: field 'attribute': missing"),
        ([good, {"prompt": "p", "attribute": "x"}], r"rows.jsonl:2: field 'id': missing"),
        ([good, dict(good)], r"rows.jsonl:2: field 'id': duplicate id 'a' \(first on line 1\)"),
        ([good, {**good, "id": 7}], r"rows.jsonl:2: field 'id': expected a string"),
        ([{**good, "annotations": {"ann": "yes"}}], r"rows.jsonl:1: field 'annotations.ann': unknown label value"),
    ]
    for rows, message in cases:
        path = write_rows(tmp_path / "rows.jsonl", rows)
        with pytest.raises(DataError, match=message):
            read_rows(path, st, label_spec(st))


def test_a_locked_store_fails_in_bounded_time_and_keeps_its_labels(tmp_path, monkeypatch):
    monkeypatch.setattr(store_mod, "BUSY_TIMEOUT_S", 0.5)
    db = tmp_path / "l.db"
    store = LabelStore(f"sqlite:///{db}")
    store.put("s", "r1", "alice", True, "h")
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")  # another process holds the write lock
    t0 = time.monotonic()
    with pytest.raises(StoreError, match=r"label store sqlite:///.*l.db: locked by another process for more than "
                                         r"0.5 s; nothing was written"):
        store.put("s", "r2", "alice", False, "h")
    assert time.monotonic() - t0 < 5
    other.execute("ROLLBACK")
    other.close()
    assert [(lab.row_id, lab.value) for lab in store.labels()] == [("r1", True)]
    store.put("s", "r2", "alice", False, "h")  # free again: the label goes in
    assert _count(db) == 2


def test_store_urls_that_cannot_work(tmp_path):
    with pytest.raises(ConfigurationError, match="in-memory store loses every label"):
        LabelStore("sqlite://")
    with pytest.raises(ConfigurationError, match="is not a database URL"):
        LabelStore("runs/labels.db")
    with pytest.raises(ConfigurationError, match="the folder .*missing-dir does not exist"):
        LabelStore(f"sqlite:///{tmp_path / 'missing-dir' / 'l.db'}")
    with pytest.raises(ConfigurationError, match="no such file"):
        LabelStore(f"sqlite:///{tmp_path / 'absent.db'}", write=False)
    assert not (tmp_path / "absent.db").exists()  # reading never creates a store
    (tmp_path / "notes.db").write_text("not a database at all, just text " * 40)
    with pytest.raises(StoreError, match="not an SQLite database"):
        LabelStore(f"sqlite:///{tmp_path / 'notes.db'}")
    with pytest.raises(ConfigurationError, match="database driver missing|Can.t load plugin"):
        LabelStore("postgresql+nosuchdriver://u@127.0.0.1/x")
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(StoreError, match="not a personalign label store"):
        LabelStore(f"sqlite:///{other}", write=False)


def test_the_default_store_is_under_the_runs_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("PERSONALIGN_RUNS_DIR", str(tmp_path / "runs"))
    url = store_mod.default_store_url()
    assert url == f"sqlite:///{tmp_path / 'runs' / 'labels.db'}"
    LabelStore(url, create_folder=True).put("s", "r", "a", True, "h")
    assert (tmp_path / "runs" / "labels.db").is_file()
    assert store_mod.shown_url("postgresql+psycopg://u:s3cret@db/labels") == "postgresql+psycopg://u:***@db/labels"


def test_concurrent_writers_of_one_label_leave_exactly_one(store_url):
    import threading

    LabelStore(store_url).close()  # tables made once, before the race
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            store = LabelStore(store_url)
            for k in range(12):
                store.put("s", f"r{k % 3}", "alice", k % 2 == 0, f"h{n}")
            store.close()
        except BaseException as exc:  # noqa: BLE001 -- reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(lab.row_id for lab in LabelStore(store_url).labels("s")) == ["r0", "r1", "r2"]
