"""``personalign view`` with a hostile result file or ``--out`` (issue 38): an ``--out`` that is a
file the page reads, a data file that is a FIFO or a device, figures that are not numbers. Each is
one line ``error: ...``, exit 2, and no file written or changed."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from personalign.errors import DataError
from personalign.results_page import check_result
from tests.results_page.conftest import old_result
from tests.results_page.test_page import _run_view


def _snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every entry under ``folder`` with its bytes (None for what is not a regular file)."""
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() and not p.is_symlink() else None
            for p in sorted(folder.rglob("*"))}


def _refused(proc, *expected: str) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def old_run(single_split, own_task_copy, tmp_path) -> Path:
    """A result without ``rows`` (the page rebuilds them from the data file it names) in ``tmp_path``,
    beside a copy of its stage file and data file (the run record names ``compare stage.toml``); the
    stage file names a strategy in ``my_task.py`` beside it."""
    for name in ("stage.toml", "data.jsonl", "my_task.py"):
        shutil.copy(own_task_copy / name, tmp_path / name)
    with (tmp_path / "stage.toml").open("a") as fh:
        fh.write('\n[strategies]\nmine = "my_task.py:WordOverlap"\n')
    result = old_result(single_split[1])
    result["data"] = "data.jsonl"
    path = tmp_path / "old.json"
    path.write_text(json.dumps(result))
    return path


@pytest.fixture
def new_run(single_split, tmp_path) -> Path:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(single_split[0]))
    return path


def test_out_that_is_the_result_file_is_refused(new_run, tmp_path):
    os.symlink(new_run.name, tmp_path / "link.html")
    os.link(new_run, tmp_path / "hard.html")
    (tmp_path / "sub").mkdir()
    before = _snapshot(tmp_path)
    for out in (str(new_run), new_run.name, "link.html", "hard.html", f"sub/../{new_run.name}"):
        line = _refused(_run_view(new_run.name, "--out", out, cwd=tmp_path), "error: --out", "a file the page reads")
        assert out in line
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("out", ["data.jsonl", "stage.toml", "my_task.py"])
def test_out_that_is_the_data_or_stage_file_the_page_reads_is_refused(old_run, tmp_path, out):
    (tmp_path / "sub").mkdir()
    ok = _run_view(old_run.name, "--out", "sub/page.html", cwd=tmp_path)  # the same run with another --out works
    assert ok.returncode == 0, ok.stderr
    before = _snapshot(tmp_path)
    _refused(_run_view(old_run.name, "--out", out, cwd=tmp_path), f"error: --out {out} is", "a file the page reads")
    assert _snapshot(tmp_path) == before
    # --data naming the same file is refused too
    _refused(_run_view(old_run.name, "--data", "data.jsonl", "--out", str(tmp_path / "data.jsonl"), cwd=tmp_path),
             "error: --out")
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
def test_a_data_file_that_is_a_fifo_or_device_is_refused_without_reading_it(old_run, tmp_path, special):
    if special == "fifo":
        os.mkfifo(tmp_path / "fifo")
    result = json.loads(old_run.read_text())
    result["data"] = special
    old_run.write_text(json.dumps(result))
    before = _snapshot(tmp_path)
    proc = _run_view(old_run.name, "--out", "page.html", cwd=tmp_path)  # a read would block: the timeout fails it
    what = "a named pipe" if special == "fifo" else "a device"
    _refused(proc, f"error: {old_run.name}: field 'data': {special}: expected a regular file, found {what}")
    assert _snapshot(tmp_path) == before
    data = result.pop("data")
    old_run.write_text(json.dumps(result))
    if special == "fifo":  # --data naming a FIFO: the flag's own one line
        _refused(_run_view(old_run.name, "--data", data, "--out", "page.html", cwd=tmp_path),
                 f"error: --data {data}: expected a regular file, found {what}")
    assert not (tmp_path / "page.html").exists()


@pytest.mark.parametrize("edit,field,problem", [
    (lambda r: r["strategies"][0].update(f1="<b>x</b>"), "strategies.0.f1", "expected a number or null, got a string"),
    (lambda r: r["strategies"][1].update(seconds=[1]), "strategies.1.seconds", "got a list"),
    (lambda r: r["strategies"][1].update(precision=True), "strategies.1.precision", "got a boolean"),
    (lambda r: r["strategies"][1].update(f1_range=["0.1", 0.9]), "strategies.1.f1_range", "two numbers"),
    (lambda r: r["strategies"][1]["f1_by_group"].update(pets="<i>"), "strategies.1.f1_by_group.pets", "a string"),
    (lambda r: r["strategies"][2]["vs_first"]["paired_test"].update(p_value="0.5"),
     "strategies.2.vs_first.paired_test.p_value", "a string"),
    (lambda r: r.update(gold_yes_rate="50%"), "gold_yes_rate", "a string"),
    (lambda r: r.update(n="12"), "n", "a string"),
    (lambda r: r.update(n=-1), "n", "whole number >= 0"),
    (lambda r: r.update(seed=0.5), "seed", "whole number"),
    (lambda r: r.update(kind="weird"), "kind", "expected one of binary, multiclass, scored, got 'weird'"),
    (lambda r: r.update(cv="rows"), "cv", "expected null or 'groups'"),
])
def test_figures_that_are_not_numbers_are_one_line_naming_the_field(single_split, tmp_path, edit, field, problem):
    result = json.loads(json.dumps(single_split[0]))
    edit(result)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(result))
    (tmp_path / "run.html").write_text("the page of an earlier run")
    before = _snapshot(tmp_path)
    _refused(_run_view(path.name, cwd=tmp_path), f"error: {path.name}: field '{field}': ", problem)
    assert _snapshot(tmp_path) == before  # the earlier page is left as it was
    with pytest.raises(DataError) as exc:
        check_result(result, "r.json")
    assert exc.value.field == field


def test_the_figures_of_real_results_pass_and_markup_in_text_fields_stays_text(single_split, cv_groups, tmp_path):
    for result, _ in (single_split, cv_groups):
        assert check_result(result) is result
    result = json.loads(json.dumps(single_split[0]))
    result["strategies"][1]["name"] = "<b>x</b>"  # a name is text: shown escaped, never refused
    path = tmp_path / "run.json"
    path.write_text(json.dumps(result))
    proc = _run_view(path.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "run.html").read_text(encoding="utf-8")
    assert "&lt;b&gt;x&lt;/b&gt;" in text and "<b>x</b>" not in text
