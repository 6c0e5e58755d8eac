"""The user's model cache: where it is, verify-once stamps, read-only caches, concurrent first use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from personalign.errors import ModelFileError
from personalign.lm import _cache, _models
from personalign.settings import models_dir
from tests.conftest import ROOT, TEST_MODELS_DIR, cli_env

FAST = "local/qwen2.5-coder-0.5b-instruct"


def _fake_spec(tmp_path, monkeypatch, data: bytes = b"gguf" * 5000):
    import hashlib

    part = tmp_path / "parts" / "part01.bin"
    part.parent.mkdir(parents=True, exist_ok=True)
    part.write_bytes(data)
    monkeypatch.setattr(_models, "part_files", lambda split: [("fake-part1", part, hashlib.sha256(data).hexdigest())])
    split = _models.SplitGGUF("fake-part", "0", 1, len(data), hashlib.sha256(data).hexdigest(), "fake.gguf")
    spec = _models.LocalModelSpec(name="fake", distribution="fake-part1", trained_ctx=1, description="", split=split)
    monkeypatch.setitem(_models.MODELS, "fake", spec)
    return spec


def _forget():
    _cache._verified.clear()
    _cache._how.clear()


def test_default_models_dir_is_the_user_cache_not_the_runs_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("PERSONALIGN_MODELS_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("PERSONALIGN_RUNS_DIR", str(tmp_path / "runs-a"))
    a = models_dir()
    monkeypatch.setenv("PERSONALIGN_RUNS_DIR", str(tmp_path / "runs-b"))
    assert a == models_dir()
    if sys.platform.startswith("linux"):
        assert a == tmp_path / "xdg" / "personalign" / "models"
    monkeypatch.setenv("PERSONALIGN_MODELS_DIR", str(tmp_path / "mine"))
    assert models_dir() == tmp_path / "mine"


def test_assembled_file_is_stamped_and_later_processes_do_not_rehash(tmp_path, monkeypatch):
    monkeypatch.setenv("PERSONALIGN_MODELS_DIR", str(tmp_path / "models"))
    spec = _fake_spec(tmp_path, monkeypatch)
    path, sha = _models.model_file("local/fake")
    assert sha == spec.split.sha256 and _models.how_verified(path) == "assembled"
    stamp = json.loads((tmp_path / "models" / "fake.stamp.json").read_text())
    assert stamp["sha256"] == sha and stamp["size"] == path.stat().st_size
    assert stamp["mtime_ns"] == path.stat().st_mtime_ns

    _forget()  # a new process: only the stamp vouches for the file
    monkeypatch.setattr(_cache, "sha256_file", lambda p: pytest.fail("re-hashed a stamped file"))
    assert _models.model_file("local/fake") == (path, sha)
    assert _models.how_verified(path) == "stamp"


def test_a_changed_file_is_rehashed_and_a_corrupted_one_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("PERSONALIGN_MODELS_DIR", str(tmp_path / "models"))
    _fake_spec(tmp_path, monkeypatch)
    path, sha = _models.model_file("local/fake")
    _forget()
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))  # touched: stamp disagrees
    assert _models.model_file("local/fake")[1] == sha and _models.how_verified(path) == "hash"
    stamp = json.loads((tmp_path / "models" / "fake.stamp.json").read_text())
    assert stamp["mtime_ns"] == path.stat().st_mtime_ns, "the stamp is renewed after a successful re-hash"

    _forget()
    with open(path, "r+b") as fh:
        fh.seek(100)
        fh.write(b"XXXX")  # same size, new mtime
    with pytest.raises(ModelFileError, match="corrupted") as err:
        _models.model_file("local/fake")
    assert "\n" not in str(err.value)


def test_rehash_ignores_a_valid_stamp(tmp_path, monkeypatch):
    monkeypatch.setenv("PERSONALIGN_MODELS_DIR", str(tmp_path / "models"))
    _fake_spec(tmp_path, monkeypatch)
    path, _ = _models.model_file("local/fake")
    _forget()
    _models.model_file("local/fake", rehash=True)
    assert _models.how_verified(path) == "hash"


def test_verified_model_in_a_cache_is_used_without_writing_anything(tmp_path, monkeypatch):
    """What a read-only cache needs: with a valid stamp, using the model writes no file, lock or stamp."""
    monkeypatch.setenv("PERSONALIGN_MODELS_DIR", str(tmp_path / "models"))
    _fake_spec(tmp_path, monkeypatch)
    path, sha = _models.model_file("local/fake")
    before = {p.name: p.stat().st_mtime_ns for p in path.parent.iterdir()}
    _forget()
    assert _models.model_file("local/fake") == (path, sha)
    assert {p.name: p.stat().st_mtime_ns for p in path.parent.iterdir()} == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write a 0o555 directory; the no-write test above covers it")
def test_read_only_cache_with_a_verified_model_works(tmp_path, monkeypatch):
    monkeypatch.setenv("PERSONALIGN_MODELS_DIR", str(tmp_path / "models"))
    _fake_spec(tmp_path, monkeypatch)
    path, sha = _models.model_file("local/fake")
    path.parent.chmod(0o555)
    try:
        _forget()
        assert _models.model_file("local/fake") == (path, sha)
    finally:
        path.parent.chmod(0o755)


def test_assembling_into_a_read_only_cache_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PERSONALIGN_MODELS_DIR", "/proc/personalign-models")  # not creatable, even by root
    _fake_spec(tmp_path, monkeypatch)
    with pytest.raises(ModelFileError) as err:
        _models.model_file("local/fake")
    msg = str(err.value)
    assert "/proc/personalign-models" in msg and "PERSONALIGN_MODELS_DIR" in msg and "\n" not in msg


def test_cli_read_only_cache_is_a_one_line_error_exit_2(tmp_path):
    env = cli_env(tmp_path / "runs", PERSONALIGN_MODELS_DIR="/proc/personalign-models")
    proc = subprocess.run([sys.executable, "-m", "personalign", "doctor", "--json"], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "/proc/personalign-models" in lines[0] and "Traceback" not in proc.stderr
    assert proc.stdout == ""


_RACE = """
import json, sys, time
from personalign.lm import _models
spec = _models.get_spec(sys.argv[1])
target = _models.models_dir() / spec.split.file_name
while time.time() < float(sys.argv[2]):
    time.sleep(0.005)
path, sha = _models.model_file(sys.argv[1])
print(json.dumps({"sha": sha, "how": _models.how_verified(path)}))
"""


def test_two_processes_assembling_at_once_one_wins_none_corrupts(tmp_path):
    """Two real processes ask for the (not yet assembled) 0.5B model at the same instant."""
    try:
        _models.part_files(_models.get_spec(FAST).split)
    except ModelFileError as exc:
        pytest.skip(f"0.5B part wheels not installed: {exc}")
    cache = tmp_path / "cache"
    env = {**os.environ, "PERSONALIGN_MODELS_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    start = time.time() + 3.0
    procs = [subprocess.Popen([sys.executable, "-c", _RACE, FAST, str(start)], env=env, cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e for _, e in outs]
    results = [json.loads(o.strip().splitlines()[-1]) for o, _ in outs]
    spec = _models.get_spec(FAST)
    assert {r["sha"] for r in results} == {spec.split.sha256}
    assert sorted(r["how"] for r in results) in (["assembled", "stamp"], ["assembled", "hash"]), results
    target = cache / spec.split.file_name
    assert target.stat().st_size == spec.split.size
    assert _cache.sha256_file(target) == spec.split.sha256, "the file in place is whole"
    assert not list(cache.glob("*.partial")), "no temporary file is left"


def test_tests_use_their_own_model_cache():
    assert models_dir() == TEST_MODELS_DIR


def test_a_fresh_runs_folder_assembles_nothing(tmp_path):
    """With the model cache in place, a new PERSONALIGN_RUNS_DIR gets no models/ and no hashing."""
    _models.model_file(FAST)  # ensure the tests' cache holds it (and its stamp)
    code = ("import json; from personalign.lm import model_file, how_verified; "
            f"p, s = model_file({FAST!r}); print(json.dumps(how_verified(p)))")
    env = cli_env(tmp_path / "runs")
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == "stamp"
    assert not (tmp_path / "runs" / "models").exists()


def test_warm_doctor_reads_stamps_and_imports_no_heavy_library(tmp_path):
    """`personalign doctor` after the first run: every model verified by its stamp, and neither
    DSPy, litellm, llama.cpp nor torch imported (that is what keeps it near a second)."""
    _models.model_file(FAST)
    code = ("import json, sys; from personalign.cli._doctor import collect; "
            "info = collect(bench=False, lm='', cache_dir=None); "
            "print(json.dumps({'how': {k: m['verified_by'] for k, m in info['models'].items()}, "
            "'heavy': sorted(m for m in ('dspy', 'litellm', 'llama_cpp', 'torch') if m in sys.modules), "
            "'models_dir': info['models_dir']}))")
    env = cli_env(tmp_path / "runs")
    subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, timeout=600)  # stamps
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert set(out["how"].values()) == {"stamp"}, out
    assert out["heavy"] == [] and out["models_dir"] == str(TEST_MODELS_DIR)
    print(f"\nwarm doctor (in-process collect) {seconds:.2f} s")
