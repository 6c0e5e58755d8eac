"""``personalign.compare``: strategies of a stage on the same held-out human labels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from personalign._verbs.cost import announce, measured, speed_key
from personalign._verbs.projection import project_compare
from personalign._verbs.folds import group_folds, run_folds, split_folds
from personalign._verbs.inputs import (check_capabilities, check_counts, entered, load_data, names_of, parse_strategies,
                                      resolve_model, with_module)
from personalign._verbs.reports import ComparisonReport
from personalign.errors import ArgumentError, BudgetExceeded, brief, note_partial
from personalign.lm.spend import spent_fields, total_spent


def compare(stage, strategies: Any = None, data: Any = None, *, split: str = "val", train_split: str = "train",
            cv: str | None = None, lm: Any = None, api_base: str | None = None, lm_kwargs: dict | None = None,
            seed: int = 0, n_boot: int = 1000, limit: int | None = None, train_limit: int | None = None,
            repeats: int = 1, temperature: float | None = None, out_dir: str | Path | None = None,
            callbacks: Any = (), progress: bool = False, on_cost: Any = None,
            concurrency: int | None = None, max_cost: float | None = None) -> ComparisonReport:
    """Compare strategies of ``stage`` on the same held-out rows against the human labels.

    Every trainable strategy is compiled on training rows only (the one compile path); each is then
    scored on held-out rows: binary stages F1, precision, recall and yes-rate, other stages the
    stage's metric, each with a 95% interval that resamples the stage's groups (fewer than 5: their
    range), plus the stage's set objective, LM calls and seconds. Every strategy after the first is
    paired with the first on the same rows. **A binary stage's first row is its reference**: the
    constant that predicts the class its objective scores (``all-yes`` for F1 of a true class), added
    when not listed, so a Δ reads against the trivial baseline.

    Args:
        stage, data, lm, api_base, lm_kwargs, callbacks, concurrency, max_cost: as
            :func:`personalign.compile`.
        strategies: comma-separated names or a list (``NAME@OPTIMIZER`` compiles an LLM strategy
            with a teleprompter; a list may hold ``dspy.Module`` objects); None: the stage's defaults.
        split / train_split: scored on ``split``, compiled on ``train_split`` (one split).
        cv: ``"groups"``: leave-one-group-out over every labelled row (all splits pooled): each
            strategy is compiled on all groups but one and scored on it; headline: the mean
            per-group figure, the pooled figure and the worst group beside it.
        limit: a seeded sample of that many rows (of ``split``; with ``cv``, of all rows),
            stratified over the stage's groups.
        train_limit: a seeded sample of that many of the rows each strategy is fitted or compiled
            on (``train_split``; with ``cv``, each fold's), stratified over the stage's groups.
        on_cost: called with the projected model calls (:class:`personalign.Cost`) before the
            first one; None: its line is printed on stderr when ``progress``.
        repeats / temperature: runs of each sampling strategy at that temperature (distinct
            ``rollout_id``), resampled inside every interval; deterministic ones run once.
        out_dir: write the result JSON and a chart (PNG) there (paths in ``result_file`` /
            ``chart_file``; with ``cv``, rewritten after each strategy). The JSON is written first: a
            chart that cannot be drawn leaves ``chart_file`` null and ``chart_error`` saying why.
        n_boot, seed: bootstrap resamples; seed of every stochastic step.

    Returns:
        :class:`ComparisonReport`: ``rows`` (one per strategy) and the JSON in ``to_dict()``;
        ``print(report)`` prints the table.

    Raises:
        ConfigurationError: an unknown stage, strategy, optimizer or model; a bad argument
            (:class:`~personalign.errors.ArgumentError`, naming it).
        DataError: unreadable data; an empty split; one class where a learned strategy needs two.
    """
    from personalign.stages import resolve_stage
    from personalign.tracking.callbacks import Callbacks, RunInfo

    st = resolve_stage(stage)
    check_counts(n_boot=n_boot, repeats=repeats, limit=limit, train_limit=train_limit)
    if cv not in (None, "groups"):
        raise ArgumentError("cv", f"must be 'groups' (leave-one-group-out), got {cv!r}")
    if isinstance(strategies, (list, tuple)):
        names = []
        for s in strategies:
            if not isinstance(s, str):
                st, s = with_module(st, s)
            names.append(s)
        strategies = names
    specs = parse_strategies(st, strategies)
    if st.reference and st.reference not in [n for n, o in specs if not o] and st.reference in st.registry:
        specs = [(st.reference, None), *specs]
    ds = load_data(st, data)
    groups = None
    if cv:
        folds, groups = group_folds(st, ds, specs, limit=limit, seed=seed, train_limit=train_limit)
    else:
        folds = split_folds(st, ds, specs, split=split, train_split=train_split, limit=limit, seed=seed,
                            train_limit=train_limit)
    uses_lm = any(st.registry.info(n).uses_lm for n, _ in specs)
    model = resolve_model(lm, needed=uses_lm, api_base=api_base, lm_kwargs=lm_kwargs, temperature=temperature,
                          concurrency=concurrency, max_cost=max_cost)
    check_capabilities(st, [n for n, _ in specs], model)
    result = _head(st, ds, specs, model, seed=seed, n_boot=n_boot, split=split, train_split=train_split,
                   folds=folds, groups=groups)
    if train_limit is not None:
        result["train_limit"] = train_limit
    cbs = Callbacks(callbacks)
    run = RunInfo("compare", st, params=_params(result, specs), tags={"cv": "groups"} if cv else {},
                  datasets=_datasets(folds, cv, split, train_split), data=ds.label, data_sha256=ds.sha256,
                  lm=model.name if uses_lm else None, split="logo" if cv else split)
    cbs.check(run)
    from personalign._verbs import tables

    files = _Files(result, out_dir, cbs, run)
    try:
        announced: list = []
        with cbs.run(run, result), entered(model, announced):
            cost = project_compare(st, specs, folds, lm=model.lm, model=model.name, seed=seed, repeats=repeats)
            announced.append(cost)
            result["projected_lm_calls"] = cost.to_dict()
            announce(cost, on_cost, progress)  # the run's inputs and cache checked; no model call yet
            table = (tables.GroupTable if cv else tables.SplitTable)(st, result, folds, n_boot=n_boot, seed=seed)
            with tables.progress_for(folds, specs, cv and progress, cost) as bar:
                for (base, opt), name, projected in zip(specs, names_of(specs), cost.strategies):
                    info = st.registry.info(base)
                    with measured(speed_key(model.name, name)) as used:  # its own speed, for the next line
                        done = run_folds(st, base, opt, folds, lm=model.lm, seed=seed, n_boot=n_boot, repeats=repeats,
                                         label=name, progress=progress and not cv,
                                         tracing=lambda n: cbs.tracing(run, n), on_fold=bar.on_fold(name),
                                         fit_calls=projected.fitting + projected.compiling)
                    table.add(name, info, done, reference=(name == st.reference and not result["strategies"]))
                    table.note(spent_fields(used.tokens))  # tokens and dollars from the responses' usage
                    cbs.on_candidate_end(run, table.candidate(name, info, done, model.name))
                    if cv:  # a long run keeps what it measured: "complete": false until the end
                        table.finish(partial=True)
                        files.write(partial=True)
                        cbs.on_partial(run, result)
            result["spent"] = total_spent(result["strategies"])
            table.finish()
            files.write()
    except BudgetExceeded:  # --max-cost writes nothing half: a leave-one-group-out run's partial files go
        for kept in (files.partial_file, *(getattr(c, "partial_file", None) for c in cbs.callbacks)):
            if kept:
                Path(kept).unlink(missing_ok=True)
        raise
    except KeyboardInterrupt as exc:  # the interrupt line names what a partial result was kept in
        note_partial(exc, files.partial_file, *(getattr(c, "partial_file", None) for c in cbs.callbacks))
        raise
    return ComparisonReport(stage=st.name, data=result, rows=result["strategies"])


def _head(st, ds, specs, model, *, seed, n_boot, split, train_split, folds, groups) -> dict[str, Any]:
    """The result's fields before any strategy runs."""
    from datetime import datetime, timezone

    from personalign.lm import adapter_name, default_model
    from personalign.lm.serving import endpoint_info
    from personalign.results_page import page_rows, row_fields

    head: dict[str, Any] = {"stage": st.name, "kind": st.kind, "metric": st.metric_name,
                            "objective": st.objective.name, "positive_name": st.positive_name, "data": ds.label,
                            "data_sha256": ds.sha256, "lm": model.name, "seed": seed, "n_boot": n_boot,
                            "strategy_names": names_of(specs), "reference": st.reference, "stage_ref": st.ref,
                            "row_fields": row_fields(st),
                            "rows": page_rows(st, [ex for f in folds for ex in f.test],
                                              [f.name for f in folds for _ in f.test] if groups is not None else None),
                            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"), "strategies": []}
    if groups is not None:
        return {**head, "split": "all (leave-one-group-out)", "cv": "groups", "group_key": st.group_key,
                "groups": groups, "n_groups": len(groups), "n": sum(len(f.test) for f in folds), "complete": False}
    evalset, trainset = folds[0].test, folds[0].train
    out = {**head, "split": split, "train_split": train_split, "n": len(evalset), "n_train": len(trainset),
           "lm": model.name or default_model(), "adapter": adapter_name(model.name) if model.name else None,
           "endpoint": endpoint_info(model.name) if model.name else None}
    if st.kind == "binary":
        gold = [bool(st.is_positive(st.gold(ex))) for ex in evalset]
        out["gold_yes_rate"] = sum(gold) / len(gold)
    return out


def _params(result: dict, specs) -> dict:
    keys = ("stage", "data", "data_sha256", "split", "train_split", "n", "n_train", "train_limit", "lm", "adapter",
            "seed", "n_boot")
    return {**{k: result[k] for k in keys if k in result}, "strategies": ",".join(names_of(specs)),
            **({"cv": "groups"} if result.get("cv") else {})}


def _datasets(folds, cv, split: str, train_split: str) -> list:
    if cv:
        return [([ex for f in folds for ex in f.test], "all", "evaluation")]
    return [(folds[0].test, split, "evaluation"), (folds[0].train, train_split, "training")]


class _Files:
    """The result JSON and chart under ``out_dir`` (atomic writes, one unique stem per run; with
    ``cv`` the JSON is rewritten after each strategy), announced to the callbacks when final.

    The JSON is written before anything reads the result back: a chart that cannot be drawn leaves
    ``chart_file`` null and says why in ``chart_error`` (the result rewritten with it), so the work
    of a run is never lost to a view of it."""

    def __init__(self, result: dict, out_dir: Any, cbs, run) -> None:
        import uuid

        from personalign._verbs.results import stamp

        self.result, self.out_dir, self.cbs, self.run = result, out_dir, cbs, run
        self.partial_file: str | None = None  # the result file while it holds "complete": false
        tag = "logo" if result.get("cv") else result["split"]
        self.stem = f"{result['stage']}-{tag}-{stamp()}-{uuid.uuid4().hex[:12]}"

    def write(self, partial: bool = False) -> None:
        from personalign._verbs.results import write_result

        if self.out_dir is None:
            return
        out = Path(self.out_dir)
        self.result["result_file"] = str(out / f"{self.stem}.json")
        write_result(self.result, out, stem=self.stem)
        self.partial_file = self.result["result_file"] if partial else None
        if partial:
            return
        self._chart(out / f"{self.stem}.png")
        write_result(self.result, out, stem=self.stem)
        for key in ("chart_file", "result_file"):
            if self.result[key] is not None:
                self.cbs.on_artifact(self.run, self.result[key])

    def _chart(self, path: Path) -> None:
        """``chart_file``: the chart drawn at ``path``; or null, with ``chart_error`` (one line)."""
        from personalign._verbs.results import plot_groups, plot_result

        plot = plot_groups if self.result.get("cv") else plot_result
        try:
            self.result["chart_file"] = str(plot(self.result, path))
        except Exception as exc:  # noqa: BLE001  (a figure the chart cannot draw; the CLI exits non-zero on it)
            self.result["chart_file"] = None
            self.result["chart_error"] = brief(exc)


__all__ = ["compare"]
