"""``personalign label serve | export | import``: collect human labels on a local page, store them,
and write them where every verb reads them (:mod:`personalign.labels`).

:func:`serve`, :func:`export` and :func:`import_` are plain typer command functions; :data:`app`
mounts them as ``serve``, ``export`` and ``import`` (:func:`register` adds them to another group).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

STORE_HELP = ("Label store: any SQLAlchemy URL, e.g. sqlite:///labels.db or postgresql+psycopg://USER@HOST/DB "
              "(default: sqlite:///RUNS/labels.db under PERSONALIGN_RUNS_DIR).")


def serve(
    rows: Path = typer.Argument(..., help="Rows to label (JSONL: a unique string id and the stage's inputs per row)."),
    stage: str = typer.Option(..., "--stage", help="The stage: a built-in name (relevance) or a stage .toml."),
    store: Optional[str] = typer.Option(None, "--store", help=STORE_HELP),
    port: int = typer.Option(8765, "--port", min=0, max=65535, help="Port on 127.0.0.1 (0: any free port)."),
    annotator: Optional[str] = typer.Option(None, "--annotator", help="Name the page starts with (each person "
                                            "can type their own)."),
) -> None:
    """Serve a local annotation page on 127.0.0.1: one row at a time, the stage's inputs as its
    signature describes them, its output's values as buttons with keys (y/n, or 1..9), s skips,
    u undoes. Several annotators by name, each with their own queue; every label is committed to
    the store before the page says saved, so stopping (even kill -9) and restarting resumes."""
    import signal
    import sys

    from personalign.cli import _signals
    from personalign.labels import serve_labels as run

    try:
        run(rows, stage, store_url=store, port=port, annotator=annotator, echo=typer.echo)  # click.echo flushes
        return
    except KeyboardInterrupt as exc:  # Ctrl-C / SIGTERM: uvicorn finished the requests in flight
        code = _signals.exit_code(exc)
    sys.stderr.write(f"stopped ({signal.Signals(code - 128).name}): every label the page showed as saved is in "
                     "the store\n")
    raise SystemExit(code)  # raised outside the handler: main() prints no second interrupt line


def export(
    rows: Path = typer.Option(..., "--rows", help="The rows file the labels were given on (matched by id)."),
    out: Path = typer.Option(..., "--out", help="File to write (atomically)."),
    store: Optional[str] = typer.Option(None, "--store", help=STORE_HELP),
    stage: Optional[str] = typer.Option(None, "--stage", help="Stage whose labels to export (default: the one the "
                                        "rows were served for); required with --format label-studio."),
    fmt: str = typer.Option("canonical", "--format", help="canonical (JSONL with annotations, which every verb "
                            "reads) or label-studio (Label Studio task JSON)."),
    config: Optional[Path] = typer.Option(None, "--config", help="With --format label-studio: also write the Label "
                                          "Studio labeling config (XML) here."),
) -> None:
    """Write the rows with every stored label as "annotations": {annotator: label} (canonical
    JSONL), or as Label Studio tasks."""
    import sys

    from personalign.errors import ConfigurationError

    if fmt == "canonical":
        if config is not None:
            raise ConfigurationError("--config is for --format label-studio")
        from personalign.labels import export_canonical

        done = export_canonical(rows, out, store_url=store, stage=stage)
    elif fmt == "label-studio":
        if stage is None:
            raise ConfigurationError("--format label-studio needs --stage (its output field names the choices)")
        from personalign.labels import export_label_studio

        done = export_label_studio(rows, out, stage, store_url=store, config_path=config)
    else:
        raise ConfigurationError(f"--format {fmt!r}: use canonical or label-studio")
    for note in done.notes:
        sys.stderr.write(f"note: {note}\n")
    typer.echo(done.summary(out))


def import_(
    tasks: Path = typer.Argument(..., help="Label Studio JSON export (a task array; not JSON-MIN)."),
    stage: str = typer.Option(..., "--stage", help="The stage the tasks label (its inputs and output)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write the tasks as canonical JSONL here (atomically)."),
    store: Optional[str] = typer.Option(None, "--store", help="Also put the labels into this store (one "
                                        "transaction: all or none)."),
    replace: bool = typer.Option(False, "--replace", help="Overwrite stored labels that differ from the file's "
                                 "(default: refuse, nothing written)."),
    annotator_map: Optional[str] = typer.Option(None, "--annotator-map", help="Who Label Studio's users are: "
                                                "USER_ID=NAME (or E-MAIL=NAME), comma-separated, e.g. 2=alice,3=bob; "
                                                "for an export without e-mails, every user id in it."),
) -> None:
    """Read Label Studio tasks and annotations into canonical JSONL (--out) and/or a label store
    (--store). A choice the stage does not allow, a task without an input field or an annotation
    without an annotator is one error line naming file, line and field; nothing is written. User
    ids without an e-mail (Label Studio's default export) are refused when the store holds named
    annotators: export with user details, or name them with --annotator-map."""
    from personalign.labels import import_label_studio, parse_annotator_map

    names = parse_annotator_map(annotator_map)
    facts = import_label_studio(tasks, stage, out_path=out, store_url=store, replace=replace, names=names)
    where = " and ".join(str(x) for x in (out, store and _shown(store)) if x)
    line = (f"imported {facts['rows']} tasks, {facts['labels']} labels "
            f"(annotators: {', '.join(facts['annotators']) or 'none'}) into {where}")
    if store:
        line += f"; store: {facts['added']} added, {facts['same']} already there, {facts['replaced']} replaced"
    typer.echo(line)


def _shown(url: str) -> str:
    from personalign.labels import shown_url

    return shown_url(url)


def register(group: typer.Typer) -> None:
    """Add ``serve``, ``export`` and ``import`` to ``group`` (the ``label`` command group)."""
    group.command("serve")(serve)
    group.command("export")(export)
    group.command("import")(import_)


app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
register(app)
