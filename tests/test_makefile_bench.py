"""``make bench`` runs the benchmark scripts only: not the helpers (``benchmarks/_*.py``), not the
results renderer (``report.py``, run once at the end), not ``demo_timing.py`` (model-heavy; it
belongs to ``make demo-results``). Read from ``make -n bench`` (a dry run: nothing executes)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from tests.conftest import ROOT

NOT_BENCHMARKS = {"report.py", "demo_timing.py"}


def _dry_run() -> list[str]:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    # Under ``make test`` (CI) the parent make's MAKELEVEL/MAKEFLAGS turn on "make[1]: Entering
    # directory" lines; a dry run of its own, without them, prints the recipe only.
    env = {k: v for k, v in os.environ.items() if k not in {"MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES"}}
    proc = subprocess.run(["make", "--no-print-directory", "-n", "bench"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def test_make_bench_runs_every_benchmark_script_and_nothing_else():
    lines = _dry_run()
    (loop,) = [line for line in lines if "for b in" in line]
    ran = re.search(r"for b in (.*?); do", loop).group(1).split()
    expected = sorted(f"benchmarks/{p.name}" for p in (ROOT / "benchmarks").glob("*.py")
                      if not p.name.startswith("_") and p.name not in NOT_BENCHMARKS)
    assert ran == expected
    assert len(ran) >= 10 and "benchmarks/relevance_lopo.py" in ran
    assert not [b for b in ran if b.split("/")[-1].startswith("_") or b.split("/")[-1] in NOT_BENCHMARKS]
    assert lines[-1].endswith("python benchmarks/report.py")  # the results page, re-rendered once at the end
    assert "set -e" in loop  # a failing benchmark stops the run
