"""``personalign stage init NAME`` and ``personalign stage validate FILE [--data DATA]``: a stage
of your own, declared in a stage file (:mod:`personalign.stages.spec`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  rich_markup_mode=None)


@app.command("init")
def init(
    name: str = typer.Argument(..., help="The stage's name (letters, digits, - _ .)."),
    out: Optional[Path] = typer.Option(None, "--out", help="File to write (default NAME.toml); never overwritten."),
) -> None:
    """Write a commented stage file template (valid as written; edit inputs, output, label)."""
    import re

    from personalign.errors import ConfigurationError
    from personalign.stages import template

    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.-]*", name):
        raise ConfigurationError(f"stage name {name!r}: use letters, digits, '-', '_' or '.', starting with a letter")
    path = out or Path(f"{name}.toml")
    if path.exists() or path.is_symlink():  # a dangling symlink too: writing would create its target elsewhere
        raise ConfigurationError(f"{path} exists{' (a symlink)' if path.is_symlink() else ''}; choose another --out "
                                 "(nothing was written)")
    if not path.parent.is_dir():
        raise ConfigurationError(f"{path}: the folder {path.parent} does not exist (nothing was written)")
    try:  # atomically: a full disk or a read-only folder leaves no half-written file to block a rerun
        from personalign.data import write_text

        write_text(path, template(name), exclusive=True)
    except OSError as exc:
        raise ConfigurationError(f"{path}: cannot write ({exc.strerror or exc}); nothing was written") from None
    typer.echo(f"wrote {path}; next: personalign stage validate {path} --data DATA.jsonl")


@app.command("validate")
def validate(
    file: Path = typer.Argument(..., help="The stage file (.toml), or any stage reference (file.py:STAGE, module:ATTR)."),
    data: Optional[Path] = typer.Option(None, "--data", help="Labelled JSONL to check against the stage."),
    train_split: str = typer.Option("train", "--train-split", help="The split compile fits on (must exist)."),
) -> None:
    """Check a stage (keys, types, references) and, with --data, every row of its data.

    A bad row fails (one line naming file, line and field; exit 2). Duplicate ids, a split that is
    not train/val/test, and a single-example group are warnings: one line each on stderr, counted
    in the summary, exit 0."""
    import sys

    from personalign.stages import check_data, resolve_stage

    st = resolve_stage(str(file))
    line = (f"ok: stage '{st.name}' ({st.kind}; inputs {', '.join(st.inputs)}; output {st.output}; "
            f"strategies {', '.join(st.registry.names())})")
    if data is not None:
        facts = check_data(st, data, train_split=train_split)
        splits = ", ".join(f"{k} {v}" for k, v in sorted(facts["splits"].items(), key=lambda kv: str(kv[0])))
        labels = ", ".join(f"{k} {v}" for k, v in sorted(facts["labels"].items()))
        n_warn = len(facts["warnings"])
        line += (f"\nok: {facts['n']} rows in {data} (splits: {splits}; {st.label}: {labels}); "
                 f"{n_warn} warning{'' if n_warn == 1 else 's'}")
        for warning in facts["warnings"]:
            sys.stderr.write(f"warning: {warning}\n")
    typer.echo(line)
