"""The documentation site builds with ``mkdocs build --strict`` (no broken link, anchor or API
reference), offline, and each stage guide lists exactly the strategies its stage registers."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

# Pages that other branches write (the lead merges them). Until one is merged the strict build
# runs on a copy of docs/ with a one-line placeholder for it, so every other link is still checked.
PAGES_FROM_OTHER_BRANCHES = ("relevance.md", "own-task.md", "sweeps.md", "models.md", "reliability.md", "figures.md")

# stage -> its guide (a guide lists the strategies of its stage in a table whose first column is `name`)
GUIDES = {"extraction": "extraction.md", "verification": "verification.md", "judge": "judge.md",
          "respond": "respond.md", "violation": "respond.md", "perspectives": "perspectives.md", "mcq": "mcq.md"}


def _config_for(docs_dir: Path, tmp_path: Path) -> Path:
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    text = re.sub(r"(?m)^docs_dir: .*$", f"docs_dir: {docs_dir}", text)
    text = re.sub(r"(?m)^(\s+)paths: \[\.\]$", rf"\1paths: [{ROOT}]", text)
    cfg = tmp_path / "mkdocs.yml"
    cfg.write_text(text, encoding="utf-8")
    return cfg


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None
                    or importlib.util.find_spec("mkdocstrings") is None,
                    reason="the docs extra (mkdocs, mkdocs-material, mkdocstrings) is not installed: pip install -e '.[docs]'")
def test_mkdocs_build_strict(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs)
    missing = [p for p in PAGES_FROM_OTHER_BRANCHES if not (docs / p).exists()]
    for page in missing:
        (docs / page).write_text(f"# {page}\n\nPlaceholder: this page is written on another branch.\n")
    if missing:
        warnings.warn(f"docs pages not merged yet, built with placeholders: {', '.join(missing)}", stacklevel=1)
    cfg = _config_for(docs, tmp_path)
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(cfg), "-d", str(site)],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path,
                          env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (site / "index.html").exists() and (site / "api.html").exists()
    api = (site / "api.html").read_text(encoding="utf-8")
    assert "personalign.compare" in api and "ComparisonReport" in api and "Raises" in api, "the API reference rendered no docstring"
    # offline: the built site loads no web font or script from another host
    index = (site / "index.html").read_text(encoding="utf-8")
    assert "fonts.googleapis.com" not in index and "fonts.gstatic.com" not in index


def test_nav_lists_every_page():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    listed = set(re.findall(r":\s+([\w./-]+\.md)\s*$", nav, flags=re.M))
    assert {p.name for p in DOCS.glob("*.md")} <= listed
    assert set(PAGES_FROM_OTHER_BRANCHES) <= listed


@pytest.mark.parametrize("stage", sorted(GUIDES))
def test_stage_guide_lists_exactly_the_stages_own_strategies(stage):
    """A stage's guide lists the strategies its stage.toml declares; the generic ones its kind gets
    are one table in own-task.md, which the guide links."""
    from personalign.stages import resolve_stage
    from personalign.stages.strategies import GENERIC

    text = (DOCS / GUIDES[stage]).read_text(encoding="utf-8")
    if stage in ("respond", "violation"):  # one page, a section each
        text = text.split("## violation", 1)[stage == "violation"]
    text = text.split("## Earlier measurements", 1)[0]
    table = re.search(r"\| strategy \| uses an LM \|.*?\n\n", text, flags=re.S)
    assert table, f"docs/{GUIDES[stage]} has no strategy table for {stage}"
    listed = re.findall(r"^\| `([^`]+)` \|", table.group(0), flags=re.M)
    spec = resolve_stage(stage)
    own = list(spec.spec.strategies)
    assert sorted(listed) == sorted(own), f"docs/{GUIDES[stage]}: lists {listed}, stage.toml declares {own}"
    if set(GENERIC[spec.kind]) - set(own):
        assert "own-task.md#generic-strategies" in text, f"docs/{GUIDES[stage]} does not link the generic strategies"


def test_generic_strategy_table_is_the_registry():
    from personalign.stages.strategies import GENERIC

    text = (DOCS / "own-task.md").read_text(encoding="utf-8").split("## Generic strategies", 1)[1]
    rows = dict(re.findall(r"^\| `([^`]+)` \| ([^|]+) \|", text, flags=re.M))
    kinds = {name: {k for k, names in GENERIC.items() if name in names} for name in rows}
    assert set(rows) == {n for names in GENERIC.values() for n in names}
    assert all({k.strip() for k in rows[n].split(",")} >= kinds[n] for n in rows), rows  # majority: scored too


def test_readme_links_resolve():
    """Every relative link of the README names a file of the repository (pages of other branches
    excepted until they are merged) and, for docs/results.md#NAME, a record's section."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)\s]+)\)", readme):
        if re.match(r"^[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        if Path(path).name in PAGES_FROM_OTHER_BRANCHES and not (ROOT / path).exists():
            continue
        assert (ROOT / path).exists(), f"README.md links {target}: no such file"
        if anchor:
            text = (ROOT / path).read_text(encoding="utf-8")
            slugs = {re.sub(r"[^a-z0-9 -]", "", h.strip().lower()).replace(" ", "-")  # MkDocs' anchor of a heading
                     for h in re.findall(r"(?m)^#+ (.+)$", text)}
            assert anchor in slugs, f"README.md links {target}: no such section"
