"""Bad input refused at the door (issue 28): environment settings, model files, I/O errors, empty
attributes, ``ui`` flags, pipeline plans. Each case: exit 2, one stderr line naming the variable or
file and the value, no traceback, nothing written (the case's runs/ directory never appears).
Every malformed value and file is made here."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DEMO, ROOT, cli_env

COMPARE = ("compare", "relevance", "--data", str(DEMO), "--strategies", "bm25", "--no-track")


def _run(tmp_path: Path, *args: str, prefix: tuple[str, ...] = (), timeout: int = 120, **env: str):
    e = cli_env(tmp_path / "runs", **env)
    return subprocess.run([*prefix, sys.executable, "-m", "personalign", *args], capture_output=True, text=True,
                          cwd=tmp_path, env=e, timeout=timeout, stdin=subprocess.DEVNULL)


def _one_line(proc, *needles: str, tmp_path: Path | None = None) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-1500:])
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-1500:]
    assert lines[0].startswith("error: "), lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    if tmp_path is not None:
        assert not (tmp_path / "runs").exists(), "bad input wrote the runs directory"
    return lines[0]


# --- environment ---------------------------------------------------------------------------------

ENV_CASES = [("PERSONALIGN_N_CTX", v) for v in ("abc", "0", "16", "-4096", "99999999")] + [
    ("PERSONALIGN_THREADS", "abc"), ("PERSONALIGN_THREADS", "0"), ("PERSONALIGN_SEED", "abc"),
    ("PERSONALIGN_SEED", "-1"), ("PERSONALIGN_MAX_TRACES", "abc"), ("PERSONALIGN_MAX_TRACES", "-3"),
    ("PERSONALIGN_KV_REUSE", "maybe"), ("PERSONALIGN_BATCH_DECODE", "maybe"),
]


@pytest.mark.parametrize("var,value", ENV_CASES, ids=[f"{k}={v}" for k, v in ENV_CASES])
def test_bad_environment_value_is_one_line_naming_it(tmp_path, var, value):
    _one_line(_run(tmp_path, *COMPARE, **{var: value}), var, repr(value), tmp_path=tmp_path)


def test_settings_in_bounds_are_read_once_and_typed(monkeypatch):
    from personalign.lm._engine import LocalSettings
    from personalign.settings import env_settings
    from personalign.tracking.native import max_traces

    monkeypatch.setenv("PERSONALIGN_N_CTX", "2048")
    monkeypatch.setenv("PERSONALIGN_THREADS", " 2 ")
    monkeypatch.setenv("PERSONALIGN_SEED", "7")
    monkeypatch.setenv("PERSONALIGN_KV_REUSE", "off")
    monkeypatch.setenv("PERSONALIGN_MAX_TRACES", "0")
    s = LocalSettings.from_env()
    assert (s.n_ctx, s.n_threads, s.seed, s.reuse_prefix) == (2048, 2, 7, False)
    assert max_traces() == 0 and env_settings().N_CTX == 2048


def test_runs_dir_that_is_a_file(tmp_path):
    f = tmp_path / "runs-file"
    f.write_text("x")
    _one_line(_run(tmp_path, *COMPARE, PERSONALIGN_RUNS_DIR=str(f)), "PERSONALIGN_RUNS_DIR", str(f), "not a directory")
    assert f.read_text() == "x"


def _read_only(path: Path) -> tuple[str, ...]:
    """A command prefix that runs the CLI with ``path`` read-only: a read-only bind mount in a private
    mount namespace (root writes through file modes), else ``chmod 555``."""
    if os.geteuid() != 0:
        path.chmod(0o555)
        return ()
    if not shutil.which("unshare"):
        pytest.skip("running as root without unshare: cannot make a directory read-only")
    probe = subprocess.run(["unshare", "-m", "sh", "-c", f"mount --bind -o ro '{path}' '{path}'"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a read-only mount here: {probe.stderr.decode()[:200]}")
    return ("unshare", "-m", "sh", "-c", f"mount --bind -o ro '{path}' '{path}' && exec \"$0\" \"$@\"")


def test_read_only_runs_dir(tmp_path):
    ro = tmp_path / "ro-runs"
    ro.mkdir()
    proc = _run(tmp_path, *COMPARE, prefix=_read_only(ro), PERSONALIGN_RUNS_DIR=str(ro))
    _one_line(proc, "PERSONALIGN_RUNS_DIR", str(ro), "not writable")
    assert list(ro.iterdir()) == []


def test_read_only_runs_dir_still_validates_data(tmp_path):
    """Reading commands need no writable runs dir."""
    ro = tmp_path / "ro-runs"
    ro.mkdir()
    proc = _run(tmp_path, "data", "validate", str(DEMO), "--kind", "relevance", prefix=_read_only(ro),
                PERSONALIGN_RUNS_DIR=str(ro))
    assert proc.returncode == 0, proc.stderr[-1500:]


def _models_dir() -> Path:
    d = ROOT / "runs" / "models"
    if not (d / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf").is_file():
        pytest.skip(f"assembled models not found in {d} (run `make setup`)")
    return d.resolve()


def test_doctor_on_a_read_only_models_dir_that_holds_verified_models(tmp_path):
    models = _models_dir()
    proc = _run(tmp_path, "doctor", "--json", prefix=_read_only(models), timeout=600,
                PERSONALIGN_MODELS_DIR=str(models))
    assert proc.returncode == 0, proc.stderr[-1500:]
    info = json.loads(proc.stdout)
    assert all(m["verified"] for m in info["models"].values())


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory", "truncated"])
def test_model_file_that_is_not_a_model_is_refused_before_opening(tmp_path, kind):
    var = "PERSONALIGN_GGUF_QWEN2_5_CODER_0_5B_INSTRUCT"
    target = {"fifo": tmp_path / "m.gguf", "dev-zero": Path("/dev/zero"), "directory": tmp_path / "dir.gguf",
              "truncated": tmp_path / "short.gguf"}[kind]
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "directory":
        target.mkdir()
    elif kind == "truncated":
        target.write_bytes(b"GGUF" + b"\0" * 100)
    proc = _run(tmp_path, "predict", "relevance", "--prompt", "hi", "-a", "x", "--strategy", "zero-shot",
                "--lm", "local/qwen2.5-coder-0.5b-instruct", timeout=60, **{var: str(target)})
    needle = {"fifo": "FIFO", "dev-zero": "device", "directory": "directory", "truncated": "bytes"}[kind]
    _one_line(proc, var, str(target), needle, tmp_path=None if kind == "truncated" else tmp_path)


def test_model_file_checks_without_the_cli(tmp_path):
    from personalign.errors import ConfigurationError
    from personalign.settings import check_regular_file

    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    for path, needle in ((fifo, "FIFO"), (Path("/dev/zero"), "device"), (tmp_path, "directory")):
        with pytest.raises(ConfigurationError, match=needle):
            check_regular_file(path, what="X")
    ok = tmp_path / "f"
    ok.write_bytes(b"1234")
    assert check_regular_file(ok, what="X", expected_size=4).st_size == 4
    with pytest.raises(ConfigurationError, match="holds 4 bytes, expected 5"):
        check_regular_file(ok, what="X", expected_size=5)


# --- I/O errors on inputs ------------------------------------------------------------------------

EIO = "/proc/self/mem"  # a regular file whose read fails with EIO


@pytest.mark.parametrize("args", [
    ("data", "validate", EIO, "--kind", "relevance"),
    ("data", "stats", EIO, "--kind", "relevance"),
    ("data", "validate", EIO, "--kind", "prefeval-mcq"),
    ("compare", "relevance", "--data", EIO, "--strategies", "bm25", "--no-track"),
    ("compile", "relevance", "--strategy", "bm25", "--data", EIO, "--no-track"),
    ("predict", "relevance", "--prompt", "hi", "--attributes-file", EIO),
], ids=lambda a: " ".join(a[:2]) + " " + a[-1])
def test_io_error_reading_an_input_names_the_file(tmp_path, args):
    if not Path(EIO).exists():
        pytest.skip("no /proc/self/mem here")
    _one_line(_run(tmp_path, *args), EIO, tmp_path=tmp_path)


def test_io_error_helper_names_the_file(tmp_path):
    from personalign.data.files import reading
    from personalign.errors import DataError

    with pytest.raises(DataError, match="x.jsonl: cannot read file: Input/output error"):
        with reading(tmp_path / "x.jsonl"):
            raise OSError(5, "Input/output error")


# --- predict, ui, pipeline ----------------------------------------------------------------------

@pytest.mark.parametrize("attrs,needle", [(("-a", "", "-a", "x"), "attribute 1 ('')"),
                                          (("-a", "x", "-a", "   "), "attribute 2 ('   ')")])
def test_predict_empty_attribute(tmp_path, attrs, needle):
    _one_line(_run(tmp_path, "predict", "relevance", "--prompt", "hi", *attrs, "--strategy", "bm25"), needle,
              tmp_path=tmp_path)


def test_predict_relevance_api_refuses_empty_attribute():
    from personalign.errors import ConfigurationError
    from personalign._verbs.relevance import predict_relevance

    with pytest.raises(ConfigurationError, match="attribute 2"):
        predict_relevance(["vegan", " "], "hi", strategy="bm25")


@pytest.mark.parametrize("port", ["0", "70000", "abc", "-1"])
def test_ui_bad_port(tmp_path, port):
    _one_line(_run(tmp_path, "ui", "--port", port), "--port", repr(port), tmp_path=tmp_path)


def test_ui_bad_tracking_uri(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n")
    cases = [("foo://bar", "unsupported scheme 'foo'"), (f"sqlite:///{text}", "not an SQLite database"),
             ("/nonexistent/dir", "does not exist"), (str(text), "is not a directory"),
             (f"sqlite:///{tmp_path}", "not an SQLite database")]
    for uri, needle in cases:
        _one_line(_run(tmp_path, "ui", "--tracking-uri", uri), uri, needle, tmp_path=tmp_path)


def _one_class(tmp_path: Path) -> Path:
    rows = [json.loads(x) for x in DEMO.read_text().splitlines() if x.strip()]
    for r in rows:
        r["relevant"] = True
    p = tmp_path / "one_class.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def test_pipeline_plan_refused_before_any_model_work(tmp_path):
    data = tmp_path / "prefeval"
    data.mkdir()
    _one_line(_run(tmp_path, "run", "pipeline", str(data), "--conditions", "no-profile,no-profile", "--no-track",
                   timeout=60), "no-profile", "more than once", tmp_path=tmp_path)
    one = _one_class(tmp_path)
    _one_line(_run(tmp_path, "run", "pipeline", str(data), "--selector", "minilm-logreg", "--selector-data", str(one),
                   "--no-track", timeout=60), str(one), "only", tmp_path=tmp_path)


def test_pipeline_check_plan_api(tmp_path):
    from personalign.errors import ConfigurationError, DataError
    from personalign.runners.pipeline import check_plan

    kw = dict(extractor="first-person", verifier="minilm-logreg", selector="zero-shot", selector_data=None)
    with pytest.raises(ConfigurationError, match="more than once"):
        check_plan(["pipeline", "no-profile", "pipeline"], **kw)
    with pytest.raises(DataError, match="only"):
        check_plan(["pipeline"], **{**kw, "selector_data": _one_class(tmp_path)})
    check_plan(["pipeline", "no-profile"], **{**kw, "selector_data": DEMO})
