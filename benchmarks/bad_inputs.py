"""Malformed inputs across every command, as a hostile user would try them; prints one JSON object.

Each case runs ``python -m personalign ...`` in its own temp directory (its own runs/, cwd) with a
60 s timeout and is classified:

* clean: exit 2, exactly one stderr line starting ``error:``, and nothing written (no runs/, no
  cache, no new file anywhere in the case directory);
* traceback: a Python traceback or an exit code other than 0/2;
* wrong_success: exit 0;
* hang: the timeout expired;
* unclean: exit 2 but more than one line, or something was written.

Strategies that need no LM (bm25, minilm-logreg) keep it fast. Usage:
``python benchmarks/bad_inputs.py [--workers 2] [--only SUBSTRING]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _common import ROOT, emit

DEMO = ROOT / "examples" / "relevance_demo.jsonl"
BAD = ROOT / "tests" / "fixtures" / "bad"
TIMEOUT = 60
ROOT_USER = os.geteuid() == 0

# fixture file -> --kind (the malformed-file corpus of tests/data/test_data_bad_inputs.py)
FIXTURE_KINDS = {
    "relevance_truncated_line.jsonl": "relevance", "relevance_missing_field.jsonl": "relevance",
    "relevance_wrong_type.jsonl": "relevance", "relevance_label_out_of_range.jsonl": "relevance",
    "empty.jsonl": "relevance", "relevance_non_utf8.jsonl": "relevance", "relevance_duplicate_ids.jsonl": "relevance",
    "relevance_not_an_object.jsonl": "relevance", "relevance_rate_contradicts_label.jsonl": "relevance",
    "canonical_relevance_int_label.jsonl": "relevance", "canonical_mcq_gold_out_of_range.jsonl": "mcq",
    "canonical_verification_unknown_field.jsonl": "verification", "canonical_rating_out_of_scale.jsonl": "rating",
    "recenter_raw_bad_vote.jsonl": "recenter-raw", "prefeval_mcq_three_options.json": "prefeval-mcq",
    "prefeval_persona_missing_turn_field.json": "prefeval-persona",
    "prefeval_choice_aligned_not_an_option.json": "prefeval-choice", "cupid_bad_role.jsonl": "cupid",
    "cupid_empty_array.json": "cupid", "personamem_wrong_header/questions_32k.csv": "personamem",
    "personamem_missing_contexts/questions_32k.csv": "personamem",
    "personamem_bad_answer/questions_32k.csv": "personamem",
}


# --- inputs built in each case directory ---------------------------------------------------------

def _write(d: Path, name: str, content: bytes | str) -> str:
    p = d / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(content if isinstance(content, bytes) else content.encode())
    return str(p)


def _fifo(d: Path, name: str) -> str:
    p = d / name
    os.mkfifo(p)
    return str(p)


def _one_class(d: Path, splits: tuple[str, ...] = ("train",)) -> str:
    """The demo data with every row of ``splits`` labelled relevant."""
    lines = [json.loads(x) for x in DEMO.read_text().splitlines() if x.strip()]
    for r in lines:
        if r["split"] in splits:
            r["relevant"] = True
    return _write(d, "one_class.jsonl", "".join(json.dumps(r) + "\n" for r in lines))


def _program(d: Path, mutate=None, weights=None, name: str = "prog") -> str:
    """A saved minilm-logreg (fake weights, no MiniLM needed), then damaged by ``mutate(doc)`` /
    ``weights(dir)``."""
    import numpy as np

    from personalign.programs.saved import PROGRAM_FILE, save_program
    from personalign.programs.common.logistic import LogisticHead
    from personalign.stages import resolve_stage
    STRATEGIES = resolve_stage("relevance").registry

    n = 384 * 3 + 1
    program = STRATEGIES.create("minilm-logreg")
    program.head = LogisticHead.from_arrays(coef=np.ones(n) * 0.01, intercept=np.asarray(0.0), mean=np.zeros(n),
                                            scale=np.ones(n))
    program.threshold = 0.5
    target = save_program(program, d / name, stage="relevance", strategy="minilm-logreg")
    if mutate is not None:
        doc = json.loads((target / PROGRAM_FILE).read_text())
        mutate(doc)
        (target / PROGRAM_FILE).write_text(json.dumps(doc))
    if weights is not None:
        weights(target)
    return str(target)


def _unhashed(fn):
    """Replace the weights with ``fn(arrays)`` and drop their sha256 list (so the array checks run)."""
    def apply(target: Path):
        import numpy as np

        with np.load(target / "minilm_logreg.npz") as z:
            arrays = {k: z[k] for k in z.files}
        np.savez(target / "minilm_logreg.npz", **fn(arrays))
        doc = json.loads((target / "program.json").read_text())
        doc["metadata"]["personalign"]["weights"] = {}
        (target / "program.json").write_text(json.dumps(doc))
    return apply


def _setitem(key, value):
    return lambda doc: doc.__setitem__(key, value)


def cases() -> list[tuple[str, object]]:
    """(name, build) where ``build(case_dir) -> argv`` (after ``python -m personalign``)."""
    import numpy as np

    demo = str(DEMO)
    huge = '{"id": ' + "9" * 5000 + "}\n"
    deep = "[" * 100_000 + "]" * 100_000 + "\n"
    out: list[tuple[str, object]] = []
    for fixture, kind in FIXTURE_KINDS.items():
        out.append((f"data validate {fixture}", lambda d, f=fixture, k=kind: ["data", "validate", str(BAD / f), "--kind", k]))
    out += [
        ("data validate missing", lambda d: ["data", "validate", str(d / "nope.jsonl"), "--kind", "relevance"]),
        ("data validate directory", lambda d: ["data", "validate", str(d), "--kind", "relevance"]),
        ("data validate fifo", lambda d: ["data", "validate", _fifo(d, "p.jsonl"), "--kind", "relevance"]),
        ("data validate fifo json", lambda d: ["data", "validate", _fifo(d, "p.json"), "--kind", "prefeval-explicit"]),
        ("data stats fifo csv", lambda d: ["data", "stats", _fifo(d, "questions_32k.csv"), "--kind", "personamem"]),
        ("data validate /dev/zero", lambda d: ["data", "validate", "/dev/zero", "--kind", "relevance"]),
        ("data validate huge int", lambda d: ["data", "validate", _write(d, "h.jsonl", huge), "--kind", "relevance"]),
        ("data validate deep nesting", lambda d: ["data", "validate", _write(d, "n.jsonl", deep), "--kind", "relevance"]),
        ("data validate deep json", lambda d: ["data", "validate", _write(d, "n.json", deep), "--kind", "prefeval-mcq"]),
        ("data validate binary", lambda d: ["data", "validate", _write(d, "b.jsonl", b"\x00\x01\xff" * 50), "--kind",
                                            "relevance"]),
        ("data stats huge int", lambda d: ["data", "stats", _write(d, "h.jsonl", huge), "--kind", "relevance"]),
        ("data validate unknown kind", lambda d: ["data", "validate", demo, "--kind", "nope"]),
        ("compare missing data", lambda d: ["compare", "relevance", "--data", str(d / "x.jsonl")]),
        ("compare fifo data", lambda d: ["compare", "relevance", "--data", _fifo(d, "p.jsonl"), "--strategies", "bm25"]),
        ("compare /dev/zero", lambda d: ["compare", "relevance", "--data", "/dev/zero", "--strategies", "bm25"]),
        ("compare huge int", lambda d: ["compare", "relevance", "--data", _write(d, "h.jsonl", huge), "--strategies",
                                        "bm25"]),
        ("compare deep nesting", lambda d: ["compare", "relevance", "--data", _write(d, "n.jsonl", deep)]),
        ("compare binary data", lambda d: ["compare", "relevance", "--data", _write(d, "b.jsonl", b"\x00" * 99)]),
        ("compare unknown stage", lambda d: ["compare", "nope", "--data", demo]),
        ("compare unknown strategy", lambda d: ["compare", "relevance", "--data", demo, "--strategies", "nope"]),
        ("compare empty strategies", lambda d: ["compare", "relevance", "--data", demo, "--strategies", ","]),
        ("compare empty lm", lambda d: ["compare", "relevance", "--data", demo, "--strategies", "zero-shot", "--lm", ""]),
        ("compare unknown split", lambda d: ["compare", "relevance", "--data", demo, "--split", "nope",
                                             "--strategies", "bm25"]),
        ("compare one-class train", lambda d: ["compare", "relevance", "--data", _one_class(d), "--strategies",
                                               "minilm-logreg"]),
        ("compare unknown optimizer", lambda d: ["compare", "relevance", "--data", demo, "--strategies", "zero-shot@x"]),
        ("compare violation empty data", lambda d: ["compare", "violation", "--data", _write(d, "e.jsonl", ""),
                                                    "--strategies", "all-no"]),
        ("run pipeline unknown extractor", lambda d: ["run", "pipeline", str(d), "--extractor", "nope", "--limit", "2"]),
        ("run pipeline unknown verifier", lambda d: ["run", "pipeline", str(d), "--verifier", "nope", "--limit", "2"]),
        ("compile out is a file", lambda d: ["compile", "relevance", "--strategy", "bm25", "--data", demo, "--out",
                                             _write(d, "f.txt", "x")]),
        ("compile out under a file", lambda d: ["compile", "relevance", "--strategy", "bm25", "--data", demo, "--out",
                                                _write(d, "f.txt", "x") + "/sub"]),
        ("compile out not empty", lambda d: ["compile", "relevance", "--strategy", "bm25", "--data", demo, "--out",
                                             str(Path(_write(d, "o/keep.txt", "x")).parent)]),
        ("compile empty lm", lambda d: ["compile", "relevance", "--strategy", "zero-shot", "--data", demo, "--lm", " "]),
        ("compile one-class train", lambda d: ["compile", "relevance", "--strategy", "minilm-logreg", "--data",
                                               _one_class(d)]),
        ("compile fifo data", lambda d: ["compile", "relevance", "--strategy", "bm25", "--data", _fifo(d, "p.jsonl")]),
        ("compile unknown strategy", lambda d: ["compile", "relevance", "--strategy", "nope", "--data", demo]),
        ("compile teleprompter on fitted", lambda d: ["compile", "relevance", "--strategy", "bm25", "--optimizer",
                                                      "bootstrap", "--data", demo]),
    ]

    def ev(name, mutate=None, weights=None, extra=()):
        out.append((f"eval {name}", lambda d: ["eval", "relevance", "--program", _program(d, mutate, weights), "--data",
                                               demo, *extra]))

    ev("nan threshold", _setitem("threshold", float("nan")))
    ev("string threshold", _setitem("threshold", "high"))
    ev("missing state key", lambda doc: doc.pop("features"))
    ev("mistyped state", _setitem("features", 7))
    ev("unknown strategy", lambda doc: doc["metadata"]["personalign"].__setitem__("strategy", "nope"))
    ev("missing weights", weights=lambda t: (t / "minilm_logreg.npz").unlink())
    ev("corrupt weights", weights=lambda t: (t / "minilm_logreg.npz").write_bytes(b"PK junk"))
    ev("pickled weights", weights=_unhashed(lambda a: {**a, "coef": np.array([object()] * len(a["coef"]))}))
    ev("wrong-shape weights", weights=_unhashed(lambda a: {**a, "coef": a["coef"][:3]}))
    ev("missing-key weights", weights=_unhashed(lambda a: {k: v for k, v in a.items() if k != "scale"}))
    ev("nan weights", weights=_unhashed(lambda a: {**a, "intercept": np.asarray(np.nan)}))
    ev("program.json not json", weights=lambda t: (t / "program.json").write_text("{not json"))
    ev("program.json binary", weights=lambda t: (t / "program.json").write_bytes(b"\x00\x9f" * 20))
    ev("program.json huge int", weights=lambda t: (t / "program.json").write_text(huge))
    ev("program.json a list", weights=lambda t: (t / "program.json").write_text("[]"))
    ev("empty lm", extra=("--lm", ""))
    out += [
        ("eval missing program", lambda d: ["eval", "relevance", "--program", str(d / "none"), "--data", demo]),
        ("eval dir without program", lambda d: ["eval", "relevance", "--program", str(Path(_write(d, "e/x", "")).parent),
                                                "--data", demo]),
        ("eval other stage", lambda d: ["eval", "verification", "--program", _program(d), "--data", demo]),
        ("predict binary attributes", lambda d: ["predict", "relevance", "--prompt", "hi", "--attributes-file",
                                                 _write(d, "a.txt", b"vegan\n\x89PNG\x00\x00")]),
        ("predict fifo attributes", lambda d: ["predict", "relevance", "--prompt", "hi", "--attributes-file",
                                               _fifo(d, "a.txt")]),
        ("predict missing attributes", lambda d: ["predict", "relevance", "--prompt", "hi", "--attributes-file",
                                                  str(d / "none.txt")]),
        ("predict no attributes", lambda d: ["predict", "relevance", "--prompt", "hi"]),
        ("predict empty lm", lambda d: ["predict", "relevance", "--prompt", "hi", "-a", "x", "--lm", ""]),
        ("predict save onto a file", lambda d: ["predict", "relevance", "--prompt", "hi", "-a", "x", "--strategy",
                                                "bm25", "--save", _write(d, "f.txt", "x")]),
        ("predict save onto foreign dir", lambda d: ["predict", "relevance", "--prompt", "hi", "-a", "x", "--strategy",
                                                     "bm25", "--save", str(Path(_write(d, "mine/n.txt", "x")).parent)]),
        ("predict one-class data", lambda d: ["predict", "relevance", "--prompt", "hi", "-a", "x", "--strategy",
                                              "minilm-logreg", "--data", _one_class(d, ("train", "val"))]),
        ("predict corrupt program", lambda d: ["predict", "relevance", "--prompt", "hi", "-a", "x", "--program",
                                               _program(d, _setitem("threshold", "x"))]),
        ("predict strategy and program", lambda d: ["predict", "relevance", "--prompt", "hi", "-a", "x", "--strategy",
                                                    "bm25", "--program", _program(d)]),
        ("sweep strategies []", lambda d: ["sweep", "relevance", "--data", demo, "--space",
                                           _write(d, "s.toml", "strategies = []\n")]),
        ("sweep strategies 5", lambda d: ["sweep", "relevance", "--data", demo, "--space",
                                          _write(d, "s.toml", "strategies = 5\n")]),
        ("sweep binary space", lambda d: ["sweep", "relevance", "--data", demo, "--space",
                                          _write(d, "s.toml", b"\x00\x01\x02")]),
        ("sweep fifo space", lambda d: ["sweep", "relevance", "--data", demo, "--space", _fifo(d, "s.toml")]),
        ("sweep unknown section", lambda d: ["sweep", "relevance", "--data", demo, "--space",
                                             _write(d, "s.toml", "strategies = ['bm25']\n[nope]\nx = 1\n")]),
        ("sweep yaml not a mapping", lambda d: ["sweep", "relevance", "--data", demo, "--space",
                                                _write(d, "s.yaml", "- a\n- b\n")]),
        ("sweep empty lm", lambda d: ["sweep", "relevance", "--data", demo, "--lm", ""]),
        ("sweep fifo data", lambda d: ["sweep", "relevance", "--data", _fifo(d, "p.jsonl")]),
        ("sweep one-class train", lambda d: ["sweep", "relevance", "--data", _one_class(d), "--space",
                                             _write(d, "s.toml", "strategies = ['minilm-logreg']\n")]),
        ("run sft-export binary questions", lambda d: ["run", "sft-export", str(d / "out.jsonl"), "--bank", demo,
                                                       "--questions", _write(d, "q.txt", b"\x00\x00")]),
        ("run sft-export out is a dir", lambda d: ["run", "sft-export", str(d), "--bank", demo, "--questions",
                                                   _write(d, "q.txt", "What should I cook?\n")]),
        ("run personamem fifo", lambda d: ["run", "personamem", _fifo(d, "questions_32k.csv")]),
        ("run prefeval-mcq missing", lambda d: ["run", "prefeval-mcq", str(d / "none")]),
        ("run judge-agreement huge int", lambda d: ["run", "judge-agreement", _write(d, "r.jsonl", huge)]),
        ("run empty lm", lambda d: ["run", "prefeval-mcq", demo, "--lm", ""]),
    ]
    from bad_inputs_door import door_cases  # issue 28 part A: programs, environment, I/O, ui, pipeline

    out += door_cases(demo, _one_class)
    if not ROOT_USER:  # root reads any file whatever its mode
        def unreadable(d):
            p = Path(_write(d, "u.jsonl", DEMO.read_text()))
            p.chmod(0)
            return ["data", "validate", str(p), "--kind", "relevance"]
        out.append(("data validate unreadable", unreadable))
    # --- sweep search-space files (issue 28): benchmarks/bad_inputs_sweep.py ---
    from bad_inputs_sweep import cases as sweep_space_cases

    out += sweep_space_cases(_write)
    return out


def _snapshot(d: Path) -> set[str]:
    return {str(p.relative_to(d)) for p in d.rglob("*")}


def run_case(name: str, build) -> dict:
    with tempfile.TemporaryDirectory(prefix="badin-") as tmp:
        d = Path(tmp)
        built = build(d)  # an argv, or {"argv", "env", "prefix"} (bad_inputs_door.py)
        argv, extra_env, prefix = ((built["argv"], built.get("env", {}), built.get("prefix", ()))
                                   if isinstance(built, dict) else (built, {}, ()))
        before = _snapshot(d)
        env = {**os.environ, "PERSONALIGN_RUNS_DIR": str(d / "runs"), "PYTHONPATH": str(ROOT), **extra_env}
        env.pop("PERSONALIGN_CACHE_DIR", None)
        env.pop("DSPY_CACHEDIR", None)
        t0 = time.perf_counter()
        try:
            proc = subprocess.run([*prefix, sys.executable, "-m", "personalign", *argv], capture_output=True, text=True,
                                  cwd=d, env=env, timeout=TIMEOUT, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return {"name": name, "outcome": "hang", "seconds": TIMEOUT}
        written = sorted(_snapshot(d) - before)
        lines = [l for l in proc.stderr.splitlines() if l.strip()]
        if proc.returncode == 0:
            outcome = "wrong_success"
        elif "Traceback" in proc.stderr or proc.returncode != 2:
            outcome = "traceback"
        elif len(lines) == 1 and lines[0].startswith("error:") and not written:
            outcome = "clean"
        else:
            outcome = "unclean"
        row = {"name": name, "outcome": outcome, "rc": proc.returncode, "seconds": round(time.perf_counter() - t0, 1)}
        if outcome != "clean":
            row["stderr"] = proc.stderr[-600:]
            row["written"] = written[:10]
        else:
            row["error"] = lines[0][:200]
        return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--only", default=None)
    args = ap.parse_args()
    table = [(n, b) for n, b in cases() if args.only is None or args.only in n]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(args.workers) as pool:
        rows = list(pool.map(lambda c: run_case(*c), table))
    counts = {k: sum(r["outcome"] == k for r in rows) for k in ("clean", "traceback", "wrong_success", "hang",
                                                                 "unclean")}
    commands = sorted({r["name"].split()[0] for r in rows})
    emit({"benchmark": "bad_inputs", "cases": len(rows), "clean": counts["clean"], "tracebacks": counts["traceback"],
          "wrong_successes": counts["wrong_success"], "hangs": counts["hang"], "unclean": counts["unclean"],
          "commands": commands, "seconds": round(time.perf_counter() - t0, 1),
          "not_clean": [r for r in rows if r["outcome"] != "clean"]})


if __name__ == "__main__":
    main()
