"""Relevance leave-one-prompt-out: what a user gets on a prompt the program has never seen.

Data: every labelled row of ``../shared/data/recenter_relevance/relevance_labels.jsonl`` (train
and val pooled: 4 prompts x 5 users, 534 pairs). Each fold fits or compiles every strategy on
three prompts and scores the fourth; nothing of the held-out prompt is used but its (unlabelled)
scores inside a unit rule. Per strategy: per-prompt F1 and yes-rate, the mean over prompts (the
headline), the worst prompt, the F1 of the pooled predictions, and an interval of the mean from a
two-level cluster bootstrap (prompts, then users within each prompt; with 4 prompts the interval
is coarse -- the per-prompt range is printed beside it); the paired difference to ``style-rank``
on the same resamples; ROC AUC of the score per held-out prompt.

Rows:

* today's strategies as baselines: ``all-yes``, ``style-rank``, ``yes-prob`` (raw threshold on the
  margin, ``decision="threshold"``), ``yes-prob-rank``, ``ensemble`` (threshold), ``ensemble-rank``;
* ``yes-prob@auto`` / ``ensemble@auto``: the same scorers with the decision rule chosen by
  :func:`personalign.optimizers.decision.fit_decision_rule` (rule and unit by leave-one-prompt-out
  F1 over the three fit prompts; the default of ``LearnedSelectorFit`` now);
* ``lm-probe``: a linear probe on the model's final hidden state at the verdict position (the
  hidden states come from the same forward pass as the margins and are cached beside them), its
  ``C`` and decision rule chosen inside the fit prompts;
* ``margin:<kind>@<unit>``: each rule on the yes/no margin with its value fitted on the three fit
  prompts (the candidates the automatic choice picks from -- not a selection on the held-out one);
* ``margin:oracle``: the best raw threshold chosen *on the held-out prompt itself* (a ceiling for
  this score, not a strategy).

LM cost: one prompt evaluation per pair (``yes_no_margin`` of the default 1.5B model), cached on
disk per pair (``--cache``, JSONL appended line by line, so an interrupted run resumes), with the
seconds of each fresh evaluation (the LM seconds per pair). ``--max-new N`` stops after N fresh
margins; ``--partial`` then writes the results on the pairs of the prompts whose margins are all
cached (the record says so), else the script exits 3 without writing.

Usage (load the model one job at a time)::

    flock /tmp/personalign-model.lock python benchmarks/relevance_newprompt.py \\
        [--lm local/qwen2.5-coder-1.5b-instruct] [--cache runs/relevance_newprompt] [--max-new N] [--partial] \\
        [--n-boot 1000] [--out benchmarks/results/relevance-newprompt.json]
    python benchmarks/relevance_newprompt.py --render-docs docs/relevance.md   # the docs table from --out
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

from _common import ROOT, log, quiet_logs, shared_data, usage_error
from personalign.record import run_record, write_record
from _newprompt_report import _ratio_figures, _spread, figures, render_docs
from _newprompt_lm import RowStore, compute_margins, hidden_dir, import_dspy_cache, pair_key, seed_margins, time_paired

import personalign  # noqa: E402,F401

BASELINES = ("all-yes", "style-rank", "yes-prob", "yes-prob-rank", "ensemble", "ensemble-rank")
AUTO = ("yes-prob", "ensemble")  # also run with decision="auto"
NEW = ("lm-probe", "ensemble-rank+probe", "ensemble+probe")  # need the hidden states; decision="auto"
LM_ROWS = {"yes-prob", "yes-prob-rank", "ensemble", "ensemble-rank", "lm-probe", "ensemble-rank+probe", "ensemble+probe"}
SUBSET = ("style-rank", "yes-prob-rank", "ensemble-rank", "yes-prob@auto", "ensemble@auto") + NEW
"""Rows run on the users whose hidden states are all cached, when not every pair has one."""


def f1(gold, pred) -> float:
    from sklearn.metrics import f1_score

    return float(f1_score(gold, pred, zero_division=0))


def auc(gold, scores) -> float | None:
    from sklearn.metrics import roc_auc_score

    if scores is None or any(s is None for s in scores) or len(set(gold)) < 2:
        return None
    return float(roc_auc_score(gold, scores))


def run_strategy(name: str, train, test, model: str):
    """(decisions, scores or None, compile facts) of a strategy fitted on ``train``, on ``test``."""
    from personalign.compile_service import compile_program
    from personalign.lm import make_lm, use
    from personalign.stages import resolve_stage
    STAGE = resolve_stage("relevance")
    from personalign.programs.run import run_program

    base, _, mode = name.partition("@")
    base, plus, _ = base.partition("+probe")
    info = STAGE.registry.info(base)
    fit = {"decision": "threshold"} if (base in AUTO and not mode and not plus) else None  # today's raw threshold
    program = STAGE.registry.create(base) if plus else None
    if plus:
        from personalign.programs.relevance.ensemble import _probe_member

        program.probe = _probe_member(None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with use(make_lm(model)) if info.uses_lm else _null():
            program, cinfo = compile_program(STAGE, base, None, list(train), seed=0, fit_settings=fit, program=program)
            out = run_program(program, list(test), inputs=STAGE.inputs, output=STAGE.output, progress=False)
    rule = ((cinfo or {}).get("details") or {}).get("decision_rule")
    facts = {"decision_rule": {k: rule[k] for k in ("kind", "unit", "value", "cv_objective", "fallback")}
             if rule else None}
    return [bool(p) for p in out.predictions], out.scores, facts


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return False


def rule_rows(train, test, m_train, m_test):
    """Each margin rule with its value fitted on the fit prompts (pooled F1); plus the oracle."""
    import numpy as np

    from personalign.optimizers.decision import MIN_UNIT, _best_value
    from personalign.programs.decision import apply_rule
    from personalign.optimizers.decision import stage_units

    gold_tr = [bool(e.relevant) for e in train]
    gold_te = [bool(e.relevant) for e in test]
    out = {}
    units_tr = stage_units(train, "prompt_id", ("prompt_id", "user_id"))
    units_te = stage_units(test, "prompt_id", ("prompt_id", "user_id"))
    s_tr = np.asarray(m_train, dtype=float)

    def objective(idx, decisions):
        return f1([gold_tr[i] for i in idx], list(decisions))

    out["margin:threshold"] = apply_rule("threshold", _best_value("threshold", np.arange(len(s_tr)), s_tr,
                                                                  [0] * len(s_tr), objective, 1), m_test, [0] * len(m_test))
    for kind in ("top_share", "zscore", "offset"):
        for uname in units_tr:
            v = _best_value(kind, np.arange(len(s_tr)), s_tr, units_tr[uname], objective, MIN_UNIT)
            out[f"margin:{kind}@{uname}"] = apply_rule(kind, v, m_test, units_te[uname], min_unit=MIN_UNIT)
    best = max((f1(gold_te, [m >= t for m in m_test]), t) for t in sorted(set(m_test)))
    out["margin:oracle"] = [m >= best[1] for m in m_test]
    return out


def summarize(per_fold: dict[str, dict], tests: dict[str, list], names: list[str], *, n_boot: int,
              seed: int) -> dict[str, dict]:
    """The leave-one-group-out rows of :mod:`personalign.results` (one place for the figures of a
    LOGO run): per strategy the mean per-prompt F1 with its interval over resampled prompts -- or,
    below 5 prompts, no interval and the range of the per-prompt F1s -- the pooled F1, the worst
    prompt, each prompt's F1 with its interval over users (two levels of
    :mod:`personalign.metrics.cluster`); each row's per-prompt differences to ``style-rank`` (mean,
    range or interval, exact sign-flip p, Holm-adjusted over the rows)."""
    from personalign.results import add_holm, paired_groups, summarize_strategy
    from personalign.evaluation import stage_report
    from personalign.stages import resolve_stage
    STAGE = resolve_stage("relevance")

    prompts = list(per_fold)
    pooled = [ex for p in prompts for ex in tests[p]]
    rows: dict[str, dict] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in names:
            folds = [{"group": p, "report": {**stage_report(STAGE, tests[p], per_fold[p]["pred"][n], n_boot=n_boot,
                                                            seed=seed), "predictions": per_fold[p]["pred"][n]}}
                     for p in prompts]
            rows[n] = summarize_strategy(STAGE, n, folds, pooled, n_boot=n_boot, seed=seed)
        for n in names:
            if n != "style-rank":
                rows[n]["vs_first"] = paired_groups(rows[n], rows["style-rank"], seed=seed)
    add_holm(list(rows.values()))
    return rows


def table_row(row: dict, per_fold: dict[str, dict], name: str, facts: dict | None) -> dict:
    """The results file's ``extra.strategies[name]`` entry of one crossval row."""
    h, vs = row["headline"], row.get("vs_first")
    by = {g["group"]: g for g in row["by_group"]}
    return {"mean_f1": h["value"], "ci": h["ci"], "range": h["range"], "worst_f1": row["worst"]["value"],
            "worst_prompt": row["worst"]["group"], "pooled_f1": row["pooled"]["value"],
            "per_prompt_f1": {p: by[p]["f1"] for p in per_fold}, "per_prompt_f1_ci": {p: by[p].get("f1_ci") for p in per_fold},
            "per_prompt_yes_rate": {p: by[p]["yes_rate"] for p in per_fold},
            "auc": {p: per_fold[p]["auc"][name] for p in per_fold},
            "diff_vs_style_rank": vs["diff"] if vs else 0.0, "diff_ci": vs["ci"] if vs else None,
            "diff_range": vs["range"] if vs else None, "diff_by_prompt": vs["diff_by_group"] if vs else None,
            "p_sign_flip": vs["permutation"]["p_value"] if vs else None,
            "p_min": vs["permutation"]["p_min"] if vs else None, "p_holm": vs.get("p_holm") if vs else None,
            "lm": name.split("@")[0] in LM_ROWS or name.startswith("margin:") or name.startswith("dspy:"),
            "compile": facts}


def lopo(rows, prompts, wanted, store, tag, margin_of, model, reuse):
    """Leave-one-prompt-out of the rows ``wanted`` (fitted on the other prompts, from ``store`` with
    ``reuse``) plus the margin rules and, with no ``tag``, the rows other jobs completed in the
    store: ``(per_fold, tests, facts, names)``."""
    per_fold: dict[str, dict] = {}
    tests: dict[str, list] = {}
    facts: dict[str, dict] = {}
    names: list[str] = []
    for p in prompts:
        train = [r for r in rows if r.prompt_id != p]
        test = [r for r in rows if r.prompt_id == p]
        gold = [bool(r.relevant) for r in test]
        fold = {"gold": gold, "users": [str(r.user_id) for r in test], "pred": {}, "auc": {}}
        for name in wanted:
            hit = store.get(tag + name, p, len(test)) if reuse else None
            if hit is None:
                t1 = time.perf_counter()
                pred, scores, f = run_strategy(name, train, test, model)
                hit = {"pred": pred, "auc": auc(gold, scores), "facts": {**f, "seconds": round(time.perf_counter() - t1, 2)}}
                store.put(tag + name, p, hit)
            fold["pred"][name], fold["auc"][name] = hit["pred"], hit["auc"]
            facts.setdefault(name, {})[str(p)] = hit["facts"]
            log(f"prompt {p}: {name} F1 {f1(gold, hit['pred']):.3f}")
        m_tr = [margin_of[id(r)] for r in train]
        m_te = [margin_of[id(r)] for r in test]
        for name, pred in rule_rows(train, test, m_tr, m_te).items():
            fold["pred"][name] = pred
            fold["auc"][name] = auc(gold, m_te)
        per_fold[str(p)] = fold
        tests[str(p)] = test
    # rows computed by other jobs (plain DSPy, compiled programs): only when every prompt has them
    for name in ([] if tag else store.names()):
        if name.startswith("subset:"):
            continue
        if name not in per_fold[prompts[0]]["pred"] and all(store.get(name, p, len(tests[p])) for p in prompts):
            for p in prompts:
                hit = store.get(name, p, len(tests[p]))
                per_fold[p]["pred"][name], per_fold[p]["auc"][name] = hit["pred"], hit["auc"]
                facts.setdefault(name, {})[p] = hit["facts"]
    names = list(per_fold[prompts[0]]["pred"])
    return per_fold, tests, facts, names


def _partial_rows(store, per_fold, tests, names) -> dict:
    """Rows of the store done on some prompts only: their per-prompt F1 (no mean: a subset of
    prompts is not the leave-one-prompt-out figure), with the same prompts' F1 of the full rows."""
    out = {}
    for name in store.names():
        if name in names or name.startswith("subset:"):
            continue
        done = {p: store.get(name, p, len(tests[p])) for p in per_fold}
        done = {p: h for p, h in done.items() if h is not None}
        if done:
            out[name] = {"per_prompt_f1": {p: f1(per_fold[p]["gold"], h["pred"]) for p, h in done.items()},
                         "per_prompt_yes_rate": {p: sum(h["pred"]) / len(h["pred"]) for p, h in done.items()},
                         "facts": {p: h["facts"] for p, h in done.items()}}
    return out


def compile_vs_plain(table: dict) -> dict | None:
    """personalign's compiled ``zero-shot@labeled`` against the best plain-DSPy row on the same
    folds (None until every fold of all three is done): the ratio of mean per-prompt F1s (the
    issue's target >= 1.3) and the difference (target +0.15 when plain DSPy is below 0.10)."""
    plain = [r for r in ("dspy:labeled-k8", "dspy:bootstrap") if r in table]
    if "zero-shot@labeled" not in table or len(plain) < 2:
        return None
    best = max(plain, key=lambda r: table[r]["mean_f1"])
    ours, theirs = table["zero-shot@labeled"]["mean_f1"], table[best]["mean_f1"]
    return {"best_plain": best, "personalign": ours, "plain": theirs, "diff": ours - theirs,
            "ratio": ours / theirs if theirs > 0 else None,
            "target": "ratio >= 1.3" if theirs >= 0.10 else "diff >= +0.15 (plain DSPy below 0.10)",
            "met": (ours / theirs >= 1.3) if theirs >= 0.10 else (ours - theirs >= 0.15)}


def _deadline(hhmm: str | None) -> float | None:
    """``time.time()`` of today's ``HH:MM`` UTC (None: no deadline)."""
    if not hhmm:
        return None
    import datetime as dt

    h, m = (int(v) for v in hhmm.split(":"))
    now = dt.datetime.now(dt.timezone.utc)
    return now.replace(hour=h, minute=m, second=0, microsecond=0).timestamp()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lm", default="local/qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--data", default=None)
    ap.add_argument("--cache", default=str(ROOT / "runs" / "relevance_newprompt"))
    ap.add_argument("--max-new", type=int, default=None)
    ap.add_argument("--partial", action="store_true")
    ap.add_argument("--margins-only", action="store_true")
    ap.add_argument("--time-pairs", type=int, default=0, metavar="N",
                    help="first time yes-prob against lm-probe on N pairs (paired blocks; cache dir timing.json)")
    ap.add_argument("--reuse", action="store_true",
                    help="read the rows already stored under --cache instead of refitting them")
    ap.add_argument("--dspy-folds", default=None, metavar="P1,P2|all",
                    help="first run plain DSPy and personalign's zero-shot@labeled on these held-out prompts (stored per fold)")
    ap.add_argument("--dspy-only", action="store_true", help="stop after --dspy-folds")
    ap.add_argument("--deadline", default=None, metavar="HH:MM", help="UTC time after which no new LM evaluation or DSPy fold starts")
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "relevance-newprompt.json"))
    ap.add_argument("--render-docs", default=None, metavar="PAGE",
                    help="only render the results file (--out) into PAGE between its markers")
    ap.add_argument("--import-dspy-cache", default=None, metavar="DIR",
                    help="first copy margins another run left in this DSPy disk cache (read through a copy)")
    args = ap.parse_args(argv)
    if args.render_docs:
        render_docs(Path(args.out), Path(args.render_docs))
        return 0
    quiet_logs()
    data = Path(args.data) if args.data else shared_data() / "recenter_relevance" / "relevance_labels.jsonl"
    if not data.is_file():
        usage_error(f"relevance labels not found at {data} (--data)")
    if args.n_boot < 100:
        usage_error(f"--n-boot must be >= 100, got {args.n_boot}")
    import numpy as np

    from personalign.programs.relevance.data import load_examples

    rows = load_examples(data)
    model = args.lm
    cache_path = Path(args.cache) / f"margins-{model.replace('/', '_')}.jsonl"
    t0 = time.perf_counter()
    if args.import_dspy_cache:
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        log(f"{import_dspy_cache(model, rows, cache_path, Path(args.import_dspy_cache))} margins imported "
            f"from {args.import_dspy_cache}")
    if args.time_pairs:
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        t = time_paired(model, rows, args.time_pairs, cache_path.parent / "timing.json")
        log(f"paired timing: lm-probe / yes-prob = {t['ratio_probe_to_yes_prob']:.3f} over {t['n_pairs']} pairs x 2")
    cache = compute_margins(model, rows, cache_path, args.max_new, deadline=_deadline(args.deadline))
    log(f"margins: {sum(pair_key(model, r.attribute, r.prompt) in cache for r in rows)}/{len(rows)} cached "
        f"({time.perf_counter() - t0:.0f}s)")
    if args.margins_only:
        return 0
    hdir = hidden_dir(cache_path)
    covered = {p for p in {r.prompt_id for r in rows}
               if all(pair_key(model, r.attribute, r.prompt) in cache for r in rows if r.prompt_id == p)}
    prompts = sorted({r.prompt_id for r in rows})
    partial = len(covered) < len(prompts)
    if partial and not args.partial:
        sys.stderr.write(f"error: margins missing for prompts {sorted(set(prompts) - covered)}; rerun, or --partial\n")
        return 3
    rows = [r for r in rows if r.prompt_id in covered]
    prompts = sorted(covered)
    if len(prompts) < 3:
        sys.stderr.write(f"error: {len(prompts)} prompt(s) with all margins cached; need >= 3\n")
        return 3
    seed_margins(model, rows, cache, hidden_dir(cache_path))
    with_probe = all((hdir / f"{pair_key(model, r.attribute, r.prompt)}.npy").is_file() for r in rows)
    if not with_probe:
        log("hidden states missing for some pairs: the lm-probe row is skipped")
    margin_of = {id(r): cache[pair_key(model, r.attribute, r.prompt)]["margin"] for r in rows}
    store = RowStore(Path(args.cache) / f"rows-{model.replace('/', '_')}")
    if args.dspy_folds:
        from _newprompt_dspy import run_folds

        folds = prompts if args.dspy_folds == "all" else args.dspy_folds.split(",")
        by_prompt = {p: ([r for r in rows if r.prompt_id != p], [r for r in rows if r.prompt_id == p]) for p in prompts}
        run_folds(store, by_prompt, folds, model, seed=args.seed, deadline=_deadline(args.deadline))
        if args.dspy_only:
            return 0
    wanted = list(BASELINES) + [f"{b}@auto" for b in AUTO] + (list(NEW) if with_probe else [])
    per_fold, tests, facts, names = lopo(rows, prompts, wanted, store, "", margin_of, model, args.reuse)
    partial_rows = _partial_rows(store, per_fold, tests, names)
    sub_table = None
    if not with_probe:
        units = {(r.prompt_id, str(r.user_id)) for r in rows}
        done = {u for u in units if all((hdir / f"{pair_key(model, r.attribute, r.prompt)}.npy").is_file()
                                        for r in rows if (r.prompt_id, str(r.user_id)) == u)}
        sub = [r for r in rows if (r.prompt_id, str(r.user_id)) in done]
        if {r.prompt_id for r in sub} == set(prompts):
            log(f"lm-probe on the {len(done)} (prompt, user) units with every hidden state cached ({len(sub)} pairs)")
            sp, st, sf, sn = lopo(sub, prompts, list(SUBSET), store, "subset:", margin_of, model, args.reuse)
            sub_rows = summarize(sp, st, sn, n_boot=args.n_boot, seed=args.seed)
            sub_table = {"units": sorted(f"{p}/{u}" for p, u in done), "n_pairs": len(sub),
                         "strategies": {n: table_row(sub_rows[n], sp, n, sf.get(n)) for n in sn}}
        else:
            log("hidden states: not every prompt has a complete user yet: no lm-probe rows")
    rows_cv = summarize(per_fold, tests, names, n_boot=args.n_boot, seed=args.seed)
    secs = [row["seconds"] for row in cache.values() if "seconds" in row and row.get("prompt_id") in covered]
    table = {n: table_row(rows_cv[n], per_fold, n, facts.get(n)) for n in names}
    vs_plain = compile_vs_plain(table)
    timing_file = cache_path.parent / "timing.json"
    timing = json.loads(timing_file.read_text()) if timing_file.is_file() else None
    command = "python benchmarks/relevance_newprompt.py " + " ".join(argv if argv is not None else sys.argv[1:])
    record = run_record(
        Path(args.out).stem, figures(table, len(rows)) + _ratio_figures(vs_plain) + (figures(sub_table["strategies"], sub_table["n_pairs"], "subset.")
                                                           if sub_table else []), title=f"Relevance, leave-one-prompt-out over the {len(prompts)} shared prompts (mean per-prompt F1)",
        command=command.strip(), model=model, data=data, stage="relevance",
        resampling={"unit": "prompt_id > user_id", "n_clusters": len(prompts), "n_boot": args.n_boot},
        extra={"strategies": table, "partial_rows": partial_rows, "probe_subset": sub_table, "prompts": prompts, "n_pairs": len(rows), "partial": partial, "lm_probe_run": with_probe,
               "lm_seconds_per_pair": {"n": len(secs), "mean": float(np.mean(secs)) if secs else None,
                                       "median": float(np.median(secs)) if secs else None},
               "timing": timing, "compile_vs_plain_dspy": vs_plain,
               "note": f"per-prompt F1 of each held-out prompt; with {len(prompts)} prompts (< 5) the mean has no "
                       "interval: the range of the per-prompt F1s is given (personalign.metrics.cluster); each "
                       "prompt's F1 has an interval over its users; margin:oracle chooses its threshold on the "
                       "held-out prompt and is a ceiling, not a strategy"})
    write_record(Path(args.out), record)
    log(f"wrote {args.out}")
    for n in names:
        t = table[n]
        print(f"{n:32s} mean F1 {t['mean_f1']:.3f} {_spread(t['ci'], t['range'])} worst {t['worst_f1']:.3f} "
              f"pooled {t['pooled_f1']:.3f} vs style-rank {t['diff_vs_style_rank']:+.3f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
