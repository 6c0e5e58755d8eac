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
from _newprompt_lm import RowStore, compute_margins, hidden_dir, import_dspy_cache, pair_key, seed_margins, time_paired

import personalign  # noqa: E402,F401

BASELINES = ("all-yes", "style-rank", "yes-prob", "yes-prob-rank", "ensemble", "ensemble-rank")
AUTO = ("yes-prob", "ensemble")  # also run with decision="auto"
NEW = ("lm-probe",)  # decision="auto" (its default)
LM_ROWS = {"yes-prob", "yes-prob-rank", "ensemble", "ensemble-rank", "lm-probe"}



def registered(name: str) -> str | None:
    """The relevance strategy a row measures (``yes-prob@auto`` -> ``yes-prob``: the decision mode is
    not an optimizer), None for an analysis row that is no strategy (``margin:offset``, the oracle)."""
    return None if ":" in name else name.split("@", 1)[0]

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
    from personalign.programs.relevance import STAGE
    from personalign.programs.run import run_program

    base, _, mode = name.partition("@")
    info = STAGE.registry.info(base)
    fit = {"decision": "threshold"} if (base in AUTO and not mode) else None  # today's raw threshold
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with use(make_lm(model)) if info.uses_lm else _null():
            program, cinfo = compile_program(STAGE, base, None, list(train), seed=0, fit_settings=fit)
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
    """The leave-one-group-out rows of :mod:`personalign.crossval` (one place for the figures of a
    LOGO run): per strategy the mean per-prompt F1 with its interval over resampled prompts -- or,
    below 5 prompts, no interval and the range of the per-prompt F1s -- the pooled F1, the worst
    prompt, each prompt's F1 with its interval over users (two levels of
    :mod:`personalign.metrics.cluster`); each row's per-prompt differences to ``style-rank`` (mean,
    range or interval, exact sign-flip p, Holm-adjusted over the rows)."""
    from personalign.crossval import add_holm, paired_groups, summarize_strategy
    from personalign.evaluation import stage_report
    from personalign.programs.relevance import STAGE

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
    cache = compute_margins(model, rows, cache_path, args.max_new)
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
    per_fold: dict[str, dict] = {}
    tests: dict[str, list] = {}
    facts: dict[str, dict] = {}
    names: list[str] = []
    wanted = list(BASELINES) + [f"{b}@auto" for b in AUTO] + (list(NEW) if with_probe else [])
    for p in prompts:
        train = [r for r in rows if r.prompt_id != p]
        test = [r for r in rows if r.prompt_id == p]
        gold = [bool(r.relevant) for r in test]
        fold = {"gold": gold, "users": [str(r.user_id) for r in test], "pred": {}, "auc": {}}
        for name in wanted:
            hit = store.get(name, p, len(test)) if args.reuse else None
            if hit is None:
                t1 = time.perf_counter()
                pred, scores, f = run_strategy(name, train, test, model)
                hit = {"pred": pred, "auc": auc(gold, scores), "facts": {**f, "seconds": round(time.perf_counter() - t1, 2)}}
                store.put(name, p, hit)
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
    for name in store.names():
        if name not in per_fold[prompts[0]]["pred"] and all(store.get(name, p, len(tests[p])) for p in prompts):
            for p in prompts:
                hit = store.get(name, p, len(tests[p]))
                per_fold[p]["pred"][name], per_fold[p]["auc"][name] = hit["pred"], hit["auc"]
                facts.setdefault(name, {})[p] = hit["facts"]
        elif name not in per_fold[prompts[0]]["pred"]:
            log(f"row {name}: not every prompt is done ({[p for p in prompts if store.get(name, p, len(tests[p]))]}): left out")
    names = list(per_fold[prompts[0]]["pred"])
    rows_cv = summarize(per_fold, tests, names, n_boot=args.n_boot, seed=args.seed)
    secs = [row["seconds"] for row in cache.values() if "seconds" in row and row.get("prompt_id") in covered]
    table = {n: table_row(rows_cv[n], per_fold, n, facts.get(n)) for n in names}
    timing_file = cache_path.parent / "timing.json"
    timing = json.loads(timing_file.read_text()) if timing_file.is_file() else None
    command = "python benchmarks/relevance_newprompt.py " + " ".join(argv if argv is not None else sys.argv[1:])
    record = run_record(
        Path(args.out).stem, figures(table, len(rows)), title=f"Relevance, leave-one-prompt-out over the {len(prompts)} shared prompts (mean per-prompt F1)",
        command=command.strip(), model=model, data=data, stage="relevance",
        resampling={"unit": "prompt_id > user_id", "n_clusters": len(prompts), "n_boot": args.n_boot},
        extra={"strategies": table, "prompts": prompts, "n_pairs": len(rows), "partial": partial, "lm_probe_run": with_probe,
               "lm_seconds_per_pair": {"n": len(secs), "mean": float(np.mean(secs)) if secs else None,
                                       "median": float(np.median(secs)) if secs else None},
               "timing": timing,
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


BEGIN, END = "<!-- relevance_newprompt:begin -->", "<!-- relevance_newprompt:end -->"


def _spread(ci, rng) -> str:
    """``[lo, hi]`` for an interval, ``(range lo-hi)`` below 5 clusters (docs/figures.md)."""
    if ci:
        return f"[{ci[0]:.2f}, {ci[1]:.2f}]"
    return f"(range {rng[0]:.2f}–{rng[1]:.2f})" if rng else ""


def _signed(ci, rng) -> str:
    if ci:
        return f"[{ci[0]:+.2f}, {ci[1]:+.2f}]"
    return f"(range {rng[0]:+.2f} to {rng[1]:+.2f})" if rng else ""


def render_markdown(record: dict) -> str:
    """The docs table of a results file: one row per strategy (mean per-prompt F1 with its interval
    over prompts, or their range below 5 prompts; worst prompt; pooled F1; difference to style-rank
    with its range and sign-flip p; per-prompt F1 and yes-rate; ROC AUC per held-out prompt)."""
    ex = record["extra"]
    prompts = [str(p) for p in ex["prompts"]]
    short = [p.split(":")[-1] for p in prompts]
    lines = [f"Results file `benchmarks/results/{record['name']}.json` (commit `{record['git_commit'][:10]}`, "
             f"{record['date']}, model `{record['model']['name']}`, {ex['n_pairs']} pairs, {len(prompts)} prompts"
             + (", PARTIAL: not every prompt" if ex.get("partial") else "") + "). Command: `" + record["command"] + "`",
             "",
             "With fewer than 5 prompts no interval of the mean is reported: the range of the per-prompt figures "
             "is. The difference to `style-rank` is paired per prompt; its sign-flip p cannot go below "
             f"{2 / 2 ** len(prompts):.3f} with {len(prompts)} prompts.",
             "",
             "| strategy | mean F1 (range) | worst | pooled F1 | vs style-rank (range), p | "
             + " | ".join(f"F1 / yes {p}" for p in short) + " | AUC " + " / ".join(short) + " |",
             "|---|---|---|---|---|" + "---|" * len(short) + "---|"]
    for name, t in ex["strategies"].items():
        per = " | ".join(f"{t['per_prompt_f1'][p]:.3f} / {t['per_prompt_yes_rate'][p]:.2f}" for p in prompts)
        aucs = [t["auc"].get(p) for p in prompts]
        auc = " / ".join(f"{a:.2f}" for a in aucs) if all(a is not None for a in aucs) else "-"
        vs = ("-" if t.get("p_sign_flip") is None else
              f"{t['diff_vs_style_rank']:+.3f} {_signed(t['diff_ci'], t['diff_range'])}, p {t['p_sign_flip']:.3f}")
        lines.append(f"| `{name}` | {t['mean_f1']:.3f} {_spread(t['ci'], t['range'])} | {t['worst_f1']:.3f} | "
                     f"{t['pooled_f1']:.3f} | {vs} | {per} | {auc} |")
    sec = ex.get("lm_seconds_per_pair") or {}
    if sec.get("n"):
        lines += ["", f"LM seconds per pair of `yes-prob` (one forward pass, KV prefix reused; machine shared): median "
                      f"{sec['median']:.2f} s, mean {sec['mean']:.2f} s over {sec['n']} fresh evaluations."]
    tm = ex.get("timing")
    if tm:
        lines += ["", f"Cost of `lm-probe` against `yes-prob`, paired (the same {tm['n_pairs']} pairs, blocks "
                      f"{tm['blocks']}): {tm['total_seconds']['lm-probe']:.1f} s against "
                      f"{tm['total_seconds']['yes-prob']:.1f} s, ratio {tm['ratio_probe_to_yes_prob']:.2f}; "
                      f"largest margin difference {tm['max_abs_margin_diff']:.3f} nats."]
    return "\n".join(lines) + "\n"


def render_docs(results: Path, page: Path) -> None:
    """Replace the block between the page's markers with :func:`render_markdown` of ``results``."""
    record = json.loads(results.read_text())
    text = page.read_text()
    if BEGIN not in text or END not in text:
        usage_error(f"{page}: markers {BEGIN} / {END} not found")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    page.write_text(head + BEGIN + "\n" + render_markdown(record) + END + tail)


AUC_ROWS = ("yes-prob", "ensemble", "ensemble-rank", "style-rank", "lm-probe")


def figures(table: dict, n: int) -> list[dict]:
    """The record's figures: per strategy the mean per-prompt F1 (interval over prompts, or none
    and the range in the note below 5 prompts), the worst prompt, the pooled F1, each prompt's F1
    (interval over its users), the paired difference to style-rank (range and sign-flip p in the
    note below 5 prompts), and the ROC AUC of the score per held-out prompt."""
    from personalign.record import figure

    out = []
    for name, t in table.items():
        st, base = registered(name), f"relevance.newprompt.{name}"
        k = len(t["per_prompt_f1"])
        few = t["ci"] is None
        out.append(figure(f"{base}.f1_mean", f"{name}: mean per-prompt F1, leave-one-prompt-out", t["mean_f1"],
                          metric="f1_mean", strategy=st, ci=t["ci"], n=k,
                          note=(f"{k} prompts (< 5): no interval; per-prompt range [{t['range'][0]:.3f}, {t['range'][1]:.3f}]"
                                if few else None)))
        out.append(figure(f"{base}.f1_worst", f"{name}: worst held-out prompt ({t['worst_prompt']})", t["worst_f1"],
                          metric="f1", strategy=st, note=str(t["worst_prompt"])))
        out.append(figure(f"{base}.f1_pooled", f"{name}: F1 of the pooled out-of-prompt predictions", t["pooled_f1"],
                          metric="f1", strategy=st, n=n))
        for p, v in t["per_prompt_f1"].items():
            out.append(figure(f"{base}.f1.{p}", f"{name} on prompt {p} (fitted on the others)", v, metric="f1",
                              strategy=st, ci=t["per_prompt_f1_ci"].get(p), note="interval: users within the prompt"))
        if t.get("p_sign_flip") is not None:
            rng = t["diff_range"]
            out.append(figure(f"{base}.diff_vs_style_rank", f"{name} - style-rank, mean per-prompt F1",
                              t["diff_vs_style_rank"], metric="f1_mean_diff", strategy=st, ci=t["diff_ci"], n=k,
                              note=(f"paired per prompt; sign-flip p {t['p_sign_flip']:.3f} (smallest reachable "
                                    f"{t['p_min']:.3f})" + (f"; per-prompt range [{rng[0]:+.3f}, {rng[1]:+.3f}]" if few else ""))))
        if name in AUC_ROWS:
            for p, a in t["auc"].items():
                if a is not None:
                    out.append(figure(f"{base}.auc.{p}", f"{name}: ROC AUC on held-out prompt {p}", a,
                                      metric="roc_auc", strategy=st))
    return out


if __name__ == "__main__":
    raise SystemExit(main())
