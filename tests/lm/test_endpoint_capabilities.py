"""Endpoint capability check, adapter choice and yes-prob through an OpenAI-compatible server (fast):
a scripted chat-completions server on loopback plays a server with and without JSON-schema
support and ``top_logprobs`` (the real llama.cpp server is in ``test_server.py``, slow)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from personalign.errors import ConfigurationError
from personalign.lm import serving
from tests.conftest import DEMO, ROOT, cli_env


def _lp(token: str, logprob: float, top: list[tuple[str, float]]) -> dict:
    return {"token": token, "logprob": logprob, "bytes": None,
            "top_logprobs": [{"token": t, "logprob": v, "bytes": None} for t, v in top]}


class _Handler(BaseHTTPRequestHandler):
    dialect: str | None = "json_object"  # the response_format dialect this server honours
    logprobs: bool = True
    requests: list

    def log_message(self, *args):  # quiet
        pass

    def do_POST(self):  # noqa: N802 -- http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.requests.append(body)
        fmt = body.get("response_format") or {}
        if fmt.get("type") == "json_schema" and self.dialect != "json_schema":
            return self._send(400, {"error": {"message": "response_format.type must be 'text' or 'json_object'"}})
        if fmt and fmt.get("type") == self.dialect:
            content = json.dumps({"zq_flag": True})
            steps = [_lp('{"', -0.01, [('{"', -0.01)]), _lp("zq", -0.2, [("zq", -0.2)]),
                     _lp("_flag", -0.1, [("_flag", -0.1)]), _lp('":', -0.01, [('":', -0.01)]),
                     _lp(" true", -0.3, [(" true", -0.3), (" false", -1.5)]), _lp("}", -0.01, [("}", -0.01)])]
        elif (body.get("max_tokens") or body.get("max_completion_tokens")) == 1:  # OpenAI's two names
            content, steps = "Yes", [_lp("Yes", -0.1, [("Yes", -0.1), ("No", -2.4), ("yes", -5.0), ("Maybe", -6.0)])]
        else:
            content, steps = "Hello! How can I help?", [_lp("Hello", -0.5, [("Hello", -0.5), ("Hi", -1.2)])]
        choice = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        if self.logprobs and body.get("logprobs"):
            choice["logprobs"] = {"content": steps[: max(1, len(steps))]}
        self._send(200, {"id": "x", "object": "chat.completion", "created": 0, "model": body.get("model"),
                         "choices": [choice], "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}})

    def _send(self, status: int, obj: dict) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _serve(dialect, logprobs):
    handler = type("H", (_Handler,), {"dialect": dialect, "logprobs": logprobs, "requests": []})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, handler, f"http://127.0.0.1:{httpd.server_address[1]}/v1"


def _probe_signature():
    """A one-boolean signature whose output key is the probe's (the scripted server answers it)."""
    import dspy

    class Probe(dspy.Signature):
        """Answer."""

        question: str = dspy.InputField()
        zq_flag: bool = dspy.OutputField()

    return Probe


@pytest.fixture
def endpoints(monkeypatch):
    monkeypatch.setattr(serving, "_endpoints", {})
    servers = []

    def start(dialect="json_object", logprobs=True):
        httpd, handler, base = _serve(dialect, logprobs)
        servers.append(httpd)
        return handler, base

    yield start
    for s in servers:
        s.shutdown()


def test_capable_server_gets_the_schema_adapter_and_one_summary_line(endpoints, capsys):
    from personalign.lm import adapter_name, make_lm

    handler, base = endpoints("json_object", True)
    lm = make_lm("openai/good-server", api_base=base, cache=False)
    ep = serving.known("openai/good-server")
    assert ep.schema_dialect == "json_object" and ep.top_logprobs == 2 and ep.api_base == base
    assert adapter_name(lm.model) == "json-schema[json_object]"
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("endpoint openai/good-server at " + base) and "LACKS" not in err[0]
    tried = [r.get("response_format", {}).get("type") for r in handler.requests]
    assert tried == ["json_schema", "json_object"], "OpenAI's dialect first, then llama-cpp-python's"
    assert lm.kwargs["temperature"] == 0.0 and lm.kwargs["api_key"] == "none"


def test_server_without_schema_or_logprobs_says_what_it_lacks(endpoints, capsys):
    from personalign.lm import adapter_name, make_lm

    _, base = endpoints(None, False)
    make_lm("openai/plain-server", api_base=base, cache=False)
    line = capsys.readouterr().err.strip()
    assert "\n" not in line and "LACKS JSON-schema" in line and "LACKS top_logprobs" in line
    assert adapter_name("openai/plain-server") == "chat"
    with pytest.raises(ConfigurationError) as err:
        serving.require_top_logprobs("openai/plain-server", "yes-probability scoring")
    assert "top_logprobs" in str(err.value) and base in str(err.value) and "\n" not in str(err.value)


def test_schema_adapter_sends_the_bounded_schema_in_the_server_dialect(endpoints):
    import dspy

    from personalign.lm import make_lm, use

    handler, base = endpoints("json_object", True)
    lm = make_lm("openai/schema-server", api_base=base, cache=False)

    Probe = _probe_signature()

    with use(lm):
        out = dspy.Predict(Probe)(question="anything")
    assert out.zq_flag is True
    fmt = handler.requests[-1]["response_format"]
    assert fmt["type"] == "json_object"
    assert fmt["schema"]["properties"]["zq_flag"]["type"] == "boolean" and fmt["schema"]["required"] == ["zq_flag"]


def test_yes_no_margin_from_top_logprobs(endpoints):
    from personalign.lm import make_lm, use
    from personalign.lm.scoring import relevance_messages, yes_no_margin

    _, base = endpoints("json_object", True)
    lm = make_lm("openai/lp-server", api_base=base, cache=False)
    with use(lm):
        margin = yes_no_margin(lm.model, relevance_messages("The user is vegetarian.", "Plan my dinners."))
    assert margin == pytest.approx(float(__import__("numpy").logaddexp(-0.1, -5.0)) - (-2.4))


def test_bool_margin_reads_the_servers_json_logprobs(endpoints):
    import dspy

    from personalign.lm import make_lm, use
    from personalign.lm.logprobs import scored

    _, base = endpoints("json_object", True)
    lm = make_lm("openai/margin-server", api_base=base, cache=False)

    Probe = _probe_signature()

    with use(lm):
        out, score = scored(dspy.Predict(Probe), "zq_flag", question="anything")
    assert out.zq_flag is True and score == pytest.approx(-0.3 - -1.5)


def test_unreachable_endpoint_is_a_one_line_error():
    import socket

    from personalign.lm import make_lm

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    with pytest.raises(ConfigurationError) as err:
        make_lm("openai/nobody", api_base=f"http://127.0.0.1:{port}/v1", cache=False)
    assert f"127.0.0.1:{port}" in str(err.value) and "\n" not in str(err.value)


def test_cli_yes_prob_on_an_endpoint_without_logprobs_exits_2(endpoints, tmp_path):
    _, base = endpoints(None, False)
    proc = subprocess.run([sys.executable, "-m", "personalign", "compare", "relevance", "--data", str(DEMO),
                           "--strategies", "yes-prob", "--lm", "openai/plain", "--api-base", base, "--no-track"],
                          capture_output=True, text=True, cwd=ROOT, env=cli_env(tmp_path / "runs"), timeout=600)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [l for l in proc.stderr.strip().splitlines() if l.strip()]
    assert "Traceback" not in proc.stderr
    assert lines[0].startswith("endpoint openai/plain") and "LACKS top_logprobs" in lines[0]
    assert lines[-1].startswith("error: ") and "top_logprobs" in lines[-1] and len(lines) == 2


@pytest.mark.parametrize("flag,value,needle", [("--api-base", "127.0.0.1:8000", "http(s)://"),
                                               ("--lm-kwargs", "{not json", "not JSON"),
                                               ("--lm-kwargs", "[1, 2]", "JSON object")])
def test_bad_endpoint_flags_are_one_line_errors(tmp_path, flag, value, needle):
    proc = subprocess.run([sys.executable, "-m", "personalign", "compare", "relevance", "--data", str(DEMO),
                           "--lm", "openai/x", flag, value, "--no-track"], capture_output=True, text=True, cwd=ROOT,
                          env=cli_env(tmp_path / "runs"), timeout=600)
    lines = [l for l in proc.stderr.strip().splitlines() if l.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and needle in lines[0], proc.stderr
