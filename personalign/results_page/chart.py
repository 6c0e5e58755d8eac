"""The results page's chart: one bar per strategy (the headline figure with its 95% interval, or
the range of its groups when there are too few for one) and a dot per group, as PNG bytes
(matplotlib, Agg) for a ``data:`` URI -- nothing is fetched when the page opens."""

from __future__ import annotations

import io
from typing import Any

__all__ = ["chart_png", "chart_points"]


def chart_points(result: dict) -> list[dict[str, Any]]:
    """Per strategy ``{"name", "value", "low", "high", "interval" ("95% CI" | "range" | None),
    "groups": [values]}`` read from a compare result (``--cv groups``: the headline mean per group
    and each held-out group; single split: the metric and its per-group figures)."""
    key = result.get("metric", "f1")
    out = []
    for r in result["strategies"]:
        if result.get("cv") == "groups":
            h = r["headline"]
            value, ci, rng = h["value"], h.get("ci"), h.get("range")
            groups = [g.get(key) for g in r.get("by_group") or []]
        else:
            value, ci, rng = r.get(key), r.get(f"{key}_ci"), r.get(f"{key}_range")
            groups = list((r.get(f"{key}_by_group") or {}).values())
        band = ci or rng
        out.append({"name": r["name"], "value": value, "low": band[0] if band else None,
                    "high": band[1] if band else None, "interval": "95% CI" if ci else "range" if rng else None,
                    "groups": [g for g in groups if g is not None]})
    return out


def chart_png(result: dict, *, dpi: int = 110) -> bytes:
    """The chart of ``result`` as PNG bytes (about 700 x 330 px at the default ``dpi``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    key = result.get("metric", "f1")
    points = chart_points(result)
    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(points) + 2.4), 3.0))
    xs = range(len(points))
    values = [p["value"] if p["value"] is not None else 0.0 for p in points]
    ax.bar(xs, values, color="#8fb3d9", edgecolor="#3b6ea5", width=0.6, zorder=2,
           label=("mean per group" if result.get("cv") == "groups" else key))
    for x, p in zip(xs, points):
        if p["low"] is not None and p["value"] is not None:
            ax.errorbar(x, p["value"], yerr=[[p["value"] - p["low"]], [p["high"] - p["value"]]], color="#1f3b5c",
                        capsize=5, lw=1.4, zorder=3)
        if p["groups"]:
            ax.plot([x + 0.18] * len(p["groups"]), p["groups"], "o", color="#222", ms=3.5, zorder=4,
                    alpha=0.75 if len(p["groups"]) <= 20 else 0.3)  # many groups: overlaps show as darker dots
        if p["value"] is not None:
            top = max(p["value"], p["high"] if p["high"] is not None else p["value"])
            ax.annotate(f"{p['value']:.2f}", (x, top), textcoords="offset points", xytext=(0, 4), ha="center",
                        fontsize=8, color="#1f3b5c")
    if key == "f1" and result.get("gold_yes_rate") is not None:
        rate = result["gold_yes_rate"]
        ax.axhline(2 * rate / (1 + rate), color="grey", ls="--", lw=1, zorder=1,
                   label=f"all-{result.get('positive_name', 'yes')} F1")
    human = result.get("human")
    if human and human["metric"] == key:  # the human ceiling (its mean per group under --cv groups)
        value = human["headline"]["value"] if "headline" in human else human[key]
        ax.axhline(value, color="#b5651d", ls=":", lw=1.5, zorder=1, label=f"human ceiling ({value:.2f})")
    ax.plot([], [], "o", color="#222", ms=3.5, label="one group")
    ax.set_xticks(list(xs), [p["name"] for p in points], rotation=15 if len(points) > 3 else 0, ha="right"
                  if len(points) > 3 else "center", fontsize=9)
    ax.set_ylim(0, 1.12)
    what = {"95% CI": "95% CI", "range": "range over groups"}
    bars = sorted({what[p["interval"]] for p in points if p["interval"]})
    ax.set_ylabel(f"{key}" + (f" ({', '.join(bars)})" if bars else ""), fontsize=9)
    ax.grid(axis="y", color="#e5e5e5", zorder=0)
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()
