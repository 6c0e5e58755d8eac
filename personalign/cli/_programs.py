"""``personalign compile STAGE`` and ``personalign eval STAGE`` for every stage."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from pathlib import Path

from personalign.cli._checks import check_out_dir
from personalign.errors import ConfigurationError


def _metric_keys(stage) -> tuple[str, ...]:
    if stage.kind == "binary":
        return ("f1", "f1_ci", "precision", "precision_ci", "recall", "recall_ci", "yes_rate", "yes_rate_ci",
                "accuracy")
    return (stage.metric_name, f"{stage.metric_name}_ci")


def run_compile(*, stage: str, strategy: str | None, optimizer: str | None, data: Path, train_split: str,
                lm: str | None, seed: int, out: Path | None, cache_dir, no_cache: bool, tracking_uri: str | None,
                no_track: bool, json_out: bool) -> None:
    from personalign.data.digest import file_sha256
    from personalign.compile_service import compile_program
    from personalign.lm import adapter_name, default_model, configure_cache, make_lm
    from personalign.optimizers import OPTIMIZERS
    from personalign.programs.export import prompt_text
    from personalign.programs.saved import save_program
    from personalign.settings import runs_dir
    from personalign.programs.stages import get_stage
    from personalign.tracking import Tracker
    from personalign.tracking_native import log_dataset, register_prompt, run_name

    st = get_stage(stage)
    registry = st.registry
    strategy = strategy or st.default_strategies.split(",")[0].strip()
    info = registry.info(strategy)
    if optimizer is not None:
        opt_info = OPTIMIZERS.info(optimizer)
        if opt_info.kind == "teleprompter" and info.trainable:
            raise ConfigurationError(f"teleprompters compile LLM strategies; '{strategy}' is fitted by its own "
                                     "optimizer (omit --optimizer)")
        if not info.uses_lm:
            raise ConfigurationError(f"'{strategy}' calls no LM; it has nothing for --optimizer to compile")
        if optimizer == "knn":
            raise ConfigurationError("knn programs keep their neighbour index in memory and cannot be saved; "
                                     "use `compare --strategies NAME@knn` to evaluate them")
    check_out_dir(out)
    trainset = st.load(data, train_split)
    if info.trainable:
        st.check_fittable(trainset, data, train_split)
    model = lm or default_model()
    lm_obj = make_lm(model) if info.uses_lm else None
    name = strategy + (f"@{optimizer}" if optimizer else "")
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    target = out or runs_dir() / "programs" / f"{st.name}-{name.replace('@', '-')}-{stamp}"
    check_out_dir(target)
    # every input is valid: only now touch the cache and the tracking store
    configure_cache(cache_dir, enabled=not no_cache)
    tracker = None if no_track else Tracker(tracking_uri)
    if tracker is not None:
        tracker.check()
    compile_info: dict = {}

    def work():
        program, info_dict = compile_program(st, strategy, optimizer, trainset, lm=lm_obj, seed=seed)
        compile_info.update(info_dict or {"optimizer": None})
        compile_info.update({"data": str(data), "train_split": train_split})
        # build in a sibling temp dir, then rename: an interrupted compile leaves no half-written program
        try:
            save_program(program, target, stage=st.name, strategy=strategy, lm=model if info.uses_lm else None,
                         compile_info=compile_info, extra_files={"prompt.md": prompt_text(program)})
        except OSError as exc:
            raise ConfigurationError(f"cannot write --out {target}: {exc.strerror or exc}") from None
        if tracker is not None:
            tracker.log_metrics({k: v for k, v in compile_info.items() if isinstance(v, (int, float))})
            tracker.log_artifact(target / "program.json")
            tracker.log_artifact(target / "prompt.md")
            prompt = register_prompt(tracker, program, stage=st.name, strategy=strategy, optimizer=optimizer,
                                     lm=model if info.uses_lm else None, run_id=tracker.run_id)
            if prompt:
                compile_info["prompt"] = prompt

    params = {"stage": st.name, "strategy": strategy, "optimizer": optimizer, "data": str(data),
              "data_sha256": file_sha256(data), "train_split": train_split, "seed": seed,
              "lm": model if info.uses_lm else None}
    if tracker is not None:
        with tracker.run(run_name("compile", st.name, strategy=name, data=data, split=train_split,
                                  lm=model if info.uses_lm else None),
                         params=params, tags={"command": "compile", "stage": st.name}):
            log_dataset(tracker, st, trainset, data=data, sha256=params["data_sha256"], split=train_split,
                        context="training")
            work()
    else:
        work()
    summary = {"stage": st.name, "strategy": strategy, "optimizer": optimizer, "program": str(target),
               "prompt_file": str(target / "prompt.md"), "compile": compile_info,
               "lm": model if info.uses_lm else None, "adapter": adapter_name(model) if info.uses_lm else None}
    if json_out:
        sys.stdout.write(json.dumps(summary, default=str) + "\n")
    else:
        from rich.console import Console

        from personalign.compile_service import summary_line

        line = summary_line(name, compile_info)
        Console().print(f"compiled {name} -> {target}\nreadable prompt: {target / 'prompt.md'}"
                        + (f"\n{line}" if line else ""), markup=False, highlight=False)


def run_eval(*, stage: str, program: Path, data: Path, split: str, lm: str | None, seed: int, n_boot: int,
             cache_dir, no_cache: bool, tracking_uri: str | None, no_track: bool, json_out: bool,
             limit: int | None = None) -> None:
    from personalign.data.digest import file_sha256
    from personalign.evaluation import evaluate_stage
    from personalign.lm import default_model, configure_cache, make_lm
    from personalign.programs.fitted import fitted_rows_warning
    from personalign.programs.saved import load_program
    from personalign.programs.stages import get_stage
    from personalign.tracking import Tracker
    from personalign.tracking_native import lm_traces, log_dataset, log_predictions, run_name

    st = get_stage(stage)
    if not program.exists():
        raise ConfigurationError(f"no saved program at {program}")
    prog, meta = load_program(program, stage=st.name)
    evalset = st.load(data, split)
    leak = fitted_rows_warning(meta, data, split)
    if leak:
        sys.stderr.write(leak + "\n")
    evalset = st.limit(evalset, limit, seed)
    uses_lm = st.registry.info(meta["strategy"]).uses_lm
    model = lm or meta.get("lm") or default_model()
    lm_obj = make_lm(model) if uses_lm else None
    configure_cache(cache_dir, enabled=not no_cache)  # after every input check: bad input writes nothing
    tracker = None if no_track else Tracker(tracking_uri)
    if tracker is not None:
        tracker.check()
    out: dict = {}

    def work():
        with lm_traces(tracker, tags={"stage": st.name, "strategy": meta["strategy"]}):
            report = evaluate_stage(st, prog, evalset, lm=lm_obj, n_boot=n_boot, seed=seed, progress=not json_out,
                                    description=meta["strategy"])
        hidden = {"correct", "gold_positive", "predicted_positive", "scores", "predictions", "errors"}
        out.update({"stage": st.name, "program": str(program), "strategy": meta["strategy"],
                    **({"warnings": [leak]} if leak else {}),
                    "optimizer": (meta.get("compile") or {}).get("optimizer"), "data": str(data), "split": split,
                    **{k: v for k, v in report.items() if k not in hidden},
                    "lm": model if uses_lm else None, "seed": seed})
        if tracker is not None:
            tracker.log_metrics({k: out[k] for k in (*_metric_keys(st), "lm_calls", "failures", "seconds") if k in out})
            log_predictions(tracker, st, evalset, report)

    params = {"stage": st.name, "program": str(program), "strategy": meta["strategy"], "data": str(data),
              "data_sha256": file_sha256(data), "split": split, "seed": seed, "lm": model if uses_lm else None,
              "evaluated_on_fitted_rows": bool(leak)}
    if tracker is not None:
        optimizer = (meta.get("compile") or {}).get("optimizer")
        label = meta["strategy"] + (f"@{optimizer}" if optimizer else "")
        with tracker.run(run_name("eval", st.name, strategy=label, data=data, split=split,
                                  lm=model if uses_lm else None),
                         params=params, tags={"command": "eval", "stage": st.name}):
            log_dataset(tracker, st, evalset, data=data, sha256=params["data_sha256"], split=split)
            work()
    else:
        work()
    if json_out:
        sys.stdout.write(json.dumps(out, default=str) + "\n")
        return
    from rich.console import Console

    key = st.metric_name
    line = (f"{out['strategy']} on {split} (n={out['n']}): {key} {out[key]:.3f} "
            f"[{out[key + '_ci'][0]:.2f}, {out[key + '_ci'][1]:.2f}]")
    if st.kind == "binary":
        line += (f", precision {out['precision']:.3f}, recall {out['recall']:.3f}, "
                 f"{st.positive_name}-rate {out['yes_rate']:.1%}")
    Console().print(line + f", LM calls {out['lm_calls']}, failures {out['failures']}", markup=False, highlight=False)
