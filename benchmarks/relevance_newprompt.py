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
import hashlib
import json
import sys
import time
import warnings
from pathlib import Path

from _common import ROOT, log, quiet_logs, shared_data, usage_error
from personalign.record import run_record, write_record

import personalign  # noqa: E402,F401

BASELINES = ("all-yes", "style-rank", "yes-prob", "yes-prob-rank", "ensemble", "ensemble-rank")
AUTO = ("yes-prob", "ensemble")  # also run with decision="auto"
NEW = ("lm-probe",)  # decision="auto" (its default)
LM_ROWS = {"yes-prob", "yes-prob-rank", "ensemble", "ensemble-rank", "lm-probe"}



def registered(name: str) -> str | None:
    """The relevance strategy a row measures (``yes-prob@auto`` -> ``yes-prob``: the decision mode is
    not an optimizer), None for an analysis row that is no strategy (``margin:offset``, the oracle)."""
    return None if ":" in name else name.split("@", 1)[0]

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


def compute_margins(model: str, rows, cache_path: Path, max_new: int | None) -> dict[str, dict]:
    """Margin and final hidden state of every pair, from the cache or the model: margins appended
    to the JSONL cache, hidden states as ``<key>.npy`` (float32, (n_embd,)) beside it, each written
    as soon as it is computed. A pair with a cached margin but no hidden state is re-evaluated
    for its hidden state (its cached margin is kept)."""
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
    order = sharing_order([(pair_key(model, rows[i].attribute, rows[i].prompt) in cache, short[rows[i].prompt],
                            rows[i].prompt, str(rows[i].user_id), rows[i].attribute) for i in todo])
    done = 0
    with cache_path.open("a") as fh:
        for j in order:
            if max_new is not None and done >= max_new:
                break
            r = rows[todo[j]]
            key = pair_key(model, r.attribute, r.prompt)
            t0 = time.perf_counter()
            m, h = margin_and_hidden(model, relevance_messages(r.attribute, r.prompt))
            secs = time.perf_counter() - t0
            tmp = hdir / f".{key}.tmp.npy"
            np.save(tmp, np.asarray(h, dtype=np.float32), allow_pickle=False)
            tmp.replace(hdir / f"{key}.npy")
            if key in cache:  # a margin from the plain scorer: record both, to check they agree
                with (cache_path.parent / "recheck.jsonl").open("a") as rc:
                    rc.write(json.dumps({"key": key, "margin_plain": cache[key]["margin"],
                                         "margin_with_hidden": float(m)}) + "\n")
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
    """Put the cached margins and hidden states where ``yes-prob`` and ``lm-probe`` look first
    (no LM call for them)."""
    import numpy as np

    from personalign.programs.relevance import probe, yes_prob

    for r in rows:
        key = pair_key(model, r.attribute, r.prompt)
        hit = cache.get(key)
        if hit is not None:
            yes_prob._margins[(model, r.attribute, r.prompt)] = float(hit["margin"])
        if (hdir / f"{key}.npy").is_file():
            probe._hidden[(model, r.attribute, r.prompt)] = np.load(hdir / f"{key}.npy", allow_pickle=False).astype(np.float64)


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


def cluster_boot(per_fold: dict[str, dict], names, n_boot: int, seed: int):
    """Two-level cluster bootstrap of the mean per-prompt F1: prompts with replacement, then users
    within each drawn prompt. Returns ``{name: [draws]}`` (same resamples for every name)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    prompts = sorted(per_fold)
    draws = {n: [] for n in names}
    for _ in range(n_boot):
        pick = rng.choice(len(prompts), size=len(prompts), replace=True)
        vals = {n: [] for n in names}
        for pi in pick:
            fold = per_fold[prompts[pi]]
            users = sorted(set(fold["users"]))
            upick = rng.choice(len(users), size=len(users), replace=True)
            idx = [i for u in upick for i, uu in enumerate(fold["users"]) if uu == users[u]]
            gold = [fold["gold"][i] for i in idx]
            for n in names:
                vals[n].append(f1(gold, [fold["pred"][n][i] for i in idx]))
        for n in names:
            draws[n].append(float(np.mean(vals[n])))
    return draws


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lm", default="local/qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--data", default=None)
    ap.add_argument("--cache", default=str(ROOT / "runs" / "relevance_newprompt"))
    ap.add_argument("--max-new", type=int, default=None)
    ap.add_argument("--partial", action="store_true")
    ap.add_argument("--margins-only", action="store_true")
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
    per_fold: dict[str, dict] = {}
    facts: dict[str, dict] = {}
    names: list[str] = []
    for p in prompts:
        train = [r for r in rows if r.prompt_id != p]
        test = [r for r in rows if r.prompt_id == p]
        gold = [bool(r.relevant) for r in test]
        fold = {"gold": gold, "users": [str(r.user_id) for r in test], "pred": {}, "auc": {}}
        for name in list(BASELINES) + [f"{b}@auto" for b in AUTO] + (list(NEW) if with_probe else []):
            t1 = time.perf_counter()
            pred, scores, f = run_strategy(name, train, test, model)
            fold["pred"][name], fold["auc"][name] = pred, auc(gold, scores)
            facts.setdefault(name, {})[str(p)] = {**f, "seconds": round(time.perf_counter() - t1, 2)}
            log(f"prompt {p}: {name} F1 {f1(gold, pred):.3f}")
        m_tr = [margin_of[id(r)] for r in train]
        m_te = [margin_of[id(r)] for r in test]
        for name, pred in rule_rows(train, test, m_tr, m_te).items():
            fold["pred"][name] = pred
            fold["auc"][name] = auc(gold, m_te)
        per_fold[str(p)] = fold
        names = list(fold["pred"])
    draws = cluster_boot(per_fold, names, args.n_boot, args.seed)
    secs = [row["seconds"] for row in cache.values() if "seconds" in row and row.get("prompt_id") in covered]
    table = {}
    for n in names:
        per = {p: f1(per_fold[p]["gold"], per_fold[p]["pred"][n]) for p in per_fold}
        yes = {p: float(np.mean(per_fold[p]["pred"][n])) for p in per_fold}
        pooled = f1([g for p in per_fold for g in per_fold[p]["gold"]], [d for p in per_fold for d in per_fold[p]["pred"][n]])
        diff = np.asarray(draws[n]) - np.asarray(draws["style-rank"])
        table[n] = {"mean_f1": float(np.mean(list(per.values()))), "worst_f1": min(per.values()),
                    "ci": [float(np.percentile(draws[n], 2.5)), float(np.percentile(draws[n], 97.5))],
                    "pooled_f1": pooled, "per_prompt_f1": per, "per_prompt_yes_rate": yes,
                    "auc": {p: per_fold[p]["auc"][n] for p in per_fold},
                    "diff_vs_style_rank": float(np.mean(list(per.values())) - np.mean(
                        [f1(per_fold[p]["gold"], per_fold[p]["pred"]["style-rank"]) for p in per_fold])),
                    "diff_ci": [float(np.percentile(diff, 2.5)), float(np.percentile(diff, 97.5))],
                    "lm": n.split("@")[0] in LM_ROWS or n.startswith("margin:"), "compile": facts.get(n)}
    command = "python benchmarks/relevance_newprompt.py " + " ".join(argv if argv is not None else sys.argv[1:])
    record = run_record(
        name="relevance-newprompt", title="Relevance, leave-one-prompt-out over the 4 shared prompts (mean per-prompt F1)",
        command=command.strip(), model=model, data=data, stage="relevance",
        resampling={"unit": "prompt_id, then user_id within prompt", "n_clusters": len(prompts), "n_boot": args.n_boot},
        figures=figures(table, len(rows), len(prompts)),
        extra={"strategies": table, "prompts": prompts, "n_pairs": len(rows), "partial": partial, "lm_probe_run": with_probe,
               "lm_seconds_per_pair": {"n": len(secs), "mean": float(np.mean(secs)) if secs else None,
                                       "median": float(np.median(secs)) if secs else None},
               "note": "per-prompt F1 of each held-out prompt; the interval is a two-level cluster bootstrap "
                       f"over {len(prompts)} prompts (coarse: see worst/per-prompt); margin:oracle chooses its "
                       "threshold on the held-out prompt and is a ceiling, not a strategy"})
    write_record(Path(args.out), record)
    log(f"wrote {args.out}")
    for n in names:
        t = table[n]
        print(f"{n:32s} mean F1 {t['mean_f1']:.3f} [{t['ci'][0]:.3f}, {t['ci'][1]:.3f}] worst {t['worst_f1']:.3f} "
              f"pooled {t['pooled_f1']:.3f} vs style-rank {t['diff_vs_style_rank']:+.3f}", file=sys.stderr)
    return 0


BEGIN, END = "<!-- relevance_newprompt:begin -->", "<!-- relevance_newprompt:end -->"


def render_markdown(record: dict) -> str:
    """The docs table of a results file: one row per strategy (mean per-prompt F1 with its cluster
    interval, worst prompt, pooled F1, difference to style-rank, per-prompt F1 and yes-rate)."""
    ex = record["extra"]
    prompts = [str(p) for p in ex["prompts"]]
    short = [p.split(":")[-1] for p in prompts]
    lines = [f"Results file `benchmarks/results/{record['name']}.json` (commit `{record['git_commit'][:10]}`, "
             f"{record['date']}, model `{record['model']['name']}`, {ex['n_pairs']} pairs, "
             f"{record['resampling']['n_boot']} two-level cluster resamples over {len(prompts)} prompts"
             + (", PARTIAL: not every prompt" if ex.get("partial") else "") + "). Command: `" + record["command"] + "`",
             "",
             "| strategy | mean F1 [95% cluster CI] | worst | pooled F1 | vs style-rank [CI] | "
             + " | ".join(f"F1 / yes {p}" for p in short) + " | AUC " + " / ".join(short) + " |",
             "|---|---|---|---|---|" + "---|" * len(short) + "---|"]
    for name, t in ex["strategies"].items():
        per = " | ".join(f"{t['per_prompt_f1'][p]:.3f} / {t['per_prompt_yes_rate'][p]:.2f}" for p in prompts)
        aucs = [t["auc"].get(p) for p in prompts]
        auc = " / ".join(f"{a:.2f}" for a in aucs) if all(a is not None for a in aucs) else "-"
        lines.append(f"| `{name}` | {t['mean_f1']:.3f} [{t['ci'][0]:.2f}, {t['ci'][1]:.2f}] | {t['worst_f1']:.3f} | "
                     f"{t['pooled_f1']:.3f} | {t['diff_vs_style_rank']:+.3f} [{t['diff_ci'][0]:+.2f}, {t['diff_ci'][1]:+.2f}] | "
                     f"{per} | {auc} |")
    sec = ex.get("lm_seconds_per_pair") or {}
    if sec.get("n"):
        lines += ["", f"LM seconds per pair (one forward pass, KV prefix reused; machine shared): median "
                      f"{sec['median']:.2f} s, mean {sec['mean']:.2f} s over {sec['n']} fresh evaluations."]
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


def figures(table: dict, n: int, n_prompts: int) -> list[dict]:
    out = []
    for name, t in table.items():
        out.append({"key": f"relevance.newprompt.{name}.f1_mean", "label": f"{name}: mean per-prompt F1 (LOPO)",
                    "strategy": registered(name), "metric": "f1_mean", "value": t["mean_f1"], "ci": t["ci"], "n": n,
                    "note": f"worst prompt {t['worst_f1']:.3f}; pooled F1 {t['pooled_f1']:.3f}; {n_prompts} prompts"})
        out.append({"key": f"relevance.newprompt.{name}.f1_worst", "label": f"{name}: worst held-out prompt F1",
                    "strategy": registered(name), "metric": "f1_worst", "value": t["worst_f1"], "ci": None, "n": n_prompts,
                    "note": "minimum over held-out prompts"})
        out.append({"key": f"relevance.newprompt.{name}.diff_vs_style_rank", "label": f"{name} - style-rank, mean per-prompt F1",
                    "strategy": registered(name), "metric": "f1_mean_diff", "value": t["diff_vs_style_rank"], "ci": t["diff_ci"],
                    "n": n, "note": "paired: same folds and cluster resamples"})
        for p, a in t["auc"].items():
            if a is not None and name.split("@")[0] in ("yes-prob", "ensemble", "style-rank", "lm-probe") and "@" not in name:
                out.append({"key": f"relevance.newprompt.{name}.auc.prompt{p}", "label": f"{name}: ROC AUC on held-out prompt {p}",
                            "strategy": registered(name), "metric": "roc_auc", "value": a, "ci": None, "n": None, "note": None})
    return out


if __name__ == "__main__":
    raise SystemExit(main())
