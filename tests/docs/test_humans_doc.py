"""docs/humans.md's figures are data: its generated blocks are the rendering of the run records
``benchmarks/results/human-ceiling.json`` and ``label-simulation.json``, and its plot exists."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("humans_doc", ROOT / "benchmarks" / "_humans_doc.py")
doc = importlib.util.module_from_spec(_spec)
sys.modules["humans_doc"] = doc
_spec.loader.exec_module(doc)
RESULTS = ROOT / "benchmarks" / "results"


def _block(page: str, begin: str, end: str) -> str:
    return begin + page.split(begin, 1)[1].split(end, 1)[0] + end


def test_the_blocks_are_the_rendering_of_the_records():
    page = doc.PAGE.read_text(encoding="utf-8")
    sim = json.loads((RESULTS / "label-simulation.json").read_text(encoding="utf-8"))
    ceiling = json.loads((RESULTS / "human-ceiling.json").read_text(encoding="utf-8"))
    assert _block(page, doc.BEGIN, doc.END) == doc.render(sim), "run python benchmarks/label_simulation.py --render-docs"
    assert _block(page, doc.BEGIN_CEILING, doc.END_CEILING) == doc.render_ceiling(ceiling)


def test_the_plot_is_on_the_page_and_on_disk():
    page = doc.PAGE.read_text(encoding="utf-8")
    assert "(label-simulation.png)" in page and (ROOT / "docs" / "label-simulation.png").stat().st_size > 10_000


def test_the_ceiling_block_says_the_issues_figure():
    ceiling = json.loads((RESULTS / "human-ceiling.json").read_text(encoding="utf-8"))
    text = doc.render_ceiling(ceiling)
    assert "F1 **0.662** over 794 judgments" in text  # the figure of issue 39, reproduced
