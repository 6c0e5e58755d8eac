"""A served model at full speed, against a real HTTP server on 127.0.0.1 (personalign.testing.openai_server):
many calls in flight in input order, the same figures at any concurrency, 429s slowed down for and not
failed, identical requests paid once, faults counted, and an interrupt that waits for the calls in flight."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import personalign
from personalign.testing import openai_server

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "relevance_demo.jsonl"


def _compare(api_base: str, tmp_path, **kw):
    return personalign.compare("relevance", "zero-shot", DEMO, split="val", lm="openai/mock", api_base=api_base,
                               n_boot=50, callbacks=[personalign.ConfigureCache(enabled=False)], **kw)


def _row(report, name="zero-shot"):
    return next(r for r in report.rows if r["name"] == name)


@pytest.fixture(autouse=True)
def _runs(tmp_path, monkeypatch):
    monkeypatch.setenv("PERSONALIGN_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("PERSONALIGN_RETRY_BACKOFF", "0.05")


def test_many_calls_in_flight_in_input_order_with_the_same_figures_at_1_and_32(tmp_path):
    with openai_server(latency=0.2) as srv:
        one = _compare(srv.api_base, tmp_path, concurrency=1)
        t0 = time.perf_counter()
        many = _compare(srv.api_base, tmp_path, concurrency=32)
        wall = time.perf_counter() - t0
        stats = srv.stats()
    a, b = _row(one), _row(many)
    n = len(a["predictions"])
    assert a["predictions"] == b["predictions"] and a["f1"] == b["f1"] and a.get("f1_ci") == b.get("f1_ci")
    assert a["lm_calls"] == b["lm_calls"] == n and b["failures"] == 0
    assert stats["max_in_flight"] >= min(n, 16)  # 32 allowed; the rows arrive in one wave
    assert b["seconds"] < a["seconds"] / 4 and wall < a["seconds"]


def test_a_rate_limited_server_is_slowed_down_for_with_no_failure(tmp_path):
    with openai_server(latency=0.2, max_in_flight=4, retry_after=0.1) as srv:
        report = _compare(srv.api_base, tmp_path, concurrency=16)
        stats = srv.stats()
    row = _row(report)
    assert row["failures"] == 0 and stats["rate_limited"] > 0 and stats["max_in_flight"] <= 4
    assert row["lm_calls"] == len(row["predictions"])  # a refused request is not a call


def test_a_server_that_rate_limits_forever_ends_the_run_with_one_line(tmp_path):
    from personalign.errors import RateLimitedError

    with openai_server(latency=0.0, rate_limit_forever=True, retry_after=0.0) as srv:
        # the capability probe gets a 429 too: it says so in one line, before any run
        with pytest.raises((RateLimitedError, personalign.ConfigurationError)) as err:
            _compare(srv.api_base, tmp_path, concurrency=4)
    assert "\n" not in str(err.value) and "429" in str(err.value) or "rate" in str(err.value).lower()


def test_identical_requests_in_flight_are_sent_once(tmp_path):
    import threading

    from personalign.lm import make_lm

    with openai_server(latency=0.3) as srv:
        lm = make_lm("openai/mock", api_base=srv.api_base, cache=False)
        before = srv.stats()["requests"]
        out = []
        threads = [threading.Thread(target=lambda: out.append(lm(messages=[{"role": "user", "content": "same"}])))
                   for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        sent = srv.stats()["requests"] - before
    assert sent == 1 and len(out) == 8 and all(o == out[0] for o in out)


def test_server_errors_on_a_share_of_calls_are_retried_then_counted(tmp_path):
    with openai_server(latency=0.0, faults={"http_500": 0.3}) as srv:
        report = _compare(srv.api_base, tmp_path, concurrency=8)
        stats = srv.stats()
    row = _row(report)
    assert stats["faults"].get("http_500", 0) > 0
    assert row["failures"] <= 2 and len(row["predictions"]) == 27  # retried: nearly every row answered


def test_a_hung_call_times_out_and_is_counted_not_waited_for_forever(tmp_path):
    with openai_server(latency=0.0, faults={"hang": 1.0}) as srv:
        t0 = time.perf_counter()
        with pytest.raises(personalign.ConfigurationError):  # the probe's call hangs: one line, no run
            personalign.compare("relevance", "zero-shot", DEMO, split="val", lm="openai/mock", api_base=srv.api_base,
                                lm_kwargs={"timeout": 1}, callbacks=[personalign.ConfigureCache(enabled=False)])
    assert time.perf_counter() - t0 < 30


@pytest.mark.parametrize("value", ["0", "-1", "100000", "many"])
def test_a_bad_concurrency_flag_is_one_line_and_exit_2(value, capsys):
    from personalign.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["compare", "relevance", "--data", str(DEMO), "--concurrency", value])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "--concurrency" in err and "Traceback" not in err


def test_an_interrupt_with_calls_in_flight_waits_for_them_and_writes_nothing(tmp_path):
    with openai_server(latency=1.0) as srv:
        env = dict(os.environ, PYTHONPATH=str(ROOT), PERSONALIGN_RUNS_DIR=str(tmp_path / "runs"))
        proc = subprocess.Popen([sys.executable, "-m", "personalign", "compare", "relevance", "--data", str(DEMO),
                                 "--split", "val", "--strategies", "zero-shot", "--lm", "openai/mock", "--api-base",
                                 srv.api_base, "--no-cache", "--no-track", "--concurrency", "4"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.monotonic() + 60
        while srv.stats()["in_flight"] < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        stats = srv.stats()
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err and "interrupted" in err.lower()
    assert stats["requests"] < 27  # it stopped submitting
    assert not list((tmp_path / "runs").rglob("*.json")) or all(
        json.loads(p.read_text()).get("complete") is not True for p in (tmp_path / "runs").rglob("relevance-*.json"))


def test_a_reply_that_is_not_json_is_retried_and_after_its_retries_stops_a_margin_batch_in_one_line(tmp_path):
    """A gateway's HTML error page (200, not JSON) is a transient failure: a yes-prob run on a server
    sending one now and then completes with the figures of a clean server; a margin that keeps
    failing stops the run with one :class:`LMCallFailed` line, not a traceback."""
    from personalign.errors import LMCallFailed
    from personalign.lm.client import LM
    from personalign.lm.serving import yes_no_margin

    def run(api_base):
        return _row(personalign.compare("relevance", "yes-prob", DEMO, split="val", lm="openai/mock",
                                        api_base=api_base, n_boot=50,
                                        callbacks=[personalign.ConfigureCache(enabled=False)]), "yes-prob")

    with openai_server(faults={"not_json": 0.05}) as srv:
        noisy = run(srv.api_base)
        garbled = srv.stats()["faults"]["not_json"]
    with openai_server() as srv:
        clean = run(srv.api_base)
    assert garbled > 0 and noisy["predictions"] == clean["predictions"] and noisy["f1"] == clean["f1"]
    with openai_server(faults={"not_json": 1.0}) as srv:
        lm = LM("openai/mock", api_base=srv.api_base, api_key="none", cache=False)
        with pytest.raises(LMCallFailed, match=r"yes/no margin from openai/mock failed after its retries") as err:
            yes_no_margin(lm, [{"role": "user", "content": "Is this relevant? Answer yes or no."}])
        assert "\n" not in str(err.value) and srv.stats()["faults"]["not_json"] == 1 + LM.transient_retries


def test_predict_relevance_takes_api_base_like_every_verb(tmp_path):
    """``predict relevance --api-base URL`` reaches the served model (it had only the environment
    variable: ``No such option: --api-base``)."""
    from tests.conftest import cli_env

    with openai_server() as srv:
        proc = subprocess.run([sys.executable, "-m", "personalign", "predict", "relevance", "--prompt", "Plan a trip",
                               "-a", "likes museums", "-a", "is vegan", "--strategy", "zero-shot", "--lm",
                               "openai/mock", "--api-base", srv.api_base, "--json"], capture_output=True, text=True,
                              cwd=ROOT, env=cli_env(tmp_path / "runs"), timeout=300)
        sent = srv.stats()["requests"]
    assert proc.returncode == 0, proc.stderr[-1500:]
    rows = json.loads(proc.stdout)["predictions"]
    assert [r["attribute"] for r in rows] == ["likes museums", "is vegan"] and sent >= 3  # the probe + 2 rows
