"""The interrupt line mentions a partial result only when one was written (issue 37, item 5).

A ``compare --cv groups`` rewrites its result (and its ``--results`` record) after each strategy
with ``"complete": false``; interrupted after the first strategy, its one line names those files.
Interrupted before any partial write -- and every single-split compare, compile or sweep -- the
line says no complete result was written and names no file.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import personalign
from personalign.cli import _signals
from personalign.errors import Interrupted
from personalign.tracking import RecordCallback, RunCallback
from tests.conftest import DEMO, ROOT, cli_env

MOCK = ROOT / "benchmarks" / "_mock_lm.py"
PLAIN = "interrupted (SIGINT): no complete result written"  # nothing tracked: no MLflow run to close


class _InterruptAfterFirstStrategy(RunCallback):
    """Ctrl-C as the run reaches its first partial write (``on_partial``) or its first candidate."""

    def __init__(self, at: str) -> None:
        self.at = at

    def on_partial(self, run, result) -> None:
        if self.at == "partial":
            raise Interrupted(signal.SIGINT)

    def on_candidate_end(self, run, candidate) -> None:
        if self.at == "candidate":
            raise Interrupted(signal.SIGINT)


def test_a_cv_compare_interrupted_after_a_strategy_names_its_partial_files(tmp_path):
    record = tmp_path / "partial-run.json"
    with pytest.raises(KeyboardInterrupt) as caught:
        personalign.compare("relevance", "all-yes,style-rank", DEMO, cv="groups", out_dir=tmp_path / "compare",
                            callbacks=[RecordCallback(record), _InterruptAfterFirstStrategy("partial")])
    files = caught.value.partial_files
    [result] = list((tmp_path / "compare").glob("*.json"))
    assert files == [str(result), str(record)]
    assert json.loads(result.read_text())["complete"] is False
    assert [s["name"] for s in json.loads(result.read_text())["strategies"]] == ["all-yes"]
    assert record.exists()
    line = _signals.message(caught.value)
    assert line == f'{PLAIN}; the partial result ("complete": false) is in {result}, {record}'


def test_an_interrupt_before_any_partial_write_names_no_file(tmp_path):
    with pytest.raises(KeyboardInterrupt) as caught:  # the first candidate ends before its partial write
        personalign.compare("relevance", "all-yes,style-rank", DEMO, cv="groups", out_dir=tmp_path / "compare",
                            callbacks=[_InterruptAfterFirstStrategy("candidate")])
    assert not getattr(caught.value, "partial_files", None)
    assert not list((tmp_path / "compare").glob("*.json"))
    assert _signals.message(caught.value) == PLAIN


def test_a_single_split_compare_writes_no_partial_and_says_so(tmp_path):
    with pytest.raises(KeyboardInterrupt) as caught:
        personalign.compare("relevance", "all-yes,style-rank", DEMO, split="val", out_dir=tmp_path / "compare",
                            callbacks=[_InterruptAfterFirstStrategy("candidate")])
    assert not list((tmp_path / "compare").glob("*"))
    assert _signals.message(caught.value) == PLAIN


def test_ctrl_c_of_a_cv_compare_through_the_cli_names_the_partial_result(tmp_path):
    """A real SIGINT to ``personalign compare --cv groups`` while its second strategy waits on a slow
    (mock) LM: exit 130, one line naming the result JSON and the ``--results`` record, both kept with
    ``"complete": false``."""
    runs = tmp_path / "runs"
    record = tmp_path / "partial-cv.json"
    argv = [sys.executable, str(MOCK), "compare", "relevance", "--data", str(DEMO), "--cv", "groups",
            "--strategies", "all-yes,zero-shot", "--lm", "mock/relevance-1500ms", "--no-cache", "--no-track",
            "--results", str(record)]
    proc = subprocess.Popen(argv, cwd=ROOT, env=cli_env(runs), text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    deadline = time.time() + 240
    while proc.poll() is None and time.time() < deadline and not list((runs / "compare").glob("*.json")):
        time.sleep(0.05)
    assert proc.poll() is None, f"the command ended before the signal: {proc.communicate()[1][-2000:]}"
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    [result] = list((runs / "compare").glob("*.json"))
    assert err.rstrip().splitlines()[-1] == f'{PLAIN}; the partial result ("complete": false) is in {result}, {record}'
    assert json.loads(result.read_text())["complete"] is False
    assert json.loads(record.read_text())["extra"]["complete"] is False
