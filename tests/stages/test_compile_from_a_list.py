"""A program compiled through the Python API from a list of examples records them as
``examples (a list of N)`` with their sha256 in its saved ``program.json`` -- never the temporary
JSONL the verb wrote and deleted -- while a file keeps its path."""

from __future__ import annotations

import json
import tempfile

import pytest


def _saved(out):
    doc = json.loads((out / "program.json").read_text())
    return doc, doc["metadata"]["personalign"]


@pytest.mark.parametrize("strategy", ["majority", "minilm-logreg"])  # unfitted and fitted, both LM-free
def test_a_list_is_named_and_hashed_not_its_temporary_file(strategy, own_task, tmp_path, monkeypatch, runs_dir):
    import personalign
    from personalign.data.digest import file_sha256
    from personalign.stages.ref import resolve_stage

    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    st = resolve_stage(str(own_task / "stage.toml"))
    examples = st.load(own_task / "data.jsonl")
    out = tmp_path / "prog"
    made = personalign.compile(st, strategy, examples, out=out)
    label = f"examples (a list of {len(examples)})"

    # the same rows as a file: the sha256 the list was recorded with
    same = tmp_path / "same.jsonl"
    same.write_text("".join(json.dumps(dict(ex.toDict()), default=str) + "\n" for ex in examples))
    sha = file_sha256(same)
    assert made.info["data"] == label and made.info["data_sha256"] == sha
    doc, meta = _saved(out)
    assert meta["compile"]["data"] == label and meta["compile"]["data_sha256"] == sha
    assert meta["data"] == label and meta["data_sha256"] == sha
    text = (out / "program.json").read_text()
    assert str(temp) not in text and "personalign-option-follows-" not in text
    assert not list(temp.glob("personalign-*")), "the temporary JSONL outlives the call"
    program, loaded = personalign.load_program(out, stage=str(own_task / "stage.toml"), with_metadata=True)
    assert loaded["data"] == label and program is not None

    # evaluated again on the same rows: recognised as fitted-on (sha256), named as the list
    report = personalign.evaluate(st, out, examples, split="train", n_boot=20)
    (warning,) = report["warnings"]
    assert f"fitted on split(s) train of {label}" in warning
    assert report["data"] == label and str(temp) not in json.dumps(report.to_dict())

    # a file keeps its own path and the file's sha256
    from_file = personalign.compile(st, strategy, own_task / "data.jsonl", out=tmp_path / "prog-file")
    _, meta_file = _saved(tmp_path / "prog-file")
    assert from_file.info["data"] == str(own_task / "data.jsonl") == meta_file["data"]
    assert meta_file["data_sha256"] == file_sha256(own_task / "data.jsonl")
