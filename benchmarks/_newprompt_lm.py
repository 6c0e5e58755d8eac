"""The LM side of ``relevance_newprompt.py``: the yes/no margin and the final hidden state of every
(attribute, prompt) pair of the default embedded model, cached on disk per pair so an interrupted
run resumes (margins appended to a JSONL file line by line, hidden states as ``<key>.npy`` float32
(n_embd,) beside it, written atomically), the paired cost of ``lm-probe`` against ``yes-prob``, and
the hand-over of the cached values to the strategies' shared forward passes (no LM call for them)."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from _common import log


def pair_key(model: str, attribute: str, prompt: str) -> str:
    return hashlib.sha256(f"{model}\x00{prompt}\x00{attribute}".encode()).hexdigest()[:24]


def load_cache(path: Path) -> dict[str, dict]:
    out: dict[str, dict] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by an interrupted run
            out[row["key"]] = row
    return out


def hidden_dir(cache_path: Path) -> Path:
    return cache_path.with_name(cache_path.stem.replace("margins-", "hidden-"))


def compute_margins(model: str, rows, cache_path: Path, max_new: int | None,
                    deadline: float | None = None) -> dict[str, dict]:
    """Margin and final hidden state of every pair, from the cache or the model: margins appended
    to the JSONL cache, hidden states as ``<key>.npy`` (float32, (n_embd,)) beside it, each written
    as soon as it is computed. A pair with a cached margin but no hidden state is re-evaluated
    for its hidden state (its cached margin is kept). Stops after ``max_new`` evaluations or at
    ``deadline`` (``time.time()``)."""
    import numpy as np

    from personalign.lm.probe import margin_and_hidden
    from personalign.lm.scoring import relevance_messages, sharing_order

    cache = load_cache(cache_path)
    hdir = hidden_dir(cache_path)
    hdir.mkdir(parents=True, exist_ok=True)

    def missing(r) -> bool:
        k = pair_key(model, r.attribute, r.prompt)
        return k not in cache or not (hdir / f"{k}.npy").is_file()

    todo = [i for i, r in enumerate(rows) if missing(r)]
    # pairs without a margin first (the margin rows need them), prompts with the fewest missing
    # margins first (so an interrupted run completes whole prompts), then hidden states alone
    short: dict[str, int] = {}
    for r in rows:
        short[r.prompt] = short.get(r.prompt, 0) + (pair_key(model, r.attribute, r.prompt) not in cache)
    # hidden states alone: in rounds of one user per prompt (the k-th user of every prompt before the
    # (k+1)-th), so a run stopped early leaves whole users of every prompt for a leave-one-prompt-out
    # on them; inside a (prompt, user) block the request's prefix is reused
    # (a prompt's smallest user first: the first round is done soonest)
    size: dict[tuple, int] = {}
    for r in rows:
        size[(r.prompt_id, str(r.user_id))] = size.get((r.prompt_id, str(r.user_id)), 0) + 1
    rank: dict[tuple, int] = {}
    for pid in {u[0] for u in size}:
        for i, u in enumerate(sorted((u for u in size if u[0] == pid), key=lambda u: (size[u], u[1]))):
            rank[u] = i
    order = sharing_order([(pair_key(model, rows[i].attribute, rows[i].prompt) in cache, short[rows[i].prompt],
                            rank[(rows[i].prompt_id, str(rows[i].user_id))], rows[i].prompt, str(rows[i].user_id),
                            rows[i].attribute) for i in todo])
    done = 0
    with cache_path.open("a") as fh:
        for j in order:
            if max_new is not None and done >= max_new:
                break
            if deadline is not None and time.time() > deadline:
                log(f"deadline reached after {done} pairs")
                break
            r = rows[todo[j]]
            key = pair_key(model, r.attribute, r.prompt)
            t0 = time.perf_counter()
            m, h = margin_and_hidden(model, relevance_messages(r.attribute, r.prompt))
            secs = time.perf_counter() - t0
            tmp = hdir / f".{key}.tmp.npy"
            np.save(tmp, np.asarray(h, dtype=np.float32), allow_pickle=False)
            tmp.replace(hdir / f"{key}.npy")
            if key in cache:  # a margin from the plain scorer: record both (they agree?) and the seconds
                with (cache_path.parent / "recheck.jsonl").open("a") as rc:
                    rc.write(json.dumps({"key": key, "prompt_id": r.prompt_id, "margin_plain": cache[key]["margin"],
                                         "margin_with_hidden": float(m), "seconds": secs}) + "\n")
            else:
                row = {"key": key, "prompt_id": r.prompt_id, "user_id": r.user_id, "margin": float(m),
                       "seconds": secs, "with_hidden": True}
                fh.write(json.dumps(row) + "\n")
                fh.flush()
                cache[key] = row
            done += 1
            if done % 20 == 0:
                log(f"{done}/{len(todo)} pairs evaluated (last {secs:.2f}s)")
    return cache


def time_paired(model: str, rows, n: int, out: Path) -> dict:
    """LM seconds per pair of ``yes-prob`` (plain margin) and ``lm-probe`` (margin + hidden state),
    paired: the same ``n`` pairs of one (prompt, user) in sharing order, blocks in the order plain,
    probe, probe, plain, each block started from the same KV state (a pair of another prompt
    evaluated first, so the block's first pair evaluates its whole request and the rest reuse it).
    Written to ``out`` (JSON); returns it."""
    import numpy as np

    from personalign.lm.probe import margin_and_hidden
    from personalign.lm.scoring import relevance_messages, yes_no_margin

    first = rows[0]
    block = [r for r in rows if r.prompt_id == first.prompt_id and r.user_id == first.user_id][:n]
    flush = next(r for r in rows if r.prompt_id != first.prompt_id)
    secs: dict[str, list[float]] = {"yes-prob": [], "lm-probe": []}
    margins: dict[str, list[float]] = {"yes-prob": [], "lm-probe": []}
    for kind in ("yes-prob", "lm-probe", "lm-probe", "yes-prob"):
        yes_no_margin(model, relevance_messages(flush.attribute, flush.prompt))
        for r in block:
            msgs = relevance_messages(r.attribute, r.prompt)
            t0 = time.perf_counter()
            m = yes_no_margin(model, msgs) if kind == "yes-prob" else margin_and_hidden(model, msgs)[0]
            secs[kind].append(time.perf_counter() - t0)
            margins[kind].append(float(m))
    total = {k: float(np.sum(v)) for k, v in secs.items()}
    res = {"n_pairs": len(block), "blocks": "plain, probe, probe, plain", "seconds": secs,
           "total_seconds": total, "ratio_probe_to_yes_prob": total["lm-probe"] / total["yes-prob"],
           "max_abs_margin_diff": float(np.max(np.abs(np.subtract(margins["yes-prob"], margins["lm-probe"]))))}
    out.write_text(json.dumps(res, indent=1))
    return res


def import_dspy_cache(model: str, rows, cache_path: Path, directory: Path) -> int:
    """Copy the margins another run left in a DSPy disk cache (``cached_margin``'s requests: same
    model file sha256, same messages) into the margin cache, each row marked with its ``source``;
    the cache is opened read-only through a copy (restricted unpickling: floats only). Returns how
    many margins were added."""
    import shutil
    import tempfile

    from dspy.clients.cache import Cache

    from personalign.lm import get_spec
    from personalign.lm.scoring import relevance_messages

    spec = get_spec(model)
    cache = load_cache(cache_path)
    added = 0
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "cache"
        shutil.copytree(directory, copy)
        disk = Cache(enable_disk_cache=True, enable_memory_cache=False, disk_cache_dir=str(copy),
                     restrict_pickle=True)
        with cache_path.open("a") as fh:
            for r in rows:
                key = pair_key(model, r.attribute, r.prompt)
                if key in cache:
                    continue
                request = {"personalign": "yes_no_margin/1", "model": model,
                           "messages": relevance_messages(r.attribute, r.prompt),
                           "weights": spec.split.sha256 if spec.split is not None else None}
                value = disk.get(request)
                if isinstance(value, float):
                    row = {"key": key, "prompt_id": r.prompt_id, "user_id": r.user_id, "margin": value,
                           "source": f"dspy-cache:{directory}"}
                    fh.write(json.dumps(row) + "\n")
                    cache[key] = row
                    added += 1
    return added


def seed_margins(model: str, rows, cache: dict[str, dict], hdir: Path) -> None:
    """Put the cached passes (margin and hidden state) where ``yes-prob`` and ``lm-probe`` look
    first (:func:`personalign.lm.forward.remember`: no LM call for them); a pair with a margin but
    no hidden state is left to the strategies (one pass gives both)."""
    import numpy as np

    from personalign.lm.forward import remember
    from personalign.lm.scoring import relevance_messages

    for r in rows:
        key = pair_key(model, r.attribute, r.prompt)
        hit = cache.get(key)
        if hit is not None and (hdir / f"{key}.npy").is_file():
            remember(model, relevance_messages(r.attribute, r.prompt), float(hit["margin"]),
                     np.load(hdir / f"{key}.npy", allow_pickle=False))


class RowStore:
    """Per-fold results of each row, one JSON file per row under ``directory``
    (``{prompt_id: {"pred": [bool], "auc": float|None, "facts": {...}}}``), written atomically after
    each fold: rows computed by separate jobs (plain DSPy, compiled programs) join the summary,
    and an interrupted job resumes at the next fold."""

    def __init__(self, directory: Path) -> None:
        self.dir = Path(directory)

    def _path(self, name: str) -> Path:
        return self.dir / (hashlib.sha256(name.encode()).hexdigest()[:16] + ".json")

    def _load(self, name: str) -> dict:
        path = self._path(name)
        return json.loads(path.read_text())["folds"] if path.is_file() else {}

    def names(self) -> list[str]:
        return sorted(json.loads(p.read_text())["name"] for p in self.dir.glob("*.json")) if self.dir.is_dir() else []

    def get(self, name: str, prompt: str, n: int) -> dict | None:
        """The stored fold of ``name`` on ``prompt`` when it has ``n`` predictions, else None."""
        hit = self._load(name).get(str(prompt))
        return hit if hit is not None and len(hit["pred"]) == n else None

    def put(self, name: str, prompt: str, fold: dict) -> None:
        folds = self._load(name)
        folds[str(prompt)] = {"pred": [bool(v) for v in fold["pred"]], "auc": fold["auc"], "facts": fold.get("facts")}
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self._path(name).with_suffix(".tmp")
        tmp.write_text(json.dumps({"name": name, "folds": folds}, default=str))
        tmp.replace(self._path(name))


__all__ = ["RowStore", "pair_key", "load_cache", "hidden_dir", "compute_margins", "time_paired", "import_dspy_cache", "seed_margins"]
