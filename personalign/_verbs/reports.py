"""What the verbs return: typed results whose ``to_dict()`` is the JSON the command line prints
with ``--json`` and whose ``str()`` is the table it prints."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Report:
    """A verb's result: ``data`` is its JSON object (``to_dict()``); ``stage`` its stage name;
    ``report[key]`` reads ``data``; ``str(report)`` is what the command line prints."""

    stage: str
    data: dict = field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.data)

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def renderables(self) -> list:
        return []

    def __str__(self) -> str:
        from personalign._verbs.render import as_text

        return as_text(self.renderables())

    def __rich_console__(self, console, options):
        yield from self.renderables()


@dataclass
class CompiledProgram:
    """What :func:`personalign.compile` returns: the program (call it as ``program(**inputs)``),
    where it was saved (None: not saved), the stage and strategy names, the compile record
    (``info``: :class:`personalign.optimizers.base.CompileResult` as a dict, with the data's name
    and sha256), the model and its output adapter (None for LM-free strategies)."""

    program: Any
    stage: str
    strategy: str
    optimizer: str | None
    info: dict | None
    path: Path | None = None
    stage_ref: str | None = None
    lm: str | None = None
    adapter: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "stage_ref": self.stage_ref, "strategy": self.strategy,
                "optimizer": self.optimizer, "program": None if self.path is None else str(self.path),
                "prompt_file": None if self.path is None else str(self.path / "prompt.md"), "lm": self.lm,
                "adapter": self.adapter, "compile": self.info}

    def __str__(self) -> str:
        from personalign._verbs.render import compile_summary_line

        name = self.strategy + (f"@{self.optimizer}" if self.optimizer else "")
        lines = [f"compiled {name}" + (f" -> {self.path}\nreadable prompt: {self.path / 'prompt.md'}"
                                       if self.path is not None else " (not saved)")]
        summary = compile_summary_line(name, self.info)
        return "\n".join(lines + ([summary] if summary else []))


@dataclass
class EvalReport(Report):
    """:func:`personalign.evaluate`'s result: ``metric`` (``f1``, ``accuracy``, ...), its ``value``
    and 95% ``ci`` (None below 5 groups: see ``data[metric + "_range"]``)."""

    metric: str = ""
    value: float | None = None
    ci: list[float] | None = None
    kind: str = "binary"
    positive_name: str = "yes"

    def renderables(self) -> list:
        from personalign._verbs.render import eval_line

        return [*self.data.get("warnings", []),
                eval_line(self.data, metric=self.metric, kind=self.kind, positive_name=self.positive_name)]


@dataclass
class ComparisonReport(Report):
    """:func:`personalign.compare`'s result: one row per strategy (``rows``; ``row(name)``), the
    first the reference the others are paired against (``vs_first``)."""

    rows: list[dict] = field(default_factory=list, repr=False)

    def row(self, name: str) -> dict:
        for r in self.rows:
            if r["name"] == name:
                return r
        raise KeyError(name)

    def renderables(self) -> list:
        from personalign._verbs.render import comparison_renderables

        return comparison_renderables(self.data)


@dataclass
class SweepReport(Report):
    """:func:`personalign.sweep`'s result: the ``best`` trial (``number``, ``value``, ``params``,
    ``report``) and the exported ``program``."""

    best: dict | None = None

    def renderables(self) -> list:
        from personalign._verbs.render import sweep_lines

        return sweep_lines(self.data)


@dataclass
class PredictReport(Report):
    """:func:`personalign.predict`'s result: one row per input (``rows``: ``line``, ``id``, the
    output field, ``score``, ``decision``, ``error``) and where they were written."""

    rows: list[dict] = field(default_factory=list, repr=False)

    def renderables(self) -> list:
        d = self.data
        failed = bool(d["n"]) and d["failures"] == d["n"]
        from personalign.lm import calls_text

        line = (f"{d['strategy']} on {d['n']} rows of {d['data']}: failures {d['failures']}, "
                f"LM calls {calls_text(d['lm_calls'], d.get('cached_lm_calls') or 0)}")
        if d.get("positives") is not None:
            line += f", {d.get('positive_name', 'positive')} {d['positives']}"
        if failed:
            line += " (every row failed: see the 'error' field)"
        if d.get("out"):
            line += f"; written to {d['out']}"
        out = [f"rule: {d['rule']}"] if d.get("rule") else []
        out += [f"decision: {n}" for n in dict.fromkeys(r["decision"] for r in self.rows if r.get("decision"))]
        return out + [line]


__all__ = ["CompiledProgram", "ComparisonReport", "EvalReport", "PredictReport", "Report", "SweepReport"]
