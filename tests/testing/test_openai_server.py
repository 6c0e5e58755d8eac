"""The loopback OpenAI-compatible server (:mod:`personalign.testing.openai_server`), fast: latency
served concurrently, 429s past ``max_in_flight``, each fault as litellm and ``dspy.LM`` raise it,
DSPy programs answered deterministically through both adapters, usage, bounds, clean shutdown and
the command line. Every server has a short ``max_lifetime`` and every client call a timeout."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import dspy
import litellm
import pytest

from personalign.lm import adapter_name, make_lm, use
from personalign.lm.serving import known, yes_no_margin
from personalign.testing import openai_server
from personalign.testing.openai_server import Faults
from tests.conftest import ROOT

MESSAGES = [{"role": "user", "content": "Say hello."}]


def _post(api_base: str, body: dict, timeout: float = 5.0) -> tuple[int, dict, bytes]:
    """(status, headers, body) of one chat completion request through urllib (no client retries)."""
    req = urllib.request.Request(f"{api_base}/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


def _parallel(api_base: str, n: int) -> tuple[list[tuple[int, dict, bytes]], float]:
    """``n`` requests sent at once (a barrier releases them together); their replies and the wall time."""
    gate = threading.Barrier(n)

    def one(i: int):
        gate.wait(timeout=5)
        return _post(api_base, {"model": "mock", "messages": [{"role": "user", "content": f"request {i}"}]})

    t0 = time.perf_counter()
    with ThreadPoolExecutor(n) as pool:
        out = list(pool.map(one, range(n)))
    return out, time.perf_counter() - t0


def _completion(srv, **kwargs):
    return litellm.completion(model="openai/mock", api_base=srv.api_base, api_key="none", max_retries=0,
                              **{"messages": MESSAGES, "timeout": 5, **kwargs})


def test_32_requests_in_flight_each_wait_the_latency_once():
    with openai_server(latency=0.3, max_lifetime=30) as srv:
        replies, wall = _parallel(srv.api_base, 32)
        stats = srv.stats()
    assert [status for status, _, _ in replies] == [200] * 32
    assert wall < 1.5, wall
    assert stats["max_in_flight"] == 32 and stats["answered"] == 32 and stats["in_flight"] == 0
    spans = [t["end"] - t["start"] for t in stats["timeline"]]
    assert len(spans) == 32 and min(spans) >= 0.3 and max(t["end"] for t in stats["timeline"]) - min(
        t["start"] for t in stats["timeline"]) < 1.0


def test_a_request_beyond_max_in_flight_gets_429_with_retry_after():
    with openai_server(latency=0.5, max_in_flight=4, retry_after=0.2, max_lifetime=30) as srv:
        replies, _ = _parallel(srv.api_base, 8)
        stats = srv.stats()
    assert sorted(status for status, _, _ in replies) == [200] * 4 + [429] * 4
    for status, headers, body in replies:
        if status == 429:
            assert headers["Retry-After"] == "0.2" and headers["retry-after-ms"] == "200"
            assert json.loads(body)["error"]["code"] == "rate_limit_exceeded"
    assert stats["rate_limited"] == 4 and stats["max_in_flight"] == 4 and stats["answered"] == 4


def test_rate_limited_forever_as_litellm_and_dspy_see_it():
    with openai_server(rate_limit_forever=True, retry_after=0.2, max_lifetime=30) as srv:
        with pytest.raises(litellm.RateLimitError):
            _completion(srv)
        # plain dspy.LM: how the server looks to DSPy itself (personalign's LM puts its own retry
        # policy in front: tests/lm/test_hosted.py)
        lm = dspy.LM("openai/mock", api_base=srv.api_base, api_key="none", cache=False, num_retries=2)
        t0 = time.perf_counter()
        with pytest.raises(dspy.utils.exceptions.LMRateLimitError) as caught:
            lm("hi")
        assert caught.value.retry_after == 0.2
        assert time.perf_counter() - t0 < 2.0  # dspy.LM waited Retry-After (0.2 s) between its 3 tries
        assert srv.stats()["rate_limited"] == 1 + 3


# fault kind -> (what litellm.completion raises, what dspy.LM raises), as observed with litellm 1.110
# and DSPy 3.4.1 (whose LM reaches an openai/ model on an api_base natively, not through litellm)
FAULTS = {
    "http_500": (litellm.InternalServerError, "LMServerError"),
    "http_503": (litellm.ServiceUnavailableError, "LMServerError"),
    "hang": (litellm.Timeout, "LMTransportError"),
    "drop": (litellm.InternalServerError, "LMTransportError"),  # litellm: "Connection error."
    "not_json": (litellm.InternalServerError, "LMProviderError"),
}


@pytest.mark.parametrize("kind", sorted(FAULTS))
def test_each_fault_as_litellm_and_dspy_see_it(kind):
    litellm_error, dspy_error = FAULTS[kind]
    with openai_server(faults=Faults(at={1: kind, 2: kind}), max_lifetime=30) as srv:
        t0 = time.perf_counter()
        with pytest.raises(litellm_error):
            _completion(srv, timeout=0.5)
        lm = dspy.LM("openai/mock", api_base=srv.api_base, api_key="none", cache=False, num_retries=0, timeout=0.5)
        with pytest.raises(getattr(dspy.utils.exceptions, dspy_error)):
            lm("hi")
        assert _completion(srv).choices[0].message.content  # request 3: no fault
        assert time.perf_counter() - t0 < 3.0
        deadline = time.monotonic() + 2
        while srv.stats()["in_flight"] and time.monotonic() < deadline:  # a hang ends when its client leaves
            time.sleep(0.02)
        stats = srv.stats()
    assert stats["faults"][kind] == 2 and stats["requests"] == 3 and stats["in_flight"] == 0


def test_fault_draws_are_seeded_by_request_number():
    faults = Faults(rates={"http_500": 0.2, "drop": 0.1}, at={3: "hang"}, seed=7)
    kinds = [faults.kind(n) for n in range(1, 2001)]
    assert kinds == [Faults(rates={"http_500": 0.2, "drop": 0.1}, at={3: "hang"}, seed=7).kind(n) for n in range(1, 2001)]
    assert kinds[2] == "hang" and 0.17 < kinds.count("http_500") / 2000 < 0.23 and 0.07 < kinds.count("drop") / 2000 < 0.13
    assert kinds != [Faults(rates={"http_500": 0.2, "drop": 0.1}, seed=8).kind(n) for n in range(1, 2001)]
    for bad in ({"http_418": 0.1}, {"http_500": 0.7, "drop": 0.7}):
        with pytest.raises(ValueError):
            Faults(rates=bad)


def test_a_refused_connection_as_litellm_and_dspy_see_it():
    with openai_server(max_lifetime=30) as srv:
        api_base = srv.api_base
    with pytest.raises(litellm.InternalServerError):  # litellm 1.110 raises no APIConnectionError here either
        litellm.completion(model="openai/mock", api_base=api_base, api_key="none", messages=MESSAGES, max_retries=0,
                           timeout=2)
    lm = make_lm("openai/mock", api_base=api_base, cache=False, load=False, num_retries=0, timeout=2)
    with pytest.raises(dspy.utils.exceptions.LMTransportError):
        lm("hi")


class Pick(dspy.Signature):
    """Decide whether the item matters and name it."""

    item: str = dspy.InputField()
    relevant: bool = dspy.OutputField()
    label: str = dspy.OutputField()
    grade: int = dspy.OutputField()


def _predict(lm, adapter) -> list[tuple]:
    items = [f"item {i}" for i in range(12)]
    with dspy.context(lm=lm, adapter=adapter):
        return [tuple(dict(dspy.Predict(Pick)(item=x)).values()) for x in items]


def test_an_unparseable_answer_fails_the_adapter_not_the_call():
    with openai_server(faults=Faults(at={1: "unparseable", 2: "unparseable"}), max_lifetime=30) as srv:
        lm = make_lm("openai/mock", api_base=srv.api_base, cache=False, load=False, num_retries=0)
        with dspy.context(lm=lm, adapter=dspy.ChatAdapter()):
            with pytest.raises(dspy.utils.exceptions.AdapterParseError):  # ChatAdapter, then its JSON fallback
                dspy.Predict(Pick)(item="x")
        assert srv.stats()["faults"]["unparseable"] == 2


def test_dspy_programs_get_deterministic_answers_through_both_adapters():
    from personalign.testing import mock_provider

    runs = []
    for _ in range(2):
        with openai_server(max_lifetime=30) as srv:
            lm = make_lm("openai/mock", api_base=srv.api_base, cache=False, load=False)
            runs.append({name: _predict(lm, adapter) for name, adapter in
                         (("chat", dspy.ChatAdapter()), ("json", dspy.JSONAdapter()))})
            assert srv.stats()["answered"] == 24  # each parsed first time: no adapter fallback
    assert runs[0] == runs[1]
    for name in ("chat", "json"):
        assert {r[0] for r in runs[0][name]} == {True, False}, runs[0][name]
    mock_provider.register()
    assert _predict(dspy.LM("mock/pick", cache=False), dspy.ChatAdapter()) == runs[0]["chat"]  # the mock's answers


def test_the_capability_probe_finds_a_schema_dialect_and_top_logprobs():
    with openai_server(max_lifetime=30) as srv:
        lm = make_lm("openai/mock-probe", api_base=srv.api_base, cache=False)  # probes (once per model name)
        endpoint = known("openai/mock-probe")
        assert endpoint.schema_dialect == "json_schema" and endpoint.top_logprobs == 5
        assert adapter_name("openai/mock-probe") == "json-schema[json_schema]"
        with use(lm):
            out = dspy.Predict(Pick)(item="item 0")
        assert isinstance(out.relevant, bool) and isinstance(out.grade, int)
        margins = [yes_no_margin(lm, [{"role": "user", "content": f"fact {i}. Answer Yes or No."}]) for i in range(12)]
        again = [yes_no_margin(lm, [{"role": "user", "content": f"fact {i}. Answer Yes or No."}]) for i in range(12)]
    assert margins == again and any(m > 0 for m in margins) and any(m < 0 for m in margins)
    assert all(0.5 <= abs(m) <= 4.5 for m in margins)


def test_usage_counts_tokens_and_stats_sum_them():
    from personalign.testing._openai_reply import count_tokens, prompt_tokens

    with openai_server(max_lifetime=30) as srv:
        responses = [_completion(srv, messages=[{"role": "user", "content": f"count {'these words ' * i}"}])
                     for i in range(1, 4)]
        stats = srv.stats()
    for i, resp in enumerate(responses, 1):
        content = resp.choices[0].message.content
        assert resp.usage.prompt_tokens == prompt_tokens([{"role": "user", "content": f"count {'these words ' * i}"}])
        assert resp.usage.completion_tokens == count_tokens(content) > 0
        assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens
    assert stats["prompt_tokens"] == sum(r.usage.prompt_tokens for r in responses)
    assert stats["completion_tokens"] == sum(r.usage.completion_tokens for r in responses)


def test_bounds_refuse_and_stop_the_server():
    with openai_server(max_requests=2, max_lifetime=30) as srv:
        assert [_post(srv.api_base, {"messages": MESSAGES})[0] for _ in range(2)] == [200, 200]
        status, _, body = _post(srv.api_base, {"messages": MESSAGES})
        assert status == 503 and json.loads(body)["error"]["code"] == "server_bound"
        assert srv.wait(timeout=2)
        assert srv.stats()["over_bound"] == 1
    t0 = time.perf_counter()
    with openai_server(latency=10, max_lifetime=0.3) as srv:
        status, _, body = _post(srv.api_base, {"messages": MESSAGES})
        assert status == 503 and json.loads(body)["error"]["code"] == "server_stopped"
        assert srv.stats()["stopped"] == 1
    assert time.perf_counter() - t0 < 2.0


def _server_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if "openai-server" in t.name or "process_request" in t.name]


def test_starts_fast_and_closes_every_connection_and_thread():
    before = _server_threads()
    t0 = time.perf_counter()
    with openai_server(faults=Faults(at={1: "hang"}), max_lifetime=30) as srv:
        started = time.perf_counter() - t0
        idle = socket.create_connection(("127.0.0.1", srv.port), timeout=5)  # a keep-alive connection, idle
        idle.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
        head = idle.recv(4096)
        assert head.startswith(b"HTTP/1.1 200 OK")
        with ThreadPoolExecutor(1) as pool:
            hung = pool.submit(_post, srv.api_base, {"messages": MESSAGES}, 10)  # hangs until the server closes
            while srv.stats()["in_flight"] < 1:
                time.sleep(0.01)
            port = srv.port
            srv.close()
            assert hung.result(timeout=5)[0] == 503
    assert started < 0.5 and time.perf_counter() - t0 < 3.0
    rest = head
    while chunk := idle.recv(4096):  # the models body, then EOF: the server closed the idle connection
        rest += chunk
    assert rest.endswith(b"}]}")
    idle.close()
    assert _server_threads() == before
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_the_command_line_serves_until_sigterm_and_prints_its_stats():
    proc = subprocess.Popen([sys.executable, "-m", "personalign.testing.openai_server", "--latency", "0.05",
                             "--max-lifetime", "60"], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        ready = json.loads(proc.stdout.readline())
        assert _post(ready["api_base"], {"messages": MESSAGES})[0] == 200
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=10)
    finally:
        proc.kill()
    stats = json.loads(out.strip().splitlines()[-1])
    assert proc.returncode == 0 and stats["answered"] == 1 and len(stats["timeline"]) == 1
