"""``personalign compile STAGE`` and ``personalign eval STAGE`` for every stage: thin layers over
:func:`personalign.workflows.compile_and_save` and :func:`personalign.workflows.evaluate_program`
(the work behind ``personalign.compile`` and ``personalign.evaluate``)."""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from pathlib import Path

from personalign.cli._checks import check_out_dir
from personalign.errors import ConfigurationError


def run_compile(*, stage: str, strategy: str | None, optimizer: str | None, data: Path, train_split: str,
                lm: str | None, seed: int, out: Path | None, cache_dir, no_cache: bool, tracking_uri: str | None,
                no_track: bool, json_out: bool) -> None:
    from personalign.api import CompiledProgram
    from personalign.lm import configure_cache
    from personalign.programs.stage_ref import resolve_stage, stage_ref_of
    from personalign.settings import runs_dir
    from personalign.tracking import Tracker
    from personalign.workflows import check_strategy, compile_and_save

    st = resolve_stage(stage)
    strategy = strategy or st.default_strategies.split(",")[0].strip()
    check_strategy(st, strategy, optimizer)
    check_out_dir(out)
    name = strategy + (f"@{optimizer}" if optimizer else "")
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    target = out or runs_dir() / "programs" / f"{st.name}-{name.replace('@', '-')}-{stamp}"
    check_out_dir(target)
    tracker = None if no_track else Tracker(tracking_uri)
    result = compile_and_save(st, strategy, data, optimizer=optimizer, train_split=train_split, lm=lm, seed=seed,
                              out=target, tracker=tracker, make=CompiledProgram, stage_ref=stage_ref_of(st),
                              on_ready=lambda: configure_cache(cache_dir, enabled=not no_cache))
    if json_out:
        from personalign.data.strict_json import dumps

        sys.stdout.write(dumps(result.to_dict(), default=str) + "\n")
        return
    from rich.console import Console

    from personalign.compile_service import summary_line

    line = summary_line(name, result.info)
    Console().print(f"compiled {name} -> {target}\nreadable prompt: {target / 'prompt.md'}"
                    + (f"\n{line}" if line else ""), markup=False, highlight=False)


def run_eval(*, stage: str, program: Path, data: Path, split: str, lm: str | None, seed: int, n_boot: int,
             cache_dir, no_cache: bool, tracking_uri: str | None, no_track: bool, json_out: bool,
             limit: int | None = None) -> None:
    from personalign.lm import configure_cache
    from personalign.programs.stage_ref import resolve_stage
    from personalign.tracking import Tracker
    from personalign.workflows import evaluate_program

    st = resolve_stage(stage)
    if not program.exists():
        raise ConfigurationError(f"no saved program at {program}")
    tracker = None if no_track else Tracker(tracking_uri)
    out = evaluate_program(st, program, data, split=split, lm=lm, seed=seed, n_boot=n_boot, limit=limit,
                           tracker=tracker, progress=not json_out,
                           on_ready=lambda: configure_cache(cache_dir, enabled=not no_cache))
    for warning in out.get("warnings", []):
        sys.stderr.write(warning + "\n")
    if json_out:
        from personalign.data.strict_json import dumps

        sys.stdout.write(dumps(out, default=str) + "\n")
        return
    from rich.console import Console

    from personalign.cli._compare import _fmt_ci

    key = st.metric_name
    line = (f"{out['strategy']} on {split} (n={out['n']}): {key} "
            f"{_fmt_ci(out[key], out.get(key + '_ci'), out.get(key + '_range'))}")
    if st.kind == "binary":
        line += (f", precision {out['precision']:.3f}, recall {out['recall']:.3f}, "
                 f"{st.positive_name}-rate {out['yes_rate']:.1%}")
    res = out.get("resampling") or {}
    line += f", LM calls {out['lm_calls']}, failures {out['failures']}"
    if res:
        line += f" (intervals resample {res['unit']}: {res['n_clusters']} top-level cluster{'s' if res['n_clusters'] != 1 else ''})"
    Console().print(line, markup=False, highlight=False)
