"""Bounded, regular-file-only readers: pipes, devices, huge integers, deep nesting, unreadable and
binary files are one-line DataErrors (never a hang, a MemoryError or a traceback)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from personalign.data import files as _io
from personalign.data.kinds import validate
from personalign.errors import DataError

ROOT_USER = hasattr(os, "geteuid") and os.geteuid() == 0


def _one_line(exc: DataError) -> str:
    msg = str(exc)
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize("kind, name", [("relevance", "data.jsonl"), ("prefeval-explicit", "topic.json"),
                                        ("personamem", "questions_32k.csv")])
def test_named_pipe_is_refused_without_opening_it(tmp_path, kind, name):
    fifo = tmp_path / name
    os.mkfifo(fifo)
    # in a subprocess with a timeout: opening a FIFO with no writer would block forever
    code = (f"from personalign.cli.data import main; import sys; sys.exit(main(['validate', {str(fifo)!r}, "
            f"'--kind', {kind!r}]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "named pipe" in proc.stderr and str(fifo) in proc.stderr


def test_device_is_refused():
    with pytest.raises(DataError, match="a device") as ei:
        validate("/dev/zero", "relevance")
    _one_line(ei.value)
    with pytest.raises(DataError, match="a device"):
        _io.read_text("/dev/zero")


@pytest.mark.parametrize("text, fragment", [
    ('{"id": ' + "9" * 5000 + "}\n", "4300 digits"),
    ("[" * 100_000 + "]" * 100_000 + "\n", "nested too deeply"),
])
def test_huge_int_and_deep_nesting_in_jsonl_and_json(tmp_path, text, fragment):
    jsonl = tmp_path / "x.jsonl"
    jsonl.write_text(text)
    with pytest.raises(DataError) as ei:
        list(_io.iter_jsonl(jsonl))
    assert fragment in _one_line(ei.value) and ei.value.line == 1
    doc = tmp_path / "x.json"
    doc.write_text(text)
    with pytest.raises(DataError) as ei:
        _io.read_json(doc)
    assert fragment in _one_line(ei.value)


def test_huge_int_through_the_relevance_loader(tmp_path):
    path = tmp_path / "rel.jsonl"
    path.write_text('{"prompt_index": ' + "1" * 5000 + "}\n")
    with pytest.raises(DataError, match="4300 digits"):
        validate(path, "relevance")


@pytest.mark.skipif(ROOT_USER, reason="root reads files whatever their mode")
def test_unreadable_file(tmp_path):
    path = tmp_path / "secret.jsonl"
    path.write_text('{"a": 1}\n')
    path.chmod(0)
    with pytest.raises(DataError, match="permission denied"):
        validate(path, "relevance")


def test_binary_files(tmp_path):
    path = tmp_path / "blob.jsonl"
    path.write_bytes(b'{"a": 1}\n\x00\x01\x02\xff\n')
    with pytest.raises(DataError) as ei:
        list(_io.iter_jsonl(path))
    assert ei.value.line == 2 and "NUL" in _one_line(ei.value)
    txt = tmp_path / "attrs.txt"
    txt.write_bytes(b"vegan\n\x89PNG\r\n\x1a\n\x00\x00")
    with pytest.raises(DataError, match="binary file") as ei:
        _io.read_text(txt)
    assert ei.value.line == 4  # vegan, \x89PNG\r, \x1a, then the NUL


def test_size_bounds(tmp_path, monkeypatch):
    monkeypatch.setattr(_io, "MAX_LINE_BYTES", 64)
    path = tmp_path / "long.jsonl"
    path.write_text('{"a": "' + "x" * 100 + '"}\n')
    with pytest.raises(DataError, match="longer than 64 bytes"):
        list(_io.iter_jsonl(path))
    with pytest.raises(DataError, match="larger than 10 bytes"):
        _io.read_text(path, max_bytes=10)


def test_csv_field_over_the_limit(tmp_path):
    from personalign.data.personamem import REQUIRED, load_personamem

    path = tmp_path / "questions_32k.csv"
    path.write_text(",".join(REQUIRED) + "\n" + '"' + "x" * 200_000 + '"' + ",a" * (len(REQUIRED) - 1) + "\n")
    with pytest.raises(DataError, match="invalid CSV") as ei:
        load_personamem(path, include_context=False)
    _one_line(ei.value)


def test_directory_and_missing(tmp_path):
    with pytest.raises(DataError, match="found a directory"):
        _io.read_text(tmp_path)
    with pytest.raises(DataError, match="not found"):
        _io.read_text(tmp_path / "nope.txt")
