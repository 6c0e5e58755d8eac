"""Real compare results for the results-page tests (LM-free strategies, seconds), in two forms:

* the result file ``compare`` writes today (no ``rows``), and
* the same result carrying the rows contract (:mod:`personalign.results_page`), built the way
  ``compare`` is to emit it: the examples and reports each ``evaluate_repeats`` call saw are
  captured while the real ``compare_stage`` runs (nothing is re-run) and turned into ``rows`` and
  the per-strategy ``scores`` / ``correct`` / ``row_errors`` by ``page_rows`` / ``strategy_arrays``.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import DEMO, ROOT

OWN_TASK = ROOT / "examples" / "own_task"


def compare_with_rows(folder: Path, stage: str, data: str, strategies: str, cv: str | None = None) -> tuple[dict, Path]:
    """Run ``compare`` (the Python API the CLI calls) from ``folder`` with the paths as a user types
    them (its run record names the equivalent command line: ``personalign compare STAGE --data DATA
    --strategies ...``) and return (the result, which carries the rows contract, and the result file
    compare wrote under ``folder/runs/compare``)."""
    import personalign

    argv = ["personalign", "compare", stage, "--data", data, "--strategies", strategies, "--no-track"]
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(folder)
        mp.setattr(sys, "argv", argv + (["--cv", cv] if cv else []))
        result = personalign.compare(stage, strategies, data, cv=cv, out_dir="runs/compare").to_dict()
    result = json.loads(json.dumps(result, default=str))
    path = next((folder / "runs" / "compare").glob("*.json"))  # one run per folder
    return result, path


def old_result(path: Path) -> dict:
    """The result file at ``path`` as ``compare`` wrote it before it carried the rows contract:
    no ``rows``, ``row_fields``, ``stage_ref``; no per-row ``scores``, ``correct``, ``row_errors``."""
    from personalign.results_page import load_result

    result = load_result(path)
    for key in ("rows", "row_fields", "stage_ref"):
        result.pop(key, None)
    for row in result["strategies"]:
        for key in ("scores", "correct", "row_errors"):
            row.pop(key, None)
    return result


@pytest.fixture(scope="session")
def own_task_copy(tmp_path_factory) -> Path:
    """The own-task example (stage file + data) copied to a folder of its own."""
    d = tmp_path_factory.mktemp("own_task")
    for name in ("stage.toml", "data.jsonl", "my_task.py"):
        shutil.copy(OWN_TASK / name, d / name)
    return d


@pytest.fixture(scope="session")
def single_split(own_task_copy) -> tuple[dict, Path]:
    """A single-split compare of the own-task example: majority, minilm-logreg (has scores)."""
    return compare_with_rows(own_task_copy, "stage.toml", "data.jsonl", "majority,minilm-logreg")


@pytest.fixture(scope="session")
def cv_groups(tmp_path_factory) -> tuple[dict, Path]:
    """A leave-one-prompt-out compare of the relevance demo: all-yes, style-rank."""
    folder = tmp_path_factory.mktemp("relevance")
    shutil.copy(DEMO, folder / DEMO.name)
    return compare_with_rows(folder, "relevance", DEMO.name, "all-yes,style-rank", cv="groups")
