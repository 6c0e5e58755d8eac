"""The figures and the docs table of ``relevance_newprompt.py``'s results file: run-record figures
(:mod:`personalign.record`) and the Markdown block rendered into docs/relevance.md. Below 5 prompts
a mean has no interval: the range of the per-prompt figures is shown instead (docs/figures.md)."""

from __future__ import annotations

import json
from pathlib import Path

from _common import usage_error


def registered(name: str) -> str | None:
    """The relevance strategy a row measures (``yes-prob@auto`` -> ``yes-prob``, ``ensemble-rank+probe``
    -> ``ensemble-rank``: the decision mode and the probe member are settings, not strategies), None
    for an analysis row that is no strategy (``margin:offset``, the oracle, plain DSPy)."""
    return None if ":" in name else name.split("@", 1)[0].split("+", 1)[0]


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


def _table(strategies: dict, prompts: list[str], short: list[str]) -> list[str]:
    lines = ["| strategy | mean F1 (range) | worst | pooled F1 | vs style-rank (range), p | "
             + " | ".join(f"F1 / yes {p}" for p in short) + " | AUC " + " / ".join(short) + " |",
             "|---|---|---|---|---|" + "---|" * len(short) + "---|"]
    for name, t in strategies.items():
        per = " | ".join(f"{t['per_prompt_f1'][p]:.3f} / {t['per_prompt_yes_rate'][p]:.2f}" for p in prompts)
        aucs = [t["auc"].get(p) for p in prompts]
        auc = " / ".join(f"{a:.2f}" for a in aucs) if all(a is not None for a in aucs) else "-"
        vs = ("-" if t.get("p_sign_flip") is None else
              f"{t['diff_vs_style_rank']:+.3f} {_signed(t['diff_ci'], t['diff_range'])}, p {t['p_sign_flip']:.3f}")
        lines.append(f"| `{name}` | {t['mean_f1']:.3f} {_spread(t['ci'], t['range'])} | {t['worst_f1']:.3f} | "
                     f"{t['pooled_f1']:.3f} | {vs} | {per} | {auc} |")
    return lines


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
             ] + _table(ex["strategies"], prompts, short)
    sub = ex.get("probe_subset")
    if sub:
        lines += ["", f"**`lm-probe` on the users whose hidden states are all cached** ({len(sub['units'])} of the "
                      f"(prompt, user) units, {sub['n_pairs']} pairs; every row refitted and scored on these pairs only, "
                      "so the rows compare with each other, not with the table above):", ""]
        lines += _table(sub["strategies"], prompts, short)
    part = ex.get("partial_rows") or {}
    if part:
        lines += ["", "**Rows done on some prompts only** (per-prompt F1 / yes-rate; no mean: a subset of prompts is "
                      "not the leave-one-prompt-out figure):", "", "| row | " + " | ".join(short) + " |",
                  "|---|" + "---|" * len(short)]
        for name, t in part.items():
            cells = [f"{t['per_prompt_f1'][p]:.3f} / {t['per_prompt_yes_rate'][p]:.2f}" if p in t["per_prompt_f1"] else "not run"
                     for p in prompts]
            lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
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


def figures(table: dict, n: int, prefix: str = "") -> list[dict]:
    """The record's figures: per strategy the mean per-prompt F1 (interval over prompts, or none
    and the range in the note below 5 prompts), the worst prompt, the pooled F1, each prompt's F1
    (interval over its users), the paired difference to style-rank (range and sign-flip p in the
    note below 5 prompts), and the ROC AUC of the score per held-out prompt."""
    from personalign.record import figure

    out = []
    for name, t in table.items():
        st, base = registered(name), f"relevance.newprompt.{prefix}{name}"
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


def _ratio_figures(vs: dict | None) -> list[dict]:
    from personalign.record import figure

    if not vs:
        return []
    out = [figure("relevance.newprompt.compile_vs_plain_dspy.diff", f"zero-shot@labeled - {vs['best_plain']}, mean per-prompt F1",
                  vs["diff"], metric="f1_mean_diff", strategy="zero-shot", note=f"target {vs['target']}; met: {vs['met']}")]
    if vs["ratio"] is not None:
        out.append(figure("relevance.newprompt.compile_vs_plain_dspy.ratio", f"zero-shot@labeled / {vs['best_plain']}, mean per-prompt F1",
                          vs["ratio"], metric="f1_ratio", strategy="zero-shot", note=f"target {vs['target']}; met: {vs['met']}"))
    return out


__all__ = ["BEGIN", "END", "figures", "registered", "render_docs", "render_markdown"]
