"""Results are data: docs/results.md is rendered from benchmarks/results/*.json and held to them.

Fails when a figure on the page differs from its JSON, when a record is stale in a way it records
itself (stage, strategy, model), when the README quotes a figure its linked record does not hold,
and when the renderer accepts a malformed record or writes anything on bad input.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("results_report", ROOT / "benchmarks" / "report.py")
report = importlib.util.module_from_spec(_spec)
sys.modules["results_report"] = report
_spec.loader.exec_module(report)

RECORDS = report.load_records()
PAGE = report.RESULTS_PAGE.read_text(encoding="utf-8") if report.RESULTS_PAGE.exists() else ""
ROW = re.compile(r"^\| `(?P<key>[^`]+)` \|(?P<cells>.*)\|$")


def _page_rows(text: str) -> dict[str, list[str]]:
    rows = {}
    for line in text.splitlines():
        m = ROW.match(line)
        if m:
            rows[m["key"]] = [c.strip() for c in m["cells"].split(" | ")]
    return rows


def _section(text: str, name: str) -> str:
    """The page's section of one record (``## NAME`` to the next ``## ``): two records may hold one key."""
    start = text.find(f"\n## {name}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else len(text)] if start != -1 else ""


def test_there_are_records():
    assert RECORDS, "benchmarks/results/ holds no run record"


@pytest.mark.parametrize("rec", RECORDS, ids=lambda r: r.name)
def test_every_figure_on_the_page_equals_its_json(rec):
    rows = _page_rows(_section(PAGE, rec.name))
    for fig in rec.figures:
        assert fig.key in rows, f"docs/results.md has no row for {rec.name}:{fig.key}; run python benchmarks/report.py"
        cells = rows[fig.key]
        value, ci = cells[3].strip("*"), cells[4]
        want, want_ci = report.fmt_value(fig), report.fmt_ci(fig.ci, signed=report.signed(fig))
        assert value == want, f"docs/results.md says {fig.key} = {value}; {rec.name}.json says {want}"
        assert ci == want_ci, f"docs/results.md says {fig.key} CI {ci}; {rec.name}.json says {want_ci}"


def test_page_is_exactly_the_rendering_of_the_records():
    as_of = report.AS_OF.search(PAGE)  # each record's status as of the commit the page names
    assert as_of, "docs/results.md names no commit its statuses were checked at: run python benchmarks/report.py"
    assert PAGE == report.render(RECORDS, as_of[1]), "docs/results.md is not what benchmarks/report.py renders: run it"


def test_page_has_no_row_without_a_record():
    keys = {f.key for r in RECORDS for f in r.figures}
    assert set(_page_rows(PAGE)) <= keys


@pytest.mark.parametrize("rec", RECORDS, ids=lambda r: r.name)
def test_records_are_current(rec):
    assert report.stale(rec) == []


# -- staleness is detected ---------------------------------------------------------------------------------

def _record(**changes):
    rec = copy.deepcopy(RECORDS[0].model_dump())
    rec.update(changes)
    return report.RunRecord.model_validate(rec)


def test_stale_when_the_stage_is_gone():
    assert any("stage 'no-such-stage' no longer exists" in p for p in report.stale(_record(stage="no-such-stage")))


def test_stale_when_a_strategy_or_optimizer_is_gone():
    # a record of a stage whose first two figures name strategies (records like batched-decode name neither)
    staged = next(r for r in RECORDS if r.stage and all(f.strategy for f in r.figures[:2]))
    rec = staged.model_dump()
    rec["figures"][0]["strategy"] = "retired-strategy"
    rec["figures"][1]["strategy"] = f"{staged.figures[0].strategy}@no-such-optimizer"
    problems = report.stale(report.RunRecord.model_validate(rec))
    assert any("'retired-strategy' is no longer" in p for p in problems)
    assert any("optimizer 'no-such-optimizer'" in p for p in problems)


def test_stale_when_the_model_is_unknown_or_its_sha_differs():
    assert any("not an embedded model" in p
               for p in report.stale(_record(model={"name": "local/retired-model", "sha256": None})))
    from personalign.lm import MODELS

    name = next(n for n, s in MODELS.items() if s.split is not None)
    assert report.stale(_record(model={"name": f"local/{name}", "sha256": MODELS[name].split.sha256})) == []
    assert any("is not the pinned" in p for p in report.stale(_record(model={"name": f"local/{name}", "sha256": "0" * 64})))
    assert report.stale(_record(model={"name": "openai/gpt-4o-mini", "sha256": None})) == []


def test_stale_when_the_data_changed(tmp_path):
    data = tmp_path / "labels.jsonl"
    data.write_text('{"id": "a"}\n')
    from personalign.data.digest import file_sha256

    rec = _record(data={"path": str(data), "sha256": file_sha256(data)})
    assert report.stale(rec) == []
    data.write_text('{"id": "b"}\n')
    assert any("has changed since the run" in p for p in report.stale(rec))


# -- bad records: one line, exit 2, nothing written --------------------------------------------------------

def _good() -> dict:
    return json.loads(next((ROOT / "benchmarks" / "results").glob("*.json")).read_text())


def _bad_cases():
    good = _good()
    name = good["name"]
    missing = {k: v for k, v in good.items() if k != "git_commit"}
    wrong_type = copy.deepcopy(good)
    wrong_type["figures"][0]["value"] = "0.5"
    dup = copy.deepcopy(good)
    dup["figures"].append(copy.deepcopy(dup["figures"][0]))
    typo = copy.deepcopy(good)
    typo["figures"][0]["vaule"] = 1.0
    bad_ci = copy.deepcopy(good)
    bad_ci["figures"][0]["ci"] = [0.9, 0.1]
    return [
        ("invalid-json", name, '{"name": "x",\n  oops}', "line 2"),
        ("missing-key", name, json.dumps(missing), "key 'git_commit': Field required"),
        ("wrong-type", name, json.dumps(wrong_type), "key 'figures[0].value'"),
        ("duplicate-key", name, json.dumps(dup), "duplicate figure key"),
        ("unknown-key", name, json.dumps(typo), "key 'figures[0].vaule'"),
        ("ci-order", name, json.dumps(bad_ci), "key 'figures[0]'"),
        ("name-mismatch", "other-name", json.dumps(good), "differs from the file name"),
    ]


@pytest.mark.parametrize("case,stem,text,expected", _bad_cases(), ids=[c[0] for c in _bad_cases()])
def test_bad_record_is_one_line_exit_2_nothing_written(tmp_path, case, stem, text, expected):
    results = tmp_path / "results"
    results.mkdir()
    (results / f"{stem}.json").write_text(text)
    out = tmp_path / "results.md"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "report.py"), "--results", str(results),
                           "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("error: ") and f"{stem}.json" in lines[0] and expected in lines[0], lines[0]
    assert not out.exists() and proc.stdout == ""


def test_check_fails_when_a_figure_on_the_page_was_edited(tmp_path):
    page = tmp_path / "results.md"
    fig = RECORDS[0].figures[0]
    page.write_text(PAGE.replace(f"| **{report.fmt_value(fig)}** |", "| **0.999** |", 1))
    assert page.read_text() != PAGE
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "report.py"), "--check", "--out", str(page)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "differs from" in proc.stderr
    page.write_text(PAGE)
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "report.py"), "--check", "--out", str(page)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


# -- the README quotes only figures of the records it links -------------------------------------------------

LINK = re.compile(r"results\.md#([a-z0-9-]+)")
NUMBER = re.compile(r"(?<![\w.])[−+-]?\d+\.\d+")


def _blocks(lines: list[str]):
    """The README's paragraphs and list items: (first line number, text), a figure and its link in one block."""
    start, block = 1, []
    for i, line in enumerate([*lines, ""], 1):
        new_item = line.lstrip().startswith(("- ", "* ", "| ")) or not line.strip() or line.startswith(("#", "```"))
        if new_item and block:
            yield start, " ".join(block)
            block = []
        if line.strip() and not line.startswith(("#", "```")):
            start, block = (i, [line]) if not block else (start, [*block, line])


def test_readme_figures_come_from_the_records_they_link():
    by_name = {r.name: r for r in RECORDS}
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    linked = set()
    for i, block in _blocks(lines):
        names = LINK.findall(block)
        for name in names:
            assert name in by_name, f"README.md:{i} links results.md#{name}, which is no record"
            linked.add(name)
        if not names:
            continue
        printed = {report.fmt(v, signed=sg) for name in names for f in by_name[name].figures for sg in (False, True)
                   for v in [f.value, *(f.ci or [])]}
        for number in NUMBER.findall(block):
            assert number.replace("-", "−") in printed, f"README.md:{i}: {number} is not a figure of {names}"
    assert linked, "the README links no results entry"
    if (ROOT / "benchmarks" / "results" / "demo.json").exists():
        assert "demo" in linked, "the README's demo figures must link their record, results.md#demo"


def test_readme_is_short():
    n = len((ROOT / "README.md").read_text(encoding="utf-8").splitlines())
    assert n <= 150, f"README.md has {n} lines (at most 150)"
