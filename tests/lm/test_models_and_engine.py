"""Embedded model registry, file verification, schema bounding and prompt formats (fast)."""

from __future__ import annotations

import shutil

import pytest

from personalign.errors import ModelFileError, UnknownModelError, find_personalign_error
from personalign.lm._engine import bound_schema, schema_from_response_format
from personalign.lm import _models
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


def test_qwen_default_is_assembled_and_matches_its_pinned_sha256():
    from personalign.lm import DEFAULT_MODEL

    assert DEFAULT_MODEL == "local/qwen2.5-coder-1.5b-instruct"
    path, sha = model_file(DEFAULT_MODEL)
    spec = get_spec(DEFAULT_MODEL)
    assert sha == spec.split.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert path.stat().st_size == spec.split.size == 1_117_320_768
    assert len(_models.part_files(spec.split)) == 22


def _fake_parts(tmp_path, monkeypatch, chunks, record=None):
    """A split model of small fake parts (what the part wheels would hold), wired into part_files."""
    import hashlib

    paths = []
    for i, data in enumerate(chunks, start=1):
        p = tmp_path / f"part{i:02d}.bin"
        p.write_bytes(data)
        paths.append((f"fake-part{i}", p, (record or {}).get(i, hashlib.sha256(data).hexdigest())))
    monkeypatch.setattr(_models, "part_files", lambda split: paths)
    whole = b"".join(chunks)
    split = _models.SplitGGUF("fake-part", "0", len(chunks), len(whole), hashlib.sha256(whole).hexdigest(), "fake.gguf")
    return _models.LocalModelSpec(name="fake", distribution="fake-part1..n", trained_ctx=1, description="", split=split)


def test_split_model_assembles_atomically_and_verifies(tmp_path, monkeypatch):
    spec = _fake_parts(tmp_path, monkeypatch, [b"abc" * 1000, b"def" * 7, b"g"])
    target = tmp_path / "models" / "fake.gguf"
    assert _models.assemble(spec, target, progress=False) == spec.split.sha256
    assert target.read_bytes() == b"abc" * 1000 + b"def" * 7 + b"g"
    assert sorted(p.name for p in target.parent.iterdir()) == [".fake.gguf.lock", "fake.gguf", "fake.stamp.json"], \
        "no temporary file may remain (the lock file and the verification stamp stay)"


def test_corrupted_part_is_named_and_nothing_is_written(tmp_path, monkeypatch):
    spec = _fake_parts(tmp_path, monkeypatch, [b"abc", b"def", b"ghi"])
    (tmp_path / "part02.bin").write_bytes(b"dXf")  # same size, different bytes than its RECORD hash
    target = tmp_path / "models" / "fake.gguf"
    with pytest.raises(ModelFileError) as err:
        _models.assemble(spec, target, progress=False)
    msg = str(err.value)
    assert "fake-part2" in msg and "force-reinstall" in msg and "\n" not in msg
    assert not target.exists() and [p.name for p in target.parent.iterdir()] in ([], [".fake.gguf.lock"])


def test_truncated_part_is_a_one_line_error(tmp_path, monkeypatch):
    spec = _fake_parts(tmp_path, monkeypatch, [b"abc", b"def"])
    (tmp_path / "part01.bin").write_bytes(b"ab")
    with pytest.raises(ModelFileError, match="fake-part1") as err:
        _models.assemble(spec, tmp_path / "models" / "fake.gguf", progress=False)
    assert "expected 6" in str(err.value) and not (tmp_path / "models" / "fake.gguf").exists()


def test_missing_part_wheel_names_the_part_and_the_fix():
    split = _models.SplitGGUF("personalign-no-such-part", "9.9", 2, 10, "0" * 64, "x.gguf")
    with pytest.raises(ModelFileError) as err:
        _models.part_files(split)
    msg = str(err.value)
    assert "part 1/2" in msg and "personalign-no-such-part1" in msg and "pip install personalign-no-such-part1==9.9" in msg


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


@pytest.mark.parametrize("var,field", [("KV_REUSE", "reuse_prefix"), ("BATCH_DECODE", "batch_decode")])
def test_switch_settings_are_parsed_and_a_bad_value_is_an_error(monkeypatch, var, field):
    from personalign.errors import ConfigurationError
    from personalign.lm._engine import LocalSettings

    assert getattr(LocalSettings.from_env(), field) is True  # on by default
    monkeypatch.setenv(f"PERSONALIGN_{var}", "0")
    assert getattr(LocalSettings.from_env(), field) is False
    monkeypatch.setenv(f"PERSONALIGN_{var}", "on")
    assert getattr(LocalSettings.from_env(), field) is True
    monkeypatch.setenv(f"PERSONALIGN_{var}", "maybe")
    with pytest.raises(ConfigurationError, match=f"PERSONALIGN_{var}.*'maybe'"):
        LocalSettings.from_env()
