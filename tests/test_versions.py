"""The version guard: an untested dspy/optuna/mlflow/litellm release is one line and exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from personalign import _versions
from personalign._versions import TESTED, UntestedVersionError, check_versions, untested

ROOT = Path(__file__).resolve().parents[1]


def _tested_versions() -> dict[str, str]:
    return {name: low for name, (low, _high) in TESTED.items()}


def test_installed_versions_are_tested():
    assert untested() == [], "the environment running the suite must be a tested one"


def test_lower_bound_is_inclusive_and_upper_bound_exclusive():
    versions = _tested_versions()
    assert untested(versions) == []
    versions["dspy"] = TESTED["dspy"][1] + ".0"
    (problem,) = untested(versions)
    assert problem.startswith(f"dspy {versions['dspy']} is outside the tested range")


@pytest.mark.parametrize("name", sorted(TESTED))
def test_each_library_has_both_bounds_checked(name):
    low, high = TESTED[name]
    assert untested({name: high}) and untested({name: "0.1"}) and not untested({name: low})


def test_missing_library_is_left_to_its_own_import_error():
    assert untested({name: None for name in TESTED}) == []


def test_check_raises_one_line_and_allow_env_downgrades_to_a_warning(monkeypatch):
    bad = _tested_versions() | {"optuna": "6.0.1"}
    hook = sys.excepthook
    try:
        with pytest.raises(UntestedVersionError) as info:
            check_versions(bad)
    finally:
        sys.excepthook = hook
    assert "\n" not in str(info.value) and "optuna 6.0.1" in str(info.value)
    assert isinstance(info.value, ImportError)
    monkeypatch.setenv(_versions.ALLOW_ENV, "1")
    with pytest.warns(RuntimeWarning, match="optuna 6.0.1"):
        check_versions(bad)


def _fake_distribution(tmp_path: Path, name: str, version: str) -> Path:
    """A dist-info that shadows the installed one on sys.path (importlib.metadata takes the first)."""
    info = tmp_path / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return tmp_path


@pytest.mark.parametrize("argv", [["-c", "import personalign; personalign.compare"],
                                  ["-c", "from personalign import Stage"],
                                  ["-c", "from personalign._launch import main; main()", "--version"],
                                  ["-m", "personalign", "--version"]])
def test_untested_major_at_first_use_is_one_line_and_exit_2(tmp_path, argv):
    """Checked before the first public name is imported and before the command line starts (not at
    ``import personalign`` itself, which stays short for the console script's Ctrl-C)."""
    shadow = _fake_distribution(tmp_path, "dspy", "4.0.0")
    env = {k: v for k, v in os.environ.items() if k != _versions.ALLOW_ENV}
    env["PYTHONPATH"] = os.pathsep.join([str(shadow), str(ROOT), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, *argv], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: dspy 4.0.0 is outside the tested range"), done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
