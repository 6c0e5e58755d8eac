"""CUPID scoring ("CUPID: Evaluating Personalized and Contextualized Alignment of LLMs from
Interactions", COLM 2025; kixlab/CUPID, CC-BY-4.0).

* **Inferred preferences** (:func:`score_inferred_preferences`): CUPID's *Preference Match*
  scores an inferred preference by the share of the instance's gold checklist
  (``current_checklist``, 2-4 yes/no checks) that the preference covers; upstream a fine-tuned
  judge (PrefMatcher-7B) decides coverage, here the typed
  :class:`~personalign.signatures.respond.PreferenceCoverageSignature` program run with the given
  LM (one call per checklist item). LM-free companion: the MiniLM cosine between the inferred and
  the gold ``current_contextual_preference``.
* **Responses** (:func:`score_responses`): the share of checklist items a response satisfies
  (:class:`~personalign.signatures.respond.ChecklistSignature`, one call per item).

Inferred preferences / responses are given as a mapping ``instance id -> text`` or a JSONL file
of ``{"id": <instance id>, "preference"|"response": text}`` (ids as produced by
:func:`personalign.data.load_cupid`: ``cupid:<row>:<persona_id>``).
"""

from __future__ import annotations

import os
import time
from typing import Mapping, Sequence

from personalign.errors import DataError
from personalign.lm import resolve_lm, use
from personalign.runners._common import mean_ci


def read_texts(path: str | os.PathLike, field: str) -> dict[str, str]:
    """``{id: text}`` from JSONL lines ``{"id", field}``.

    Raises:
        DataError: missing file, a line without ``id`` or ``field`` (named), duplicate id.
    """
    from personalign.data.files import iter_jsonl

    out: dict[str, str] = {}
    for lineno, obj in iter_jsonl(path):
        rid, text = obj.get("id"), obj.get(field)
        if not isinstance(rid, str) or not rid:
            raise DataError(path, lineno, "id", "missing or not a non-empty string")
        if not isinstance(text, str):
            raise DataError(path, lineno, field, "missing or not a string")
        if rid in out:
            raise DataError(path, lineno, "id", f"duplicate id '{rid}'")
        out[rid] = text
    return out


def _texts(source, field: str) -> dict[str, str]:
    return read_texts(source, field) if isinstance(source, (str, os.PathLike)) else dict(source)


def _check_ids(instances, texts: Mapping[str, str], what: str) -> None:
    known = {i.id for i in instances}
    unknown = [k for k in texts if k not in known]
    if unknown:
        raise DataError(what, None, "id", f"{len(unknown)} id(s) match no CUPID instance, e.g. '{unknown[0]}'")


def score_inferred_preferences(instances: Sequence, inferred, *, lm=None, use_lm: bool = True, n_boot: int = 1000,
                               seed: int = 0) -> dict:
    """Score inferred preferences against CUPID instances.

    Args:
        instances: :class:`~personalign.data.CupidInstance` list (``load_cupid``).
        inferred: ``{instance id: preference}`` or a JSONL path (``{"id", "preference"}``);
            instances without an inferred preference score 0 (counted in ``n_missing``).
        lm: the judge LM (model string or ``dspy.LM``; default the embedded model).
        use_lm: False -> MiniLM similarity only (no LM calls).

    Returns:
        ``{"n", "n_missing", "preference_match" (mean share of checklist items covered, with
        ``preference_match_ci``; None without LM), "cosine" (+ ``cosine_ci``), "lm_calls",
        "seconds", "items": [{"id", "match", "cosine"}]}``.
    """
    import dspy

    from personalign.lm import CallCounter
    from personalign.lm.embedder import cosine_pairs
    from personalign.programs.common.text import truncate_head
    from personalign.signatures.respond import PreferenceCoverageSignature

    t0 = time.perf_counter()
    texts = _texts(inferred, "preference")
    got = [texts.get(i.id, "").strip() for i in instances]
    missing = sum(1 for g in got if not g)
    cos = cosine_pairs([g or "-" for g in got], [i.current_contextual_preference for i in instances])
    cos = [float(c) if g else 0.0 for c, g in zip(cos, got)]
    matches: list[float] = []
    calls = 0
    if use_lm:
        lm_obj = resolve_lm(lm, True)
        cover = dspy.Predict(PreferenceCoverageSignature)
        with CallCounter() as cc, use(lm_obj):
            for inst, pref in zip(instances, got):
                if not pref or not inst.current_checklist:
                    matches.append(0.0)
                    continue
                ok = 0
                for check in inst.current_checklist:
                    try:
                        ok += bool(cover(preference=truncate_head(pref, 800), check=check).covered)
                    except Exception:  # noqa: BLE001 -- a failed call counts as not covered
                        pass
                matches.append(ok / len(inst.current_checklist))
        calls = cc.calls
    m = mean_ci(matches, n_boot=n_boot, seed=seed) if matches else {"mean": None, "ci": None}
    c = mean_ci(cos, n_boot=n_boot, seed=seed)
    return {"n": len(instances), "n_missing": missing, "preference_match": m["mean"], "preference_match_ci": m["ci"],
            "cosine": c["mean"], "cosine_ci": c["ci"], "lm_calls": calls, "seconds": round(time.perf_counter() - t0, 2),
            "items": [{"id": i.id, "match": matches[k] if matches else None, "cosine": cos[k]}
                      for k, i in enumerate(instances)]}


def score_responses(instances: Sequence, responses, *, lm=None, n_boot: int = 1000, seed: int = 0) -> dict:
    """Share of each instance's checklist a response satisfies (typed checklist judge, one LM
    call per item); a missing response scores 0.

    Returns:
        ``{"n", "n_missing", "checklist", "checklist_ci", "lm_calls", "seconds", "items"}``.
    """
    import dspy

    from personalign.lm import CallCounter
    from personalign.programs.common.text import truncate_head
    from personalign.signatures.respond import ChecklistSignature

    t0 = time.perf_counter()
    texts = _texts(responses, "response")
    lm_obj = resolve_lm(lm, True)
    judge = dspy.Predict(ChecklistSignature)
    scores, missing = [], 0
    with CallCounter() as cc, use(lm_obj):
        for inst in instances:
            resp = texts.get(inst.id, "").strip()
            if not resp or not inst.current_checklist:
                missing += not resp
                scores.append(0.0)
                continue
            ok = 0
            for check in inst.current_checklist:
                try:
                    ok += bool(judge(request=truncate_head(inst.current_request, 1500),
                                     response=truncate_head(resp, 2500), check=check).satisfied)
                except Exception:  # noqa: BLE001 -- a failed call counts as not satisfied
                    pass
            scores.append(ok / len(inst.current_checklist))
    s = mean_ci(scores, n_boot=n_boot, seed=seed)
    return {"n": len(instances), "n_missing": missing, "checklist": s["mean"], "checklist_ci": s["ci"],
            "lm_calls": cc.calls, "seconds": round(time.perf_counter() - t0, 2),
            "items": [{"id": i.id, "checklist": sc} for i, sc in zip(instances, scores)]}


def run_cupid(data: str | os.PathLike, *, inferred=None, responses=None, lm=None, use_lm: bool = True,
              limit: int | None = None, n_boot: int = 1000, seed: int = 0) -> dict:
    """Load CUPID (parquet/JSON/JSONL) and score the given inferred preferences and/or responses.

    Raises:
        DataError: unreadable data or an id matching no instance; ConfigurationError: neither ``inferred`` nor ``responses``.
    """
    from personalign.data import load_cupid
    from personalign.errors import ConfigurationError

    if inferred is None and responses is None:
        raise ConfigurationError("give inferred preferences (--inferred FILE) and/or responses (--responses FILE)")
    instances = load_cupid(data)
    given = {}
    for name, source, field in (("inferred", inferred, "preference"), ("responses", responses, "response")):
        if source is not None:
            given[name] = _texts(source, field)
            _check_ids(instances, given[name], str(source) if isinstance(source, (str, os.PathLike)) else name)
    if limit is not None:  # a seeded sample stratified by persona (file order kept), not the first rows
        from personalign.data.sample import stratified_limit

        if limit < 1:
            raise ConfigurationError(f"--limit must be >= 1, got {limit}")
        instances = stratified_limit(instances, limit, "persona_id", seed)
    out: dict = {"data": str(data), "n": len(instances)}
    if "inferred" in given:
        out["inferred"] = score_inferred_preferences(instances, given["inferred"], lm=lm, use_lm=use_lm,
                                                     n_boot=n_boot, seed=seed)
    if "responses" in given:
        out["responses"] = score_responses(instances, given["responses"], lm=lm, n_boot=n_boot, seed=seed)
    return out


__all__ = ["read_texts", "score_inferred_preferences", "score_responses", "run_cupid"]
