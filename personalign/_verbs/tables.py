"""The rows of a comparison, built from each strategy's fold results: :class:`SplitTable` (one
split: the report, the set objective, the paired comparison with the first row and its paired
permutation test of the objective) and
:class:`GroupTable` (leave-one-group-out: the mean per-group headline, the pooled figure, the
worst group, the sign-flip test over groups, Holm-adjusted)."""

from __future__ import annotations

import contextlib
from typing import Iterator

from personalign._verbs.folds import FoldResult, compile_cached, compile_calls

HIDDEN = frozenset({"correct", "gold_positive", "predicted_positive", "scores", "cluster_levels", "error_at"})


def row_arrays(done: list[FoldResult]) -> dict:
    """The per-row arrays of one strategy (:func:`personalign.results_page.strategy_arrays`), the
    folds' joined in the order of the result's ``rows`` (a fold's error indices offset by the rows
    before it): ``scores``, ``correct``, ``row_errors``."""
    from personalign.results_page import strategy_arrays

    out: dict = {"scores": [], "correct": [], "row_errors": {}}
    offset = 0
    for f in done:
        part = strategy_arrays(f.report, f.report.get("error_at"))
        out["scores"] += part["scores"] or [None] * len(f.report["predictions"])
        out["correct"] += part["correct"] or [None] * len(f.report["predictions"])
        out["row_errors"].update({str(int(i) + offset): msg for i, msg in part["row_errors"].items()})
        offset += len(f.report["predictions"])
    return out


def decision_rules(done: list[FoldResult]) -> list[dict]:
    """The decision rule each fold's compile chose (``{"group", "rule", "describe", "reason",
    "band"}``; :func:`personalign.compile_service.decision_rule_of`), folds without one left out."""
    from personalign.compile_service import decision_rule_of

    return [{"group": f.fold, **rule} for f in done if (rule := decision_rule_of(f.compile_info))]


class _Table:
    def __init__(self, stage, result: dict, folds: list, *, n_boot: int, seed: int) -> None:
        self.stage, self.result, self.n_boot, self.seed, self.folds = stage, result, n_boot, seed, folds
        self.examples = [ex for f in folds for ex in f.test]  # the scored rows, in fold order
        self.human = self.human_row()  # the human ceiling where the rows carry annotations of >= 3 people
        if self.human is not None:
            result["human"] = self.human

    def human_row(self) -> dict | None:
        from personalign._verbs.human import human_on_rows

        return human_on_rows(self.stage, self.examples, n_boot=self.n_boot, seed=self.seed)

    def candidate(self, name: str, info, done: list[FoldResult], model: str | None):
        """The :class:`~personalign.tracking.callbacks.Candidate` of the strategy just added."""
        from personalign.tracking.callbacks import Candidate

        row = self.result["strategies"][-1]
        compile_info = done[-1].compile_info
        metrics = {k: v for k, v in row.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        dev = row.get("compile_summary") or {}
        metrics.update({k: dev[k] for k in ("dev_before", "dev_after") if dev.get(k) is not None})
        single = len(done) == 1
        return Candidate(name, params={"strategy": name, "summary": info.summary, "uses_lm": info.uses_lm,
                                       **({"lm": model} if info.uses_lm else {}),
                                       **({"compile": compile_info} if compile_info else {})},
                         metrics=metrics, row=row, examples=self.examples if single else None,
                         report=done[0].report if single else None, program=done[0].program if single else None,
                         traces=done[0].traces if single else None)

    def partial(self) -> dict:
        return self.result

    def note(self, fields: dict) -> None:
        """Add ``fields`` to the row just added (its spend: :func:`personalign.lm.spend.spent_fields`)."""
        for row in (*self.result["strategies"][-1:], *getattr(self, "rows", [])[-1:]):
            row.update(fields)

    def finish(self, partial: bool = False) -> None:
        from personalign._verbs.results import result_record

        self.result["uses_lm"] = any(r.get("uses_lm") for r in self.result["strategies"])
        self.result["run_record"] = result_record(self.result)


class SplitTable(_Table):
    """Rows of a single-split comparison (``vs_first``: paired bootstrap of the metric, the paired
    permutation test of the objective (``paired_test``, Holm-adjusted), the sign-flip test and
    McNemar kept for reference; ``vs_uncompiled`` for ``NAME@OPT`` after ``NAME``)."""

    def __init__(self, stage, result: dict, folds: list, *, n_boot: int, seed: int) -> None:
        super().__init__(stage, result, folds, n_boot=n_boot, seed=seed)
        self.reports: dict[str, dict] = {}

    def add(self, name: str, info, done: list[FoldResult], *, reference: bool) -> dict:
        from personalign.evaluation import paired_comparison

        st, (fold,) = self.stage, done
        report = fold.report
        objective = report.get(st.metric_name) if st.objective.on == "metric" else \
            st.objective.value_or_none(st.score(self.examples, report["predictions"], scores=report.get("scores")))
        hidden = HIDDEN | ({"predictions_by_repeat"} if report.get("repeats", 1) == 1 else set())
        row = {"name": name, **{k: v for k, v in report.items() if k not in hidden}, "objective": objective,
               "uses_lm": info.uses_lm,
               "compile_lm_calls": compile_calls(fold.compile_info),
               "compile_cached_lm_calls": compile_cached(fold.compile_info), "seconds": fold.seconds,
               "compile": fold.compile_info, "compile_summary": fold.compile_summary, "warnings": fold.warnings,
               "decision_rules": decision_rules(done), **row_arrays(done)}
        if reference:
            row["reference"] = True
        if self.human is not None:
            from personalign._verbs.human import share_on_rows

            row["share_of_human"] = share_on_rows(st, self.human, self.examples, report)
        first = next(iter(self.reports.values()), None)
        if first is not None:
            row["vs_first"] = {"against": self.result["strategies"][0]["name"],
                               **paired_comparison(st, report, first, n_boot=self.n_boot, seed=self.seed,
                                                   examples=self.examples)}
            row["vs_first"]["f1_diff"] = row["vs_first"]["diff"]  # former key
        base = name.split("@", 1)[0]
        if "@" in name and base in self.reports:  # the same strategy uncompiled ran earlier: pair them
            row["vs_uncompiled"] = {"against": base, **paired_comparison(st, report, self.reports[base],
                                                                         n_boot=self.n_boot, seed=self.seed,
                                                                         examples=self.examples)}
        self.reports[name] = report
        self.result["strategies"].append(row)
        return row

    def finish(self, partial: bool = False) -> None:
        from personalign._verbs.groups import add_holm

        rows = self.result["strategies"]
        add_holm(rows, key=lambda r: r["vs_first"]["paired_test"], test=lambda t: t)  # the test the table shows
        add_holm([r for r in rows if "vs_first" not in r or "permutation" in r["vs_first"]["diff"]],
                 key=lambda r: r["vs_first"]["diff"])  # the sign-flip kept for reference (its former p_holm)
        super().finish(partial)


class GroupTable(_Table):
    """Rows of a leave-one-group-out comparison (``headline``, ``pooled``, ``worst``, ``by_group``;
    ``vs_first``: per-group differences, sign-flip p, Holm)."""

    def __init__(self, stage, result: dict, folds: list, *, n_boot: int, seed: int) -> None:
        super().__init__(stage, result, folds, n_boot=n_boot, seed=seed)
        self.rows: list[dict] = []

    def human_row(self) -> dict | None:
        from personalign._verbs.human import human_over_groups

        return human_over_groups(self.stage, self.folds, n_boot=self.n_boot, seed=self.seed)

    def add(self, name: str, info, done: list[FoldResult], *, reference: bool) -> dict:
        from personalign._verbs.groups import add_holm, paired_groups, public_row, summarize_strategy

        per_fold = [{"group": f.fold, "report": f.report, "compile_summary": f.compile_summary} for f in done]
        row = summarize_strategy(self.stage, name, per_fold, self.examples, n_boot=self.n_boot, seed=self.seed)
        row.update(uses_lm=info.uses_lm, lm_calls=sum(f.report["lm_calls"] for f in done),
                   compile_lm_calls=sum(compile_calls(f.compile_info) for f in done),
                   cached_lm_calls=sum(f.report.get("cached_lm_calls", 0) for f in done),
                   compile_cached_lm_calls=sum(compile_cached(f.compile_info) for f in done),
                   failures=sum(f.report["failures"] for f in done),
                   seconds=round(sum(f.seconds for f in done), 3), repeats=done[0].report["repeats"],
                   repeat_note=done[0].report["repeat_note"], warnings=sorted({w for f in done for w in f.warnings}),
                   decision_rules=decision_rules(done))
        row.update(row_arrays(done))
        if reference:
            row["reference"] = True
        if self.human is not None:
            from personalign._verbs.human import share_over_groups

            row["share_of_human"] = share_over_groups(self.stage, self.human, self.folds, [f.report for f in done])
        if self.rows:
            row["vs_first"] = paired_groups(row, self.rows[0], seed=self.seed, group_key=self.stage.group_key)
        self.rows.append(row)
        add_holm(self.rows)
        self.result["strategies"] = [public_row(r) for r in self.rows]
        return self.result["strategies"][-1]

    def finish(self, partial: bool = False) -> None:
        self.result["complete"] = not partial
        super().finish()


class _Bar:
    """The leave-one-group-out progress display (stderr; cleared when done; none off a terminal):
    the run's new model calls, advanced by each one made, and the fold being fitted and scored."""

    def __init__(self, bar, total: int, n_folds: int) -> None:
        self.bar, self.n_folds, self.counter = bar, n_folds, None
        self.task = bar.add_task("leave-one-group-out", total=max(total, 1)) if bar is not None else None

    def tick(self) -> None:
        """A model call was made or answered: the bar shows the calls made so far."""
        if self.bar is not None and self.counter is not None:
            self.bar.update(self.task, completed=self.counter.snapshot())

    def on_fold(self, name: str):
        def update(k: int, fold) -> None:
            if self.bar is not None:
                self.bar.update(self.task, description=f"{name}: fit on {self.n_folds - 1} groups, score {fold.name} "
                                                       f"({k + 1}/{self.n_folds})")
        return update


@contextlib.contextmanager
def progress_for(folds, specs, enabled: bool, cost=None) -> Iterator[_Bar]:
    """A :class:`_Bar` of the run's new model calls (``cost``: its projection), with the time left:
    from the pace of the calls made, and before that from the model's known speed (a no-op bar when
    not ``enabled``)."""
    if not enabled:
        yield _Bar(None, 0, len(folds))
        return
    from personalign._verbs.results import progress_display
    from personalign.lm import CallCounter

    new = cost.new if cost is not None else 0
    seconds = cost.seconds if cost is not None else None
    bar = progress_display(True, seconds_per_call=seconds / new if new and seconds else None)
    bar.start()
    try:
        shown = _Bar(bar, new, len(folds))
        with CallCounter(on_call=shown.tick) as counter:
            shown.counter = counter
            yield shown
    finally:
        bar.stop()


__all__ = ["GroupTable", "SplitTable", "progress_for"]
