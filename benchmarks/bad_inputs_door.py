"""Issue 28's "at the door" cases for ``bad_inputs.py``: saved programs that try to choose the LM,
``PERSONALIGN_*`` values out of bounds, model files that are not model files, I/O errors on inputs,
empty attributes, ``ui`` flags, pipeline plans refused before model work.

Each ``build(case_dir)`` returns an argv (after ``python -m personalign``) or a dict ``{"argv",
"env" (extra variables), "prefix" (a command the CLI runs under, e.g. a read-only mount)}``.
Saved-program cases set ``OPENAI_API_BASE`` to a closed loopback port: a program that got through
would fail to connect (a traceback or a non-2 exit), never reach a network.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

EIO = "/proc/self/mem"  # a regular file whose read fails with EIO
DEAD_ENDPOINT = "http://127.0.0.1:9/v1"  # the discard port: nothing answers


def _zero_shot(d: Path, mutate) -> str:
    """A saved relevance zero-shot program, then ``mutate(doc)`` applied to its program.json."""
    from personalign.stages import resolve_stage
    STRATEGIES = resolve_stage("relevance").registry
    from personalign.programs.saved import PROGRAM_FILE, save_program

    target = save_program(STRATEGIES.create("zero-shot"), d / "prog", stage="relevance", strategy="zero-shot",
                          lm="local/smollm2-135m-instruct")
    doc = json.loads((target / PROGRAM_FILE).read_text())
    mutate(doc)
    (target / PROGRAM_FILE).write_text(json.dumps(doc))
    return str(target)


def _predictor(doc: dict) -> dict:
    return next(doc[k] for k in doc["metadata"]["personalign"]["state_keys"]
                if isinstance(doc[k], dict) and "signature" in doc[k])


LM_STATE = {"model": "openai/gpt-4o-mini", "api_base": DEAD_ENDPOINT, "extra_headers": {"X-Exfil": "1"}}
PROGRAM_ATTACKS = {
    "lm": lambda doc: _predictor(doc).__setitem__("lm", LM_STATE),
    "_dspy_lm_class": lambda doc: _predictor(doc).__setitem__("lm", {**LM_STATE, "_dspy_lm_class": "x.Y"}),
    "extra_headers": lambda doc: _predictor(doc).__setitem__("extra_headers", {"X-Exfil": "1"}),
    "config": lambda doc: _predictor(doc).__setitem__("config", {"api_base": DEAD_ENDPOINT}),
    "callbacks": lambda doc: _predictor(doc).__setitem__("callbacks", ["os.system"]),
    "top-level lm": lambda doc: doc.__setitem__("lm", LM_STATE),
    "remote metadata lm": lambda doc: doc["metadata"]["personalign"].__setitem__("lm", "openai/gpt-4o-mini"),
    "unknown metadata key": lambda doc: doc["metadata"]["personalign"].__setitem__("lm_class", "dspy.LM"),
    "stage_ref not passed": lambda doc: doc["metadata"]["personalign"].__setitem__("stage_ref", "stages.py:S"),
}


def _read_only_prefix(path: Path) -> tuple[str, ...]:
    """Run the CLI with ``path`` read-only (a bind mount in a private mount namespace as root)."""
    if os.geteuid() != 0:
        path.chmod(0o555)
        return ()
    return ("unshare", "-m", "sh", "-c", f"mount --bind -o ro '{path}' '{path}' && exec \"$0\" \"$@\"")


def _can_read_only() -> bool:
    if os.geteuid() != 0:
        return True
    if not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


def door_cases(demo: str, one_class) -> list[tuple[str, object]]:
    """(name, build) of every case of issue 28 part A; ``one_class(d)`` writes one-class labels."""
    out: list[tuple[str, object]] = []
    for name, mutate in PROGRAM_ATTACKS.items():
        out.append((f"eval program carrying {name}", lambda d, m=mutate: {
            "argv": ["eval", "relevance", "--program", _zero_shot(d, m), "--data", demo, "--no-track"],
            "env": {"OPENAI_API_BASE": DEAD_ENDPOINT, "OPENAI_API_KEY": "sk-bad-inputs"}}))
    out.append(("predict program carrying lm", lambda d: {
        "argv": ["predict", "relevance", "--prompt", "hi", "-a", "x", "--program",
                 _zero_shot(d, PROGRAM_ATTACKS["lm"]), "--lm", "local/smollm2-135m-instruct"],
        "env": {"OPENAI_API_BASE": DEAD_ENDPOINT, "OPENAI_API_KEY": "sk-bad-inputs"}}))
    compare = ["compare", "relevance", "--data", demo, "--strategies", "bm25", "--no-track"]
    for var, value in (("N_CTX", "abc"), ("N_CTX", "0"), ("N_CTX", "16"), ("THREADS", "abc"), ("THREADS", "0"),
                       ("SEED", "abc"), ("SEED", "-1"), ("MAX_TRACES", "abc"), ("KV_REUSE", "maybe")):
        out.append((f"env PERSONALIGN_{var}={value}", lambda d, k=var, v=value: {
            "argv": compare, "env": {f"PERSONALIGN_{k}": v}}))
    def runs_file(d):
        (d / "f.txt").write_text("x")
        return {"argv": compare, "env": {"PERSONALIGN_RUNS_DIR": str(d / "f.txt")}}

    out.append(("env PERSONALIGN_RUNS_DIR is a file", runs_file))
    if _can_read_only():
        def ro_runs(d):
            (d / "ro").mkdir()
            return {"argv": compare, "env": {"PERSONALIGN_RUNS_DIR": str(d / "ro")}, "prefix": _read_only_prefix(d / "ro")}
        out.append(("env PERSONALIGN_RUNS_DIR read-only", ro_runs))
    var = "PERSONALIGN_GGUF_QWEN2_5_CODER_0_5B_INSTRUCT"
    predict_lm = ["predict", "relevance", "--prompt", "hi", "-a", "x", "--strategy", "zero-shot", "--lm",
                  "local/qwen2.5-coder-0.5b-instruct"]

    def fifo_model(d):
        os.mkfifo(d / "m.gguf")
        return {"argv": predict_lm, "env": {var: str(d / "m.gguf")}}

    def dir_model(d):
        (d / "m.gguf").mkdir()
        return {"argv": predict_lm, "env": {var: str(d / "m.gguf")}}

    out += [("model file is a FIFO", fifo_model), ("model file is a directory", dir_model),
            ("model file is /dev/zero", lambda d: {"argv": predict_lm, "env": {var: "/dev/zero"}})]
    if os.path.exists(EIO):
        out += [
            ("data validate EIO", lambda d: ["data", "validate", EIO, "--kind", "relevance"]),
            ("data stats EIO", lambda d: ["data", "stats", EIO, "--kind", "relevance"]),
            ("data validate EIO json", lambda d: ["data", "validate", EIO, "--kind", "prefeval-mcq"]),
            ("compare --data EIO", lambda d: ["compare", "relevance", "--data", EIO, "--strategies", "bm25"]),
            ("compile --data EIO", lambda d: ["compile", "relevance", "--strategy", "bm25", "--data", EIO]),
            ("predict --attributes-file EIO", lambda d: ["predict", "relevance", "--prompt", "hi",
                                                         "--attributes-file", EIO]),
        ]
    out += [
        ("predict empty attribute", lambda d: ["predict", "relevance", "--prompt", "hi", "-a", "", "-a", "x"]),
        ("predict blank attribute", lambda d: ["predict", "relevance", "--prompt", "hi", "-a", "   "]),
    ]
    for port in ("0", "70000", "abc"):
        out.append((f"ui --port {port}", lambda d, p=port: ["ui", "--port", p]))

    def text_file(d):
        (d / "notes.txt").write_text("not a database\n")
        return str(d / "notes.txt")

    out += [
        ("ui --tracking-uri foo://bar", lambda d: ["ui", "--tracking-uri", "foo://bar"]),
        ("ui --tracking-uri non-database file", lambda d: ["ui", "--tracking-uri", f"sqlite:///{text_file(d)}"]),
        ("ui --tracking-uri /nonexistent/dir", lambda d: ["ui", "--tracking-uri", "/nonexistent/dir"]),
        ("run pipeline duplicate conditions", lambda d: ["run", "pipeline", str(d), "--conditions",
                                                         "no-profile,no-profile", "--no-track"]),
        ("run pipeline one-class selector-data", lambda d: ["run", "pipeline", str(d), "--selector", "minilm-logreg",
                                                            "--selector-data", one_class(d), "--no-track"]),
    ]
    return out


__all__ = ["door_cases"]
