"""`data stats` output, light CLI import, and streaming of a 50 MB JSONL."""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc

from personalign.cli.data import main
from personalign.data import RelevanceExample, iter_relevance
from personalign.data.kinds import stats


def test_stats_real_relevance(shared_data, capsys):
    path = shared_data / "recenter_relevance" / "relevance_labels.jsonl"
    s = stats(path, "relevance")
    assert s["n"] == 534 and s["labels"] == {"false": 441, "true": 93}
    assert s["splits"] == {"train": 338, "val": 196} and s["groups"]["prompt"] == 4
    assert s["label_rate"] == 93 / 534
    assert s["lengths"]["attribute"]["min"] <= s["lengths"]["attribute"]["p50"] <= s["lengths"]["attribute"]["max"]
    assert main(["stats", str(path), "--kind", "relevance", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n"] == 534
    assert main(["stats", str(path), "--kind", "relevance"]) == 0
    out = capsys.readouterr().out
    assert "records: 534" in out and "train: 338" in out


def test_stats_fixtures(fixtures):
    assert stats(fixtures / "cupid" / "cupid_tiny.jsonl", "cupid")["labels"] == {"changing": 1, "consistent": 1,
                                                                                 "contrastive": 1}
    s = stats(fixtures / "personamem" / "questions_tiny.csv", "personamem")
    assert s["n"] == 3 and s["labels"] == {"0": 1, "1": 1, "2": 1} and s["groups"]["user"] == 2


def test_cli_module_is_light():
    code = ("import sys, personalign.cli.data; "
            "bad = [m for m in ('dspy', 'litellm', 'torch', 'llama_cpp', 'numpy', 'pydantic') if m in sys.modules]; "
            "print(bad)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "[]", r.stdout + r.stderr


def test_50mb_jsonl_streams(tmp_path):
    path = tmp_path / "big.jsonl"
    line = RelevanceExample(id="x", attribute="The user prefers concise answers. " * 8, prompt="Q " * 400,
                            relevant=False, prompt_id="p").model_dump()
    n = 0
    with path.open("w") as fh:
        while fh.tell() < 50 * 1024 * 1024:
            line["id"] = f"e{n}"
            fh.write(json.dumps(line) + "\n")
            n += 1
    size = path.stat().st_size
    tracemalloc.start()
    count = sum(1 for _ in iter_relevance(path))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert count == n
    # streaming: peak is the id set plus one line, far below the file size
    assert peak < size / 5, f"peak {peak / 1e6:.1f} MB for a {size / 1e6:.1f} MB file"
