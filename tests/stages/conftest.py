"""Fixtures shared by the stage tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT

OWN_TASK = ROOT / "examples" / "own_task"


@pytest.fixture
def own_task(tmp_path) -> Path:
    """A temporary folder holding a copy of the own-task example's stage.toml and data.jsonl."""
    for name in ("stage.toml", "data.jsonl"):
        shutil.copy(OWN_TASK / name, tmp_path / name)
    return tmp_path


def predict_file(stage, program, data, **kw) -> dict:
    """``personalign.predict`` as its JSON (the rows under ``predictions``)."""
    import personalign

    return personalign.predict(stage, program, data, **kw).to_dict()
