"""Saved programs of any stage: JSON state + metadata + weight files, never pickle.

Layout: a directory with ``program.json``
``{"stage", "strategy", "state": <program.dump_state()>, "lm", "compile", "data", "data_sha256",
"metrics", "versions"}`` and, for a program compiled with a decision rule, ``"decision_rule"``
(:mod:`personalign.programs._decision`; reapplied on load) plus the strategy's weight files written by its ``save_weights(dir)``
(npz with ``allow_pickle=False`` or safetensors). :func:`load_program` rebuilds the strategy from
its stage's registry and loads the state: a fresh process needs no original Python objects.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from personalign.errors import ConfigurationError

PROGRAM_FILE = "program.json"


def package_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("personalign", "dspy", "litellm", "scikit-learn", "sentence-transformers", "numpy"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


def save_program(program, directory: str | Path, *, stage: str, strategy: str, lm: str | None = None,
                 compile_info: dict | None = None, metrics: dict | None = None) -> Path:
    """Save ``program`` as ``directory/program.json`` plus its weight files; returns the directory.

    ``program.json`` is written last and atomically (tmp + rename), so a directory without it is
    an unfinished save.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    rule = getattr(program, "decision_rule", None)  # a compiled decision rule wraps the strategy
    program = getattr(program, "undecided", program)
    if hasattr(program, "save_weights") and getattr(program, "fitted", True):
        program.save_weights(directory)
    meta: dict[str, Any] = {"stage": stage, "strategy": strategy, "state": program.dump_state(), "lm": lm,
                            "compile": compile_info, "metrics": metrics, "versions": package_versions()}
    if rule is not None:
        meta["decision_rule"] = rule
    data = (compile_info or {}).get("data")
    if data and Path(data).exists():
        from personalign.compare import file_sha256

        meta["data"], meta["data_sha256"] = data, file_sha256(data)
    tmp = directory / (PROGRAM_FILE + ".tmp")
    tmp.write_text(json.dumps(meta, indent=2, default=str))
    tmp.replace(directory / PROGRAM_FILE)
    return directory


def read_metadata(directory: str | Path) -> tuple[Path, dict[str, Any]]:
    """``(path of program.json, its metadata)``.

    Raises:
        ConfigurationError: no program.json, invalid JSON, or no stage/strategy in it.
    """
    directory = Path(directory)
    path = directory / PROGRAM_FILE if directory.is_dir() else directory
    if not path.exists():
        raise ConfigurationError(f"no saved program at {path}")
    try:
        meta = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(meta, dict) or "strategy" not in meta:
        raise ConfigurationError(f"{path} is not a saved personalign program (no 'strategy')")
    meta.setdefault("stage", "relevance")
    return path, meta


def load_program(directory: str | Path, *, stage: str | None = None):
    """Load a program saved by :func:`save_program`. Returns ``(program, metadata dict)``.

    Raises:
        ConfigurationError: not a saved program, a program of another stage than ``stage``, or an
            unknown stage/strategy.
    """
    from personalign.stages import get_stage

    path, meta = read_metadata(directory)
    if stage is not None and meta["stage"] != stage:
        raise ConfigurationError(f"{path} is a saved {meta['stage']} program, not a {stage} program")
    registry = get_stage(meta["stage"]).registry
    program = registry.create(meta["strategy"])
    program.load_state(meta.get("state") or {})
    if hasattr(program, "load_weights") and (meta.get("state") or {}).get("fitted", True):
        program.load_weights(path.parent)
    if meta.get("decision_rule"):
        from personalign.programs._decision import with_rule

        st = get_stage(meta["stage"])
        program = with_rule(program, meta["decision_rule"], st.output, st.group_key)
    return program, meta


__all__ = ["PROGRAM_FILE", "load_program", "package_versions", "read_metadata", "save_program"]
