"""What the docs tests share: the pages, their paragraphs and tables, the typer commands, and the
code's defaults shown as the docs write them (the runs folder as ``runs``, the home folder as ``~``)."""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path

import pytest
import typer

from personalign.cli import app

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "runs" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


# -- reading the pages ------------------------------------------------------------------------------

def blocks(path: Path) -> list[tuple[int, str]]:
    """``(first line, text)`` of each prose paragraph (its lines joined) and each table row, outside
    fenced code blocks."""
    out: list[tuple[int, str]] = []
    para: list[str] = []
    start = 0
    fenced = False
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            line = ""
        if fenced or not line.strip() or line.lstrip().startswith("|"):
            if para:
                out.append((start, " ".join(para)))
                para = []
            if not fenced and line.lstrip().startswith("|"):
                out.append((i, line.strip()))
            continue
        if not para:
            start = i
        para.append(line.strip())
    if para:
        out.append((start, " ".join(para)))
    return out


def tables(path: Path) -> list[tuple[int, list[str], list[tuple[int, list[str]]]]]:
    """``(header line, header cells, [(line, cells), ...])`` of each Markdown table."""
    lines = path.read_text(encoding="utf-8").splitlines()
    tables, i = [], 0
    while i < len(lines) - 1:
        if lines[i].lstrip().startswith("|") and re.fullmatch(r"\s*\|[\s:|-]+\|\s*", lines[i + 1]):
            head = cells(lines[i])
            rows, j = [], i + 2
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                rows.append((j + 1, cells(lines[j])))
                j += 1
            tables.append((i + 1, head, rows))
            i = j
        else:
            i += 1
    return tables


def cells(row: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", row.strip().strip("|"))]


def literals(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)


# -- the code's side ----------------------------------------------------------------------------------

@lru_cache(maxsize=1)
def commands() -> dict[str, object]:
    """``"compare"``, ``"predict batch"``, ... -> the click command typer builds."""
    out: dict[str, object] = {}

    def walk(cmd, path: list[str]) -> None:
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                walk(sub, [*path, name])
        else:
            out[" ".join(path)] = cmd

    walk(typer.main.get_command(app), [])
    return out


def commands_with(flag: str) -> dict[str, object]:
    """Command path -> the option ``flag`` of every command that has it."""
    return {path: p for path, cmd in commands().items() for p in cmd.params
            if p.param_type_name == "option" and flag in [*p.opts, *getattr(p, "secondary_opts", [])]}


@pytest.fixture
def unset(tmp_path, monkeypatch) -> Path:
    """No ``PERSONALIGN_*`` variable, no ``XDG_CACHE_HOME``, the current folder a fresh one: the
    code's defaults as a new user meets them. Returns the runs folder they imply."""
    for key in [k for k in os.environ if k.startswith("PERSONALIGN_")] + ["XDG_CACHE_HOME"]:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(tmp_path)
    from personalign.settings import runs_dir

    return runs_dir()


def shown(value, runs: Path | None = None) -> str:
    """A computed default as the docs write it: the runs folder as ``runs``, the home folder as ``~``."""
    text = str(value)
    if runs is not None:
        text = text.replace(str(runs), "runs")
    home = str(Path.home())
    return "~" + text[len(home):] if text.startswith(home + os.sep) else text


def as_written(text: str) -> str:
    text = text.strip().strip('"')
    text = text.replace("<runs>", "runs")
    return text[2:] if text.startswith("./") else text


def computed() -> dict[str, object]:
    """Options whose signature default is None and whose default the code computes."""
    from personalign.lm import default_model
    from personalign.settings import cache_dir, default_sweep_storage, default_tracking_uri

    return {"--tracking-uri": default_tracking_uri, "--storage": default_sweep_storage, "--cache-dir": cache_dir,
            "--lm": default_model}


def same(written: str, actual, runs: Path) -> bool:
    written = as_written(written)
    if isinstance(actual, bool):
        return written.lower() in (("1", "on", "true", "yes") if actual else ("0", "off", "false", "no"))
    if isinstance(actual, (int, float)):
        try:
            return float(written.replace(",", "")) == float(actual)
        except ValueError:
            return False
    return actual is not None and written.rstrip("/") == shown(actual, runs).rstrip("/")
