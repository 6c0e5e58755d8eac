"""Cost before it is spent, for any model: the cost line's tokens and dollars against what a real
HTTP server on 127.0.0.1 (personalign.testing.openai_server) reports, the tokens and dollars spent
in every output, and ``--max-cost`` holding the run to a budget."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import personalign
from personalign.lm import CallCounter, make_lm, use
from personalign.testing import openai_server
from tests.conftest import DEMO, ROOT, cli_env

PRICED = "openai/gpt-4o-mini"  # a model string litellm's bundled price map lists, served by the loopback server


@pytest.fixture(autouse=True)
def _runs(tmp_path, monkeypatch):
    monkeypatch.setenv("PERSONALIGN_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("PERSONALIGN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PERSONALIGN_RETRY_BACKOFF", "0.05")


def _compare(api_base: str, lm: str = "openai/mock", cache: bool = False, **kw):
    costs: list = []
    report = personalign.compare("relevance", "zero-shot", DEMO, split="val", lm=lm, api_base=api_base, n_boot=50,
                                 callbacks=[personalign.ConfigureCache(enabled=cache)], on_cost=costs.append, **kw)
    return report, costs[0]


def _row(report, name="zero-shot"):
    return next(r for r in report.rows if r["name"] == name)


def test_projected_input_tokens_are_within_a_quarter_of_what_the_server_reports():
    with openai_server() as srv:
        lm = make_lm("openai/mock", api_base=srv.api_base, cache=False)  # its capability check
        before = srv.stats()["prompt_tokens"]
        report, cost = _compare(srv.api_base, lm=lm)
        reported = srv.stats()["prompt_tokens"] - before
    row, projected = _row(report), cost.strategies[-1]
    assert projected.name == "zero-shot" and projected.input_tokens is not None
    assert row["spent_input_tokens"] == reported > 0  # spent: the responses' own usage
    assert 0.75 <= projected.input_tokens / reported <= 1.25, (projected.input_tokens, reported)
    assert cost.to_dict()["input_tokens"] == cost.input_tokens == projected.input_tokens
    # no speed known for the output yet: max_tokens per call is the bound
    assert projected.output_tokens == projected.new * 512 >= row["spent_output_tokens"] > 0


def test_a_priced_model_string_shows_dollars_and_an_unpriced_one_says_so():
    with openai_server() as srv:
        priced, cost = _compare(srv.api_base, lm=PRICED)
        _, free = _compare(srv.api_base)
    assert cost.priced and cost.dollars > 0
    assert "litellm's bundled price map" in cost.line() and f"${cost.dollars:.4f}" in cost.line()
    assert not free.priced and free.dollars == 0 and "$0 (no price on file for openai/mock)" in free.line()
    row = _row(priced)
    assert row["priced"] is True and row["spent_dollars"] > 0
    from personalign.lm.prices import price

    p_in, p_out = price(PRICED)
    assert row["spent_dollars"] == pytest.approx(row["spent_input_tokens"] * p_in + row["spent_output_tokens"] * p_out)
    assert priced.data["spent"]["dollars"] == pytest.approx(sum(r.get("spent_dollars", 0) for r in priced.rows))


def test_the_second_projection_uses_the_measured_output_and_a_cached_response_costs_nothing():
    with openai_server() as srv:
        first, _ = _compare(srv.api_base, lm=PRICED, cache=True)
        requests = srv.stats()["requests"]
        again, cost = _compare(srv.api_base, lm=PRICED, cache=True)
        assert srv.stats()["requests"] == requests  # every call answered by the cache
    spent = _row(first)
    assert _row(again)["spent_input_tokens"] == 0 and _row(again)["spent_dollars"] == 0
    assert again.data["spent"] == {"input_tokens": 0, "output_tokens": 0, "dollars": 0.0, "priced": False}
    assert cost.new == 0 and cost.dollars == 0
    # the measured mean output per call (speed.json) replaced the max_tokens bound
    from personalign.lm.spend import sample_tokens  # noqa: F401 -- the module the projection counts with
    from personalign.lm.speed import known_speed

    mean = known_speed(f"{PRICED} zero-shot")["generation"]["output_tokens_per_call"]
    assert mean == pytest.approx(spent["spent_output_tokens"] / spent["lm_calls"], abs=0.01)


def test_the_loopback_server_counts_usage_with_the_cl100k_tokenizer():
    from personalign.lm.prices import cl100k, count_messages

    assert cl100k() is not None  # litellm's bundled copy, read offline
    text = "Is the user's dietary preference relevant to a dinner plan?"
    with openai_server() as srv:
        lm = make_lm("openai/mock", api_base=srv.api_base, cache=False, load=False)
        with use(lm), CallCounter() as counter:
            lm(text)
    usage = counter.tokens["openai/mock"]
    # "user" is one token; 3 per message, 3 for the reply (OpenAI's count, as litellm's token_counter)
    messages = [{"role": "user", "content": text}]
    assert usage["prompt_tokens"] == count_messages(messages) == len(cl100k().encode(text)) + 1 + 3 + 3


def _cli(*args: str, runs, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "personalign", *args], capture_output=True, text=True, cwd=ROOT,
                          env=cli_env(runs, PERSONALIGN_CACHE_DIR=str(runs / "cache")), timeout=timeout)


def test_spent_tokens_and_dollars_are_in_the_json_the_result_file_and_the_run_record(tmp_path):
    record = tmp_path / "cost-record.json"
    with openai_server() as srv:
        proc = _cli("compare", "relevance", "--data", str(DEMO), "--strategies", "zero-shot", "--lm", PRICED,
                    "--api-base", srv.api_base, "--no-cache", "--no-track", "--n-boot", "50", "--json",
                    "--results", str(record), runs=tmp_path / "runs")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "litellm's bundled price map" in proc.stderr and "input +" in proc.stderr
    out = json.loads(proc.stdout)
    row = next(r for r in out["strategies"] if r["name"] == "zero-shot")
    assert row["spent_input_tokens"] > 0 and row["spent_output_tokens"] > 0 and row["spent_dollars"] > 0
    assert out["spent"]["dollars"] == pytest.approx(row["spent_dollars"])
    assert out["projected_lm_calls"]["dollars"] > 0 and out["projected_lm_calls"]["input_tokens"] > 0
    saved = json.loads(open(out["result_file"], encoding="utf-8").read())
    assert saved["spent"] == out["spent"]
    assert "spent" in json.dumps(json.loads(record.read_text(encoding="utf-8")))


def test_max_cost_stops_before_the_call_that_would_pass_it_and_writes_nothing(tmp_path):
    runs, record = tmp_path / "runs", tmp_path / "stopped.json"
    with openai_server() as srv:
        proc = _cli("compare", "relevance", "--data", str(DEMO), "--strategies", "zero-shot", "--lm", PRICED,
                    "--api-base", srv.api_base, "--no-cache", "--no-track", "--n-boot", "50", "--concurrency", "1",
                    "--max-cost", "0.0006", "--results", str(record), runs=runs)
        sent = srv.stats()["requests"]
    assert proc.returncode == 1, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "stopped at $" in errors[0] and "of $0.0006 after" in errors[0] and "nothing written" in errors[0]
    assert f"after {sent - 1:,} of 27 calls sent" in errors[0]  # every request but the capability probe
    assert 1 < sent < 27  # some made: each reserves its projected $0.000344 (512 output tokens), is charged its usage (~$0.00004)
    assert not (runs / "compare").exists() or not any((runs / "compare").iterdir())
    assert not record.exists()


def test_max_cost_with_calls_in_flight_counts_what_was_sent(tmp_path):
    """32 in flight: the calls sent but not answered when the budget stops are in the line, not lost."""
    import re

    with openai_server(latency=0.3) as srv:
        proc = _cli("compare", "relevance", "--data", str(DEMO), "--strategies", "zero-shot", "--lm", PRICED,
                    "--api-base", srv.api_base, "--no-cache", "--no-track", "--n-boot", "50", "--concurrency", "32",
                    "--max-cost", "0.003", runs=tmp_path / "runs")
        sent = srv.stats()["requests"]
    assert proc.returncode == 1, proc.stderr[-2000:]
    m = re.search(r"after (\d+) of 27 calls sent", proc.stderr)
    assert m and int(m[1]) == sent - 1 > 1, (sent, proc.stderr[-800:])  # every request but the capability probe
    assert "in flight" in proc.stderr


def test_max_cost_from_python():
    from personalign.errors import ArgumentError, BudgetExceeded

    with openai_server() as srv:
        with pytest.raises(BudgetExceeded, match="after 0 of 27 calls sent"):
            _compare(srv.api_base, lm=PRICED, max_cost=0.0)
        report, _ = _compare(srv.api_base, max_cost=0.0)  # no price on file: $0 a call, never stopped
        assert _row(report)["failures"] == 0 and _row(report)["lm_calls"] == 27
        for bad in (-1, float("nan"), float("inf"), "ten"):
            with pytest.raises(ArgumentError, match="max_cost"):
                _compare(srv.api_base, max_cost=bad)


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "-inf", "ten", ""])
def test_bad_max_cost_values_exit_2_with_one_line(tmp_path, value):
    proc = _cli("compare", "relevance", "--data", str(DEMO), "--lm", PRICED, "--no-track", f"--max-cost={value}",
                runs=tmp_path / "runs", timeout=120)
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "--max-cost" in lines[0]


def test_max_cost_in_a_leave_one_group_out_compare_leaves_no_partial_result(tmp_path):
    from personalign.errors import BudgetExceeded

    out = tmp_path / "compare"
    with openai_server() as srv:
        with pytest.raises(BudgetExceeded, match="nothing written"):
            _compare(srv.api_base, lm=PRICED, cv="groups", out_dir=out, max_cost=0.0005)
    # the reference row (all-yes) was kept as a partial result before zero-shot ran: gone now
    assert not out.exists() or list(out.iterdir()) == []


@pytest.mark.slow  # an MLflow SQLite store and a compare: ~30 s
def test_spent_tokens_and_dollars_are_mlflow_metrics(tmp_path):
    import mlflow

    from personalign.tracking import MLflowCallback

    callback = MLflowCallback(f"sqlite:///{tmp_path / 'mlflow.db'}")
    with openai_server() as srv:
        report = personalign.compare("relevance", "zero-shot", DEMO, split="val", lm=PRICED, api_base=srv.api_base,
                                     n_boot=50, callbacks=[personalign.ConfigureCache(enabled=False), callback])
    result = report.to_dict()
    client = mlflow.MlflowClient(tracking_uri=callback.tracker.tracking_uri)
    parent = client.get_run(result["mlflow_run_id"])
    assert result["spent"]["dollars"] > 0
    assert parent.data.metrics["spent_dollars"] == pytest.approx(result["spent"]["dollars"])
    assert parent.data.metrics["spent_input_tokens"] == result["spent"]["input_tokens"] > 0
    child = next(c for c in client.search_runs([parent.info.experiment_id],
                                               f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
                 if c.data.tags.get("strategy") == "zero-shot")
    row = _row(report)
    assert child.data.metrics["spent_output_tokens"] == row["spent_output_tokens"] > 0
    assert child.data.metrics["spent_dollars"] == pytest.approx(row["spent_dollars"])


def test_compile_and_eval_record_their_spend_and_a_compile_stops_at_max_cost_in_one_error(tmp_path, capfd):
    from personalign.errors import BudgetExceeded

    kw = dict(lm=PRICED, callbacks=[personalign.ConfigureCache(enabled=False)])
    with openai_server() as srv:
        made = personalign.compile("relevance", "zero-shot", DEMO, optimizer="bootstrap", api_base=srv.api_base,
                                   out=tmp_path / "prog", **kw)
        scored = personalign.evaluate("relevance", tmp_path / "prog", DEMO, api_base=srv.api_base, n_boot=50, **kw)
        capfd.readouterr()
        with pytest.raises(BudgetExceeded, match="nothing written"):
            personalign.compile("relevance", "zero-shot", DEMO, optimizer="bootstrap", api_base=srv.api_base,
                                out=tmp_path / "stopped", max_cost=0.0001, **kw)
        said = capfd.readouterr().err
    assert made.info["spent_dollars"] > 0 and made.info["spent_input_tokens"] > 0 and made.info["priced"]
    assert scored.data["spent_dollars"] > 0 and scored.data["spent_output_tokens"] > 0
    assert not (tmp_path / "stopped").exists()
    # the stop is raised once, not logged by the teleprompter for every example left
    assert "max-cost" not in said, said[-2000:]


def test_a_sweep_stopped_by_max_cost_says_one_line_without_a_traceback(tmp_path):
    """A trial that reaches ``--max-cost`` stops the sweep: exit 1, one ``error:`` line, none of
    Optuna's "Trial N failed ..." tracebacks."""
    space = tmp_path / "space.toml"
    space.write_text('strategies = ["zero-shot"]\n[pruner]\nkind = "none"\n[lm]\noptimizer = ["none"]\n')
    with openai_server() as srv:
        proc = _cli("sweep", "relevance", "--data", str(DEMO), "--space", str(space), "--n-trials", "2",
                    "--lm", PRICED, "--api-base", srv.api_base, "--no-cache", "--no-track", "--n-boot", "50",
                    "--storage", f"sqlite:///{tmp_path / 'study.db'}", "--max-cost", "0.0006",
                    runs=tmp_path / "runs")
    assert proc.returncode == 1, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "stopped at $" in errors[0], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "failed with parameters" not in proc.stderr, proc.stderr[-2000:]


def test_a_served_yes_prob_is_charged_and_held_to_max_cost():
    """yes-prob through an endpoint reads its margins from one-token forward passes (sent outside
    ``dspy.LM.__call__``): their tokens and dollars are in the row's spend, and ``max_cost`` stops
    them before the call that would pass it."""
    from personalign.errors import BudgetExceeded

    def run(**kw):
        costs: list = []
        report = personalign.compare("relevance", "yes-prob", DEMO, split="val", lm=PRICED, api_base=srv.api_base,
                                     n_boot=50, callbacks=[personalign.ConfigureCache(enabled=False)],
                                     on_cost=costs.append, **kw)
        return report, costs[0]

    with openai_server() as srv:  # the stopped run first: margins a run computed are kept in memory
        with pytest.raises(BudgetExceeded, match="nothing written"):
            run(max_cost=0.0003)  # the whole run is projected at $0.0007
        stopped = srv.stats()["requests"]
        report, cost = run()
        made = srv.stats()["requests"] - stopped
    row = _row(report, "yes-prob")
    assert row["spent_input_tokens"] > 0 and row["spent_dollars"] > 0 and row["priced"]
    assert cost.dollars > 0.0003 and 0.5 <= row["spent_dollars"] / cost.dollars <= 1.5, (row, cost.dollars)
    assert 1 < stopped < made, (stopped, made)


def test_max_cost_holds_what_the_server_bills_when_strategies_cost_unlike_amounts(tmp_path, monkeypatch):
    """Generations beside one-token forward passes, after a run measured the outputs (the projection
    is a mean, not a bound): what the server billed never passes ``max_cost`` (a fresh-clone try
    saw $0.0024 spent on a $0.0020 cap, exit 0: each call reserved the strategies' average price)."""
    from personalign.errors import BudgetExceeded
    from personalign.lm.prices import dollars

    monkeypatch.setenv("PERSONALIGN_CACHE_DIR", str(tmp_path / "cache"))  # speed.json kept between the runs

    def run(srv, **kw):
        lm = make_lm(PRICED, api_base=srv.api_base, cache=False)  # its capability check, before the count
        before = srv.stats()
        report = None
        try:
            report = personalign.compare("relevance", "zero-shot,cot,yes-prob", DEMO, split="val", lm=lm,
                                         n_boot=50, on_cost=lambda cost: None, **kw)
        finally:
            after = srv.stats()
            billed.append(dollars(PRICED, after["prompt_tokens"] - before["prompt_tokens"],
                                  after["completion_tokens"] - before["completion_tokens"]))
        return report

    billed: list = []
    with openai_server() as srv:
        whole = run(srv).data["spent"]["dollars"]
    assert whole == pytest.approx(billed[-1])
    for share in (0.5, 0.9):
        with openai_server() as srv:
            with pytest.raises(BudgetExceeded):
                run(srv, max_cost=whole * share)
        assert billed[-1] <= whole * share, (billed[-1], whole * share)
