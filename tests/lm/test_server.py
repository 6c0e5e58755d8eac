"""The same program on an OpenAI-compatible server (slow): llama-cpp-python's own server on
loopback serving the 0.5B GGUF from the model cache; ``compare`` and ``compile`` through it; the
decisions compared with the embedded engine's on the same pairs (printed)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import DEMO, ROOT, cli_env

pytestmark = pytest.mark.slow

FAST = "local/qwen2.5-coder-0.5b-instruct"
N_PAIRS = 8


@pytest.fixture(scope="module")
def server():
    from personalign.testing.server import llama_server, server_available

    why = server_available()
    if why:
        pytest.skip(why)
    with llama_server(FAST) as srv:
        yield srv


def _cli(*args: str, env: dict) -> dict:
    proc = subprocess.run([sys.executable, "-m", "personalign", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"out": json.loads(proc.stdout.strip().splitlines()[-1]), "stderr": proc.stderr}


def _find(obj, key):
    """The first value of ``key`` anywhere in nested dicts/lists (None when absent)."""
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        obj = list(obj.values())
    if isinstance(obj, list):
        for v in obj:
            hit = _find(v, key)
            if hit is not None:
                return hit
    return None


def _posts(srv) -> int:
    """Chat completions the server has answered so far (its access log)."""
    return srv.log.read_text(errors="replace").count("POST /v1/chat/completions")


def _server_args(srv) -> list[str]:
    from personalign.testing.server import LLAMA_CPP_SERVER_KWARGS

    return ["--lm", srv.model, "--api-base", srv.api_base, "--lm-kwargs", json.dumps(LLAMA_CPP_SERVER_KWARGS)]


def _compare(lm_args: list[str], tmp_path, name: str) -> dict:
    return _cli("compare", "relevance", "--data", str(DEMO), "--split", "val", "--limit", str(N_PAIRS),
                "--strategies", "zero-shot,yes-prob", "--n-boot", "50", "--no-track", "--json", *lm_args,
                env=cli_env(tmp_path / name, PERSONALIGN_CACHE_DIR=str(tmp_path / name / "cache")))


def test_compare_through_the_server_decides_as_the_embedded_engine(server, tmp_path):
    embedded = _compare(["--lm", FAST], tmp_path, "embedded")
    before = _posts(server)
    served = _compare(_server_args(server), tmp_path, "served")
    assert _posts(server) - before >= 2 * N_PAIRS, "the served run must reach the server for both strategies"
    line = [l for l in served["stderr"].splitlines() if l.startswith("endpoint ")]
    assert line and "schema-constrained (json_object" in line[0] and "top_logprobs" in line[0], served["stderr"]
    assert "LACKS" not in line[0]
    out = served["out"]
    assert out["adapter"] == "json-schema[json_object]" and out["endpoint"]["top_logprobs"] > 0
    assert embedded["out"]["adapter"] == "json-grammar"
    report = []
    # --json leaves out per-pair predictions; the result file keeps them
    full = {k: json.loads(open(r["out"]["result_file"]).read()) for k, r in (("e", embedded), ("s", served))}
    for a, b in zip(full["e"]["strategies"], full["s"]["strategies"]):
        assert a["name"] == b["name"]
        same = sum(x == y for x, y in zip(a["predictions"], b["predictions"]))
        report.append(f"{a['name']}: {same}/{len(a['predictions'])} decisions equal; "
                      f"F1 embedded {a['f1']:.3f} vs server {b['f1']:.3f}")
    print("\n" + "\n".join(report))  # the decision comparison (pytest -s / CI log)
    for a, b in zip(full["e"]["strategies"], full["s"]["strategies"]):
        if a["name"] != "yes-prob":  # generated answers: the same decisions
            assert a["predictions"] == b["predictions"], report
            continue
        # a margin: the embedded engine reads it from the shared one-token pass (lm.forward), the server
        # from its top_logprobs; llama.cpp rounds the two batch shapes differently (within 0.05 nats:
        # the test below), so a pair on the fitted threshold may fall either side of it
        diffs = [abs(x - y) for x, y in zip(a["scores"], b["scores"]) if x is not None and y is not None]
        assert len(diffs) == len(a["predictions"]) and max(diffs) <= 0.1, (diffs, report)


def test_compile_through_the_server_calibrates_on_its_logprobs(server, tmp_path):
    out = _cli("compile", "relevance", "--strategy", "zero-shot", "--optimizer", "labeled", "--data", str(DEMO),
               "--out", str(tmp_path / "program"), "--no-track", "--json", *_server_args(server),
               env=cli_env(tmp_path / "runs", PERSONALIGN_CACHE_DIR=str(tmp_path / "cache")))["out"]
    assert out["adapter"] == "json-schema[json_object]"
    found = _find(out["compile"], "n_calibration")
    print("\ncompile through the server:", json.dumps({k: _find(out["compile"], k) for k in
                                                     ("n_calibration", "decision_rule", "chosen", "reason")},
                                                    default=str))
    # calibration ran on scores, i.e. the bool margins came back in the endpoint's top_logprobs
    assert found and found > 0, out["compile"]
    assert (tmp_path / "program" / "program.json").exists()


def test_yes_prob_margins_through_the_server_match_the_embedded_ones(server):
    from personalign.lm import make_lm, use
    from personalign.lm.scoring import relevance_messages, yes_no_margin
    from personalign.testing.server import LLAMA_CPP_SERVER_KWARGS

    lm = make_lm(server.model, api_base=server.api_base, cache=False, **LLAMA_CPP_SERVER_KWARGS)
    rows = [json.loads(l) for l in DEMO.read_text().splitlines()][:6]
    diffs = []
    before = _posts(server)
    for row in rows:
        messages = relevance_messages(row["attribute"], row["prompt"])
        local = yes_no_margin(FAST, messages)
        with use(lm):
            served = yes_no_margin(lm.model, messages)
        diffs.append(abs(local - served))
        assert (local >= 0) == (served >= 0)
    assert _posts(server) - before == len(rows)
    print("\nyes-prob margin |embedded - server| (nats):", [round(d, 4) for d in diffs])
    assert max(diffs) < 0.05, diffs
