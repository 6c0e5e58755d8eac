"""Same seed and cache -> identical metrics across two runs (separate processes, embedded model).

A compare with a compiled strategy (``zero-shot@bootstrap``: BootstrapFewShot on a train split, dev
held out by prompt) and the zero-shot judge, run twice with the same ``--seed`` and ``--cache-dir``:
every metric, CI, prediction, paired difference, McNemar p and the compiled demos are identical,
and the second run reaches the model zero times (compile and evaluation both come from the cache).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import DEMO, ROOT, cli_env

KEYS = ("n", "f1", "f1_ci", "precision", "precision_ci", "recall", "recall_ci", "yes_rate", "yes_rate_ci",
        "accuracy", "failures")


def _small_data(path):
    """3 train prompts x 4 pairs (2 relevant, 2 not) and 6 val pairs of one prompt, from the demo set."""
    rows = [json.loads(line) for line in DEMO.read_text().splitlines()]
    train_prompts = sorted({r["prompt_id"] for r in rows if r["split"] == "train"})[:3]
    keep = []
    for p in train_prompts:
        pos = [r for r in rows if r["prompt_id"] == p and r["relevant"]][:2]
        neg = [r for r in rows if r["prompt_id"] == p and not r["relevant"]][:2]
        keep += pos + neg
    val_prompt = sorted({r["prompt_id"] for r in rows if r["split"] == "val"})[0]
    keep += [r for r in rows if r["prompt_id"] == val_prompt][:6]
    path.write_text("".join(json.dumps(r) + "\n" for r in keep))
    return path


@pytest.mark.slow
def test_same_seed_and_cache_give_identical_metrics_across_two_runs(tmp_path):
    data = _small_data(tmp_path / "small.jsonl")
    cmd = [sys.executable, "-m", "personalign", "compare", "relevance", "--data", str(data), "--split", "val",
           "--strategies", "zero-shot,zero-shot@bootstrap", "--lm", "local/smollm2-135m-instruct", "--seed", "7", "--cache-dir", str(tmp_path / "cache"),
           "--no-track", "--json"]
    outs = []
    for i in range(2):
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=cli_env(tmp_path / f"runs{i}"),
                              timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        outs.append(json.loads(proc.stdout))
    first, second = outs
    assert first["n"] == 6 and first["seed"] == second["seed"] == 7
    saved = [json.loads(open(o["result_file"]).read()) for o in outs]  # the full result, predictions included
    for a, b, sa, sb in zip(first["strategies"], second["strategies"], saved[0]["strategies"], saved[1]["strategies"]):
        assert a["name"] == b["name"]
        assert {k: a[k] for k in KEYS} == {k: b[k] for k in KEYS}, a["name"]
        assert sa["predictions"] == sb["predictions"] and len(sa["predictions"]) == 6
        assert a["failures"] == 0
    # the first row is the stage's reference (all-yes); the compiled strategy is found by name
    a, b = ({s["name"]: s for s in out["strategies"]}["zero-shot@bootstrap"] for out in (first, second))
    assert a["vs_first"]["diff"] == b["vs_first"]["diff"] and a["vs_first"]["mcnemar"] == b["vs_first"]["mcnemar"]
    for key in ("score_before", "score_before_ci", "score_after", "score_after_ci"):
        assert a["compile"][key] == b["compile"][key], key
    assert a["compile"]["details"]["demos"] == b["compile"]["details"]["demos"]
    # the first run reached the model; the second came entirely from the cache
    assert [r["name"] for r in first["strategies"]] == ["all-yes", "zero-shot", "zero-shot@bootstrap"]
    assert first["strategies"][1]["lm_calls"] == 6 and a["compile_lm_calls"] > 0
    assert [r["lm_calls"] for r in second["strategies"]] == [0, 0, 0]
    assert [r["compile_lm_calls"] for r in second["strategies"]] == [0, 0, 0]
