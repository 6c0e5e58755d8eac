"""Shared helpers for benchmark scripts (each script prints exactly one JSON object on stdout)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def shared_data() -> Path:
    """``../shared/data`` beside the project root (or PERSONALIGN_SHARED_DATA)."""
    env = os.environ.get("PERSONALIGN_SHARED_DATA")
    return Path(env) if env else ROOT.parent / "shared" / "data"


_T0 = time.perf_counter()


def log(msg: str) -> None:
    """Progress on stderr, stamped with the seconds since the benchmark started (stdout carries
    only the JSON object)."""
    sys.stderr.write(f"[{time.perf_counter() - _T0:7.1f}s] {msg}\n")
    sys.stderr.flush()


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def usage_error(message: str) -> None:
    """A bad flag: one ``error:`` line on stderr, exit code 2, nothing on stdout."""
    sys.stderr.write(f"error: {message}\n")
    raise SystemExit(2)


def quiet_logs() -> None:
    import logging

    for name in ("LiteLLM", "litellm", "dspy", "httpx"):
        logging.getLogger(name).setLevel(logging.ERROR)


def run_on_prefeval(benchmark: str, data: str | None, work) -> int:
    """Run ``work(root)`` on the PrefEval root ``data`` (default ``shared_data()/prefeval``; absent:
    a ``skipped`` object) and emit its dict; an input error (PersonalignError) is one ``error:``
    line on stderr and exit code 2, nothing on stdout. Returns the exit code."""
    root = Path(data) if data else shared_data() / "prefeval"
    if data is None and not root.is_dir():
        emit({"benchmark": benchmark, "skipped": f"PrefEval not found at {root}"})
        return 0
    from personalign.errors import PersonalignError, find_personalign_error

    try:
        out = work(root)
    except Exception as exc:  # noqa: BLE001 -- input errors: one line, exit 2
        ours = exc if isinstance(exc, PersonalignError) else find_personalign_error(exc)
        if ours is None:
            raise
        sys.stderr.write(f"error: {ours}\n")
        return 2
    emit(out)
    return 0


def judge_reports(paths, lm: str, pairwise_strategy: str) -> dict:
    """The ``violation`` / ``pairwise`` reports of ``--judge-report`` files (``benchmarks/judges.py``
    output), each with its ``source`` and ``n_questions``. A pairwise report of another strategy
    than ``pairwise_strategy`` is skipped: it does not validate this one.

    Raises:
        ConfigurationError: an unreadable file, or not a ``benchmarks/judges.py`` report of ``lm``.
    """
    from personalign.errors import ConfigurationError

    out = {}
    for path in paths:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigurationError(f"--judge-report {path}: {exc}") from None
        if not isinstance(data, dict) or data.get("benchmark") != "judges" or data.get("lm") != lm:
            got = data if not isinstance(data, dict) else {k: data.get(k) for k in ("benchmark", "lm")}
            raise ConfigurationError(f"--judge-report {path}: not a benchmarks/judges.py report of {lm} ({got!r})")
        for name in ("violation", "pairwise"):
            rep = data.get(name)
            if not isinstance(rep, dict):
                continue
            if name == "pairwise" and rep.get("judge") != f"pairwise:{pairwise_strategy}":
                continue
            out[name] = {**rep, "source": str(path), "n_questions": data.get("n_pairs")}
    return out


RESULTS = ROOT / "benchmarks" / "results"


def write_results(name: str, figures: list[dict], *, title: str | None = None, command: str | None = None,
                  model: str | None = None, adapter: str | None = None, sampler: dict | None = None,
                  data=None, data_sha256: str | None = None, resampling: dict | None = None,
                  stage: str | None = None, extra: dict | None = None, out_dir=None,
                  measures: list[str] | None = None) -> dict:
    """Write ``benchmarks/results/<name>.json`` in the run-record format (:mod:`personalign.record`:
    command, git commit, versions, model sha256, data sha256, resampling, figures) atomically; return
    the record written. ``name``: the file stem (lower-case letters, digits, hyphens); ``figures``:
    :func:`personalign.record.figure` dicts; ``measures``: the code the figures measure (git
    pathspecs; default :data:`personalign.record.MEASURES`), the running benchmark script added
    (the results page marks the record stale once a later commit changes any of it).

    Raises:
        ValueError: a malformed figure or record (nothing is written)."""
    from personalign.record import MEASURES, run_record, write_record

    script = Path(sys.argv[0]).resolve()
    own = [script.relative_to(ROOT).as_posix()] if script.parent == ROOT / "benchmarks" else []
    record = run_record(name, figures, title=title, command=command, model=model, adapter=adapter, sampler=sampler,
                        data=data, data_sha256=data_sha256, resampling=resampling, stage=stage, extra=extra,
                        measures=[*(measures or MEASURES), *own])
    write_record(Path(out_dir or RESULTS) / f"{name}.json", record)
    return record


def compare_groups(stage: str, strategies: str, data, *, save, **kwargs) -> dict:
    """``personalign.compare(stage, strategies, data, cv="groups", **kwargs)`` as its JSON, calling
    ``save(result)`` after each strategy (a partial result, ``"complete": false``) and at the end."""
    import personalign
    from personalign.tracking import RunCallback

    class Save(RunCallback):
        def on_partial(self, run, result):
            save(result)

    result = personalign.compare(stage, strategies, data, cv="groups", callbacks=[Save()], **kwargs).to_dict()
    save(result)
    return result


def write_cv_results(name: str, result: dict, *, title: str, command: str, stage: str) -> dict:
    """Write a leave-one-group-out compare result (``personalign.compare(..., cv="groups")``,
    partial or complete) as ``benchmarks/results/<name>.json``: its figures and resampling from
    :func:`personalign.results.result_record`, ``extra`` gaining the groups, the per-strategy
    rows without predictions and ``complete``. Returns the record written."""
    from personalign.results import result_record

    rec = result_record({**result, "uses_lm": bool(result.get("lm"))}, command=command)
    rows = [{k: v for k, v in r.items() if k != "predictions"} for r in result["strategies"]]
    extra = {**rec["extra"], "groups": result["groups"], "strategies": rows, "complete": bool(result.get("complete"))}
    record = write_results(name, rec["figures"], title=title, command=command, model=result.get("lm"),
                           adapter=rec["adapter"], data=result["data"], data_sha256=result["data_sha256"],
                           resampling=rec["resampling"], stage=stage, extra=extra)
    log(f"{len(rows)} strategies written to benchmarks/results/{name}.json")
    return record
