"""``personalign data validate|stats PATH --kind KIND`` — check and describe data files.

Imports only typer at module level; loaders are imported inside the commands. Bad input
raises :class:`personalign.errors.DataError` (one line naming file, line and field), which
the root CLI turns into exit code 2. Run standalone with ``python -m personalign.cli.data``.
Neither command writes anything.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from personalign.cli._output import print_json

app = typer.Typer(help="Validate and describe data files.", no_args_is_help=True, add_completion=False,
                  pretty_exceptions_enable=False, rich_markup_mode=None)

_KIND_HELP = ("Data kind: relevance, recenter-raw, verification, extraction, rating, mcq, profile, "
              "prefeval-explicit, prefeval-persona, prefeval-choice, prefeval-mcq, personamem, cupid; or a stage "
              "(path/to/stage.toml, file.py:STAGE) to read PATH with its loader.")


def _is_stage(kind: str) -> bool:
    from personalign.data import KINDS

    return kind not in KINDS and (kind.endswith(".toml") or ":" in kind or "/" in kind or "\\" in kind)


def _stage_stats(path: Path, ref: str) -> dict:
    """:func:`personalign.data.kinds.stats`'s shape for the rows of a user's stage (its loader)."""
    from collections import Counter

    import numpy as np

    from personalign.stages import resolve_stage, split_of

    st = resolve_stage(ref)
    rows = st.load(path)
    s: dict = {"path": str(path), "kind": f"stage {st.name}", "n": len(rows),
               "labels": dict(Counter(str(st.gold(ex)) for ex in rows)),
               "splits": dict(Counter(str(split_of(ex)) for ex in rows))}
    keys = [k for k in dict.fromkeys((st.group_key, *(st.decision_keys or ()))) if k]
    s["groups"] = {k: len({str(getattr(ex, k, None)) for ex in rows}) for k in keys}
    s["lengths"] = {}
    for name in st.inputs:
        n = np.array([len(str(getattr(ex, name, "") or "")) for ex in rows] or [0])
        s["lengths"][name] = {"min": int(n.min()), "p5": float(np.percentile(n, 5)),
                              "p50": float(np.percentile(n, 50)), "p95": float(np.percentile(n, 95)),
                              "max": int(n.max())}
    return s


@app.command()
def validate(
    path: Path = typer.Argument(..., help="File (or PrefEval folder) to check."),
    kind: str = typer.Option(..., "--kind", "-k", help=_KIND_HELP),
) -> None:
    """Read every record of PATH as KIND (a data kind, or a stage: stage.toml, file.py:STAGE, ...);
    print a one-line summary, or fail on the first bad record."""
    from personalign.data import validate_kind

    warnings: list = []
    if _is_stage(kind):  # a stage of the user's: its loader, then the same warnings as `stage validate`
        import sys

        from personalign.stages import resolve_stage, stage_data_warnings

        st = resolve_stage(kind)
        n = len(st.load(path))
        warnings = stage_data_warnings(st, path)
        for warning in warnings:
            sys.stderr.write(f"warning: {warning}\n")
    else:
        n = validate_kind(path, kind)
    tail = f"; {len(warnings)} warning{'' if len(warnings) == 1 else 's'}" if warnings else ""
    typer.echo(f"ok: {n} {kind} records in {path}{tail}")


@app.command()
def stats(
    path: Path = typer.Argument(..., help="File (or PrefEval folder) to describe."),
    kind: str = typer.Option(..., "--kind", "-k", help=_KIND_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of text."),
) -> None:
    """Counts, label balance, splits, group counts and text-length percentiles (characters)."""
    
    from personalign.data import kind_stats

    s = _stage_stats(path, kind) if _is_stage(kind) else kind_stats(path, kind)
    if as_json:
        print_json(s, ensure_ascii=False)
        return
    typer.echo(f"{s['path']}  ({s['kind']})")
    typer.echo(f"  records: {s['n']}")
    if "labels" in s:
        labels = ", ".join(f"{k}: {v}" for k, v in s["labels"].items())
        rate = f"  (positive rate {s['label_rate']:.3f})" if "label_rate" in s else ""
        typer.echo(f"  labels: {labels}{rate}")
    if "splits" in s:
        typer.echo("  splits: " + ", ".join(f"{k}: {v}" for k, v in s["splits"].items()))
    if s.get("groups"):
        typer.echo("  distinct: " + ", ".join(f"{k}: {v}" for k, v in s["groups"].items()))
    for field, p in s.get("lengths", {}).items():
        typer.echo(f"  length of {field} (chars): min {p['min']}, p5 {p['p5']:.0f}, median {p['p50']:.0f}, "
                   f"p95 {p['p95']:.0f}, max {p['max']}")
    if "turns" in s:
        p = s["turns"]
        typer.echo(f"  turns: min {p['min']}, median {p['p50']:.0f}, max {p['max']}")


def main(argv: list[str] | None = None) -> int:
    """Run the sub-app standalone, mapping PersonalignError to one stderr line and exit 2."""
    from personalign.errors import PersonalignError, find_personalign_error

    try:
        app(args=argv, standalone_mode=False)
    except PersonalignError as exc:
        typer.echo(f"error: {exc}", err=True)
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except Exception as exc:  # click usage errors and wrapped PersonalignErrors
        import click

        err = find_personalign_error(exc)
        if err is not None:
            typer.echo(f"error: {err}", err=True)
            return err.exit_code
        if isinstance(exc, click.ClickException):
            exc.show()
            return exc.exit_code
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
