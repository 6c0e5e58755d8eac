"""Log-probability margins of boolean output fields (personalign.lm.logprobs): parsing is unit
tested on hand-built OpenAI-shaped logprobs; the embedded path is tested in test_local_backend."""

from __future__ import annotations

import math

import dspy
import pytest
from dspy.utils.dummies import DummyLM

from personalign.lm.logprobs import bool_field, bool_margin, choice_distribution, expected_value, request, scored
from personalign.signatures.relevance import RelevanceSignature
from personalign.signatures.verification import VerificationSignature


def tok(token, logprob, top):
    return {"token": token, "logprob": logprob, "top_logprobs": [{"token": t, "logprob": lp} for t, lp in top]}


def json_answer(value_top):
    return {"content": [tok("{", -0.1, [("{", -0.1)]), tok(' "', -0.2, [(' "', -0.2)]),
                        tok("relevant", -0.01, [("relevant", -0.01)]), tok('":', -0.01, [('":', -0.01)]),
                        tok(" false", dict(value_top).get(" false", -9.0), value_top), tok(" }", -0.1, [(" }", -0.1)])]}


def test_margin_sums_every_spelling_of_each_side():
    lp = json_answer([(" False", -1.0), (" True", -2.0), (" false", -1.5), (" true", -2.5), (' "', -3.0)])
    want = math.log(math.exp(-2.0) + math.exp(-2.5)) - math.log(math.exp(-1.0) + math.exp(-1.5))
    assert bool_margin(lp, "relevant") == pytest.approx(want)


def test_a_side_missing_from_the_top_alternatives_is_bounded_by_the_least_likely_one():
    lp = json_answer([(" false", -0.1), (' "', -4.0), (" no", -6.0)])
    assert bool_margin(lp, "relevant") == pytest.approx(-6.0 - (-0.1))


def test_chat_adapter_answers_and_the_last_occurrence_of_the_field_are_used():
    content = [tok("[[ ## reasoning ## ]]\n", -0.1, []), tok('it says "relevant": false', -0.3, []),
               tok("\n\n[[ ## relevant ## ]]\n", -0.1, []), tok("True", -0.2, [("True", -0.2), ("False", -1.9)])]
    assert bool_margin({"content": content}, "relevant") == pytest.approx(1.7)


@pytest.mark.parametrize("logprobs", [None, {}, {"content": []}, {"content": [tok("hello", -0.1, [])]}])
def test_no_margin_without_logprobs_or_without_the_field(logprobs):
    assert bool_margin(logprobs, "relevant") is None


def rating_answer(value_top):
    return {"content": [tok('{"', -0.1, [('{"', -0.1)]), tok("rating", -0.01, [("rating", -0.01)]),
                        tok('":', -0.01, [('":', -0.01)]), tok(" ", -0.01, [(" ", -0.01)]),
                        tok(value_top[0][0], value_top[0][1], value_top), tok("}", -0.1, [("}", -0.1)])]}


def test_choice_distribution_renormalizes_over_the_choices_and_gives_the_expected_rating():
    lp = rating_answer([("4", math.log(0.5)), ("2", math.log(0.2)), ("5", math.log(0.1)), ("x", math.log(0.2))])
    dist = choice_distribution(lp, "rating", (1, 2, 3, 4, 5))
    assert dist == pytest.approx({1: 0.0, 2: 0.25, 3: 0.0, 4: 0.625, 5: 0.125})
    assert expected_value(lp, "rating", (1, 2, 3, 4, 5)) == pytest.approx(2 * 0.25 + 4 * 0.625 + 5 * 0.125)


def test_no_distribution_when_no_choice_is_among_the_alternatives():
    assert choice_distribution(rating_answer([("x", -0.1), ("y", -2.0)]), "rating", (1, 2, 3)) is None
    assert expected_value(None, "rating", (1, 2, 3)) is None
    assert expected_value(rating_answer([("3", -0.1)]), "missing", (1, 2, 3)) is None


def test_bool_field_comes_from_the_signature():
    assert bool_field(RelevanceSignature) == "relevant"
    assert bool_field(VerificationSignature) == "accepted"

    class NoBool(dspy.Signature):
        x: str = dspy.InputField()
        y: str = dspy.OutputField()

    with pytest.raises(ValueError, match="NoBool has no bool output field"):
        bool_field(NoBool)


def test_dummy_lm_gets_no_logprob_request_and_scores_none():
    lm = DummyLM([{"relevant": "True"}])
    assert request(lm) == {}
    with dspy.context(lm=lm):
        out, score = scored(dspy.Predict(RelevanceSignature), "relevant", attribute="a", prompt="p")
    assert out.relevant is True and score is None and "logprobs" not in out


def test_local_and_logprob_capable_hosted_models_are_asked_for_logprobs():
    assert request(dspy.LM("local/smollm2-135m-instruct")) == {"config": {"logprobs": True, "top_logprobs": 20}}
    assert request(dspy.LM("openai/gpt-4o-mini"))["config"]["logprobs"] is True
    assert request(dspy.LM("anthropic/claude-3-5-haiku-20241022")) == {}
