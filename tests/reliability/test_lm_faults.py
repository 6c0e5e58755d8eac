"""20% injected LM faults (exceptions, timeouts, empty output) during compile and eval.

The faults are injected by a real litellm provider (:class:`personalign.testing.faults.FaultInjector`)
registered as ``local``, so every call travels litellm -> ``dspy.LM`` (and its retries) -> the
JSONAdapter -> the program -> ``run_program`` or a teleprompter. The fast tests wrap the ``mock``
provider (deterministic answers, no model); the slow ones wrap the embedded model itself.

What must hold: the run completes; transient faults are retried (the LM's own retries and
``run_program``'s) and leave the result unchanged; requests that always fail ("poisoned") are
counted as failures, reported with their example index, and scored as failures (the wrong label).
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest

from tests.conftest import DEMO, ROOT, cli_env
from personalign.testing import faults
from personalign.testing.faults import FaultInjector

MODEL = "local/smollm2-135m-instruct"
FAULTS = ("exception", "timeout", "empty")


def _demo_splits():
    from personalign.stages import resolve_stage as get_stage

    st = get_stage("relevance")
    examples = st.load(DEMO)
    return st, [e for e in examples if e.split == "train"], [e for e in examples if e.split == "val"]


def _poison(example, i: int):
    """A copy of ``example`` whose every LM request fails (its attribute carries a marker)."""
    return example.copy(attribute=f"{example.attribute} [POISON-{i}]")


def _random_fault_share(stats) -> float:
    random_attempts = stats["attempts"] - stats["poisoned"]
    return sum(stats[k] for k in FAULTS) / random_attempts


def _assert_failures_scored(report, gold, poisoned_idx):
    from sklearn.metrics import f1_score

    assert report["failures"] == len(poisoned_idx)
    assert [i for i, p in enumerate(report["predictions"]) if p is None] == poisoned_idx
    for i in poisoned_idx:
        assert report["correct"][i] == 0.0  # a failure costs the score: it counts as the wrong label
        assert any(e.startswith(f"example {i}:") for e in report["errors"]), report["errors"]
    filled = [(not g) if p is None else p for g, p in zip(gold, report["predictions"])]
    assert report["f1"] == pytest.approx(f1_score(gold, filled, zero_division=0.0))


def test_bootstrap_compile_and_eval_complete_under_20pct_faults(fresh_cache, mock_handler):
    from personalign.compile_service import compile_program as compile_for_stage
    from personalign.evaluation import evaluate_stage
    from personalign.lm import make_lm

    st, train, val = _demo_splits()
    evalset = val[:12] + [_poison(val[12], 1)] + val[13:20] + [_poison(val[20], 2)]
    poisoned_idx = [12, 20]
    gold = [bool(e.relevant) for e in evalset]
    inj = FaultInjector(mock_handler, rate=0.2, seed=0, poison=("[POISON-",))
    with faults.provider("local", inj), faults.fast_lm_retries():
        lm = make_lm(MODEL, load=False)
        program, info = compile_for_stage(st, "zero-shot", "bootstrap", train, lm=lm, seed=0)
        compile_stats = dict(inj.stats)
        report = evaluate_stage(st, program, evalset, lm=lm, progress=False)
    with faults.provider("local", FaultInjector(mock_handler, rate=0.0)):
        clean = evaluate_stage(st, program, evalset, lm=make_lm(MODEL, load=False, cache=False), progress=False)

    # the compile completed under faults, and reports them
    # (which calls fail is a seeded hash of the request; the 20% share is checked over the whole run below)
    assert compile_stats["attempts"] > 20 and sum(compile_stats.get(k, 0) for k in FAULTS) >= 1
    assert info["actual_lm_calls"] > 0 and sum(info["details"]["demos"].values()) > 0
    tf = info["details"]["teleprompter_failures"]
    assert tf["failed_predictor_calls"] == sum(tf["by_type"].values()) and tf["error_budget"] >= 10
    assert info["details"]["val_before"]["n"] > 0 and "failures" in info["details"]["val_after"]

    # about 20% of the calls failed, of every kind, and the failed requests were retried
    stats = inj.stats
    assert 0.1 <= _random_fault_share(stats) <= 0.3, dict(stats)
    assert all(stats[k] > 0 for k in FAULTS), dict(stats)
    assert stats["retries"] > 0
    # each poisoned example was tried 3 times by run_program (1 + 2 retries), timeouts and
    # exceptions among them 3 times more by dspy.LM
    assert stats["poisoned"] >= 2 * 3

    # transient faults changed nothing: the same answers as a fault-free run, except the poisoned ones
    assert report["n"] == len(evalset) and report["lm_calls"] > 0
    assert [p for i, p in enumerate(report["predictions"]) if i not in poisoned_idx] == \
           [p for i, p in enumerate(clean["predictions"]) if i not in poisoned_idx]
    _assert_failures_scored(report, gold, poisoned_idx)
    assert clean["failures"] == 0


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record) -> None:
        self.messages.append(record.getMessage())


def test_mipro_scores_failed_examples_instead_of_cancelling_the_search(fresh_cache, mock_handler):
    """DSPy cancels an evaluation after ``max_errors`` (10) failed examples and scores the candidate 0
    (and one failed instruction proposal aborts MIPROv2); the wrapper retries failed calls and raises
    the error budget, so each failure costs only its own example."""
    from personalign.lm import make_lm
    from personalign.optimizers import OPTIMIZERS

    st, train, val = _demo_splits()
    dev = val[:9] + [_poison(e, i) for i, e in enumerate(val[9:21])]  # 12 examples always fail
    inj = FaultInjector(mock_handler, rate=0.2, seed=1, poison=("[POISON-",), poison_kinds=("empty",))
    records = _Records()
    parallel_log = logging.getLogger("dspy.utils.parallelizer")
    parallel_log.addHandler(records)
    try:
        with faults.provider("local", inj), faults.fast_lm_retries():
            lm = make_lm(MODEL, load=False)
            opt = OPTIMIZERS.create("mipro", seed=0, lm=lm, max_trials=3, **st.teleprompter_kwargs())
            compiled, res = opt.compile(st.registry.create("zero-shot"), trainset=train, valset=dev)
    finally:
        parallel_log.removeHandler(records)

    assert not [m for m in records.messages if "cancelled" in m.lower()], "an evaluation was cancelled"
    assert sum("Error for Example" in m for m in records.messages) >= 12  # the failures were met, and scored
    d = res.details
    assert d["val_before"]["failures"] >= 12 and d["val_after"]["failures"] >= 12
    tf = d["teleprompter_failures"]
    assert tf["error_budget"] >= 11 and tf["failed_predictor_calls"] >= 12
    assert tf["retried_calls"] >= 2 * 12  # each poisoned run tried 3 times before it counts as failed
    assert res.score_after is not None and res.score_after > 0
    assert inj.stats["retries"] > 0 and all(inj.stats[k] > 0 for k in FAULTS)


@pytest.mark.slow
def test_embedded_model_compile_and_eval_under_20pct_faults(fresh_cache):
    """The same, with the faults wrapped around the embedded model (a small set: ~40 real calls)."""
    from personalign.compile_service import compile_program as compile_for_stage
    from personalign.evaluation import evaluate_stage
    from personalign.lm import make_lm
    from personalign.lm._provider import register

    register()
    st, train, val = _demo_splits()
    by_prompt: dict = {}
    for e in train:
        by_prompt.setdefault(e.prompt_id, []).append(e)
    small_train = [e for p in sorted(by_prompt)[:3] for e in by_prompt[p][:3]]  # 3 prompts x 3
    evalset = val[:5] + [_poison(val[5], 1)] + val[6:8]
    gold = [bool(e.relevant) for e in evalset]
    inj = FaultInjector(faults.handler_of("local"), rate=0.2, seed=3, poison=("[POISON-",))
    with faults.provider("local", inj), faults.fast_lm_retries():
        lm = make_lm(MODEL)
        program, info = compile_for_stage(st, "zero-shot", "bootstrap", small_train, lm=lm, seed=0)
        report = evaluate_stage(st, program, evalset, lm=lm, progress=False)

    assert info["actual_lm_calls"] > 0 and "teleprompter_failures" in info["details"]
    assert sum(inj.stats[k] for k in FAULTS) > 0 and inj.stats["ok"] > 0
    assert inj.stats["retries"] > 0
    assert report["n"] == len(evalset)
    _assert_failures_scored(report, gold, [5])
    assert all(p in (True, False) for i, p in enumerate(report["predictions"]) if i != 5)


@pytest.mark.slow
def test_cli_compile_and_eval_under_faults_report_failures_and_keep_secrets_out(tmp_path):
    """``personalign compile`` (bootstrap) and ``personalign eval`` in fresh processes with the fault
    provider: both complete; eval's JSON and its MLflow run report the failures; a fake API key
    set in the environment appears nowhere under runs/ (MLflow database, artifacts, programs)."""
    import mlflow

    runs = tmp_path / "runs"
    secret = "sk-test-FAKE-KEY-reliability-0123456789"
    data = tmp_path / "demo.jsonl"
    rows = [json.loads(line) for line in DEMO.read_text().splitlines()]
    val_idx = [i for i, r in enumerate(rows) if r["split"] == "val"]
    rows[val_idx[2]]["attribute"] += " [POISON-1]"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    stats_file = tmp_path / "faults.json"
    env = cli_env(runs, OPENAI_API_KEY=secret, HF_TOKEN=secret + "-hf",
                  PERSONALIGN_TEST_FAULTS=json.dumps({"rate": 0.2, "seed": 0, "poison": ["[POISON-"],
                                                      "stats": str(stats_file), "fast_retries": True}))
    runner = [sys.executable, "-m", "personalign.testing.faults"]
    prog = tmp_path / "prog"
    proc = subprocess.run([*runner, "compile", "relevance", "--strategy", "zero-shot", "--optimizer", "bootstrap",
                           "--lm", MODEL,
                           "--data", str(data), "--out", str(prog), "--json"],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    compiled = json.loads(proc.stdout)
    assert "teleprompter_failures" in compiled["compile"]["details"]
    compile_faults = json.loads(stats_file.read_text())
    assert sum(compile_faults.get(k, 0) for k in FAULTS) > 0

    proc = subprocess.run([*runner, "eval", "relevance", "--program", str(prog), "--data", str(data), "--split", "val",
                           "--lm", MODEL,
                           "--json"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    eval_faults = json.loads(stats_file.read_text())
    assert out["n"] == len(val_idx) and out["failures"] == 1
    assert sum(eval_faults.get(k, 0) for k in FAULTS) > 0 and eval_faults["retries"] > 0

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{runs / 'mlflow.db'}")
    exp = client.get_experiment_by_name("personalign")
    (run,) = client.search_runs([exp.experiment_id], "tags.command = 'eval'")
    assert run.data.metrics["failures"] == 1.0 and run.info.status == "FINISHED"
    logged = json.loads(open(mlflow.artifacts.download_artifacts(run_id=run.info.run_id,
                                                                 artifact_path="predictions.json",
                                                                 tracking_uri=client.tracking_uri,
                                                                 dst_path=str(tmp_path / "dl"))).read())
    assert logged["predictions"][2] is None and logged["errors"][0].startswith("example 2:")

    for path in runs.rglob("*"):
        if path.is_file() and path.suffix != ".gguf":
            body = path.read_bytes()
            assert secret.encode() not in body, path
