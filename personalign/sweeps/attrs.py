"""A trial's report as user attributes a person can read, and read back.

Each trial's figures are stored as several short Optuna user attributes (what
``optuna.load_study(...).trials[i].user_attrs`` and optuna-dashboard show), not one long JSON
line::

    {"strategy": "minilm-logreg", "objective": "f1", "f1": 0.769, "interval": "95% CI",
     "low": 0.70, "high": 0.83, "lm_calls": 0, "seconds": 0.4, "failures": 0, "n": 24,
     "report.precision": 0.62, "report.f1_by_group": {...}, ...}

The headline (strategy, objective, its value, the interval's ``low`` / ``high``, calls, seconds)
is flat; every other figure of the report is one attribute ``report.<key>``. :func:`trial_report`
reassembles the report from them, and reads the single ``report`` attribute older studies hold.
"""

from __future__ import annotations

from typing import Any

PREFIX = "report."
HEAD = ("objective", "lm_calls", "seconds", "failures", "n", "n_scored")
INTERVALS = {"ci": "95% CI", "range": "range over groups"}  # the report's key suffix -> the attribute's words
RESULT_KEYS = ("report", "strategy", "objective", "interval", "low", "high", *HEAD)  # besides the metric's own


def report_attrs(report: dict[str, Any], metric: str, strategy: str | None = None) -> dict[str, Any]:
    """The user attributes of ``report`` (a trial's figures; ``metric``: the set objective's name)."""
    out: dict[str, Any] = {} if strategy is None else {"strategy": strategy}
    rest = dict(report)
    for key in (*HEAD, metric, f"{metric}_running"):
        if key in rest:
            out[key] = rest.pop(key)
    for suffix, words in INTERVALS.items():
        bounds = rest.get(f"{metric}_{suffix}")
        if isinstance(bounds, (list, tuple)) and len(bounds) == 2:
            rest.pop(f"{metric}_{suffix}")
            out.update({"interval": words, "low": bounds[0], "high": bounds[1]})
            break
    out.update({PREFIX + k: v for k, v in rest.items()})
    return out


def trial_report(trial) -> dict[str, Any] | None:
    """The report of a finished trial (a ``FrozenTrial``): reassembled from its short attributes
    (:func:`report_attrs`), or an older study's single ``report`` attribute; None when it has none."""
    attrs = trial.user_attrs
    if "report" in attrs:  # a study written before the report was split
        return attrs["report"]
    metric = attrs.get("objective")
    keys = [k for k in attrs if k.startswith(PREFIX)]
    if metric is None and not keys and "n_scored" not in attrs:
        return None
    out: dict[str, Any] = {k[len(PREFIX):]: attrs[k] for k in keys}
    names = [metric] if isinstance(metric, str) else []
    names += [k[:-len("_running")] for k in attrs if isinstance(k, str) and k.endswith("_running")]
    for key in (*HEAD, *names, *(f"{n}_running" for n in names)):
        if key in attrs:
            out[key] = attrs[key]
    words = attrs.get("interval")
    suffix = next((s for s, w in INTERVALS.items() if w == words), None)
    if suffix and isinstance(metric, str):
        out[f"{metric}_{suffix}"] = [attrs.get("low"), attrs.get("high")]
    return out


def set_report(trial, report: dict[str, Any], metric: str, strategy: str | None = None) -> None:
    """Store ``report`` on the running ``trial`` (an ``optuna.Trial``) as :func:`report_attrs`."""
    for key, value in report_attrs(report, metric, strategy).items():
        trial.set_user_attr(key, value)


__all__ = ["PREFIX", "RESULT_KEYS", "report_attrs", "set_report", "trial_report"]
