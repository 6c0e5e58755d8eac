"""``personalign compile`` and ``personalign eval`` for the relevance stage."""

from __future__ import annotations

import contextlib
import json
import sys
from datetime import datetime, timezone
from pathlib import Path

from personalign.errors import ConfigurationError, DataError


def _load_split(data: Path, split: str | None):
    from personalign.data import load_relevance

    if not data.exists():
        raise DataError(data, None, None, "file not found")
    rows = load_relevance(data)
    chosen = [r for r in rows if split is None or r.split == split]
    if not chosen:
        present = ", ".join(sorted({str(r.split) for r in rows}))
        raise DataError(data, None, "split", f"no examples in split '{split}' (splits present: {present})")
    return [r.to_dspy() for r in chosen]


def run_compile(*, strategy: str, optimizer: str | None, data: Path, train_split: str, lm: str | None, seed: int,
                out: Path | None, cache_dir, no_cache: bool, tracking_uri: str | None, no_track: bool,
                json_out: bool) -> None:
    import personalign  # noqa: F401
    from personalign.compare import _dev_split, file_sha256
    from personalign.lm import DEFAULT_MODEL, configure_cache, make_lm, use
    from personalign.optimizers import OPTIMIZERS
    from personalign.programs._export import prompt_text
    from personalign.programs.relevance import STRATEGIES
    from personalign.programs.relevance.api import save_program
    from personalign.settings import runs_dir
    from personalign.tracking import Tracker

    info = STRATEGIES.info(strategy)
    if optimizer is not None:
        opt_info = OPTIMIZERS.info(optimizer)
        if opt_info.kind == "teleprompter" and info.trainable:
            raise ConfigurationError(f"teleprompters compile LLM strategies; '{strategy}' is fitted by its own "
                                     "optimizer (omit --optimizer)")
        if optimizer == "knn":
            raise ConfigurationError("knn programs keep their neighbour index in memory and cannot be saved; "
                                     "use `compare --strategies NAME@knn` to evaluate them")
    trainset = _load_split(data, train_split)
    configure_cache(cache_dir, enabled=not no_cache)
    model = lm or DEFAULT_MODEL
    lm_obj = make_lm(model) if info.uses_lm else None
    program = STRATEGIES.create(strategy)
    compile_info = None
    opt = None
    if optimizer is not None:
        kwargs = {"seed": seed}
        if OPTIMIZERS.info(optimizer).kind == "teleprompter":
            kwargs["lm"] = lm_obj
        opt = OPTIMIZERS.create(optimizer, **kwargs)
    elif info.trainable:
        opt = STRATEGIES.default_optimizer(strategy, seed=seed)
    tracker = None if no_track else Tracker(tracking_uri)
    if tracker is not None:
        tracker.check()
    name = strategy + (f"@{optimizer}" if optimizer else "")
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    target = out or runs_dir() / "programs" / f"relevance-{name.replace('@', '-')}-{stamp}"
    if target.exists() and any(target.iterdir()):
        raise ConfigurationError(f"output directory {target} is not empty; choose another --out")

    def work():
        nonlocal program, compile_info
        if opt is not None:
            fit, dev = _dev_split(trainset, seed) if OPTIMIZERS.info(opt.name).kind == "teleprompter" else (trainset, None)
            with use(lm_obj) if lm_obj is not None else contextlib.nullcontext(), contextlib.redirect_stdout(sys.stderr):
                program, result = opt.compile(program, trainset=fit, valset=dev)
            compile_info = result.to_dict()
        compile_info = dict(compile_info or {"optimizer": None})
        compile_info.update({"data": str(data), "train_split": train_split})
        save_program(program, target, strategy=strategy, lm=model if info.uses_lm else None, compile_info=compile_info)
        (target / "prompt.md").write_text(prompt_text(program))
        if tracker is not None:
            tracker.log_metrics({k: v for k, v in compile_info.items() if isinstance(v, (int, float))})
            tracker.log_artifact(target / "program.json")
            tracker.log_artifact(target / "prompt.md")

    params = {"stage": "relevance", "strategy": strategy, "optimizer": optimizer, "data": str(data),
              "data_sha256": file_sha256(data), "train_split": train_split, "seed": seed,
              "lm": model if info.uses_lm else None}
    if tracker is not None:
        with tracker.run(f"compile-relevance-{name}", params=params, tags={"command": "compile", "stage": "relevance"}):
            work()
    else:
        work()
    summary = {"stage": "relevance", "strategy": strategy, "optimizer": optimizer, "program": str(target),
               "prompt_file": str(target / "prompt.md"), "compile": compile_info}
    if json_out:
        sys.stdout.write(json.dumps(summary, default=str) + "\n")
    else:
        from rich.console import Console

        Console().print(f"compiled {name} -> {target}\nreadable prompt: {target / 'prompt.md'}")


def run_eval(*, program: Path, data: Path, split: str, lm: str | None, seed: int, n_boot: int, cache_dir,
             no_cache: bool, tracking_uri: str | None, no_track: bool, json_out: bool) -> None:
    import personalign  # noqa: F401
    from personalign.compare import file_sha256
    from personalign.evaluation import filled_predictions, run_program
    from personalign.lm import DEFAULT_MODEL, configure_cache, make_lm
    from personalign.metrics import binary_report
    from personalign.programs.relevance import STRATEGIES
    from personalign.programs.relevance.api import load_program
    from personalign.signatures.relevance import INPUTS, LABEL
    from personalign.tracking import Tracker

    if not program.exists():
        raise ConfigurationError(f"no saved program at {program}")
    prog, meta = load_program(program)
    evalset = _load_split(data, split)
    configure_cache(cache_dir, enabled=not no_cache)
    uses_lm = STRATEGIES.info(meta["strategy"]).uses_lm
    model = lm or meta.get("lm") or DEFAULT_MODEL
    lm_obj = make_lm(model) if uses_lm else None
    gold = [bool(getattr(ex, LABEL)) for ex in evalset]
    tracker = None if no_track else Tracker(tracking_uri)
    if tracker is not None:
        tracker.check()
    out: dict = {}

    def work():
        outcome = run_program(prog, evalset, inputs=INPUTS, output=LABEL, lm=lm_obj, description=meta["strategy"],
                              progress=not json_out)
        report = binary_report(gold, filled_predictions(gold, outcome.predictions), n_boot=n_boot, seed=seed)
        out.update({"stage": "relevance", "program": str(program), "strategy": meta["strategy"],
                    "optimizer": (meta.get("compile") or {}).get("optimizer"), "data": str(data), "split": split,
                    **report, "lm_calls": outcome.lm_calls, "failures": outcome.failures,
                    "seconds": round(outcome.seconds, 3), "lm": model if uses_lm else None, "seed": seed})
        if tracker is not None:
            tracker.log_metrics({k: out[k] for k in ("f1", "f1_ci", "precision", "recall", "yes_rate", "lm_calls",
                                                     "failures", "seconds")})
            tracker.log_dict({"gold": gold, "predictions": outcome.predictions, "errors": outcome.errors},
                             "predictions.json")

    params = {"stage": "relevance", "program": str(program), "strategy": meta["strategy"], "data": str(data),
              "data_sha256": file_sha256(data), "split": split, "seed": seed, "lm": model if uses_lm else None}
    if tracker is not None:
        with tracker.run(f"eval-relevance-{meta['strategy']}", params=params, tags={"command": "eval", "stage": "relevance"}):
            work()
    else:
        work()
    if json_out:
        sys.stdout.write(json.dumps(out) + "\n")
        return
    from rich.console import Console

    Console().print(
        f"{out['strategy']} on {split} (n={out['n']}): F1 {out['f1']:.3f} [{out['f1_ci'][0]:.2f}, {out['f1_ci'][1]:.2f}], "
        f"precision {out['precision']:.3f}, recall {out['recall']:.3f}, yes-rate {out['yes_rate']:.1%}, "
        f"LM calls {out['lm_calls']}, failures {out['failures']}")
