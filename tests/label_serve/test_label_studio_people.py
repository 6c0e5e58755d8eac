"""Issue 46: a person is never counted twice across ``label serve`` and Label Studio, Label Studio's
JSON-MIN export is named for what it is, and the export of a partly labelled round merges.

The Label Studio files are built in the shapes Label Studio 1.23 writes: its JSON export (every
task key, every annotation key; ``completed_by`` a bare user id in the default export, the object
``{"id", "email", "first_name", "last_name"}`` in an export with user details -- ``label-studio
export``, an export snapshot) and its JSON-MIN export (label_studio_sdk's converter: the task's
``data`` flat with Label Studio's task id written over ``id``, the output control's choice, then
``annotator``, ``annotation_id``, ``created_at``, ``updated_at``, ``lead_time``; one record per
annotation, one without an annotator for a task nobody annotated).

The round: 24 rows of the own-task example without their gold (``follows``); alice, bob and carol
label the first 12 on the page (the store); the rows go to Label Studio with those labels
(``label export --format label-studio``), where the three are users 2, 3 and 4 and dana (user 5)
labels rows 12-17; Label Studio's export comes back.
"""

from __future__ import annotations

import json

import pytest

from personalign.cli import main
from personalign.errors import DataError
from personalign.labels.labelstudio import export_label_studio, import_label_studio
from personalign.labels.store import LabelStore
from tests.label_serve.conftest import OWN_TASK, write_rows

STAGE = str(OWN_TASK / "stage.toml")
STAMP = "2025-11-04T09:12:31.204518Z"
USERS = {"alice": 2, "bob": 3, "carol": 4}
DANA = {"id": 5, "email": "dana@lab.org", "first_name": "Dana", "last_name": ""}


def _run(argv, capsys):
    with pytest.raises(SystemExit) as ei:
        main(argv)
    out, err = capsys.readouterr()
    return (ei.value.code or 0), out, err


def _user(uid: int, details: bool):
    """``completed_by`` as Label Studio 1.23 exports it: the bare id, or the user with details."""
    if not details:
        return uid
    if uid == DANA["id"]:
        return dict(DANA)
    name = next(n for n, i in USERS.items() if i == uid)
    return {"id": uid, "email": f"{name}@personalign.invalid", "first_name": "", "last_name": ""}


def ls_annotation(ann_id: int, task_id: int, user, choice: str) -> dict:
    """One annotation of Label Studio 1.23's JSON export."""
    uid = user["id"] if isinstance(user, dict) else user
    return {"id": ann_id, "completed_by": user,
            "result": [{"value": {"choices": [choice]}, "id": f"Xq{ann_id:04d}kZ", "from_name": "follows",
                        "to_name": "preference", "type": "choices", "origin": "manual"}],
            "was_cancelled": False, "ground_truth": False, "created_at": STAMP, "updated_at": STAMP,
            "draft_created_at": None, "lead_time": 4.113, "prediction": {}, "result_count": 1,
            "unique_id": f"5c0e2a4b-8d1f-4e3a-9b7c-{ann_id:012d}", "import_id": None, "last_action": None,
            "bulk_created": False, "task": task_id, "project": 3, "updated_by": uid, "parent_prediction": None,
            "parent_annotation": None, "last_created_by": None}


def ls_task(task_id: int, data: dict, annotations: list) -> dict:
    """One task of Label Studio 1.23's JSON export."""
    return {"id": task_id, "annotations": annotations, "file_upload": "8f3b2c1d-tasks.json", "drafts": [],
            "predictions": [], "data": data, "meta": {}, "created_at": STAMP, "updated_at": STAMP,
            "inner_id": task_id - 100, "total_annotations": len(annotations), "cancelled_annotations": 0,
            "total_predictions": 0, "comment_count": 0, "unresolved_comment_count": 0,
            "last_comment_updated_at": None, "project": 3, "updated_by": None, "comment_authors": []}


def label_studio_export(tasks_json, *, details: bool = False, bare_dana: bool = False) -> list[dict]:
    """What Label Studio's JSON export gives back of the tasks personalign exported: each imported
    annotation under the user its e-mail matched, and dana's labels of rows 12-17 (``bare_dana``:
    her first one as a bare id, as in an export that expands only some)."""
    tasks, ann_id = json.loads(tasks_json.read_text()), 0
    out = []
    for i, task in enumerate(tasks):
        anns = []
        for ann in task["annotations"]:
            ann_id += 1
            name = ann["completed_by"]["email"].removesuffix("@personalign.invalid")
            anns.append(ls_annotation(ann_id, 101 + i, _user(USERS[name], details), ann["result"][0]["value"]["choices"][0]))
        if 12 <= i < 18:
            ann_id += 1
            who = DANA["id"] if bare_dana and i == 12 else _user(DANA["id"], details)
            anns.append(ls_annotation(ann_id, 101 + i, who, "Yes" if i % 2 else "No"))
        out.append(ls_task(101 + i, task["data"], anns))
    return out


def json_min(export: list[dict]) -> list[dict]:
    """Label Studio's JSON-MIN export of ``export`` (label_studio_sdk.converter, Format.JSON_MIN)."""
    out = []
    for task in export:
        if not task["annotations"]:
            out.append({**task["data"], "id": task["id"], "annotator": None, "annotation_id": None,
                        "created_at": None, "updated_at": None, "lead_time": None})
        for ann in task["annotations"]:
            who = ann["completed_by"]
            out.append({**task["data"], "id": task["id"], "follows": ann["result"][0]["value"]["choices"][0],
                        "annotator": who.get("email") if isinstance(who, dict) else who,
                        "annotation_id": ann["id"], "created_at": ann["created_at"], "updated_at": ann["updated_at"],
                        "lead_time": ann["lead_time"]})
    return out


@pytest.fixture
def served(tmp_path):
    """The rows file (24 rows, no gold, all in ``val``), the store with alice's, bob's and carol's
    labels of the first 12, and personalign's Label Studio tasks of them."""
    from personalign.labels.serve import open_queue

    rows = [json.loads(line) for line in (OWN_TASK / "data.jsonl").read_text().splitlines()[:24]]
    truth = [r.pop("follows") for r in rows]
    for r in rows:
        r["split"] = "val"
    path = write_rows(tmp_path / "chosen.jsonl", rows)
    url = f"sqlite:///{tmp_path / 'labels.db'}"
    queue = open_queue(path, STAGE, url)
    for i in range(12):
        queue.label("alice", rows[i]["id"], truth[i])
        queue.label("bob", rows[i]["id"], truth[i] if i != 3 else not truth[i])
        queue.label("carol", rows[i]["id"], truth[i] if i not in (5, 8) else not truth[i])
    queue.store.close()
    tasks = tmp_path / "tasks.json"
    export_label_studio(path, tasks, STAGE, store_url=url)
    return path, url, tasks


def _stored(url):
    store = LabelStore(url, write=False)
    try:
        return sorted((lab.row_id, lab.annotator, lab.value) for lab in store.labels())
    finally:
        store.close()


def test_default_export_refused_when_the_store_holds_named_annotators(served, tmp_path, capsys, runs_dir):
    rows, url, tasks = served
    export = tmp_path / "project-3-at-2025-11-04.json"
    export.write_text(json.dumps(label_studio_export(tasks), indent=2))
    before, out = _stored(url), tmp_path / "back.jsonl"
    code, _, err = _run(["label", "import", str(export), "--stage", STAGE, "--store", url, "--out", str(out)], capsys)
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"error: {export}:2: field '[0].annotations.0.completed_by': Label Studio user ids 2, 3, 4, 5 "
                          "without an e-mail (Label Studio's default JSON export), and the store holds named "
                          "annotators (alice, bob, carol): as ls-user-2 a person would be counted twice")
    assert "label-studio export PROJECT JSON" in err and "--annotator-map 2=NAME,3=NAME,4=NAME" in err
    assert _stored(url) == before and not out.exists()  # nothing written
    # no store to collide with: the ids are kept as they are
    facts = import_label_studio(export, STAGE, out_path=out)
    assert facts["annotators"] == ["ls-user-2", "ls-user-3", "ls-user-4", "ls-user-5"]


def test_the_mapping_names_every_user(served, tmp_path, capsys, runs_dir):
    rows, url, tasks = served
    export = tmp_path / "export.json"
    export.write_text(json.dumps(label_studio_export(tasks), indent=2))
    before = _stored(url)
    code, _, err = _run(["label", "import", str(export), "--stage", STAGE, "--store", url,
                         "--annotator-map", "2=alice"], capsys)
    assert code == 2 and err.count("\n") == 1 and "user id 3 is not in --annotator-map" in err
    assert err.startswith(f"error: {export}:")
    code, _, err = _run(["label", "import", str(export), "--stage", STAGE, "--store", url,
                         "--annotator-map", "2:alice"], capsys)
    assert code == 2 and "'2:alice' is not ID=NAME" in err
    assert _stored(url) == before
    code, out, err = _run(["label", "import", str(export), "--stage", STAGE, "--store", url,
                           "--annotator-map", "2=alice, 3=bob,4=carol,5=dana@lab.org"], capsys)
    assert code == 0, err
    assert "imported 24 tasks, 42 labels (annotators: alice, bob, carol, dana@lab.org)" in out
    assert "store: 6 added, 36 already there, 0 replaced" in out  # the round trip's labels are the same people's
    assert {a for _, a, _ in _stored(url)} == {"alice", "bob", "carol", "dana@lab.org"}


def test_an_export_with_user_details_is_mapped_to_e_mails(served, tmp_path):
    rows, url, tasks = served
    export = tmp_path / "export.json"
    export.write_text(json.dumps(label_studio_export(tasks, details=True, bare_dana=True), indent=2))
    facts = import_label_studio(export, STAGE, store_url=url)  # no refusal: every id has its e-mail
    assert facts["annotators"] == ["alice", "bob", "carol", "dana@lab.org"]  # dana's bare id: her e-mail elsewhere
    assert (facts["added"], facts["same"]) == (6, 36)
    back = import_label_studio(export, STAGE, out_path=tmp_path / "b.jsonl", names={"dana@lab.org": "dana"})
    assert back["annotators"] == ["alice", "bob", "carol", "dana"]


def test_json_min_is_refused_saying_which_export_to_use(served, tmp_path, capsys, runs_dir):
    rows, url, tasks = served
    export = tmp_path / "export-min.json"
    records = json_min(label_studio_export(tasks, details=True))
    assert records[0]["id"] == 101 and records[0]["follows"] in ("Yes", "No")  # the row's own id is gone
    export.write_text(json.dumps(records, indent=2))
    with pytest.raises(DataError, match="JSON-MIN"):
        import_label_studio(export, STAGE, store_url=url)
    code, _, err = _run(["label", "import", str(export), "--stage", STAGE, "--out", str(tmp_path / "x.jsonl")], capsys)
    assert code == 2 and err.count("\n") == 1 and not (tmp_path / "x.jsonl").exists()
    assert err == (f"error: {export}:2: field '[0]': this is Label Studio's JSON-MIN export, which writes Label "
                   "Studio's task id over each row's id, so its labels cannot be matched to the rows; export the "
                   "project as JSON\n")


def _polluted(served, tmp_path, capsys):
    """The canonical export of a store that took Label Studio's default export before the refusal:
    alice, bob and carol once more as ls-user-2, -3, -4, and dana as ls-user-5."""
    rows, url, tasks = served
    export = tmp_path / "export.json"
    export.write_text(json.dumps(label_studio_export(tasks), indent=2))
    facts = import_label_studio(export, STAGE, out_path=tmp_path / "ls.jsonl")
    store = LabelStore(url)
    store.put_many([("option-follows", r["id"], who, v, "old-import")
                    for r in map(json.loads, (tmp_path / "ls.jsonl").read_text().splitlines())
                    for who, v in (r.get("annotations") or {}).items()])
    store.close()
    assert facts["labels"] == 42
    labelled = tmp_path / "labelled.jsonl"
    code, _, err = _run(["label", "export", "--rows", str(rows), "--store", url, "--out", str(labelled)], capsys)
    assert code == 0, err
    return labelled


def test_merge_refuses_one_person_under_two_names(served, tmp_path, capsys, runs_dir):
    labelled, merged = _polluted(served, tmp_path, capsys), tmp_path / "merged.jsonl"
    code, _, err = _run(["label", "merge", STAGE, str(labelled), "--out", str(merged)], capsys)
    assert code == 2 and err.count("\n") == 1 and not merged.exists()
    assert err.startswith(f"error: {labelled}: field 'annotations': annotators alice and ls-user-2 gave the same "
                          "label on all 12 rows they share (and 2 more pairs): one person under two names")
    assert "--drop-annotator ls-user-2,ls-user-3,ls-user-4" in err
    code, out, err = _run(["label", "merge", STAGE, str(labelled), "--out", str(merged), "--json",
                           "--drop-annotator", "ls-user-2,ls-user-3,ls-user-4"], capsys)
    assert code == 0, err
    summary = json.loads(out)
    assert summary["agreement"]["n_annotators"] == 4 and summary["agreement"]["n_judgments"] == 42
    assert summary["dropped_annotators"] == {"names": ["ls-user-2", "ls-user-3", "ls-user-4"], "labels": 36}
    assert summary["identical"] == [] and summary["unlabelled"] == 6 and summary["written"] == 18
    code, _, err = _run(["label", "merge", STAGE, str(labelled), "--drop-annotator", "ls-user-9"], capsys)
    assert code == 2 and "no label of ls-user-9 (--drop-annotator)" in err


def test_a_duplicate_cannot_reach_the_human_row(served, tmp_path, capsys, runs_dir):
    import personalign
    from personalign._verbs.human import human_on_rows
    from personalign.labels import drop_annotators, human_ceiling
    from personalign.stages import resolve_stage

    labelled, merged = _polluted(served, tmp_path, capsys), tmp_path / "merged.jsonl"
    code, out, err = _run(["label", "merge", STAGE, str(labelled), "--out", str(merged), "--allow-identical"], capsys)
    assert code == 0, err
    assert ("note: alice and ls-user-2 gave the same label on all 12 rows they share, counted as two people"
            in " ".join(out.split()))
    st = resolve_stage(STAGE)
    rows = st.load(merged)
    assert sum(len(ex.annotations) for ex in rows) == 78  # both names are in the file
    human = human_on_rows(st, rows, n_boot=100, seed=0)
    assert set(human["by_annotator"]) == {"alice", "bob", "carol"}  # never ls-user-2, -3, -4
    assert human["duplicates"] == [{"dropped": f"ls-user-{i}", "kept": n, "n": 12} for n, i in USERS.items()]
    once, _ = drop_annotators([json.loads(line) for line in merged.read_text().splitlines()],
                              ["ls-user-2", "ls-user-3", "ls-user-4"])
    direct = human_ceiling(st, st.load(write_rows(tmp_path / "once.jsonl", once)), n_boot=100, seed=0)
    assert (human["f1"], human["n"], human["rows_covered"]) == (direct["f1"], direct["n"], 12) and human["n"] == 36
    report = personalign.compare(STAGE, "all-yes", merged, split="val", n_boot=100, out_dir=tmp_path / "out")
    d = report.to_dict()
    assert d["human"]["n"] == 36 and d["human"]["n_annotators"] == 3
    assert "left out as one person under two names: ls-user-2 (= alice on all 12 shared rows)" in str(report)


def test_a_partly_labelled_export_merges_leaving_the_unlabelled_rows_out(served, tmp_path, capsys, runs_dir):
    from personalign.stages import resolve_stage

    rows, url, _ = served
    labelled, merged = tmp_path / "labelled.jsonl", tmp_path / "merged.jsonl"
    code, _, err = _run(["label", "export", "--rows", str(rows), "--store", url, "--out", str(labelled)], capsys)
    assert code == 0, err
    code, out, err = _run(["label", "merge", STAGE, str(labelled), "--out", str(merged)], capsys)
    assert code == 0, err
    assert "12 without annotations (12 rows without a label left out)" in " ".join(out.split())
    assert len(resolve_stage(STAGE).load(merged)) == 12
    got = [json.loads(line) for line in merged.read_text().splitlines()]
    assert [r["id"] for r in got] == [json.loads(line)["id"] for line in rows.read_text().splitlines()[:12]]
    assert all(r["n_annotators"] == 3 and isinstance(r["follows"], bool) for r in got)
