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
                            "--teleprompters", "labeled,bootstrap", "--limit", "10", "--train-per-group", "4",
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


def test_compare_reports_and_tracks_the_dev_choice(tmp_path, runs_dir):  # runs_dir: artifacts stay in tmp
    import mlflow

    import personalign
    from personalign.tracking import MLflowCallback
    from personalign.lm import configure_cache
    from personalign.tracking.store import Tracker
    from tests.sweep.conftest import load_mock

    load_mock().register()
    configure_cache(tmp_path / "cache", enabled=False)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    out = personalign.compare("relevance", "zero-shot,zero-shot@labeled", DEMO, lm="mock/relevance-0ms", n_boot=20,
                              limit=6, callbacks=[MLflowCallback(uri)]).to_dict()
    _, ref, compiled = out["strategies"]  # the reference constant (all-yes) comes first
    assert ref["compile_summary"] is None
    s = compiled["compile_summary"]
    assert s["objective"] == "f1" and s["chosen"] in ("uncompiled", "labeled") and s["reason"]
    assert s["actual_lm_calls"] <= s["projected_lm_calls"]
    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("personalign")
    runs = client.search_runs([exp.experiment_id], filter_string="tags.mlflow.runName LIKE 'zero-shot@labeled ·%'")
    assert runs, [r.info.run_name for r in client.search_runs([exp.experiment_id])]
    assert runs[0].data.metrics["dev_after"] == s["dev_after"]


def test_compare_shows_the_objective_when_it_is_not_the_metric(shared_data, runs_dir):
    """The violation stage's metric is F1 of "violates" but a compile maximizes Cohen's kappa: each
    compare row carries the objective and the table gives it a column."""
    from rich.console import Console

    import personalign
    from personalign._verbs.render import render_table

    out = personalign.compare("violation", "all-no", shared_data / "prefeval", n_boot=20, limit=24).to_dict()
    assert out["metric"] == "f1" and out["objective"] == "kappa"
    row = out["strategies"][-1]
    assert row["objective"] == 0.0 and row["f1"] == 0.0  # "never violates": kappa 0, no positive found
    console = Console(width=240, record=True)
    console.print(render_table(out))
    assert "kappa (objective)" in console.export_text()
