"""PersonaMem and CUPID loaders on tiny fixtures written in the published schemas, and the
canonical JSONL of every example type."""

from __future__ import annotations

import json
import shutil

import pytest
from pydantic import ValidationError

from personalign.data import (
    ExtractionExample,
    MCQExample,
    PreferenceRatingExample,
    ProfileExample,
    RelevanceExample,
    Turn,
    VerificationExample,
    read_examples,
    write_examples,
)
from personalign.data.cupid import cupid_extraction, load_cupid
from personalign.data.personamem import load_personamem, parse_options
from personalign.errors import DataError


def test_personamem_fixture(fixtures):
    exs = load_personamem(fixtures / "personamem" / "questions_tiny.csv")
    assert [e.id for e in exs] == ["personamem:q1", "personamem:q2", "personamem:q3"]
    q1, q2, q3 = exs
    assert q1.gold_index == 1 and q1.options[1] == "A lentil and mushroom stew."
    # end_index 3: the system message and the first exchange only
    assert q1.context.count("\n\n") == 2 and "cycling" not in q1.context and "steak" in q1.context
    assert "cycling" in q2.context and q2.options[0] == "A scenic 40 km group ride."  # python-literal options
    assert q3.options == ["A hardcover box set", "A library card for paper books", "An audiobook subscription",
                          "A printed magazine"] and q3.gold_index == 2  # plain "(a) ... (b) ..." options
    assert q1.user_id == "personamem:p1" and q1.topic == "food"
    assert all(e.context == "" for e in load_personamem(fixtures / "personamem" / "questions_tiny.csv",
                                                        include_context=False))


def test_personamem_contexts_path_and_missing(fixtures, tmp_path):
    shutil.copy(fixtures / "personamem" / "questions_tiny.csv", tmp_path / "questions_tiny.csv")
    with pytest.raises(DataError, match=r"shared_contexts_tiny\.jsonl: PersonaMem shared-contexts file not found"):
        load_personamem(tmp_path / "questions_tiny.csv")
    exs = load_personamem(tmp_path / "questions_tiny.csv", fixtures / "personamem" / "shared_contexts_tiny.jsonl")
    assert len(exs) == 3


def test_parse_options_rejects_code():
    with pytest.raises(ValueError):
        parse_options("[__import__('os').system('true')]")
    assert parse_options('["(a) x", "(b) y"]') == ["x", "y"]


def test_cupid_fixture_jsonl_and_json(fixtures):
    a = load_cupid(fixtures / "cupid" / "cupid_tiny.jsonl")
    b = load_cupid(fixtures / "cupid" / "cupid_tiny.json")
    assert a == b and len(a) == 3
    first = a[0]
    assert first.instance_type == "consistent" and first.current_context_factor == "Riverside School Board"
    assert len(first.prior_sessions) == 2 and first.prior_sessions[0].turns[0].role == "user"
    assert first.history().user_id == "cupid:1+fixture_teacher"
    ext = cupid_extraction(a)
    assert ext[0].conversation[-1].content == first.current_request
    assert ext[0].gold_attributes == [first.current_contextual_preference]


def test_cupid_parquet(fixtures, tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = [json.loads(line) for line in (fixtures / "cupid" / "cupid_tiny.jsonl").read_text().splitlines()]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "test.parquet")
    assert load_cupid(tmp_path / "test.parquet") == load_cupid(fixtures / "cupid" / "cupid_tiny.jsonl")


EXAMPLES = [
    RelevanceExample(id="r", attribute="likes tea", prompt="drink?", relevant=True, prompt_id="p"),
    VerificationExample(id="v", evidence="User: I avoid dairy.", attribute="avoids dairy", accepted=True),
    ExtractionExample(id="x", conversation=[Turn(role="user", content="I avoid dairy.")], gold_attributes=["avoids dairy"]),
    PreferenceRatingExample(id="g", profile="concise", prompt="explain", response_a="a", response_b="b",
                            ratings={"concise": 2}),
    MCQExample(id="m", context="", question="which?", options=["x", "y"], gold_index=1),
    ProfileExample(id="f", user_id="u", descriptors=["cyclist"], bio="Rides daily."),
]


@pytest.mark.parametrize("ex", EXAMPLES, ids=lambda e: e.KIND)
def test_canonical_roundtrip_and_dspy(ex, tmp_path):
    path = tmp_path / f"{ex.KIND}.jsonl"
    write_examples(path, [ex])
    assert read_examples(path, ex.KIND) == [ex]
    d = ex.to_dspy()
    assert set(d.inputs().keys()) == set(ex.INPUTS)
    assert set(ex.LABELS) <= set(d.labels().keys())


def test_write_is_atomic_and_rejects_duplicates(tmp_path):
    path = tmp_path / "out.jsonl"
    with pytest.raises(DataError, match="duplicate id"):
        write_examples(path, [EXAMPLES[0], EXAMPLES[0]])
    assert list(tmp_path.iterdir()) == []

    def boom():
        yield EXAMPLES[0]
        raise RuntimeError("fail mid-write")

    from personalign.data.files import write_jsonl

    with pytest.raises(RuntimeError):
        write_jsonl(path, boom())
    assert list(tmp_path.iterdir()) == []  # no partial file, no temp file


def test_schema_validation():
    with pytest.raises(ValidationError, match=r"gold_index\s+Value error, 2 out of range for 2 options"):
        MCQExample(id="m", context="", question="q", options=["a", "b"], gold_index=2)
    with pytest.raises(ValidationError, match=r"ratings\.x\s+Input should be greater than or equal to 1"):
        PreferenceRatingExample(id="g", profile="p", prompt="q", response_a="a", response_b="b", ratings={"x": 0})
    with pytest.raises(ValidationError, match=r"relevant\s+Input should be a valid boolean"):
        RelevanceExample(id="r", attribute="a", prompt="p", relevant="yes", prompt_id="p")
