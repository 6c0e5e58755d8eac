"""Labels spent where they decide: `label next`'s selection against random labelling, simulated on held labels.

On the shared relevance labels (style-rank vs minilm-logreg, F1) and the PrefEval-derived
verification pairs (minilm-logreg vs minilm-maxsim, F2 of "rejected"), the labels are hidden; a
small seed set is labelled at random (stratified over the stage's groups), then rows are labelled
in batches, chosen three ways:

* ``random``: uniformly within each group; the estimate is the plain one (no control) -- what a team
  does today;
* ``random+control``: the same draws, the estimate corrected by the strategies' calibrated scores
  (the prediction-powered control of :func:`personalign.labels.fbeta_difference`);
* ``active``: `label next`'s selection (:mod:`personalign.labels.select`: probability proportional
  to the acquisition |φ| sqrt(p (1-p)) with a floor of 0.1, stratified over the groups) and the same
  control.

After every batch the paired difference F(a) - F(b) on all rows is estimated without bias from the
labels so far (:func:`personalign.labels.fbeta_difference`: LURE weights, the control, a normal
interval). Reported over ``--seeds`` seeds: (a) how often the truly better strategy (better on all
labels) is declared better at p < 0.05, (b) the width of the 95% interval, with the spread across
seeds, and how many labels `active` needs to reach the random curve's width (and decision rate) at
200 labels, with a percentile interval over resampled seeds.

Each strategy's predictions are computed once and reused: fitted on the other groups' rows
(relevance: leave-one-prompt-out, 4 folds; verification: 4 folds of whole topics), so every
prediction is out of sample; they are cached under ``runs/label-simulation/`` (``--no-cache``:
recompute). The strategies do not refit as labels come in (a simplification: `label next` refits
them on the labels so far). The cross-encoder was left out: its first leave-one-prompt-out fit did not
finish in 9 minutes on this 2-core machine.

Writes ``benchmarks/results/<--name>.json`` (run-record format), ``docs/<--name>.png``, the
generated blocks of ``docs/humans.md`` (:mod:`_humans_doc`), and prints one JSON object.
``--render-docs`` only rewrites those blocks from the results files.

Usage: ``python benchmarks/label_simulation.py [--seeds 50] [--batch 20] [--seed-size 40] [--max-labels 400]``
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import numpy as np

from _common import ROOT, emit, log, quiet_logs, shared_data, usage_error, write_results

DATASETS = {
    "relevance": {"stage": "relevance", "data": "recenter_relevance/relevance_labels.jsonl",
                  "strategies": ("style-rank", "minilm-logreg"), "folds": 4},
    "verification": {"stage": "verification", "data": "prefeval",
                     "strategies": ("minilm-logreg", "minilm-maxsim"), "folds": 4},
}
ARMS = ("random", "random+control", "active")
TARGET = 200
FLOOR = 0.1
SENSITIVITY_FLOOR = 0.3  # not the default: reported beside it, for the trade-off of coverage and width
CACHE = ROOT / "runs" / "label-simulation"


def predictions(name: str, spec: dict, *, use_cache: bool) -> dict:
    """Out-of-group predictions and scores of the data set's two strategies (cached by data sha256)."""
    from personalign.data.digest import file_sha256
    from personalign.labels import cross_fitted
    from personalign.stages import resolve_stage as get_stage

    st = get_stage(spec["stage"])
    path = shared_data() / spec["data"]
    sha = file_sha256(path)
    cache = CACHE / f"{name}-{sha[:12]}-{'-'.join(spec['strategies'])}-{spec['folds']}.json"
    examples = st.load(path)
    if use_cache and cache.exists():
        out = json.loads(cache.read_text())
        log(f"{name}: predictions from {cache.relative_to(ROOT)}")
    else:
        out = {"strategies": {}, "data": str(path), "sha256": sha}
        for s in spec["strategies"]:
            t0 = time.perf_counter()
            preds, scores = cross_fitted(st, s, examples, folds=spec["folds"])
            out["strategies"][s] = {"pred": [bool(p) for p in preds], "score": scores,
                                    "seconds": round(time.perf_counter() - t0, 1)}
            log(f"{name}: {s} out-of-group predictions in {out['strategies'][s]['seconds']} s")
        CACHE.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(out))
    gold = np.array([bool(st.is_positive(st.gold(ex))) for ex in examples])
    groups = [str(getattr(ex, st.group_key)) for ex in examples]
    return {**out, "gold": gold, "groups": groups, "stage": st}


def simulate(ds: dict, *, seed: int, arm: str, seed_size: int, batch: int, max_labels: int, beta: float,
             floor: float = FLOOR) -> list[dict]:
    """One labelling run: the estimate after the seed set and after every batch."""
    from personalign.labels import Draw, fbeta_difference
    from personalign.labels.select import allocate, calibrate, compare_acquisition, draw

    (sa, a), (sb, b) = [(s, np.array(v["pred"])) for s, v in ds["strategies"].items()]
    y, strata = ds["gold"], ds["groups"]
    feats = np.stack([[np.nan if x is None else x for x in v["score"]] for v in ds["strategies"].values()], axis=1)
    feats = np.where(np.isnan(feats), np.stack([a, b], axis=1), feats)
    n = y.size
    sizes = {s: strata.count(s) for s in dict.fromkeys(strata)}
    # the same seed set for every arm; the two random arms the same draws (they differ in the estimate only)
    seed_rng, rng = np.random.default_rng([seed, 0]), np.random.default_rng([seed, 2 if arm == "active" else 1])
    draws = [Draw(i, strata[i], q, 0) for i, q in draw(np.zeros(n), strata, [True] * n, allocate(sizes, {}, seed_size),
                                                      seed_rng, floor=1.0)]
    controls: list = [None]
    out = []
    while True:
        labelled = np.zeros(n, dtype=bool)
        labelled[[d.row for d in draws]] = True
        est = fbeta_difference(y, a, b, draws=draws, strata=strata, beta=beta,
                               controls=None if arm == "random" else controls)
        out.append({"labels": len(draws), "diff": est["diff"], "se": est["se"], "ci": est["ci"], "p": est["p_value"]})
        if len(draws) + batch > max_labels:
            return out
        p = calibrate(feats, y, labelled)  # from the labels so far only: fixed before the next draws
        acq = compare_acquisition(a, b, p, y, labelled, beta=beta) if arm == "active" else np.zeros(n)
        counts = allocate(sizes, {s: sum(strata[d.row] == s for d in draws) for s in sizes}, batch)
        rnd = len(controls)
        draws += [Draw(i, strata[i], q, rnd) for i, q in draw(acq, strata, ~labelled, counts, rng,
                                                             floor=floor if arm == "active" else 1.0)]
        controls.append(p)


def _crossing(budgets: np.ndarray, curve: np.ndarray, level: float, *, below: bool) -> float | None:
    """The first budget at which ``curve`` reaches ``level`` (linear between checkpoints)."""
    hit = curve <= level if below else curve >= level
    if not hit.any():
        return None
    j = int(np.argmax(hit))
    if j == 0:
        return float(budgets[0])
    x0, x1, c0, c1 = budgets[j - 1], budgets[j], curve[j - 1], curve[j]
    return float(x0 + (x1 - x0) * (level - c0) / (c1 - c0)) if c1 != c0 else float(x1)


def summarize(runs: dict, truth: float, budgets: np.ndarray, *, n_boot: int = 1000, active: str = "active") -> dict:
    """Curves per arm of ``runs`` (mean, 10th/90th percentile width; decision rate; coverage) and the
    labels the ``active`` arm needs to reach each random curve at 200, with a percentile interval
    over resampled seeds."""
    arms = list(runs)
    from statsmodels.stats.proportion import proportion_confint

    t = int(np.where(budgets == TARGET)[0][0])
    width = {arm: np.array([[r["ci"][1] - r["ci"][0] if r["ci"] else np.nan for r in run] for run in runs[arm]])
             for arm in arms}
    decided = {arm: np.array([[r["p"] is not None and r["p"] < 0.05 and np.sign(r["diff"]) == np.sign(truth)
                               for r in run] for run in runs[arm]], dtype=float) for arm in arms}
    wrong = {arm: np.array([[r["p"] is not None and r["p"] < 0.05 and np.sign(r["diff"]) != np.sign(truth)
                             for r in run] for run in runs[arm]], dtype=float) for arm in arms}
    covered = {arm: np.array([[np.nan if r["ci"] is None else float(r["ci"][0] <= truth <= r["ci"][1]) for r in run]
                              for run in runs[arm]], dtype=float) for arm in arms}
    n_seeds = width[active].shape[0]
    curves = {arm: {"width_mean": np.nanmean(width[arm], axis=0).tolist(),
                    "width_p10": np.nanpercentile(width[arm], 10, axis=0).tolist(),
                    "width_p90": np.nanpercentile(width[arm], 90, axis=0).tolist(),
                    "decision_rate": decided[arm].mean(axis=0).tolist(),
                    "decision_ci": [list(proportion_confint(int(k), n_seeds, method="wilson"))
                                    for k in decided[arm].sum(axis=0)],
                    "wrong_direction": wrong[arm].mean(axis=0).tolist(),
                    "coverage": float(np.nanmean(covered[arm])),
                    "coverage_by_budget": [None if np.isnan(x) else float(x) for x in np.nanmean(covered[arm], axis=0)],
                    "bias_at_200": float(np.mean([run[t]["diff"] for run in runs[arm]]) - truth)} for arm in arms}
    rng = np.random.default_rng(0)
    match = {}
    for base in ("random", "random+control"):
        for what, mats, below in (("width", width, True), ("decision", decided, False)):
            def needed(idx):
                ref = np.nanmean(mats[base][idx], axis=0)[t]
                return _crossing(budgets, np.nanmean(mats[active][idx], axis=0), ref, below=below)
            point = needed(np.arange(n_seeds))
            boots = [needed(rng.integers(0, n_seeds, n_seeds)) for _ in range(n_boot)]
            boots = np.array([np.nan if b is None else b for b in boots], dtype=float)
            ci = np.nanpercentile(boots, [2.5, 97.5]).tolist() if np.isfinite(boots).sum() >= n_boot // 2 else None
            match[f"{what}_vs_{base}"] = {"reference_at_200": float(np.nanmean(mats[base], axis=0)[t]),
                                          "labels": point, "labels_ci": ci,
                                          "saving": None if point is None else 1 - point / TARGET,
                                          "not_reached": float(np.mean(np.isnan(boots)))}
    return {"curves": curves, "match": match, "n_seeds": n_seeds}


def plot(results: dict, path: Path) -> Path:
    """Labels spent against the decision rate and the interval width, per data set (mean over seeds;
    bands: Wilson 95% interval of the rate, 10th-90th percentile of the width across seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    fig, axes = plt.subplots(len(names), 2, figsize=(10, 3.6 * len(names)), squeeze=False)
    colors = {"random": "#7f7f7f", "random+control": "#1f77b4", "active": "#d62728"}
    for row, name in zip(axes, names):
        res = results[name]
        x = np.array(res["budgets"])
        for arm in ARMS:
            c = res["curves"][arm]
            lo, hi = np.array(c["decision_ci"]).T
            row[0].plot(x, c["decision_rate"], color=colors[arm], label=arm)
            row[0].fill_between(x, lo, hi, color=colors[arm], alpha=0.12)
            row[1].plot(x, c["width_mean"], color=colors[arm], label=arm)
            row[1].fill_between(x, c["width_p10"], c["width_p90"], color=colors[arm], alpha=0.12)
        sens = res["sensitivity"]
        c = sens["curves"]["active"]
        row[0].plot(x, c["decision_rate"], color=colors["active"], ls="--", lw=0.9, label=f"active, floor {sens['floor']}")
        row[1].plot(x, c["width_mean"], color=colors["active"], ls="--", lw=0.9, label=f"active, floor {sens['floor']}")
        for ax in row:
            ax.axvline(TARGET, color="k", lw=0.6, ls=":")
            ax.set_xlabel("labels spent")
        a, b = res["strategies"]
        row[0].set_title(f"{name}: {a} declared better than {b} (p < 0.05)", fontsize=9)
        row[0].set_ylabel("share of seeds")
        row[0].set_ylim(-0.02, 1.02)
        row[1].set_title(f"{name}: width of the 95% interval of the {res['metric']} difference", fontsize=9)
        row[1].set_ylabel("interval width")
        row[1].legend(fontsize=8)
    fig.suptitle(f"label next vs random labelling, {results[names[0]]['n_seeds']} seeds", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def figures(results: dict) -> list[dict]:
    """The run-record figures: per data set, the true difference, each arm's width, decision rate and
    coverage at 200 labels, and the labels `active` needs to match each random arm at 200."""
    from personalign.record import figure

    out = []
    for name, res in results.items():
        t = res["budgets"].index(TARGET)
        k = f"label-sim.{name}"
        m = res["metric"]
        out.append(figure(f"{k}.truth", f"{name}: true {m} difference on all labels", res["truth"], metric=f"{m}_diff",
                          n=res["n_rows"], note=f"{res['strategies'][0]} minus {res['strategies'][1]}"))
        for arm in ARMS:
            c = res["curves"][arm]
            w = c["width_mean"][t]
            out.append(figure(f"{k}.{arm}.width200", f"{name}, {arm}: interval width at {TARGET} labels", w,
                              metric="width", n=res["n_seeds"],
                              note=f"mean over seeds; 10th-90th percentile across seeds "
                                   f"{c['width_p10'][t]:.3f}-{c['width_p90'][t]:.3f}"))
            out.append(figure(f"{k}.{arm}.decision200", f"{name}, {arm}: better strategy declared at p < 0.05, "
                              f"{TARGET} labels", c["decision_rate"][t], metric="decision_rate",
                              ci=c["decision_ci"][t], n=res["n_seeds"], note="share of seeds; Wilson 95% interval"))
            out.append(figure(f"{k}.{arm}.coverage", f"{name}, {arm}: 95% intervals covering the true difference",
                              c["coverage"], metric="coverage", n=res["n_seeds"] * len(res["budgets"]),
                              note="over every seed and checkpoint"))
        sens = res["sensitivity"]
        for tag, match, floor in (("active", res["match"], FLOOR), (f"active-floor-{sens['floor']:g}".replace(".", ""),
                                                                    sens["match"], sens["floor"])):
            for key, mt in match.items():
                what, base = key.split("_vs_")
                if mt["labels"] is None:
                    continue
                out.append(figure(f"{k}.{tag}.labels-for-{what}-of-{base.replace('+', '-')}",
                                  f"{name}: labels active (floor {floor:g}) needs for the {what} {base} reaches at "
                                  f"{TARGET}", mt["labels"], metric="labels", ci=mt["labels_ci"], n=res["n_seeds"],
                                  note=f"saving {mt['saving']:.0%}; interval: resampled seeds"))
        c = sens["curves"]["active"]
        out.append(figure(f"{k}.active-floor-{sens['floor']:g}.coverage".replace("0.", "0"),
                          f"{name}, active (floor {sens['floor']:g}): 95% intervals covering the true difference",
                          c["coverage"], metric="coverage", n=res["n_seeds"] * len(res["budgets"]),
                          note="over every seed and checkpoint"))
    return out


def run(args) -> dict:
    from personalign.stages.objective import fbeta_of

    results = {}
    for name in args.datasets:
        spec = DATASETS[name]
        ds = predictions(name, spec, use_cache=not args.no_cache)
        st = ds["stage"]
        beta = fbeta_of(st)
        (sa, va), (sb, vb) = ds["strategies"].items()
        from personalign.labels.estimate import fbeta_parts

        y, a, b = ds["gold"], np.array(va["pred"]), np.array(vb["pred"])
        truth = fbeta_parts([(y & a).sum(), (y & b).sum(), y.sum()], a.sum(), b.sum(), beta)[0]
        t0 = time.perf_counter()
        kw = dict(seed_size=args.seed_size, batch=args.batch, max_labels=args.max_labels, beta=beta)
        runs = {arm: [simulate(ds, seed=s, arm=arm, **kw) for s in range(args.seeds)] for arm in ARMS}
        budgets = np.array([r["labels"] for r in runs["active"][0]])
        summary = summarize(runs, truth, budgets)
        alt = {"random": runs["random"], "random+control": runs["random+control"],
               "active": [simulate(ds, seed=s, arm="active", floor=SENSITIVITY_FLOOR, **kw) for s in range(args.seeds)]}
        sens = summarize(alt, truth, budgets)
        summary["sensitivity"] = {"floor": SENSITIVITY_FLOOR, "curves": {"active": sens["curves"]["active"]},
                                  "match": sens["match"]}
        results[name] = {"stage": st.name, "strategies": [sa, sb], "metric": st.objective.name, "truth": float(truth),
                         "f": {sa: fbeta_parts([(y & a).sum(), (y & a).sum(), y.sum()], a.sum(), a.sum(), beta)[1],
                               sb: fbeta_parts([(y & b).sum(), (y & b).sum(), y.sum()], b.sum(), b.sum(), beta)[1]},
                         "n_rows": int(y.size), "n_groups": len(set(ds["groups"])), "budgets": budgets.tolist(),
                         "data": spec["data"], "data_sha256": ds["sha256"],
                         "prediction_seconds": {s: v.get("seconds") for s, v in ds["strategies"].items()},
                         "simulation_seconds": round(time.perf_counter() - t0, 1), **summary}
        log(f"{name}: simulated {args.seeds} seeds x {len(ARMS)} arms in {results[name]['simulation_seconds']} s")
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--seed-size", type=int, default=40)
    ap.add_argument("--max-labels", type=int, default=400)
    ap.add_argument("--datasets", default="relevance,verification")
    ap.add_argument("--name", default="label-simulation")
    ap.add_argument("--no-cache", action="store_true")
    ap.add_argument("--render-docs", action="store_true", help="only rewrite docs/humans.md's generated block")
    args = ap.parse_args(argv)
    if args.render_docs:
        from _humans_doc import render_docs

        return render_docs(args.name)
    args.datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
    bad = [d for d in args.datasets if d not in DATASETS]
    if bad:
        usage_error(f"--datasets: unknown {bad[0]!r}; choose from {', '.join(DATASETS)}")
    if args.seeds < 2 or args.batch < 1 or args.seed_size < 2:
        usage_error("--seeds must be >= 2, --batch >= 1, --seed-size >= 2")
    if (TARGET - args.seed_size) % args.batch or args.max_labels < TARGET:
        usage_error(f"the checkpoints must include {TARGET} labels: (200 - --seed-size) divisible by --batch, "
                    f"--max-labels >= {TARGET}")
    if not (shared_data() / "prefeval").is_dir():
        emit({"benchmark": "label_simulation", "skipped": f"shared data not found at {shared_data()}"})
        return 0
    quiet_logs()
    command = shlex.join(["python", "benchmarks/label_simulation.py", *(argv if argv is not None else sys.argv[1:])])
    results = run(args)
    png = plot(results, ROOT / "docs" / f"{args.name}.png")
    extra = {"results": results, "plot": str(png.relative_to(ROOT)), "arms": list(ARMS), "floor": FLOOR,
             "seed_size": args.seed_size, "batch": args.batch, "target": TARGET,
             "data": {n: {"path": r["data"], "sha256": r["data_sha256"]} for n, r in results.items()}}
    write_results(args.name, figures(results), title="label next vs random labelling, simulated on held labels",
                  command=command, extra=extra,
                  resampling={"unit": "seed", "n_clusters": args.seeds, "n_boot": 1000})
    log(f"written benchmarks/results/{args.name}.json and {png.relative_to(ROOT)}")
    if args.name == "label-simulation":  # the page quotes this record: keep it in step
        from _humans_doc import render_docs

        render_docs(args.name)
    emit({"benchmark": "label_simulation", "result": f"benchmarks/results/{args.name}.json",
          "match": {n: r["match"] for n, r in results.items()},
          "truth": {n: r["truth"] for n, r in results.items()}})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
