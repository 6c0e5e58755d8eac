"""docs/results.md marks a record stale when a commit after the one that made it changed the code it
measures (``measures``, git pathspecs; default :data:`personalign.record.MEASURES`), and only then
(issue 43, item 4): checked on a tiny git repository built here, no model."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.test_results_docs import RECORDS, ROOT, report


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c",
                           "commit.gpgsign=false", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


def _commit(repo: Path, path: str, text: str) -> str:
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(text)
    _git(repo, "add", path)
    _git(repo, "commit", "-q", "-m", f"change {path}")
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path) -> Path:
    _git(tmp_path, "init", "-q")
    for path in ("personalign/lm/engine.py", "personalign/cli/app.py", "docs/guide.md"):
        _commit(tmp_path, path, "first\n")
    return tmp_path


def _record(commit: str, measures: list[str] | None = None):
    return RECORDS[0].model_copy(update={"git_commit": commit, "measures": measures})


def test_stale_after_a_change_to_a_measured_path_and_not_after_one_elsewhere(repo):
    made = _git(repo, "rev-parse", "HEAD")
    rec, docs_only = _record(made), _record(made, ["docs"])
    assert report.code_status(rec, made, repo) == (False, f"current: the code it measures is unchanged since "
                                                          f"`{made[:12]}`")
    elsewhere = _commit(repo, "docs/guide.md", "second\n")
    head = _commit(repo, "personalign/cli/app.py", "second\n")  # the command line: not measured by default
    assert report.code_status(rec, head, repo)[0] is False
    stale, words = report.code_status(docs_only, head, repo)
    assert stale and f"last in `{elsewhere[:12]}`" in words
    changed = _commit(repo, "personalign/lm/engine.py", "second\n")
    stale, words = report.code_status(rec, changed, repo)
    assert stale and words.startswith("**stale**") and f"last in `{changed[:12]}`" in words
    assert report.code_status(rec, head, repo)[0] is False  # as of the commit before the change: current


def test_a_dirty_commit_is_judged_from_its_base_and_an_unknown_one_is_said(repo):
    made = _git(repo, "rev-parse", "HEAD")
    assert report.code_status(_record(f"{made}+dirty"), made, repo)[0] is False
    changed = _commit(repo, "personalign/lm/engine.py", "second\n")
    stale, words = report.code_status(_record(f"{made}+dirty"), changed, repo)
    assert stale and "uncommitted changes" in words
    for unknown in ("0" * 40, "unknown", f"{'f' * 40}+dirty"):
        stale, words = report.code_status(_record(unknown), changed, repo)
        assert stale is None and "not in this repository" in words, words
    assert report.code_status(_record(made), None, repo) == (None, "not checked (no git history)")


def test_the_page_marks_the_stale_record_and_names_the_commit_it_was_checked_at(repo):
    made = _git(repo, "rev-parse", "HEAD")
    changed = _commit(repo, "personalign/lm/engine.py", "second\n")
    current = _record(changed).model_copy(update={"name": "current-one"})
    old = _record(f"{made}+dirty").model_copy(update={"name": "old-one"})
    page = report.render([current, old], changed, repo)
    assert report.AS_OF.search(page)[1] == changed[:12]
    index = [line for line in page.splitlines() if line.startswith("- [")]
    assert index[0].endswith(current.title) and index[1].endswith(f"{old.title} (**stale**)")
    assert f"| git commit, date | `{made[:12]}` with uncommitted changes, {old.date} |" in page
    assert "| code measured | `personalign`, minus `personalign/cli`, minus `personalign/results_page` |" in page
    assert page.count("| status | **stale**") == 1 and page.count("| status | current") == 1


def test_a_benchmark_records_what_it_measures_and_its_own_script(tmp_path, monkeypatch):
    from personalign.record import MEASURES

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    monkeypatch.setattr(sys, "argv", [str(ROOT / "benchmarks" / "batched_decode.py")])
    import _common

    fig = {"key": "a.x", "label": "x", "strategy": None, "metric": "seconds", "value": 1.0, "ci": None, "n": None,
           "note": None}
    default = _common.write_results("a-run", [fig], command="x", out_dir=tmp_path)
    assert default["measures"] == [*MEASURES, "benchmarks/batched_decode.py"]
    narrow = _common.write_results("b-run", [fig], command="x", out_dir=tmp_path, measures=["personalign/lm"])
    assert narrow["measures"] == ["personalign/lm", "benchmarks/batched_decode.py"]
    assert report.load_record(tmp_path / "b-run.json").measures == narrow["measures"]
    with pytest.raises(ValueError, match="measures must be a non-empty list of paths"):
        _common.write_results("c-run", [fig], command="x", out_dir=tmp_path, measures=["personalign", ""])
    assert not (tmp_path / "c-run.json").exists()
