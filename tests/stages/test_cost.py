"""Cost before work (issue 37): before the first model call of compare, compile, eval, sweep and
predict batch, one line says how many model calls the run makes at most (and about how long,
when the model's speed is known); past a threshold a terminal is asked first, a pipe never;
``--train-limit`` samples the rows a strategy is fitted on; every forward pass counts.

The embedded model is :mod:`tests.fake_engine` (the real engine methods, provider, JSON adapter and
counting over a stand-in for llama.cpp); DSPy-only runs use the in-process mock provider.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests import fake_engine
from tests.conftest import ROOT, cli_env
from tests.stages.test_own_task import task  # noqa: F401  (the fixture: the example's files in a folder of their own)

TINY = "local/smollm2-135m-instruct"


@pytest.fixture
def engines(monkeypatch, runs_dir):
    """Fake embedded engines, a fresh DSPy cache and no margin kept in memory from another test."""
    import dspy

    from personalign.lm import configure_cache, forward, scoring

    forward.clear_memory()  # passes of another test (the fake engines' keys are the same in every test)
    monkeypatch.setattr(scoring, "_served", {})
    before = dspy.cache
    configure_cache(runs_dir / "cache")
    yield fake_engine.install(monkeypatch)
    dspy.cache = before


def _events(monkeypatch, engines_: dict) -> list[str]:
    """A log of "call" (each model invocation of the fake engine) that the cost hook writes "cost" into."""
    events: list[str] = []
    for name in ("complete", "next_token_logprobs"):
        real = getattr(fake_engine.FakeEngine, name)

        def logged(self, *a, _real=real, **k):
            events.append("call")
            return _real(self, *a, **k)

        monkeypatch.setattr(fake_engine.FakeEngine, name, logged)
    return events


def test_compare_says_its_cost_before_the_first_model_call_and_the_counts_hold(task, engines, monkeypatch):
    import personalign

    events = _events(monkeypatch, engines)
    costs = []

    def on_cost(cost):
        costs.append(cost)
        events.append("cost")

    report = personalign.compare(str(task / "stage.toml"), "predict,yes-prob", task / "data.jsonl", lm=TINY,
                                 n_boot=20, on_cost=on_cost)
    assert events[0] == "cost" and events.count("cost") == 1 and "call" in events
    (cost,) = costs
    by_name = {s.name: s for s in cost.strategies}
    # deterministic strategies on an embedded model (JSON adapter, temperature 0): projected == made + cached
    predict, yes_prob = report.row("predict"), report.row("yes-prob")
    assert by_name["predict"].evaluation == 12 == predict["lm_calls"] + predict["cached_lm_calls"]
    assert by_name["yes-prob"].fitting == 36 == yes_prob["compile_lm_calls"] + yes_prob["compile_cached_lm_calls"]
    assert by_name["yes-prob"].evaluation == 12 == yes_prob["lm_calls"] + yes_prob["cached_lm_calls"]
    assert by_name["yes-prob"].kind == "forward" and by_name["all-yes"].total == 0
    assert yes_prob["compile_lm_calls"] == 36  # a fresh cache: the fit's forward passes all ran, and count
    assert cost.total == 60 and report.to_dict()["projected_lm_calls"]["total"] == 60
    line = cost.line()
    assert line.startswith("cost: 60 model calls on local/smollm2-135m-instruct")  # a cold cache: all new
    assert "yes-prob 48 (36 fitting + 12 evaluation; " in line and "predict 12 evaluation, " in line
    assert " out tokens" in line and "$0 (no price on file for local/smollm2-135m-instruct)" in line
    assert "time unknown" in line  # nothing measured yet on this runs folder

    again = personalign.compare(str(task / "stage.toml"), "yes-prob", task / "data.jsonl", lm=TINY, n_boot=20,
                                on_cost=costs.append)
    row = again.row("yes-prob")
    assert row["lm_calls"] == 0 and row["cached_lm_calls"] == 12  # the margins came from DSPy's cache, shown apart
    assert costs[-1].line().startswith("cost: 0 new + 48 cached model calls")  # looked up before the run
    assert costs[-1].seconds == 0.0 and costs[-1].speed["forward"]["source"] == "run"  # the first run measured it


def test_the_line_says_no_model_calls_for_an_lm_free_run(task, runs_dir, capsys):
    import personalign

    personalign.compare(str(task / "stage.toml"), "majority", task / "data.jsonl", n_boot=20, progress=True)
    err = capsys.readouterr().err
    assert "cost: no model calls (compare)" in err and "model calls on" not in err


def test_train_limit_is_a_seeded_stratified_sample_of_the_fit_rows(task, engines):
    import personalign
    from personalign._verbs.folds import split_folds
    from personalign._verbs.inputs import load_data
    from personalign.stages import resolve_stage

    st = resolve_stage(str(task / "stage.toml"))
    ds = load_data(st, task / "data.jsonl")

    def rows(seed):
        (fold,) = split_folds(st, ds, [("yes-prob", None)], split="val", train_split="train", limit=None, seed=seed,
                              train_limit=12)
        return [ex.id for ex in fold.train], fold

    ids, fold = rows(0)
    assert len(ids) == 12 and rows(0)[0] == ids and rows(1)[0] != ids
    assert Counter(ex.topic for ex in fold.train) == Counter({t: 2 for t in
                                                              ("food", "travel", "exercise", "music", "budget",
                                                               "reading")})  # 6 topics of 6 rows: 2 each
    assert len(fold.test) == 12  # the evaluation rows are untouched
    report = personalign.compare(str(task / "stage.toml"), "yes-prob", task / "data.jsonl", lm=TINY, n_boot=20,
                                 train_limit=12, on_cost=lambda c: None)
    out = report.to_dict()
    assert out["train_limit"] == 12 and out["n_train"] == 12
    assert report.row("yes-prob")["compile_lm_calls"] == 12  # fitted on the 12 rows only
    compiled = personalign.compile(str(task / "stage.toml"), "yes-prob", task / "data.jsonl", lm=TINY,
                                   train_limit=12, on_cost=lambda c: None)
    assert compiled.info["train_limit"] == 12 and compiled.info["details"]["n_train"] == 12


def test_a_train_limit_sample_of_one_class_names_the_sample_not_the_data(task):
    """``--train-limit 1`` keeps one row: the refusal says the sample has one class (the data has
    both), and how to fix it (the fresh attack: it blamed the split)."""
    import personalign
    from personalign.errors import DataError

    with pytest.raises(DataError) as refused:
        personalign.compare(str(task / "stage.toml"), "majority,minilm-logreg", task / "data.jsonl", train_limit=1,
                            n_boot=10)
    assert "the 1 rows --train-limit 1 kept of split 'train' are all" in str(refused.value)
    assert "raise --train-limit" in str(refused.value)


def test_compile_and_eval_project_what_they_make(task, engines, tmp_path):
    import personalign

    costs = []
    compiled = personalign.compile(str(task / "stage.toml"), "yes-prob", task / "data.jsonl", lm=TINY,
                                   out=tmp_path / "yp", on_cost=costs.append)
    assert costs[-1].strategies[0].fitting == 36 == compiled.info["actual_lm_calls"] + compiled.info["cached_lm_calls"]
    assert compiled.info["projected_lm_calls"] == 36
    ev = personalign.evaluate(str(task / "stage.toml"), tmp_path / "yp", task / "data.jsonl", split="test", lm=TINY,
                              n_boot=20, on_cost=costs.append)
    assert costs[-1].verb == "eval" and costs[-1].total == 12 == ev["lm_calls"] + ev["cached_lm_calls"]


def test_a_sweep_projects_its_trials(task, engines, tmp_path):
    import personalign

    space = tmp_path / "space.toml"
    space.write_text('strategies = ["predict", "majority"]\n')
    costs = []
    report = personalign.sweep(str(task / "stage.toml"), task / "data.jsonl", space=space, n_trials=2,
                               storage=f"sqlite:///{tmp_path / 'optuna.db'}", lm=TINY, n_boot=20, export=False,
                               on_cost=costs.append, train_limit=12)
    (cost,) = costs
    # the configurations the seeded sampler picks, replayed before the run: the calls the trials make
    assert cost.trials == 2 and cost.new == report["lm_calls"]
    assert cost.bound == 2 * 6 and "(up to 12) on" in cost.line()  # at most: every trial predict on the 6 dev rows


# --- the confirmation: asked at a terminal only --------------------------------------------------
def _cost(seconds_per_call: float = 2.0):
    from personalign import Cost
    from personalign._verbs.cost import StrategyCost

    speed = {"generation": {"seconds_per_call": seconds_per_call, "calls": 10, "source": "run",
                            "measured": "2026-01-01T00:00:00+00:00"}}
    return Cost("compare", "mock/x", [StrategyCost("predict", evaluation=100)], speed=speed, in_flight=1)


def test_the_time_counts_calls_in_rounds_of_the_runs_concurrency_and_the_engine_one_at_a_time():
    """100 calls at 2 s: 200 s one at a time, 4 rounds (8 s) at 32 in flight -- the context's
    concurrency (``personalign.lm.use``) when not given; the embedded engine serves one call at a
    time whatever was asked."""
    import dspy

    from personalign import Cost
    from personalign._verbs.cost import StrategyCost
    from personalign.lm import CONCURRENCY_KEY

    speed = {"generation": {"seconds_per_call": 2.0, "calls": 10, "source": "run", "measured": "2026-01-01"}}
    rows = [StrategyCost("predict", evaluation=100)]
    assert Cost("compare", "mock/x", rows, speed=speed, in_flight=1).seconds == 200
    many = Cost("compare", "mock/x", rows, speed=speed, in_flight=32)
    assert many.seconds == 8 and "about 8 s at 2 s per call (measured by a run on 2026-01-01) with 32 in flight" \
        in many.line()
    with dspy.context(**{CONCURRENCY_KEY: 4}):
        assert Cost("compare", "mock/x", rows, speed=speed).seconds == 50
        embedded = Cost("compare", "local/qwen2.5-coder-1.5b-instruct", rows, speed=speed)
    assert embedded.in_flight == 1 and embedded.seconds == 200 and "in flight" not in embedded.line()


class _Stdin(io.StringIO):
    def __init__(self, text: str, tty: bool) -> None:
        super().__init__(text)
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_the_gate_never_asks_when_stdin_is_not_a_terminal():
    from personalign import cost_gate

    out = io.StringIO()
    stdin = _Stdin("", tty=False)
    cost_gate(10, stream=out, stdin=stdin)(_cost())  # 200 s estimated, over 10: runs on
    text = out.getvalue()
    assert text.startswith("cost: 100 model calls on mock/x (predict 100 evaluation); about 3 min at 2 s per call "
                           "(measured by a run on 2026-01-01)")
    assert "not asking (stdin is not a terminal): running" in text and stdin.tell() == 0


def test_the_gate_asks_at_a_terminal_past_the_threshold():
    from personalign import Declined, cost_gate

    with pytest.raises(Declined, match="not run"):
        cost_gate(10, stream=io.StringIO(), stdin=_Stdin("n\n", tty=True))(_cost())
    out = io.StringIO()
    cost_gate(10, stream=out, stdin=_Stdin("y\n", tty=True))(_cost())  # yes: runs
    assert "Run it? [y/N]" in out.getvalue()
    for quiet in (cost_gate(1000, stream=io.StringIO(), stdin=_Stdin("", tty=True)),  # under the threshold
                  cost_gate(10, assume_yes=True, stream=io.StringIO(), stdin=_Stdin("", tty=True)),  # --yes
                  cost_gate(None, stream=io.StringIO(), stdin=_Stdin("", tty=True))):  # no threshold
        quiet(_cost())


def _known_speed(runs: Path, model: str, seconds: float) -> None:
    (runs / "cache").mkdir(parents=True, exist_ok=True)
    (runs / "cache" / "speed.json").write_text(json.dumps({model: {"generation": {
        "seconds_per_call": seconds, "calls": 5, "source": "run", "measured": "2026-01-01T00:00:00+00:00"}}}))


def _compare_cli(task: Path, runs: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "personalign.testing.mock_provider", "compare", str(task / "stage.toml"),
            "--data", str(task / "data.jsonl"), "--strategies", "predict", "--lm", "mock/gate", "--no-track",
            "--n-boot", "20", "--confirm-over", "5", *extra]


def test_the_command_line_runs_on_from_a_pipe_and_asks_at_a_terminal(task, tmp_path):
    import pty

    runs = tmp_path / "runs"
    _known_speed(runs, "mock/gate", 6.0)  # 12 calls in one round of 32 in flight x 6 s: past --confirm-over 5
    env = cli_env(runs, PYTHONPATH=str(ROOT))
    piped = subprocess.run(_compare_cli(task, runs), env=env, stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=300)
    assert piped.returncode == 0, piped.stderr
    first = piped.stderr.splitlines()[0]
    assert first.startswith("cost: 12 model calls (up to 24) on mock/gate (predict 12 evaluation, ")
    assert "out tokens, up to 24)" in first  # a retry: the bound only
    assert "not asking (stdin is not a terminal): running" in piped.stderr
    assert list((runs / "compare").glob("*.json"))

    asked = tmp_path / "asked"
    _known_speed(asked, "mock/gate", 6.0)
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(_compare_cli(task, asked), env=cli_env(asked, PYTHONPATH=str(ROOT)), stdin=slave,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        os.write(master, b"n\n")
        out, err = proc.communicate(timeout=300)
    finally:
        os.close(master)
        os.close(slave)
    assert proc.returncode == 1, err
    assert "Run it? [y/N]" in err and "error: not run:" in err
    assert not (asked / "compare").exists()  # nothing ran, nothing written

    yes = subprocess.run(_compare_cli(task, asked, "--yes"), env=cli_env(asked, PYTHONPATH=str(ROOT)),
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    assert yes.returncode == 0 and "not asking" not in yes.stderr and "Run it?" not in yes.stderr
