"""benchmarks/compile_relevance.py end to end against the mock LM (no model): one JSON object, the table."""

from __future__ import annotations

import json
import sys

from tests.conftest import DEMO, ROOT


def test_compile_benchmark_prints_the_table(capsys, monkeypatch):
    from tests.sweep.conftest import load_mock

    load_mock().register()
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    sys.modules.pop("compile_relevance", None)
    import compile_relevance

    compile_relevance.main(["--data", str(DEMO), "--lm", "mock/relevance-0ms", "--strategies", "zero-shot",
                            "--teleprompters", "labeled,bootstrap", "--limit", "10", "--train-per-prompt", "4",
                            "--n-boot", "50"])
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert result["objective"] == "f1" and result["n"] == 10
    names = [r["name"] for r in result["rows"]]
    assert names == ["zero-shot", "zero-shot@labeled", "zero-shot@bootstrap"]
    ref, *compiled = result["rows"]
    assert "vs_uncompiled" not in ref and ref["compile"] is None
    for row in compiled:
        assert set(row["vs_uncompiled"]) == {"against", "diff", "ci", "mcnemar_p"}
        assert row["compile"]["chosen"] and row["compile"]["dev_before"] is not None
        assert row["compile_lm_calls"] <= row["projected_compile_lm_calls"]
        assert row["objective"] == row["f1"]
    assert "Δ vs uncompiled" in err and "zero-shot@bootstrap" in err
