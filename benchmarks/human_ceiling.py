"""The human ceiling and the annotators' agreement on the shared recenter relevance annotations.

Reads ``../shared/data/recenter_relevance/raw_task3_annotations.jsonl`` (tool tests dropped) joined to
the released ``relevance_labels.jsonl`` (:func:`personalign.data.recenter.annotated_relevance`), and
reports what ``personalign label merge`` prints (Fleiss' κ, Krippendorff's α, each annotator against
the others) and the human ceiling (:func:`personalign.labels.human_ceiling`: each annotator's F1 of
"relevant" against the strict majority of the others on the rows with >= 3 annotators, ties not
relevant), per prompt and per annotator, and the best leave-one-prompt-out strategy of the run records
``relevance-lopo-*.json`` as a share of it (:func:`personalign.labels.share_of_ceiling`).

Writes ``benchmarks/results/human-ceiling.json``, re-renders the generated blocks of ``docs/humans.md``
and prints one JSON object.
Usage: ``python benchmarks/human_ceiling.py [--n-boot 1000] [--seed 0]``
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys

from _common import RESULTS, emit, log, shared_data, usage_error, write_results


def best_lopo() -> tuple[str, str, float] | None:
    """``(record, strategy, mean per-prompt F1)`` of the best strategy in the relevance LOPO records."""
    best = None
    for path in sorted(RESULTS.glob("relevance-lopo-*.json")):
        rec = json.loads(path.read_text(encoding="utf-8"))
        for row in rec.get("extra", {}).get("strategies", []):
            value = (row.get("headline") or {}).get("value")
            if value is not None and (best is None or value > best[2]):
                best = (rec["name"], row["name"], float(value))
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.n_boot < 1:
        usage_error(f"--n-boot must be >= 1, got {args.n_boot}")
    d = shared_data() / "recenter_relevance"
    if not d.is_dir():
        emit({"benchmark": "human_ceiling", "skipped": f"shared data not found at {d}"})
        return 0
    from personalign.data.recenter import annotated_relevance
    from personalign.labels import agreement, human_ceiling, share_of_ceiling
    from personalign.labels.merge import annotation_items
    from personalign.stages import resolve_stage as get_stage
    from personalign.record import figure

    st = get_stage("relevance")
    raw = d / "raw_task3_annotations.jsonl"
    examples, join = annotated_relevance(d / "relevance_labels.jsonl", raw)
    rows = [ex.model_dump() for ex in examples if ex.annotations]
    ag = agreement(annotation_items(rows))
    h = human_ceiling(st, [st.mark_inputs(ex.to_dspy()) for ex in examples], n_boot=args.n_boot, seed=args.seed)
    rng = h["f1_range"]
    figs = [figure("relevance.human.f1", "human ceiling: each annotator's F1 against the majority of the others",
                   h["f1"], metric="f1", ci=h["f1_ci"], n=h["n"],
                   note=f"{h['resampling']['n_clusters']} prompts (< 5): no interval; per-prompt range "
                        f"[{rng[0]:.3f}, {rng[1]:.3f}]; {h['n_items']} rows with >= 3 annotators")]
    figs += [figure(f"relevance.human.f1.{g.split(':')[-1]}", f"human ceiling on prompt {g}", v["f1"], metric="f1",
                    n=v["n"]) for g, v in h["by_group"].items()]
    figs += [figure(f"relevance.human.f1.{a}", f"annotator {a} against the others", v["f1"], metric="f1", n=v["n"],
                    note=f"yes-rate {v['yes_rate']:.3f}") for a, v in h["by_annotator"].items()]
    figs.append(figure("relevance.human.yes_rate", "annotators' own yes-rate (share of judgments 'relevant')",
                       h["yes_rate"], metric="yes_rate", n=h["n"]))
    fl, kr = ag["fleiss"], ag["krippendorff"]
    figs.append(figure("relevance.agreement.fleiss_kappa", "Fleiss' kappa", fl["kappa"], metric="kappa",
                       n=fl["n_items"], note=f"items with {fl['raters_per_item']} annotators (statsmodels)"))
    figs.append(figure("relevance.agreement.krippendorff_alpha", "Krippendorff's alpha (nominal)", kr["alpha"],
                       metric="alpha", n=kr["n_items"], note=f"{kr['n_annotators']} annotators, missing judgments "
                                                              "allowed (krippendorff package)"))
    for row in ag["annotators"]:
        if row["kappa"] is not None:
            figs.append(figure(f"relevance.agreement.{row['annotator']}.kappa_vs_rest",
                               f"annotator {row['annotator']}: Cohen's kappa against the majority of the others",
                               row["kappa"], metric="kappa", n=row["n"], note=f"agreement {row['agreement']:.3f}"))
    figs.append(figure("relevance.join.matched", "raw vote items joined to a released row", float(join["matched"]),
                       metric="count", n=join["raw_items"], note=f"{join['released_only']} released rows have no vote"))
    figs.append(figure("relevance.join.label_equal", "joined rows whose released label is the raw votes' majority",
                       float(join["label_equal"]), metric="count", n=join["matched"],
                       note=f"released yes-rate equal to the votes' on {join['yes_rate_equal']}"))
    best = best_lopo()
    if best is not None:
        share = share_of_ceiling(best[2], h)
        figs.append(figure("relevance.human.share.best-lopo", f"best leave-one-prompt-out strategy ({best[1]}, "
                           f"{best[2]:.3f} mean per-prompt F1) as a share of the human ceiling", share,
                           metric="share", note=f"from {best[0]}.json; the ceiling is on prompts p0 and p2 against "
                                                "the others' votes, the strategy on 4 prompts against the released labels"))
    command = shlex.join(["python", "benchmarks/human_ceiling.py", *(argv if argv is not None else sys.argv[1:])])
    write_results("human-ceiling", figs, title="relevance: the human ceiling and the annotators' agreement",
                  command=command, data=str(raw), stage="relevance", resampling=h["resampling"],
                  extra={"ceiling": h, "agreement": ag, "join": join})
    log("written benchmarks/results/human-ceiling.json")
    if (RESULTS / "label-simulation.json").exists():  # docs/humans.md quotes both records
        from _humans_doc import render_docs

        render_docs()
    emit({"benchmark": "human_ceiling", "f1": h["f1"], "n": h["n"], "by_group": h["f1_by_group"],
          "fleiss": fl["kappa"], "krippendorff": kr["alpha"], "join": join})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
