"""The command line as a user runs it: subprocesses, exit codes, one-line errors, outputs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DEMO, ROOT, cli_env


def run_cli(*args: str, env: dict | None = None, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "personalign", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env or cli_env(), timeout=timeout)


def assert_one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    lines = [l for l in proc.stderr.strip().splitlines() if l.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_help_is_light_and_lists_commands():
    code = ("import sys; sys.argv=['personalign','--help']\n"
            "from personalign.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "heavy=[m for m in ('dspy','litellm','torch','llama_cpp','mlflow','sentence_transformers','optuna') if m in sys.modules]\n"
            "print('HEAVY=' + ','.join(heavy))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert "HEAVY=\n" in proc.stdout or proc.stdout.rstrip().endswith("HEAVY="), proc.stdout
    for cmd in ("doctor", "compare", "data"):
        assert cmd in proc.stdout


def test_unknown_local_model_is_a_one_line_error(tmp_path):
    proc = run_cli("compare", "relevance", "--data", str(DEMO), "--lm", "local/no-such-model", "--no-track",
                   env=cli_env(tmp_path / "runs"))
    assert_one_line_error(proc, "unknown local model", "local/smollm2-135m-instruct")
    assert not (tmp_path / "runs" / "compare").exists(), "no output on error"


def test_unroutable_model_string_is_a_one_line_error(tmp_path):
    proc = run_cli("compare", "relevance", "--data", str(DEMO), "--lm", "nonsense-model-xyz", "--no-track",
                   env=cli_env(tmp_path / "runs"))
    assert_one_line_error(proc, "unknown model string")


def test_corrupted_model_file_is_a_one_line_error(tmp_path):
    from personalign.lm._models import MODELS, model_file

    src, _ = model_file("local/smollm2-135m-instruct", verify=False)
    bad = tmp_path / "bad.gguf"
    shutil.copyfile(src, bad)
    with open(bad, "r+b") as fh:
        fh.seek(1000)
        fh.write(b"\x00\x01\x02\x03")
    env = cli_env(tmp_path / "runs", **{MODELS["smollm2-135m-instruct"].env_override: str(bad)})
    proc = run_cli("compare", "relevance", "--data", str(DEMO), "--lm", "local/smollm2-135m-instruct", "--no-track",
                   env=env)
    assert_one_line_error(proc, "corrupted", "sha256")


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere; covered by the read-only-file case below")
def test_unwritable_cache_dir_is_a_one_line_error_nonroot(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    proc = run_cli("compare", "relevance", "--data", str(DEMO), "--cache-dir", str(ro / "cache"), "--no-track",
                   env=cli_env(tmp_path / "runs"))
    assert_one_line_error(proc, "not writable")


def test_cache_dir_that_is_a_file_is_a_one_line_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    proc = run_cli("compare", "relevance", "--data", str(DEMO), "--cache-dir", str(blocker / "cache"),
                   "--no-track", env=cli_env(tmp_path / "runs"))
    assert_one_line_error(proc, "cache dir", "not writable")


def test_missing_data_file_and_unknown_split_and_strategy(tmp_path):
    env = cli_env(tmp_path / "runs")
    assert_one_line_error(run_cli("compare", "relevance", "--data", str(tmp_path / "nope.jsonl"), "--no-track", env=env),
                          "nope.jsonl")
    assert_one_line_error(run_cli("compare", "relevance", "--data", str(DEMO), "--split", "test", "--no-track",
                                  "--strategies", "minilm-cosine", env=env), "split")
    assert_one_line_error(run_cli("compare", "relevance", "--data", str(DEMO), "--strategies", "magic",
                                  "--no-track", env=env), "unknown relevance strategy 'magic'")
    assert_one_line_error(run_cli("compare", "relevance", "--data", str(DEMO), "--strategies", "zero-shot@magic",
                                  "--no-track", env=env), "magic")


def test_malformed_data_names_file_line_and_field(tmp_path):
    bad = tmp_path / "bad.jsonl"
    good = DEMO.read_text().splitlines()
    row = json.loads(good[3])
    row["relevant"] = "perhaps"
    bad.write_text("\n".join(good[:3] + [json.dumps(row)] + good[4:]) + "\n")
    proc = run_cli("compare", "relevance", "--data", str(bad), "--no-track", env=cli_env(tmp_path / "runs"))
    assert_one_line_error(proc, "bad.jsonl:4", "relevant")
    assert not (tmp_path / "runs" / "compare").exists()


@pytest.mark.slow
def test_doctor_json_reports_grammar_constrained_backend(tmp_path):
    proc = run_cli("doctor", "--json", "--full", env=cli_env(tmp_path / "runs"))
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["grammar_constrained"] is True and info["full"] is True
    assert set(info["models"]) == {"local/qwen2.5-coder-1.5b-instruct", "local/qwen2.5-coder-0.5b-instruct",
                                   "local/smollm2-135m-instruct"}
    for m in info["models"].values():
        assert len(m["sha256"]) == 64 and m["verified"] is True
    qwen = info["models"]["local/qwen2.5-coder-1.5b-instruct"]
    assert qwen["default"] is True and info["default_model"] == "local/qwen2.5-coder-1.5b-instruct"
    assert qwen["sha256"] == qwen["pinned_sha256"] == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert [m["default"] for m in info["models"].values()].count(True) == 1
    assert info["cache_dir"].startswith(str(tmp_path))
    assert info["versions"]["dspy"] and info["versions"]["litellm"]


@pytest.mark.slow
def test_compare_relevance_demo_end_to_end_with_mlflow(tmp_path):
    runs = tmp_path / "runs"
    secret = "sk-test-THIS-IS-A-FAKE-KEY-1234567890"
    env = cli_env(runs, OPENAI_API_KEY=secret)
    proc = run_cli("compare", "relevance", "--data", str(DEMO), "--split", "val", "--json", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)  # stdout is exactly one JSON object
    assert out["stage"] == "relevance" and out["split"] == "val" and out["n"] == 27
    rows = {r["name"]: r for r in out["strategies"]}
    assert list(rows) == ["all-yes", "zero-shot", "minilm-cosine"]  # the reference row first
    for r in rows.values():
        # val holds 3 prompts: intervals resample prompts, and with < 5 of them the per-prompt range stands in
        assert r["resampling"] == {"unit": "prompt_id", "n_clusters": 3, "n_boot": 1000} and r["f1_ci"] is None
        assert 0.0 <= r["f1_range"][0] <= r["f1"] <= r["f1_range"][1] <= 1.0 and len(r["f1_by_group"]) == 3
        assert 0.0 <= r["yes_rate"] <= 1.0
        assert r["failures"] == 0
    assert rows["zero-shot"]["lm_calls"] == 27  # one call per pair, nothing cached in a fresh runs dir
    assert rows["minilm-cosine"]["lm_calls"] == rows["all-yes"]["lm_calls"] == 0
    assert rows["minilm-cosine"]["compile"]["details"]["threshold"] is not None
    assert Path(out["result_file"]).exists() and Path(out["chart_file"]).read_bytes()[:4] == b"\x89PNG"
    vs = rows["minilm-cosine"]["vs_first"]
    assert vs["against"] == "all-yes"
    assert vs["f1_diff"]["range"][0] <= vs["f1_diff"]["diff"] <= vs["f1_diff"]["range"][1]
    assert vs["f1_diff"]["permutation"]["p_min"] == pytest.approx(0.25)  # 3 prompts: 2 / 2^3
    assert 0.0 <= vs["mcnemar"]["p_value"] <= 1.0 and vs["mcnemar"]["level"] == "item"
    assert out["run_record"]["model"]["name"] == out["lm"] and out["run_record"]["resampling"]["n_clusters"] == 3

    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{runs / 'mlflow.db'}")
    exp = client.get_experiment_by_name("personalign")
    parent = client.get_run(out["mlflow_run_id"])
    assert parent.data.params["stage"] == "relevance"
    children = client.search_runs([exp.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    assert {c.info.run_name for c in children} == {f"{s} · compare relevance" for s in ("all-yes", "zero-shot",
                                                                                        "minilm-cosine")}
    for c in children:
        assert "f1" in c.data.metrics and "f1_range_low" in c.data.metrics and c.info.status == "FINISHED"
    assert parent.data.tags["personalign.version.dspy"] and parent.data.tags["personalign.git_commit"]

    # the fake key never reaches the MLflow store (database or artifacts)
    for path in runs.rglob("*"):
        if path.is_file() and path.suffix != ".gguf":
            assert secret.encode() not in path.read_bytes(), path

    # same seed and cache: identical metrics on a second run, with no LM calls
    again = json.loads(run_cli("compare", "relevance", "--data", str(DEMO), "--split", "val", "--json", "--no-track",
                               env=env).stdout)
    for a, b in zip(out["strategies"], again["strategies"]):
        assert (a["f1"], a["f1_ci"], a["yes_rate"]) == (b["f1"], b["f1_ci"], b["yes_rate"])
    assert {r["name"]: r["lm_calls"] for r in again["strategies"]}["zero-shot"] == 0


@pytest.mark.slow
def test_prompt_longer_than_context_window_is_a_one_line_error(tmp_path):
    proc = run_cli("predict", "relevance", "--strategy", "zero-shot", "-a", "The user is vegan.",
                   "--prompt", "word " * 5000, env=cli_env(tmp_path / "runs", PERSONALIGN_N_CTX="2048"))
    assert_one_line_error(proc, "does not fit the 2048-token context", "PERSONALIGN_N_CTX")


@pytest.mark.slow
def test_compile_then_eval_in_a_fresh_process(tmp_path):
    runs = tmp_path / "runs"
    env = cli_env(runs)
    out_dir = tmp_path / "prog"
    proc = run_cli("compile", "relevance", "--strategy", "zero-shot", "--optimizer", "labeled", "--data", str(DEMO),
                   "--out", str(out_dir), "--json", env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout)
    saved = json.loads((out_dir / "program.json").read_text())
    meta = saved["metadata"]["personalign"]  # DSPy's layout: the state at the top, our metadata beside DSPy's
    assert meta["stage"] == "relevance" and meta["strategy"] == "zero-shot"
    assert meta["compile"]["optimizer"] == "labeled" and meta["versions"]["dspy"]
    # LabeledFewShot k=4, saved as JSON -- unless the uncompiled program scored at least as well on dev
    chosen = meta["compile"]["chosen"]
    assert chosen in ("labeled", "uncompiled") and meta["compile"]["reason"]
    assert meta["compile"]["dev_objective_after"] >= meta["compile"]["dev_objective_before"]
    n_demos = 4 if chosen == "labeled" else 0
    assert len(saved["judge"]["demos"]) == n_demos == len(saved["demos"])
    prompt = (out_dir / "prompt.md").read_text()
    assert f"### demos ({n_demos})" in prompt and "## decision rule" in prompt and "prompt_id" not in prompt
    assert n_demos == 0 or "**relevant**" in prompt
    assert summary["compile"]["actual_lm_calls"] <= summary["compile"]["projected_lm_calls"]

    proc = run_cli("eval", "relevance", "--program", str(out_dir), "--data", str(DEMO), "--split", "val", "--json",
                   env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(proc.stdout)
    for key in ("stage", "n", "f1", "f1_ci", "precision", "recall", "yes_rate", "lm_calls"):
        assert key in res
    assert res["n"] == 27 and res["lm_calls"] == 27 and res["failures"] == 0

    # a learned selector round-trips its weights (npz, no pickle) into a fresh process
    learned = tmp_path / "learned"
    assert run_cli("compile", "relevance", "--strategy", "minilm-logreg", "--data", str(DEMO), "--out", str(learned),
                   "--no-track", env=env).returncode == 0
    assert list(learned.glob("*.npz"))
    a = json.loads(run_cli("eval", "relevance", "--program", str(learned), "--data", str(DEMO), "--json",
                           "--no-track", env=env).stdout)
    assert a["lm_calls"] == 0 and 0.0 <= a["f1"] <= 1.0


def test_compile_refuses_teleprompter_on_fitted_strategy_and_missing_program(tmp_path):
    env = cli_env(tmp_path / "runs")
    assert_one_line_error(run_cli("compile", "relevance", "--strategy", "minilm-cosine", "--optimizer", "bootstrap",
                                  "--data", str(DEMO), "--no-track", env=env), "fitted by its own optimizer")
    assert_one_line_error(run_cli("eval", "relevance", "--program", str(tmp_path / "none"), "--data", str(DEMO),
                                  "--no-track", env=env), "no saved program")


def test_flag_and_configuration_errors_fail_fast_with_one_line(tmp_path):
    env = cli_env(tmp_path / "runs")
    bogus = run_cli("compare", "relevance", "--data", str(DEMO), "--strategies", "minilm-cosine",
                    "--tracking-uri", "bogus://x", env=env)
    assert_one_line_error(bogus, "MLflow tracking URI 'bogus://x': unsupported scheme 'bogus'")
    assert_one_line_error(run_cli("compare", "relevance", "--data", str(DEMO), "--strategies", " , ", "--no-track",
                                  env=env), "--strategies is empty")
    assert_one_line_error(run_cli("compare", "relevance", "--data", str(DEMO), "--train-split", "nope",
                                  "--no-track", env=env), "'nope' split")
    for flag in ("--n-boot", "--limit"):
        proc = run_cli("compare", "relevance", "--data", str(DEMO), flag, "0", "--no-track", env=env)
        assert proc.returncode == 2 and flag in proc.stderr and "Traceback" not in proc.stderr
    quiet = run_cli("compare", "relevance", "--data", str(DEMO), "--lm", "nosuchprovider/foo", "--json",
                    "--no-track", env=env)
    assert_one_line_error(quiet, "unknown model string")
    assert quiet.stdout == "", "stdout stays clean for --json"
    assert not (tmp_path / "runs" / "compare").exists()


def test_hosted_model_without_api_key_aborts_instead_of_scoring_failures(tmp_path):
    env = cli_env(tmp_path / "runs")
    env.pop("OPENAI_API_KEY", None)
    proc = run_cli("compare", "relevance", "--data", str(DEMO), "--lm", "openai/gpt-4o-mini", "--strategies",
                   "zero-shot", "--limit", "2", "--no-track", env=env)
    assert proc.returncode == 2, proc.stderr[-1500:]
    assert "no API key" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "runs" / "compare").exists()
