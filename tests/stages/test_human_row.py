"""The human row (issue 39 item 2): where the evaluated rows carry annotations from >= 3 people,
``compare`` (single split and ``--cv groups``) and ``eval`` carry the human ceiling and each
strategy's share of it -- in the table, ``to_dict()`` / ``--json``, the result file, the run record,
the results page and MLflow -- and the figures are :func:`personalign.labels.human_ceiling`'s,
computed here directly. Without annotations: no row, no keys."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

import personalign
from personalign.data.annotations import majority
from personalign.labels import human_ceiling, share_of_ceiling
from tests.conftest import ROOT, cli_env

OWN = ROOT / "examples" / "own_task"
SHARED = ROOT.parent / "shared" / "data" / "recenter_relevance"


@pytest.fixture
def annotated(tmp_path):
    """The own-task example with 3-5 annotators per row (each right 80% of the time, seeded), the
    label their majority; 6 topics in ``val`` (36 rows), 4 in ``train``. Returns (stage file, data)."""
    rows = [json.loads(line) for line in (OWN / "data.jsonl").read_text().splitlines() if line.strip()]
    topics = list(dict.fromkeys(r["topic"] for r in rows))
    rng = np.random.default_rng(7)
    out = []
    for i, r in enumerate(rows):
        votes = {f"ann{j + 1}": bool(r["follows"] if rng.random() < 0.8 else not r["follows"]) for j in range(3 + i % 3)}
        out.append({**r, "annotations": votes, "follows": majority(votes),
                    "split": "val" if topics.index(r["topic"]) < 6 else "train"})
    shutil.copy(OWN / "stage.toml", tmp_path / "stage.toml")
    data = tmp_path / "annotated.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in out))
    return tmp_path / "stage.toml", data


def _stage(path):
    from personalign.stages import resolve_stage

    return resolve_stage(str(path))


def test_single_split_human_row_is_the_ceiling_in_text_json_file_record_and_page(annotated, tmp_path):
    from personalign.results_page.tables import group_table, summary_table

    stage, data = annotated
    report = personalign.compare(str(stage), "all-yes,majority", data, split="val", n_boot=200, out_dir=tmp_path / "out")
    st = _stage(stage)
    val = [ex for ex in st.load(data) if ex.split == "val"]
    direct = human_ceiling(st, val, n_boot=200, seed=0)
    d = report.to_dict()
    human = d["human"]
    assert human["f1"] == direct["f1"] and human["f1_ci"] == direct["f1_ci"] is not None  # 6 topics: an interval
    assert human["n"] == direct["n"] == sum(len(ex.annotations) for ex in val) and human["rows_covered"] == 36
    for row in report.rows:  # every row is annotated: the share is the objective over the ceiling
        preds = [True] * 36 if row["name"] == "all-yes" else row["predictions"]
        assert row["share_of_human"] == pytest.approx(share_of_ceiling(st.score(val, preds), direct))
        assert row["share_of_human"] == pytest.approx(row["objective"] / direct["f1"])
    text = str(report)
    assert "of human" in text and "human: each annotator's f1 against the strict majority of the others" in text
    human_line = next(line for line in text.splitlines() if line.startswith("│ human"))
    assert f"{direct['f1']:.3f} [{direct['f1_ci'][0]:.2f}, {direct['f1_ci'][1]:.2f}]" in human_line
    assert f"{report.rows[0]['share_of_human']:.0%}" in text
    written = json.loads(open(d["result_file"]).read())
    assert written["human"]["f1"] == direct["f1"] and written["strategies"][1]["share_of_human"] == d["strategies"][1][
        "share_of_human"]
    keys = {f["key"]: f["value"] for f in written["run_record"]["figures"]}
    assert keys["option-follows.val.human.f1"] == direct["f1"]
    assert keys["option-follows.val.all-yes.share_of_human"] == pytest.approx(report.rows[0]["share_of_human"])
    page = summary_table(written)
    assert page["columns"][-1] == "of human" and page["rows"][-1][0]["text"] == "human"
    assert page["rows"][-1][1]["text"] == f"{direct['f1']:.3f}" and any(n.startswith("human:") for n in page["notes"])
    assert group_table(written)["rows"][-1][0]["text"] == "human"


def test_cv_groups_ceiling_is_computed_per_held_out_group(annotated):
    stage, data = annotated
    report = personalign.compare(str(stage), "all-yes", data, cv="groups", n_boot=200)
    st = _stage(stage)
    rows = st.load(data)
    groups = list(dict.fromkeys(ex.topic for ex in rows))
    per = {g: human_ceiling(st, [ex for ex in rows if ex.topic == g], n_boot=200, seed=0) for g in groups}
    human = report["human"]
    assert human["groups"] == groups and human["groups_without"] == []
    assert human["headline"]["value"] == pytest.approx(np.mean([h["f1"] for h in per.values()]))
    assert human["headline"]["ci"] is not None  # 10 topics: an interval over topics
    assert {g["group"]: g["f1"] for g in human["by_group"]} == {g: h["f1"] for g, h in per.items()}
    assert {g["group"]: g["f1_ci"] for g in human["by_group"]} == {g: h["f1_ci"] for g, h in per.items()}
    pooled = human_ceiling(st, [ex for g in groups for ex in rows if ex.topic == g], n_boot=200, seed=0)
    assert human["pooled"]["value"] == pooled["f1"]
    all_yes = np.mean([st.score([ex for ex in rows if ex.topic == g], [True] * 6) for g in groups])
    assert report.rows[0]["share_of_human"] == pytest.approx(all_yes / human["headline"]["value"])
    text = str(report)
    assert "of human" in text and "human: on the held-out rows of each topic" in text
    assert f"{human['headline']['value']:.3f}" in next(line for line in text.splitlines() if line.startswith("│ human"))


def test_eval_carries_the_human_row(annotated):
    stage, data = annotated
    program = personalign.compile(str(stage), "majority", data)
    report = personalign.evaluate(str(stage), program, data, split="val", n_boot=200)
    st = _stage(stage)
    direct = human_ceiling(st, [ex for ex in st.load(data) if ex.split == "val"], n_boot=200, seed=0)
    d = report.to_dict()
    assert d["human"]["f1"] == direct["f1"] and d["human"]["f1_ci"] == direct["f1_ci"]
    assert d["share_of_human"] == pytest.approx(d["f1"] / direct["f1"])
    assert f"human: f1 {direct['f1']:.3f}" in str(report) and f"{d['share_of_human']:.0%} of it" in str(report)


def test_without_annotations_there_is_no_human_row(tmp_path):
    stage = str(OWN / "stage.toml")
    report = personalign.compare(stage, "all-yes,majority", OWN / "data.jsonl", split="val", n_boot=50)
    d = report.to_dict()
    assert "human" not in d and all("share_of_human" not in r for r in d["strategies"])
    assert "of human" not in str(report) and "human:" not in str(report)
    program = personalign.compile(stage, "majority", OWN / "data.jsonl")
    ev = personalign.evaluate(stage, program, OWN / "data.jsonl", split="val", n_boot=50).to_dict()
    assert "human" not in ev and "share_of_human" not in ev


def test_mlflow_gets_the_ceiling_and_the_shares(annotated, tmp_path):
    from mlflow import MlflowClient

    from personalign.tracking import MLflowCallback

    stage, data = annotated
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    report = personalign.compare(str(stage), "all-yes,majority", data, split="val", n_boot=100,
                                 callbacks=[MLflowCallback(uri)])
    metrics = MlflowClient(uri).get_run(report["mlflow_run_id"]).data.metrics
    human = report["human"]
    assert metrics["f1/human"] == pytest.approx(human["f1"]) and metrics["human.judgments"] == human["n"]
    assert metrics["f1_ci/human_low"] == pytest.approx(human["f1_ci"][0])
    assert metrics["share_of_human/majority"] == pytest.approx(report.row("majority")["share_of_human"])
    program = personalign.compile(str(stage), "majority", data)
    ev = personalign.evaluate(str(stage), program, data, split="val", n_boot=100, callbacks=[MLflowCallback(uri)])
    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("personalign").experiment_id])
    evals = [r.data.metrics for r in runs if "f1/human" in r.data.metrics and "share_of_human" in r.data.metrics]
    assert len(evals) == 1 and evals[0]["share_of_human"] == pytest.approx(ev["share_of_human"])
    assert evals[0]["f1/human"] == pytest.approx(ev["human"]["f1"])


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"shared recenter relevance data not found at {SHARED}")
def test_shared_relevance_annotations_give_a_human_f1_of_0_66(tmp_path):
    """The issue's figure through the command line: merge the raw votes, compare on the merged rows."""
    merged = tmp_path / "merged.jsonl"
    env = cli_env(tmp_path / "runs")
    merge = subprocess.run([sys.executable, "-m", "personalign", "label", "merge", "relevance",
                            str(SHARED / "raw_task3_annotations.jsonl"), "--join", str(SHARED / "relevance_labels.jsonl"),
                            "--out", str(merged)], capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert merge.returncode == 0, merge.stderr[-2000:]
    proc = subprocess.run([sys.executable, "-m", "personalign", "compare", "relevance", "--data", str(merged),
                           "--split", "train", "--strategies", "all-yes", "--n-boot", "200", "--no-track", "--json"],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    human = json.loads(proc.stdout)["human"]
    assert human["f1"] == pytest.approx(0.66, abs=0.02) and human["n"] == 794 and human["n_items"] == 193
    assert set(human["f1_by_group"]) == {"recenter:p0", "recenter:p2"}
