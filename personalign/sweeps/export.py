"""Save a sweep's best trial as a program under ``runs/programs/`` (program.json + weights + prompt.md)."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from typing import Any

from optuna.trial import FrozenTrial

from personalign.errors import ConfigurationError
from personalign.sweeps.attrs import trial_report
from personalign.sweeps.storage import redact_url


def export_best(sweep, best: FrozenTrial) -> dict[str, Any]:
    """Save ``best`` (a COMPLETE trial of ``sweep``'s study, a :class:`~personalign.sweeps.runner.Sweep`).

    The program this process compiled for that trial is saved as is; a best trial run by another
    worker (or an earlier invocation) is recompiled from its parameters with the same seed. An
    export finished by another worker first is kept (``program_reused``).

    Returns:
        ``{"program", "program_json", "prompt_file", "program_reused" | "program_recompiled"}``.
    """
    from personalign.programs.export import prompt_text
    from personalign.programs.saved import PROGRAM_FILE, save_program
    from personalign.settings import runs_dir

    programs = runs_dir() / "programs"
    target = programs / f"{sweep.stage.name}-sweep-{sweep.study_name}-trial{best.number}"
    if target.parent != programs or target.name in (".", "..") or "/" in target.name or "\\" in target.name:
        raise ConfigurationError(f"cannot export trial {best.number} of study {sweep.study_name!r}: its directory "
                                 f"would not be inside {programs}; pass a --study-name of letters, digits, '.', '_', '-'")
    out = {"program": str(target), "program_json": str(target / PROGRAM_FILE), "prompt_file": str(target / "prompt.md")}
    if (target / PROGRAM_FILE).exists() and (target / "prompt.md").exists():
        out["program_reused"] = True
        return out
    objective = sweep.objective
    config = sweep.space.configure(lambda dim: dim.fixed(best.params))
    cached = objective.best if objective.best is not None and objective.best[1] == best.number else None
    if cached is not None:
        program, compile_info = cached[2], cached[3]
    else:
        with contextlib.redirect_stdout(sys.stderr):
            program, compile_info = objective.compile(config, objective.trial_lm(config))
    info = dict(compile_info or {"optimizer": None})
    info.update({"data": sweep.data.label, "train_split": sweep.train_split, "sweep": {
        "study": sweep.study_name, "trial": best.number, "params": best.params, "recompiled": cached is None,
        "storage": redact_url(sweep.storage_url),
        # the stage's reference constant on the same rows, and whether the best beats it
        **({"reference": sweep.reference} if getattr(sweep, "reference", None) else {})}})
    uses_lm = sweep.stage.registry.info(config.strategy).uses_lm
    tmp = target.parent / f".{target.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    save_program(program, tmp, stage=sweep.stage.name, stage_ref=sweep.stage.ref,
                 signature=sweep.stage.signature_record(), strategy=config.strategy,
                 lm=sweep.lm_name if uses_lm else None, compile_info=info, metrics=trial_report(best))
    (tmp / "prompt.md").write_text(prompt_text(program))
    if target.exists() and not (target / PROGRAM_FILE).exists():
        shutil.rmtree(target, ignore_errors=True)  # an unfinished export of a killed worker
    try:
        tmp.rename(target)
    except OSError:  # another worker exported it first
        shutil.rmtree(tmp, ignore_errors=True)
    out["program_recompiled"] = cached is None
    return out


__all__ = ["export_best"]
