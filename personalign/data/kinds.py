"""Registry of data kinds for ``personalign data validate|stats PATH --kind KIND``.

Each kind names a loader (real upstream format or the project's canonical JSONL) and how to
describe one record for statistics: its label, split, group keys and text fields.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from personalign.errors import DataError

__all__ = ["KINDS", "Kind", "iter_kind", "validate", "stats"]


@dataclass(frozen=True)
class Kind:
    name: str
    help: str
    load: Callable[[str | os.PathLike], Iterable[Any]]
    describe: Callable[[Any], dict]


def _relevance(path):
    from personalign.data.recenter import iter_relevance

    return iter_relevance(path)


def _canonical(kind: str):
    def load(path):
        from personalign.data.canonical import iter_examples

        return iter_examples(path, kind)

    return load


def _prefeval(kind: str):
    def load(path):
        from personalign.data.prefeval import load_prefeval

        return load_prefeval(path, kind)

    return load


def _raw(path):
    from personalign.data.recenter import load_recenter_annotations

    return load_recenter_annotations(path)


def _personamem(path):
    from personalign.data.personamem import load_personamem

    return load_personamem(path)


def _cupid(path):
    from personalign.data.cupid import load_cupid

    return load_cupid(path)


def _d_relevance(e):
    return {"label": e.relevant, "split": e.split, "groups": {"prompt": e.prompt_id, "user": e.user_id, "topic": e.topic},
            "texts": {"attribute": e.attribute, "prompt": e.prompt}}


def _d_verification(e):
    return {"label": e.accepted, "split": e.split, "groups": {"prompt": e.prompt_id, "user": e.user_id, "topic": e.topic},
            "texts": {"attribute": e.attribute, "evidence": e.evidence}}


def _d_extraction(e):
    return {"label": None, "split": e.split, "groups": {"user": e.user_id, "topic": e.topic},
            "texts": {"conversation": "\n".join(t.content for t in e.conversation), "gold": " ".join(e.gold_attributes)},
            "turns": len(e.conversation)}


def _d_rating(e):
    return {"label": None, "labels": list(e.ratings.values()), "split": e.split,
            "groups": {"prompt": e.prompt_id, "user": e.user_id, "topic": e.topic},
            "texts": {"profile": e.profile, "prompt": e.prompt, "response_a": e.response_a, "response_b": e.response_b}}


def _d_mcq(e):
    return {"label": e.gold_index, "split": e.split, "groups": {"prompt": e.prompt_id, "user": e.user_id, "topic": e.topic},
            "texts": {"context": e.context, "question": e.question}}


def _d_profile(e):
    return {"label": None, "split": e.split, "groups": {"user": e.user_id}, "texts": {"bio": e.bio}}


def _d_prefeval(r):
    d = {"label": r.aligned_index, "split": None, "groups": {"prompt": r.prompt_id, "user": r.user_id, "topic": r.topic},
         "texts": {"preference": r.preference, "question": r.question}}
    if r.conversation:
        d["texts"]["conversation"] = "\n".join(t.content for t in r.conversation)
        d["turns"] = len(r.conversation)
    return d


def _d_raw(r):
    votes = [j.relevant for j in r.judgments if j.relevant is not None]
    return {"label": None, "labels": votes, "split": None,
            "groups": {"prompt": f"recenter:p{r.prompt_index}", "user": r.user, "annotator": r.annotator},
            "texts": {}}


def _d_cupid(c):
    return {"label": c.instance_type, "split": None, "groups": {"user": c.persona_id, "topic": c.current_context_factor},
            "texts": {"request": c.current_request, "preference": c.current_contextual_preference},
            "turns": sum(len(s.turns) for s in c.prior_sessions)}


KINDS: dict[str, Kind] = {k.name: k for k in [
    Kind("relevance", "recenter relevance_labels.jsonl or canonical relevance JSONL", _relevance, _d_relevance),
    Kind("recenter-raw", "recenter raw_task{2,3}_annotations.jsonl (per-annotator)", _raw, _d_raw),
    Kind("verification", "canonical verification JSONL", _canonical("verification"), _d_verification),
    Kind("extraction", "canonical extraction JSONL", _canonical("extraction"), _d_extraction),
    Kind("rating", "canonical preference-rating JSONL", _canonical("rating"), _d_rating),
    Kind("mcq", "canonical multiple-choice JSONL", _canonical("mcq"), _d_mcq),
    Kind("profile", "canonical profile JSONL", _canonical("profile"), _d_profile),
    Kind("prefeval-explicit", "PrefEval explicit_preference (root, folder or topic file)", _prefeval("explicit"), _d_prefeval),
    Kind("prefeval-persona", "PrefEval implicit persona-driven", _prefeval("persona"), _d_prefeval),
    Kind("prefeval-choice", "PrefEval implicit choice-based", _prefeval("choice"), _d_prefeval),
    Kind("prefeval-mcq", "PrefEval mcq_options", _prefeval("mcq"), _d_prefeval),
    Kind("personamem", "PersonaMem questions CSV (+ shared_contexts JSONL beside it)", _personamem, _d_mcq),
    Kind("cupid", "CUPID parquet / JSON / JSONL", _cupid, _d_cupid),
]}


def _kind(name: str) -> Kind:
    try:
        return KINDS[name]
    except KeyError:
        raise DataError("--kind", None, None, f"unknown kind '{name}'; choose from {', '.join(KINDS)}") from None


def iter_kind(path: str | os.PathLike, kind: str) -> Iterator[Any]:
    """Stream the records of ``path`` read as ``kind`` (raises DataError on bad input; a pipe or
    device is refused before it is opened)."""
    from personalign.data.files import check_input

    k = _kind(kind)
    yield from k.load(check_input(path, allow_dir=True))


def validate(path: str | os.PathLike, kind: str) -> int:
    """Read every record; return the count. Raises DataError on the first bad record."""
    return sum(1 for _ in iter_kind(path, kind))


def _pcts(values: list[int]) -> dict:
    a = np.asarray(values, dtype=float)
    p5, p50, p95 = np.percentile(a, [5, 50, 95])
    return {"min": int(a.min()), "p5": float(p5), "p50": float(p50), "p95": float(p95), "max": int(a.max())}


def stats(path: str | os.PathLike, kind: str) -> dict:
    """Streaming statistics of a data file.

    Returns a JSON-ready dict: ``n``; ``labels`` (value → count, for kinds with a label);
    ``label_rate`` (share of True for boolean labels); ``splits`` (name → count); ``groups``
    (key → number of distinct values); ``lengths`` (text field → min/p5/p50/p95/max in
    characters); ``turns`` percentiles where conversations exist.
    """
    k = _kind(kind)
    n = 0
    labels: dict[str, int] = {}
    bools = [0, 0]
    splits: dict[str, int] = {}
    groups: dict[str, set] = {}
    lengths: dict[str, list[int]] = {}
    turns: list[int] = []
    for rec in iter_kind(path, kind):
        n += 1
        d = k.describe(rec)
        vals = d.get("labels") if d.get("labels") is not None else ([d["label"]] if d.get("label") is not None else [])
        for v in vals:
            key = str(v).lower() if isinstance(v, bool) else str(v)
            labels[key] = labels.get(key, 0) + 1
            if isinstance(v, bool):
                bools[v] += 1
        if d.get("split") is not None:
            splits[d["split"]] = splits.get(d["split"], 0) + 1
        for g, v in d.get("groups", {}).items():
            if v is not None:
                groups.setdefault(g, set()).add(v)
        for f, t in d.get("texts", {}).items():
            lengths.setdefault(f, []).append(len(t))
        if "turns" in d:
            turns.append(d["turns"])
    out: dict = {"path": str(path), "kind": kind, "n": n}
    if labels:
        out["labels"] = dict(sorted(labels.items()))
    if sum(bools):
        out["label_rate"] = bools[1] / sum(bools)
    if splits:
        out["splits"] = dict(sorted(splits.items()))
    out["groups"] = {g: len(v) for g, v in groups.items()}
    out["lengths"] = {f: _pcts(v) for f, v in lengths.items() if v}
    if turns:
        out["turns"] = _pcts(turns)
    return out
