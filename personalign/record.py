"""The run record: one format for every results file and MLflow run.

A figure is only as good as what it says about how it was made. Every
``benchmarks/results/<name>.json``, every ``compare`` result (``runs/compare/*.json``, under
``"run_record"``) and every tracked MLflow run (tags ``personalign.*``) records::

    {"name": str, "title": str, "command": str, "git_commit": str, "date": ISO-8601 str,
     "machine": {"cpu_count": int, "platform": str},
     "versions": {"personalign", "dspy", "optuna", "mlflow", "litellm", "llama_cpp_python": str},
     "model": {"name": str|None, "sha256": str|None}, "adapter": str|None, "sampler": {...}|None,
     "data": {"path": str, "sha256": str}|None,
     "resampling": {"unit": str, "n_clusters": int, "n_boot": int}|None, "stage": str|None,
     "measures": [str],   # git pathspecs of the code the figures measure (default: MEASURES)
     "figures": [{"key", "label", "strategy", "metric", "value", "ci": [lo, hi]|None, "n", "note"}],
     "extra": {...}}

Versions come from ``importlib.metadata`` (``"not installed"`` when absent); the model's sha256
is the pinned digest of the embedded model registry (:data:`personalign.lm.MODELS`; nothing is
re-hashed), None for other models; the command holds no secret (keys, tokens, header values and
URL passwords are ``***``: :func:`personalign.redaction.redact`); the data sha256 is
:func:`personalign.data.digest.file_sha256`. :func:`write_record` validates, then writes
atomically (tmp + rename): a bad record raises ``ValueError`` naming the key and writes nothing.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import uuid
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Sequence

from personalign.redaction import redact

PACKAGES = {"personalign": "personalign", "dspy": "dspy", "optuna": "optuna", "mlflow": "mlflow",
            "litellm": "litellm", "llama_cpp_python": "llama-cpp-python"}
"""Record key -> distribution name of the versions every record carries."""

NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
"""A record's name: its file stem and its anchor on the results page (benchmarks/report.py)."""
KEYS = ("name", "title", "command", "git_commit", "date", "machine", "versions", "model", "adapter", "sampler",
        "data", "resampling", "stage", "measures", "figures", "extra")
MEASURES = ("personalign", ":(exclude)personalign/cli", ":(exclude)personalign/results_page")
"""The code a record measures unless it names its own (``measures``, git pathspecs from the project
root): the package but its command line and results page, which change no figure. A record is
stale once a later commit changes them (``benchmarks/report.py``); a record written before
``measures`` existed is read with this default."""
FIGURE_KEYS = ("key", "label", "strategy", "metric", "value", "ci", "n", "note")


def slug(text: str) -> str:
    """``text`` as a record name: lower case, runs of other characters as single hyphens (``"x"`` if none left)."""
    return re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-") or "x"


def group_noun(group_key: str) -> str:
    """The unit a group key names, for labels: ``"prompt_id"`` -> ``"prompt"``."""
    return group_key.removesuffix("_id") or group_key


def plural(noun: str) -> str:
    """English plural of a group noun, for labels: ``"prompt"`` -> ``"prompts"``, ``"family"`` ->
    ``"families"``, ``"class"`` -> ``"classes"``."""
    if noun.endswith("y") and noun[-2:-1] not in tuple("aeiou"):
        return noun[:-1] + "ies"
    return noun + ("es" if noun.endswith(("s", "x", "z", "ch", "sh")) else "s")


def cv_tag(group_key: str) -> str:
    """Figure-key tag of leave-one-``group_key``-out: ``"prompt_id"`` -> ``"lopo"``, ``"topic"`` -> ``"loto"``."""
    return "lo" + "".join(w[0] for w in group_noun(group_key).split("_") if w) + "o"


def versions() -> dict[str, str]:
    """Installed versions of :data:`PACKAGES` (``"not installed"`` for a missing one)."""
    out = {}
    for key, dist in PACKAGES.items():
        try:
            out[key] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[key] = "not installed"
    return out


@functools.lru_cache(maxsize=None)
def git_commit(root: str | os.PathLike | None = None) -> str:
    """``git rev-parse HEAD`` of the source tree (``+dirty`` when it has uncommitted changes outside
    ``benchmarks/results/``, which results files themselves change; ``"unknown"`` outside a git
    checkout or without git). Read once per process: a long run records the commit it first asked
    for (commands call it when they start), not one made while it ran."""
    cwd = Path(root) if root else Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":(exclude)benchmarks/results"], cwd=cwd, capture_output=True, text=True, timeout=10)
        return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def machine() -> dict[str, Any]:
    return {"cpu_count": os.cpu_count() or 1, "platform": platform.platform()}


def model_info(model: str | None) -> dict[str, Any] | None:
    """``{"name", "sha256"}`` of a model string: the pinned digest of an embedded split model
    (:data:`personalign.lm.MODELS`), else None (not hashed here). None for no model."""
    if not model:
        return None
    from personalign.lm import MODELS

    name = model.split("/", 1)[1] if model.startswith("local/") else None
    spec = MODELS.get(name) if name else None
    split = getattr(spec, "split", None)
    return {"name": model, "sha256": split.sha256 if split is not None else None}


def data_info(path: str | os.PathLike | None, sha256: str | None = None) -> dict[str, str] | None:
    """``{"path", "sha256"}`` of a data file or folder (``sha256`` given: not re-hashed)."""
    if path is None:
        return None
    from personalign.data.digest import file_sha256

    return {"path": str(path), "sha256": sha256 or file_sha256(path)}


def figure(key: str, label: str, value: float, *, metric: str, strategy: str | None = None,
           ci: Sequence[float] | None = None, n: int | None = None, note: str | None = None) -> dict[str, Any]:
    """One figure of a record (see the module docstring); ``ci`` is ``[low, high]`` or None.

    Raises:
        ValueError: a non-finite value or a malformed ``ci``."""
    out = {"key": key, "label": label, "strategy": strategy, "metric": metric, "value": value,
           "ci": None if ci is None else [float(ci[0]), float(ci[1])], "n": n, "note": note}
    _check_figure(out, 0)
    return out


def _check_figure(f: Any, i: int) -> None:
    import math

    if not isinstance(f, dict):
        raise ValueError(f"figures[{i}]: not an object")
    missing = [k for k in FIGURE_KEYS if k not in f]
    if missing:
        raise ValueError(f"figures[{i}]: missing key(s) {', '.join(missing)}")
    for k in ("key", "label", "metric"):
        if not isinstance(f[k], str) or not f[k]:
            raise ValueError(f"figures[{i}].{k}: must be a non-empty string, got {f[k]!r}")
    if not isinstance(f["value"], (int, float)) or isinstance(f["value"], bool) or not math.isfinite(f["value"]):
        raise ValueError(f"figures[{i}].value ({f['key']}): must be a finite number, got {f['value']!r}")
    ci = f["ci"]
    if ci is not None and (len(ci) != 2 or not all(isinstance(c, (int, float)) and math.isfinite(c) for c in ci)
                           or ci[0] > ci[1]):
        raise ValueError(f"figures[{i}].ci ({f['key']}): must be [low, high] with low <= high, got {ci!r}")
    if f["n"] is not None and (not isinstance(f["n"], int) or f["n"] < 0):
        raise ValueError(f"figures[{i}].n ({f['key']}): must be a count, got {f['n']!r}")


def validate(record: dict) -> None:
    """Check a record against the format (``measures`` may be absent: a record older than it).

    Raises:
        ValueError: a missing or malformed key (named), or two figures with the same key."""
    if not isinstance(record, dict):
        raise ValueError("run record: not an object")
    missing = [k for k in KEYS if k not in record and k != "measures"]  # measures: absent in older records
    if missing:
        raise ValueError(f"run record: missing key(s) {', '.join(missing)}")
    for k in ("name", "title", "command", "git_commit", "date"):
        if not isinstance(record[k], str) or not record[k]:
            raise ValueError(f"run record: {k} must be a non-empty string, got {record[k]!r}")
    if not NAME.match(record["name"]):
        raise ValueError(f"run record: name {record['name']!r} must be lower-case letters, digits and single hyphens "
                         "(the record's anchor in docs/results.md)")
    if set(record["versions"]) != set(PACKAGES):
        raise ValueError(f"run record: versions must name {', '.join(PACKAGES)}")
    if not isinstance(record["figures"], list):
        raise ValueError("run record: figures must be a list")
    seen: set[str] = set()
    for i, f in enumerate(record["figures"]):
        _check_figure(f, i)
        if f["key"] in seen:
            raise ValueError(f"figures[{i}].key: '{f['key']}' appears twice")
        seen.add(f["key"])
    spec = record.get("measures", MEASURES)
    if not (isinstance(spec, (list, tuple)) and spec and all(isinstance(p, str) and p for p in spec)):
        raise ValueError(f"run record: measures must be a non-empty list of paths, got {spec!r}")
    res = record["resampling"]
    if res is not None and not ({"unit", "n_clusters", "n_boot"} <= set(res)):
        raise ValueError("run record: resampling must have unit, n_clusters and n_boot")


def run_record(name: str, figures: Sequence[dict], *, title: str | None = None, command: str | None = None,
               model: str | None = None, adapter: str | None = None, sampler: dict | None = None,
               data: str | os.PathLike | None = None, data_sha256: str | None = None,
               resampling: dict | None = None, stage: str | None = None, extra: dict | None = None,
               measures: Sequence[str] | None = None) -> dict[str, Any]:
    """A validated run record (``command`` default: this process's argv, shell-quoted; either way
    with its secrets -- keys, tokens, headers, URL passwords -- as ``***``:
    :func:`personalign.redaction.redact`; ``measures`` default: :data:`MEASURES`).

    Raises:
        ValueError: a malformed figure or field (:func:`validate`)."""
    command = redact(command) if command else shlex.join(redact([Path(sys.argv[0]).name, *sys.argv[1:]]))
    record = {"name": name, "title": title or name, "command": command,
              "git_commit": git_commit(), "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "machine": machine(), "versions": versions(), "model": model_info(model) or {"name": None, "sha256": None},
              "adapter": adapter, "sampler": sampler, "data": data_info(data, data_sha256),
              "resampling": resampling, "stage": stage, "measures": list(measures or MEASURES), "figures": list(figures),
              "extra": extra or {}}
    validate(record)
    return record


def write_record(path: str | os.PathLike, record: dict) -> Path:
    """Validate ``record`` and write it as JSON at ``path`` (whose stem must be the record's name)
    atomically; return the path.

    Raises:
        ValueError: the record is malformed or its name is not the file's stem (nothing is written)."""
    validate(record)
    if Path(path).stem != record["name"]:
        raise ValueError(f"run record: name {record['name']!r} differs from the file name {Path(path).stem!r}")
    return write_json(path, record)


def write_json(path: str | os.PathLike, obj: Any) -> Path:
    """Write ``obj`` as indented JSON at ``path`` atomically (tmp file + rename); return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    from personalign.data.strict_json import dumps  # no NaN/Infinity literal: null, listed

    tmp.write_text(dumps(obj, indent=2, default=str) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def mlflow_tags(record: dict) -> dict[str, str]:
    """The record's provenance as flat MLflow tags ``personalign.<key>`` (figures are metrics, not
    tags); the command redacted (:func:`personalign.redaction.redact`) before it is cut to 5000 characters."""
    tags = {"personalign.command": redact(record["command"])[:5000], "personalign.git_commit": record["git_commit"],
            "personalign.model": str((record.get("model") or {}).get("name")),
            "personalign.model_sha256": str((record.get("model") or {}).get("sha256")),
            "personalign.adapter": str(record.get("adapter")),
            "personalign.sampler": json.dumps(record.get("sampler"), default=str),
            "personalign.data_sha256": str((record.get("data") or {}).get("sha256")),
            "personalign.resampling": json.dumps(record.get("resampling"), default=str)}
    tags.update({f"personalign.version.{k}": v for k, v in record["versions"].items()})
    return tags


__all__ = ["PACKAGES", "MEASURES", "slug", "group_noun", "plural", "cv_tag", "versions", "git_commit", "machine", "model_info", "data_info", "figure", "validate",
           "run_record", "write_record", "write_json", "mlflow_tags"]
