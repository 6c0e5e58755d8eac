"""Leave-one-group-out comparison (personalign.crossval, compare --cv groups) on the demo file."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from tests.conftest import DEMO, ROOT, cli_env


def _f1(gold, pred):
    tp = sum(g and p for g, p in zip(gold, pred))
    fp = sum(p and not g for g, p in zip(gold, pred))
    fn = sum(g and not p for g, p in zip(gold, pred))
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


@pytest.fixture(scope="module")
def demo_examples():
    from personalign.stages import resolve_stage as get_stage

    return get_stage("relevance").load(DEMO)


def compare_groups(st, examples, specs, names, *, data, n_boot, progress=False, seed=0) -> dict:
    """``compare(..., cv="groups")`` of ``names`` on ``data``, as its JSON."""
    import personalign

    return personalign.compare(st, ",".join(names), data, cv="groups", n_boot=n_boot, seed=seed).to_dict()


def test_refuses_a_stage_without_group_key(demo_examples):
    from personalign._verbs.groups import groups_of
    from personalign.errors import ConfigurationError
    from personalign.stages import resolve_stage as get_stage

    st = dataclasses.replace(get_stage("relevance"), group_key=None)
    with pytest.raises(ConfigurationError, match="no group key"):
        groups_of(st, demo_examples, DEMO)


def test_refuses_singleton_groups(demo_examples):
    """A stage file without group_key groups by id: leave-one-group-out would be leave-one-item-out."""
    from personalign._verbs.groups import groups_of
    from personalign.errors import ConfigurationError
    from personalign.stages import resolve_stage as get_stage

    st = dataclasses.replace(get_stage("relevance"), group_key="id")
    rows = [ex.copy(id=f"row{i}") for i, ex in enumerate(demo_examples[:12])]
    with pytest.raises(ConfigurationError, match="its own 'id' group.*declare the stage's group_key"):
        groups_of(st, rows, DEMO)


def test_refuses_fewer_than_three_groups(demo_examples):
    from personalign._verbs.groups import groups_of
    from personalign.errors import ConfigurationError
    from personalign.stages import resolve_stage as get_stage

    two = [ex for ex in demo_examples if ex.prompt_id in ("demo:p1", "demo:p2")]
    with pytest.raises(ConfigurationError, match="2 prompt_id group.*at least 3"):
        groups_of(get_stage("relevance"), two, "two.jsonl")


def test_logo_figures_by_hand_and_no_group_leaks_into_its_fit(demo_examples, monkeypatch):
    import personalign.compile_service as cs
    from personalign.metrics.cluster import holm
    from personalign.stages import resolve_stage as get_stage

    st = get_stage("relevance")
    seen = []
    real = cs.compile_program

    def spy(stage, strategy, optimizer, trainset, **kw):
        seen.append((strategy, {ex.prompt_id for ex in trainset}))
        return real(stage, strategy, optimizer, trainset, **kw)

    monkeypatch.setattr(cs, "compile_program", spy)
    specs = [("all-yes", None), ("bm25", None), ("style-rank", None)]
    res = compare_groups(st, demo_examples, specs, [n for n, _ in specs], data=DEMO, n_boot=200, progress=False)
    groups = [f"demo:p{i}" for i in range(1, 8)]
    assert res["groups"] == groups and res["n"] == 63 and res["complete"]
    # every fit saw exactly the six other prompts
    for k, (strategy, trained_on) in enumerate(seen):
        assert trained_on == set(groups) - {groups[k % 7]}, (strategy, k)
    allyes = res["strategies"][0]
    per = {}
    for g in groups:
        gold = [bool(ex.relevant) for ex in demo_examples if ex.prompt_id == g]
        per[g] = _f1(gold, [True] * len(gold))
    assert [row["f1"] for row in allyes["by_group"]] == pytest.approx([per[g] for g in groups])
    assert allyes["headline"]["value"] == pytest.approx(sum(per.values()) / 7)
    assert allyes["worst"]["value"] == pytest.approx(min(per.values()))
    gold_all = [bool(ex.relevant) for g in groups for ex in demo_examples if ex.prompt_id == g]
    assert allyes["pooled"]["value"] == pytest.approx(_f1(gold_all, [True] * 63))
    lo, hi = allyes["headline"]["ci"]  # 7 prompts: a percentile interval over resampled prompts
    assert lo <= allyes["headline"]["value"] <= hi
    # three strategies: Holm-adjusted sign-flip p-values, exact over 2^7 sign vectors
    rows = res["strategies"][1:]
    raw = [r["vs_first"]["permutation"]["p_value"] for r in rows]
    assert [r["vs_first"]["p_holm"] for r in rows] == pytest.approx(holm(raw))
    assert all(r["vs_first"]["permutation"]["p_min"] == pytest.approx(2 / 2 ** 7) for r in rows)
    style = res["strategies"][2]
    d = style["vs_first"]
    assert d["diff"] == pytest.approx(style["headline"]["value"] - allyes["headline"]["value"])
    assert d["mde"] > 0


def test_result_record_is_valid_and_keys_are_unique(demo_examples):
    from personalign._verbs.results import result_record
    from personalign.stages import resolve_stage as get_stage
    from personalign.record import validate

    st = get_stage("relevance")
    res = compare_groups(st, demo_examples, [("all-yes", None)], ["all-yes"], data=DEMO, n_boot=100,
                         progress=False)
    res.update(stage="relevance", data=str(DEMO), data_sha256="0" * 64, lm=None, seed=0, n_boot=100, uses_lm=False)
    rec = result_record(res, command="personalign compare relevance --cv groups")
    validate(rec)
    keys = [f["key"] for f in rec["figures"]]
    assert "relevance.lopo.all-yes.f1_mean" in keys and len(keys) == 3 + 7
    assert "relevance.lopo.all-yes.f1.prompt=demo:p1" in keys
    assert rec["resampling"] == {"unit": "prompt_id", "n_clusters": 7, "n_boot": 100}
    assert rec["model"] == {"name": None, "sha256": None} and rec["adapter"] is None


def test_cv_tag_is_readable_and_stable():
    from personalign.record import cv_tag, group_noun

    assert [cv_tag(k) for k in ("prompt_id", "topic", "user_id", "task_family")] == ["lopo", "loto", "louo", "lotfo"]
    assert group_noun("prompt_id") == "prompt" and group_noun("topic") == "topic"


def _cli(*args, runs):
    return subprocess.run([sys.executable, "-m", "personalign", *args], capture_output=True, text=True, cwd=ROOT,
                          env=cli_env(runs), timeout=600)


def test_cli_cv_groups_prints_per_group_table_and_writes_record(tmp_path):
    rec_path = tmp_path / "demo-check.json"
    proc = _cli("compare", "relevance", "--data", str(DEMO), "--cv", "groups", "--strategies", "all-yes,bm25",
                "--n-boot", "200", "--no-track", "--results", str(rec_path), runs=tmp_path / "runs")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "leave-one-prompt-out over 7 prompts" in proc.stdout
    assert "demo:p7" in proc.stdout and "smallest reachable p = 0.0156" in proc.stdout
    assert "Warning" not in proc.stderr
    path = [l.split(": ", 1)[1] for l in proc.stdout.splitlines() if l.startswith("results: ")][0]
    out = json.loads(open(path).read())
    assert out["cv"] == "groups" and out["complete"] is True
    assert out["run_record"]["versions"]["dspy"] and out["run_record"]["data"]["sha256"] == out["data_sha256"]
    from personalign.record import validate

    rec = json.loads(rec_path.read_text())  # --results: the run record, named by the file's stem
    validate(rec)
    assert rec["name"] == "demo-check" and f"run record: {rec_path}" in proc.stdout
    figs = {f["key"]: f for f in rec["figures"]}
    bm25 = next(r for r in out["strategies"] if r["name"] == "bm25")
    assert figs["relevance.lopo.bm25.f1_mean"]["value"] == bm25["headline"]["value"]
    assert figs["relevance.lopo.bm25.f1_worst"]["value"] == bm25["worst"]["value"]
    assert [r["name"] for r in rec["extra"]["strategies"]] == ["all-yes", "bm25"]
    assert "predictions" not in rec["extra"]["strategies"][0] and rec["resampling"]["n_clusters"] == 7


@pytest.mark.parametrize("path,why", [("Demo_1.json", "lower-case"), ("demo.txt", "NAME.json"),
                                      ("no-such-dir/demo.json", "does not exist")])
def test_cli_results_path_is_refused_before_anything_runs(tmp_path, path, why):
    proc = _cli("compare", "relevance", "--data", str(DEMO), "--cv", "groups", "--strategies", "all-yes",
                "--no-track", "--results", str(tmp_path / path), runs=tmp_path / "runs")
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "--results" in lines[0] and why in lines[0], proc.stderr
    assert not (tmp_path / "runs" / "compare").exists() and not (tmp_path / path).exists()


def test_cli_cv_bad_value_and_too_few_groups_are_one_line(tmp_path):
    proc = _cli("compare", "relevance", "--data", str(DEMO), "--cv", "folds", "--strategies", "all-yes", "--no-track",
                runs=tmp_path / "runs")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert [l for l in proc.stderr.splitlines() if l.strip()] == [l for l in proc.stderr.splitlines() if "--cv" in l]
    two = tmp_path / "two.jsonl"
    two.write_text("".join(l for l in DEMO.read_text().splitlines(True) if '"demo:p1"' in l or '"demo:p2"' in l))
    proc = _cli("compare", "relevance", "--data", str(two), "--cv", "groups", "--strategies", "all-yes", "--no-track",
                runs=tmp_path / "runs")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "at least 3" in lines[0] and str(two) in lines[0]
    assert not (tmp_path / "runs" / "compare").exists()


def test_same_seed_same_figures(demo_examples):
    from personalign.stages import resolve_stage as get_stage

    st = get_stage("relevance")
    specs = [("all-yes", None), ("style-rank", None)]
    runs = [compare_groups(st, demo_examples, specs, ["all-yes", "style-rank"], data=DEMO, n_boot=200, seed=3,
                           progress=False) for _ in range(2)]
    for a, b in zip(runs[0]["strategies"], runs[1]["strategies"]):
        assert a["headline"] == b["headline"] and a["pooled"] == b["pooled"] and a["predictions"] == b["predictions"]
        assert a.get("vs_first") == b.get("vs_first")
