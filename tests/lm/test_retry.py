"""The one retry policy (:mod:`personalign.lm.retry`) and its two users: ``run_program`` and the
teleprompters' ``RetryingAdapter``."""

from __future__ import annotations

import zlib

import dspy
import pytest

from personalign.errors import ConfigurationError, ContextWindowError, ModelFileError
from personalign.lm.retry import RetryPolicy, fatal_lm_error, provider_exception


class AuthenticationError(Exception):
    """Named like litellm's: a missing or wrong API key."""


class APIConnectionError(Exception):
    """Named like litellm's: it wraps both a provider's own exception and a refused connection."""


def _chained(outer: BaseException, cause: BaseException) -> BaseException:
    outer.__cause__ = cause
    return outer


def test_decide_classifies_every_kind_of_failure():
    policy = RetryPolicy()
    assert policy.decide(RuntimeError("empty output")).action == "retry"
    assert policy.decide(TimeoutError("slow")).action == "retry"
    d = policy.decide(_chained(RuntimeError("wrapped"), ModelFileError("model file missing")))
    assert d.action == "raise" and isinstance(d.error, ModelFileError)
    d = policy.decide(ContextWindowError("prompt of 9000 tokens > n_ctx 4096"))
    assert d.action == "fail" and isinstance(d.error, ContextWindowError)
    d = policy.decide(AuthenticationError("no key"))
    assert d.action == "raise" and isinstance(d.error, ConfigurationError)
    assert "AuthenticationError" in str(d.error)
    # litellm's APIConnectionError around a refused connection: the server is unreachable
    refused = _chained(APIConnectionError("connect"), ConnectionRefusedError("refused"))
    assert not provider_exception(refused) and policy.decide(refused).action == "raise"
    # ... around a provider's own RuntimeError: an ordinary LM failure, retried
    inner = _chained(APIConnectionError("provider failed"), RuntimeError("injected fault"))
    assert provider_exception(inner) and fatal_lm_error(inner) is not None
    assert policy.decide(inner).action == "retry"


def test_a_retry_is_a_new_sample():
    policy = RetryPolicy(retries=3, temperature=0.5)
    kw = {"rollout_id": 7, "temperature": 0.0, "max_tokens": 10}
    assert policy.retry_kwargs(kw, 0) is kw
    second = policy.retry_kwargs(kw, 2)
    assert second == {"rollout_id": zlib.crc32(b"retry:7:2"), "temperature": 0.5, "max_tokens": 10}
    assert policy.retry_kwargs(kw, 1)["rollout_id"] != second["rollout_id"]
    lm = dspy.LM("openai/x", temperature=0.0)
    assert policy.retry_lm(lm, 0) is lm
    again = policy.retry_lm(lm, 2)
    assert again.kwargs["rollout_id"] == 2 and again.kwargs["temperature"] == 0.5


class Flaky(dspy.Module):
    """Fails its first ``n`` calls with ``exc``, then answers."""

    def __init__(self, n: int, exc: Exception):
        super().__init__()
        self.n, self.exc, self.calls = n, exc, 0

    def forward(self, x):
        self.calls += 1
        if self.calls <= self.n:
            raise self.exc
        return dspy.Prediction(y=x)


@pytest.mark.parametrize("retries,fails,expect_failure", [(2, 2, False), (2, 3, True), (0, 1, True)])
def test_run_program_follows_the_policy(retries, fails, expect_failure):
    from personalign.evaluation import run_program

    program = Flaky(fails, RuntimeError("empty output"))
    out = run_program(program, [dspy.Example(x=1).with_inputs("x")], inputs=["x"], output="y", retries=retries,
                      progress=False)
    assert out.failures == int(expect_failure) and program.calls == min(fails, retries) + 1
    assert out.errors == (["example 0: RuntimeError: empty output"] if expect_failure else [])


def test_run_program_does_not_retry_a_context_window_error_and_raises_configuration_errors():
    from personalign.evaluation import run_program

    ex = [dspy.Example(x=1).with_inputs("x")]
    program = Flaky(5, ContextWindowError("too long"))
    out = run_program(program, ex, inputs=["x"], output="y", progress=False)
    assert program.calls == 1 and out.failures == 1 and "ContextWindowError" in out.errors[0]
    with pytest.raises(ConfigurationError, match="AuthenticationError"):
        run_program(Flaky(1, AuthenticationError("no key")), ex, inputs=["x"], output="y", progress=False)


def test_retrying_adapter_uses_the_same_policy():
    from personalign.optimizers._failures import RetryingAdapter

    seen = []

    class Failing:
        def __init__(self, n):
            self.n = n

        def __call__(self, lm, lm_kwargs, signature, demos, inputs):
            seen.append(lm_kwargs)
            if len(seen) <= self.n:
                raise RuntimeError("unparseable")
            return [{"y": 1}]

    adapter = RetryingAdapter(Failing(2), RetryPolicy(retries=2))
    assert adapter(None, {"rollout_id": 1}, None, [], {}) == [{"y": 1}]
    assert adapter.retried == 2 and [k.get("temperature") for k in seen] == [None, 0.7, 0.7]
    seen.clear()
    with pytest.raises(RuntimeError, match="unparseable"):  # out of retries: raised to the teleprompter
        RetryingAdapter(Failing(5), RetryPolicy(retries=1))(None, {}, None, [], {})
    assert len(seen) == 2

    def too_long(lm, lm_kwargs, signature, demos, inputs):
        seen.append(lm_kwargs)
        raise ContextWindowError("prompt too long")

    seen.clear()
    with pytest.raises(ContextWindowError):
        RetryingAdapter(too_long, RetryPolicy(retries=2))(None, {}, None, [], {})
    assert len(seen) == 1, "a context-window error was retried"
