"""``personalign label export`` and ``label import``: canonical JSONL with the annotations, Label
Studio tasks both ways (round trip), and refusals that write nothing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from personalign.errors import ConfigurationError, DataError
from personalign.labels.export import export_canonical, merge_labels
from personalign.labels.labelstudio import import_label_studio, labeling_config, read_tasks, to_tasks
from personalign.labels.spec import label_spec
from personalign.labels.store import LabelStore
from personalign.stages import resolve_stage
from tests.conftest import ROOT, cli_env
from tests.label_serve.conftest import write_rows


def _read(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def labelled(demo_rows, tmp_path):
    """The demo rows served for relevance, with labels of alice and bob (and a skip) in a store."""
    from personalign.labels.serve import open_queue

    url = f"sqlite:///{tmp_path / 'labels.db'}"
    q = open_queue(demo_rows, "relevance", url)
    q.label("alice", "demo-000", True)
    q.label("alice", "demo-001", False)
    q.skip("alice", "demo-002")
    q.label("bob", "demo-000", False)
    q.store.close()
    return demo_rows, url


def test_export_writes_every_row_with_its_annotations(labelled, tmp_path):
    rows, url = labelled
    out = tmp_path / "out.jsonl"
    done = export_canonical(rows, out, store_url=url)
    got, original = _read(out), _read(rows)
    assert [r["id"] for r in got] == [r["id"] for r in original]  # every row, in file order
    assert got[0]["annotations"] == {"alice": True, "bob": False} and got[1]["annotations"] == {"alice": False}
    assert all("annotations" not in r for r in got[2:])  # a skip is not a label
    assert {k: v for k, v in got[0].items() if k != "annotations"} == original[0]  # the row itself unchanged
    assert (done.stage, done.n_labels, done.annotators) == ("relevance", 3, ["alice", "bob"])
    assert "6 rows, 2 with annotations; 3 labels from the store" in done.summary(out)


def test_export_merges_with_annotations_the_file_already_has(labelled, tmp_path):
    rows, url = labelled
    original = _read(rows)
    original[0]["annotations"] = {"ann01": True, "alice": False}  # an earlier round; alice changed her mind
    write_rows(rows, original)
    done = merge_labels(rows, store_url=url, stage="relevance")
    assert done.rows[0]["annotations"] == {"ann01": True, "alice": True, "bob": False}
    assert done.replaced == 1 and done.other_version == 3  # the file changed since it was served
    assert any("replaced by the store's" in n for n in done.notes)


def test_export_refusals_write_nothing(labelled, tmp_path):
    rows, url = labelled
    store = LabelStore(url)
    store.put("violation", "v1", "alice", True, "h")
    store.close()
    out = tmp_path / "out.jsonl"
    merged = merge_labels(rows, store_url=url)  # the file was served for relevance: that stage is chosen
    assert merged.stage == "relevance"
    other = write_rows(tmp_path / "other.jsonl", [{"id": "x", "prompt": "p", "attribute": "a"}])
    with pytest.raises(ConfigurationError, match="holds labels of stages relevance, violation; name one with --stage"):
        export_canonical(other, out, store_url=url)
    with pytest.raises(ConfigurationError, match="no such file"):
        export_canonical(rows, out, store_url=f"sqlite:///{tmp_path / 'typo.db'}")
    bad = write_rows(tmp_path / "bad.jsonl", [{"id": "x"}, {"id": "x"}])
    with pytest.raises(DataError, match=r"bad.jsonl:2: field 'id': duplicate id"):
        export_canonical(bad, out, store_url=url)
    assert not out.exists()


def test_label_studio_round_trip(labelled, tmp_path):
    rows, url = labelled
    spec = label_spec(resolve_stage("relevance"))
    canonical = merge_labels(rows, store_url=url).rows
    tasks = to_tasks(spec, canonical)
    first = tasks[0]
    assert first["data"] == {k: v for k, v in canonical[0].items() if k != "annotations"}
    [ann_alice, ann_bob] = first["annotations"]
    assert ann_alice["completed_by"] == {"email": "alice@personalign.invalid"}
    assert ann_alice["result"] == [{"id": "r1", "from_name": "relevant", "to_name": "prompt", "type": "choices",
                                    "origin": "manual", "value": {"choices": ["Yes"]}}]
    assert ann_bob["result"][0]["value"]["choices"] == ["No"]
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps(tasks, indent=2))
    assert read_tasks(path, spec) == canonical  # back to the same canonical rows


def test_reading_label_studio_own_export(tmp_path):
    """Label Studio's export: numeric user ids, a cancelled (skipped) annotation, another control's
    result beside the output's, and the same person twice (the later annotation counts)."""
    spec = label_spec(resolve_stage("relevance"))
    choice = lambda name, value: {"from_name": name, "to_name": "prompt", "type": "choices",  # noqa: E731
                                  "value": {"choices": [value]}}
    tasks = [{"id": 41, "data": {"prompt": "Plan a trip.", "attribute": "Likes trains."},
              "annotations": [
                  {"completed_by": 7, "result": [choice("relevant", "Yes"), choice("confidence", "low")]},
                  {"completed_by": 8, "was_cancelled": True, "result": []},
                  {"completed_by": {"id": 9, "email": "dana@lab.org"}, "result": [choice("relevant", "no")]},
                  {"completed_by": 7, "result": [choice("relevant", "No")]}]},
             {"id": 42, "data": {"id": "own-id", "prompt": "Cook.", "attribute": "Vegan."}, "annotations": []}]
    path = tmp_path / "export.json"
    path.write_text(json.dumps(tasks))
    rows = read_tasks(path, spec)
    assert rows[0]["id"] == "41" and rows[0]["annotations"] == {"ls-user-7": False, "dana@lab.org": False}
    assert rows[1]["id"] == "own-id" and "annotations" not in rows[1]
    assert "<Choices name=\"relevant\" toName=\"prompt\"" in labeling_config(spec)
    assert '<Choice value="Yes" hotkey="y"/>' in labeling_config(spec)


def test_import_refuses_an_unknown_choice_naming_file_line_and_field(tmp_path, labelled):
    _, url = labelled
    spec = label_spec(resolve_stage("relevance"))
    task = {"data": {"id": "t1", "prompt": "p", "attribute": "a"},
            "annotations": [{"completed_by": {"email": "eve@x.org"},
                             "result": [{"from_name": "relevant", "to_name": "prompt", "type": "choices",
                                         "value": {"choices": ["Maybe"]}}]}]}
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps([task, task | {"data": {"id": "t2", "prompt": "p"}}], indent=2))
    with pytest.raises(DataError, match=r"tasks.json:2: field '\[0\].annotations.0.result.0.value.choices': "
                                        r"unknown label value \"Maybe\" for 'relevant' \(allowed: \"Yes\", \"No\"\)"):
        read_tasks(path, spec)
    before = [(lab.row_id, lab.annotator, lab.value) for lab in LabelStore(url, write=False).labels()]
    proc = subprocess.run([sys.executable, "-m", "personalign", "label", "import", str(path), "--stage", "relevance",
                           "--store", url, "--out", str(tmp_path / "in.jsonl")], capture_output=True, text=True,
                          cwd=ROOT, env=cli_env(tmp_path / "runs"), timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "unknown label value" in proc.stderr
    assert proc.stderr.startswith(f"error: {path}:2: field '[0].annotations.0.result.0.value.choices'")
    assert not (tmp_path / "in.jsonl").exists()
    assert [(lab.row_id, lab.annotator, lab.value) for lab in LabelStore(url, write=False).labels()] == before


def test_import_into_a_store_keeps_what_is_there_unless_told(labelled, tmp_path):
    rows, url = labelled
    spec = label_spec(resolve_stage("relevance"))
    canonical = merge_labels(rows, store_url=url).rows
    canonical[3]["annotations"] = {"carol": True}  # labelled elsewhere, in Label Studio
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps(to_tasks(spec, canonical)))
    facts = import_label_studio(path, "relevance", store_url=url)
    assert (facts["added"], facts["same"], facts["replaced"]) == (1, 3, 0)
    canonical[0]["annotations"]["alice"] = False
    path.write_text(json.dumps(to_tasks(spec, canonical)))
    with pytest.raises(ConfigurationError, match=r"1 labels in .* differ from the store's \(first: row 'demo-000', "
                                                 r"annotator alice: store True, file False\); nothing was written"):
        import_label_studio(path, "relevance", store_url=url)
    assert import_label_studio(path, "relevance", store_url=url, replace=True)["replaced"] == 1
    stored = {(lab.row_id, lab.annotator): lab.value for lab in LabelStore(url, write=False).labels("relevance")
              if not lab.skipped}
    assert stored == {("demo-000", "alice"): False, ("demo-000", "bob"): False, ("demo-001", "alice"): False,
                      ("demo-003", "carol"): True}


def test_cli_export_and_import_round_trip(labelled, tmp_path):
    rows, url = labelled
    env = cli_env(tmp_path / "runs")

    def cli(*args):
        proc = subprocess.run([sys.executable, "-m", "personalign", "label", *args], capture_output=True, text=True,
                              cwd=ROOT, env=env, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    out = cli("export", "--rows", str(rows), "--store", url, "--out", str(tmp_path / "labelled.jsonl"))
    assert "6 rows, 2 with annotations; 3 labels from the store (stage relevance; annotators: alice, bob)" in out
    cli("export", "--rows", str(rows), "--store", url, "--format", "label-studio", "--stage", "relevance",
        "--out", str(tmp_path / "tasks.json"), "--config", str(tmp_path / "config.xml"))
    assert (tmp_path / "config.xml").read_text().startswith("<View>")
    out = cli("import", str(tmp_path / "tasks.json"), "--stage", "relevance", "--out", str(tmp_path / "back.jsonl"))
    assert "imported 6 tasks, 3 labels (annotators: alice, bob)" in out
    assert _read(tmp_path / "back.jsonl") == _read(tmp_path / "labelled.jsonl")
