"""A sweep scored on a split of fewer than 5 groups (a stage file's dev split of one topic) prints
the per-group figures and their range, never a percentile interval -- as compare does below 5
clusters, through the same helpers (``metrics.cluster.format_figure`` / ``resampling_note``)."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.cli.test_cli import run_cli
from tests.conftest import ROOT, cli_env

EXAMPLE = ROOT / "examples" / "own_task"


def _stage_and_rows():
    from personalign.stages.ref import resolve_stage

    st = resolve_stage(str(EXAMPLE / "stage.toml"))
    return st, st.load(EXAMPLE / "data.jsonl")


def _report(st, rows):
    from personalign.evaluation import stage_report

    preds = [bool(ex.follows) if i % 3 else not bool(ex.follows) for i, ex in enumerate(rows)]
    return stage_report(st, rows, preds, n_boot=200, seed=0)


def test_across_groups_by_number_of_groups():
    from personalign.evaluation import across_groups

    st, rows = _stage_and_rows()
    topics = list(dict.fromkeys(ex.topic for ex in rows))
    one = _report(st, [ex for ex in rows if ex.topic == topics[0]])
    assert one["f1_ci"] is not None and " within one " in one["resampling"]["unit"]  # items inside the topic
    view = across_groups(one, "f1")
    assert view["f1_ci"] is None and all(view[k] is None for k in view if k.endswith("_ci"))
    assert view["f1_by_group"] == {topics[0]: one["f1"]} and view["f1_range"] == [one["f1"]] * 2
    assert view["resampling"]["unit"] == "topic" and view["resampling"]["n_clusters"] == 1
    two = _report(st, [ex for ex in rows if ex.topic in topics[:2]])
    assert across_groups(two, "f1") == two and two["f1_ci"] is None and len(two["f1_by_group"]) == 2
    every = _report(st, rows)
    assert len(topics) >= 5 and across_groups(every, "f1") is every and every["f1_ci"] is not None


def test_format_figure_shows_the_interval_else_the_groups():
    from personalign.metrics.cluster import format_figure, resampling_note

    assert format_figure(0.5123, [0.4, 0.61]) == "0.512 [0.40, 0.61]"
    assert format_figure(0.5, None, [0.3, 0.7]) == "0.500 (range 0.30–0.70)"
    assert format_figure(0.5, None, [0.3, 0.7], by_group={"a": 0.3, "b": 0.7}) == "0.500 (range 0.30–0.70: a 0.300, b 0.700)"
    assert format_figure(0.75, None, [0.75, 0.75], by_group={"music": 0.75}) == "0.750 (one group, music: no interval)"
    assert format_figure(0.1, None, None, "+") == "+0.100" and format_figure(None) == "-"
    note = resampling_note({"unit": "topic", "n_clusters": 1, "n_boot": 100})
    assert "fewer than 5: per-group range shown, no percentile interval" in note
    assert resampling_note(None) == ""


def test_a_sweep_on_a_single_dev_group_prints_no_interval(tmp_path):
    for name in ("stage.toml", "data.jsonl"):
        shutil.copy(EXAMPLE / name, tmp_path / name)
    (tmp_path / "space.toml").write_text('strategies = ["majority"]\n[pruner]\nkind = "none"\n')
    args = ["sweep", str(tmp_path / "stage.toml"), "--data", str(tmp_path / "data.jsonl"), "--space",
            str(tmp_path / "space.toml"), "--n-trials", "1", "--no-track", "--no-export", "--n-boot", "50",
            "--storage", f"sqlite:///{tmp_path / 'optuna.db'}"]
    proc = run_cli(*args, env=cli_env(tmp_path / "runs"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    (trial,) = [line for line in proc.stderr.splitlines() if line.startswith("trial 0 COMPLETE")]
    assert "(one group, " in trial and ": no interval)" in trial and "[" not in trial, trial
    best = next(line for line in proc.stdout.splitlines() if line.startswith("best: trial 0"))
    assert "(one group, " in best and "intervals resample topic (1 top-level cluster," in proc.stdout
    out = json.loads(run_cli(*args, "--json", env=cli_env(tmp_path / "runs")).stdout)  # resumed: the same trial
    report = out["best"]["report"]
    assert report["f1_ci"] is None and list(report["f1_by_group"]) == [trial.split("(one group, ")[1].split(":")[0]]
    assert report["f1_range"] == [report["f1"]] * 2
