"""personalign.redaction.redact: the one function that takes secrets out of command lines, kwargs
objects, URLs and messages before personalign records or prints them."""

from __future__ import annotations

import json
import shlex

import pytest

from personalign.redaction import MASK, names_secret, redact

KWARGS = {"api_key": "sk-live-123", "extra_headers": {"Authorization": "Bearer tok-abc", "X-Org": "acme"},
          "max_tokens": 64, "extra_body": {"repeat_penalty": 1.0}}
ARGV = ["personalign", "compare", "S", "--data", "D", "--strategies", "majority", "--lm-kwargs", json.dumps(KWARGS),
        "--api-base", "http://user:PW-123@127.0.0.1:9/v1"]
CLEAN_KWARGS = {"api_key": MASK, "extra_headers": {"Authorization": MASK, "X-Org": MASK}, "max_tokens": 64,
                "extra_body": {"repeat_penalty": 1.0}}


@pytest.fixture(autouse=True)
def no_known_secrets(monkeypatch):
    """No endpoint settings from the caller's environment (they add known values)."""
    for var in ("PERSONALIGN_LM_KWARGS", "PERSONALIGN_API_BASE"):
        monkeypatch.delenv(var, raising=False)


def test_argv_list():
    out = redact(ARGV)
    assert out[:8] == ARGV[:8] and json.loads(out[8]) == CLEAN_KWARGS
    assert out[9:] == ["--api-base", "http://user:***@127.0.0.1:9/v1"]


def test_command_line_string_keeps_everything_but_the_secrets():
    line = shlex.join(ARGV)
    out = redact(line)
    assert shlex.split(out) == redact(ARGV)
    for secret in ("sk-live-123", "tok-abc", "acme", "PW-123"):
        assert secret not in out
    assert redact(out) == out  # idempotent


@pytest.mark.parametrize("argv, expected", [
    (["--api-key", "K"], ["--api-key", MASK]),
    (["--token=K", "--password", "-starts-with-dash"], ["--token=***", "--password", MASK]),
    (["--lm-kwargs", "{not json sk-live}"], ["--lm-kwargs", MASK]),  # not JSON: all of it
    (["--lm-kwargs", '{"temperature": 0}'], ["--lm-kwargs", '{"temperature": 0}']),
    (["--tracking-uri", "postgresql+psycopg://u:pw@h/db"], ["--tracking-uri", "postgresql+psycopg://u:***@h/db"]),
    (["--storage", "journal:/x/y.journal", "--seed", "3"], ["--storage", "journal:/x/y.journal", "--seed", "3"]),
    (["--no-track", "--api-key", "K", "--json"], ["--no-track", "--api-key", MASK, "--json"]),
])
def test_command_line_options(argv, expected):
    assert redact(argv) == expected
    assert shlex.split(redact(shlex.join(argv))) == expected


def test_kwargs_object():
    assert redact(KWARGS) == CLEAN_KWARGS
    nested = {"lm": {"model": "openai/x", "api_base": "https://u:pw@host/v1?api_key=abc&x=1", "api_key": None,
                     "headers": [["Authorization", "t"]], "auth": {"user": "u", "pass": "p"}},
              "group_key": "prompt_id", "figures": [{"key": "f1-zero-shot", "value": 0.5}],
              "stop": ("a", "b"), "n": 3, "flag": True}
    assert redact(nested) == {
        "lm": {"model": "openai/x", "api_base": "https://u:***@host/v1?api_key=***&x=1", "api_key": None,
               "headers": MASK, "auth": MASK},
        "group_key": "prompt_id", "figures": [{"key": "f1-zero-shot", "value": 0.5}], "stop": ["a", "b"], "n": 3,
        "flag": True}


@pytest.mark.parametrize("url, expected", [
    ("postgresql://user:s3cret@127.0.0.1:5432/optuna", "postgresql://user:***@127.0.0.1:5432/optuna"),
    ("postgresql://user:p@ss@host/db", "postgresql://user:***@host/db"),  # an unencoded @ in the password
    ("https://ghp_abc123@github.com/o/r.git", "https://***@github.com/o/r.git"),  # a lone user-info: a token
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
    ("sqlite:////tmp/runs/mlflow.db", "sqlite:////tmp/runs/mlflow.db"),
    ("journal:/x/y.journal", "journal:/x/y.journal"),
])
def test_urls(url, expected):
    assert redact(url) == expected
    assert redact(f"cannot open --storage {url}: refused") == f"cannot open --storage {expected}: refused"


@pytest.mark.parametrize("text, expected", [
    ("error: password=hunter22, user=bob", "error: password=***, user=bob"),
    ("Authorization: Bearer abc.def-ghi", "Authorization: ***"),
    ("sent header Bearer abc.def-ghi", "sent header Bearer ***"),
    ("{'api_key': 'abc', 'x': 1}", "{'api_key': '***', 'x': 1}"),
    ('{"password": 1234, "api_key": null}', '{"password": "***", "api_key": null}'),  # still JSON
    ("note=api_key=K9", "note=api_key=***"),
    ('{\\"api_key\\": \\"K9\\", \\"n\\": 1}', '{\\"api_key\\": \\"***\\", \\"n\\": 1}'),  # JSON in a JSON string
    ("max_tokens=512, Token limit reached", "max_tokens=512, Token limit reached"),
    ('{"reasoning": "ok", "relevant": true}', '{"reasoning": "ok", "relevant": true}'),
])
def test_free_text(text, expected):
    assert redact(text) == expected


def test_json_encoded_command_line():
    """A record's JSON text (the command inside a JSON string: its quotes escaped) is redacted too."""
    text = json.dumps({"command": shlex.join(ARGV)})
    out = redact(text)
    assert "sk-live-123" not in out and "tok-abc" not in out and "PW-123" not in out
    assert json.loads(out)["command"].startswith("personalign compare S --data D")


def test_known_secret_values_anywhere(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-0123456789")
    monkeypatch.setenv("PERSONALIGN_LM_KWARGS", json.dumps(KWARGS | {"api_key": "sk-kwarg-0123456789"}))
    monkeypatch.setenv("PERSONALIGN_API_BASE", "http://user:pw-long-enough@127.0.0.1:9/v1")
    text = ("AuthenticationError: Incorrect API key provided: sk-env-0123456789 / sk-kwarg-0123456789; "
            "login pw-long-enough failed")
    assert redact(text) == "AuthenticationError: Incorrect API key provided: *** / ***; login *** failed"
    monkeypatch.setenv("SHORT_TOKEN", "none")  # shorter than 8 characters: not replaced inside text
    assert redact("none of this") == "none of this"


@pytest.mark.parametrize("key", ["api_key", "x-api-key", "OPENAI_API_KEY", "apiKey", "APIKey", "secret_key",
                                 "aws_secret_access_key", "HF_TOKEN", "access_token", "accessToken", "Authorization",
                                 "password", "db_passwd", "auth", "credentials", "Cookie", "--api-key", "--token"])
def test_names_secret(key):
    assert names_secret(key)


@pytest.mark.parametrize("key", ["max_tokens", "prompt_tokens", "token_budget", "next_token_logprobs",
                                 "MAX_CHARS_PER_TOKEN", "group_key", "sort_keys", "decision_keys", "key", "api_base",
                                 "base_url", "model", "author", "--lm-kwargs", "--tracking-uri", "--storage"])
def test_names_no_secret(key):
    assert not names_secret(key)


def test_one_function_everywhere():
    """The tracking module and the sweep's URL printing use this very function."""
    from personalign.sweeps import storage
    from personalign.tracking import store

    assert store.redact is redact and storage.redact_url is redact


def test_other_values_pass_through():
    assert redact(None) is None and redact(3.5) == 3.5 and redact("") == ""
    text = "plain text: nothing to hide {not json"
    assert redact(text) is text or redact(text) == text


@pytest.mark.parametrize("text", ["A" * 400_000, "A:" * 200_000, '{"' * 200_000, '{"a":' * 100_000, "{" * 400_000,
                                  "a:b@c" * 80_000, '{"' + '\\"' * 200_000, "x?key=" * 60_000])
def test_redaction_is_not_quadratic(text):
    """A hang check, not a speed target: a 400,000-character value (a data field, a result string)
    is redacted in well under the bound; the user-info regex it replaced took 35 s on 80,000 'A's
    (quadratic), and a deeply nested JSON object raised RecursionError."""
    import time

    start = time.perf_counter()
    redact(text)
    assert time.perf_counter() - start < 20
