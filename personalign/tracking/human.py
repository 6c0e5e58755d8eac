"""The human row of a result as MLflow metrics: the human ceiling (``human``) and each strategy's
share of it (``share_of_human``), for the parent run of ``compare`` and the run of ``eval``.

Names follow the run's other summary metrics: single split ``<metric>/human`` (beside
``<metric>/<strategy>``) with ``<metric>_ci/human_low`` / ``_high``; leave-one-group-out
``human.mean_group_<metric>``, ``human.pooled_<metric>``, ``human.worst_group_<metric>``; shares
``share_of_human/<strategy>``. A result without a human row gives no metrics.
"""

from __future__ import annotations

import re

__all__ = ["human_metrics"]

_NAME = re.compile(r"[^\w.\- /]+")


def human_metrics(result: dict) -> dict:
    """``{metric name: value}`` of ``result``'s human row (a compare result, or an eval result whose
    own ``share_of_human`` is logged with its figures); ``{}`` without one."""
    h = result.get("human")
    if not h:
        return {}
    m = h["metric"]
    if "headline" in h:  # leave-one-group-out
        out = {f"human.mean_group_{m}": h["headline"]["value"], f"human.mean_group_{m}_ci": h["headline"]["ci"],
               f"human.pooled_{m}": h["pooled"]["value"], f"human.worst_group_{m}": h["worst"]["value"]}
    else:
        out = {f"{m}/human": h[m], f"{m}_ci/human": h.get(f"{m}_ci")}
    out.update({"human.judgments": h["n"], "human.annotators": h["n_annotators"], "human.yes_rate": h.get("yes_rate")})
    for row in result.get("strategies", []):
        if row.get("share_of_human") is not None:
            out[f"share_of_human/{_NAME.sub('_', row['name'].replace('@', ' at '))}"] = row["share_of_human"]
    return {k: v for k, v in out.items() if v is not None}
