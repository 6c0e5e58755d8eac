"""Ctrl-C while the console script is still starting: one line and exit 130, never Python's
``KeyboardInterrupt`` traceback (issue 38, the fresh attack: a Ctrl-C in the first ~0.5 s).

The console script is ``personalign._launch:main``: it imports the command line inside a ``try``.
Before it runs only ``personalign/__init__`` is imported, which must stay tiny (offline defaults,
public names imported on first use). Python's own start (its ``site`` module) is outside reach.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT, cli_env

#: an interrupt raised exactly as Python imports ``module`` (a meta-path finder), then the console
#: script's own code: the interrupt lands deterministically inside the start-up import.
INTERRUPT_AT_IMPORT = """
import sys
class _Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            raise KeyboardInterrupt
sys.meta_path.insert(0, _Interrupt())
sys.argv[0] = "personalign"
from personalign._launch import main
main()
"""


@pytest.mark.parametrize("module", ["typer", "personalign.cli", "personalign.cli._options", "personalign._versions"])
def test_ctrl_c_while_the_command_line_is_imported_is_one_line_and_130(tmp_path, module):
    proc = subprocess.run([sys.executable, "-c", INTERRUPT_AT_IMPORT.format(module=module), "stages"], cwd=ROOT,
                          env=cli_env(tmp_path / "runs"), capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 130, proc.stderr[-2000:]
    assert proc.stderr.splitlines() == ["interrupted (SIGINT) while starting: nothing was run"], proc.stderr[-2000:]
    assert proc.stdout == "" and not (tmp_path / "runs").exists()


def test_importing_the_package_imports_next_to_nothing(tmp_path):
    """What runs before the console script's ``try``: ``personalign/__init__`` and ``_env`` only (no
    verbs, no ``importlib.metadata``, no pydantic), so the window for a traceback is a millisecond."""
    code = ("import sys; before = set(sys.modules); import personalign\n"
            "print(sorted(m for m in set(sys.modules) - before if m.startswith(('personalign', 'importlib.metadata', 'pydantic', 'typer'))))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=cli_env(tmp_path / "runs"), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['personalign', 'personalign._env']", proc.stdout


def test_public_names_are_still_the_api():
    import personalign

    assert callable(personalign.compare) and personalign.compare is personalign._verbs.compare
    assert set(personalign.__all__) <= set(dir(personalign))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        personalign.nope  # noqa: B018


@pytest.mark.parametrize("module, sig", [("personalign.cli", "SIGTERM"), ("typer", "SIGHUP")])
def test_sigterm_or_sighup_while_starting_is_one_line_too(tmp_path, module, sig):
    """SIGTERM and SIGHUP while the command line is imported: one line and 128 + signal (Python's
    default for them was a silent death)."""
    code = INTERRUPT_AT_IMPORT.format(module=module).replace(
        "raise KeyboardInterrupt", f"import os, signal; os.kill(os.getpid(), signal.{sig})")
    proc = subprocess.run([sys.executable, "-c", code, "stages"], cwd=ROOT, env=cli_env(tmp_path / "runs"),
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    import signal

    assert proc.returncode == 128 + getattr(signal, sig), proc.stderr[-2000:]
    assert proc.stderr.splitlines() == [f"interrupted ({sig}) while starting: nothing was run"], proc.stderr[-2000:]


def _python(code: str, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=cli_env(tmp_path / "runs"), capture_output=True,
                          text=True, timeout=120)


def test_nohup_keeps_sighup_ignored(tmp_path):
    """Under ``nohup`` (SIGHUP ignored when the command starts) the command keeps ignoring it."""
    code = ("import signal, sys; signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
            "from personalign.cli import _signals\n"
            "with _signals.handle_signals():\n"
            "    assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN\n"
            "    assert signal.getsignal(signal.SIGTERM) is _signals._handler\n"
            "print('ok')")
    proc = _python(code, tmp_path)
    assert proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_sighup_during_a_command_unwinds_like_sigterm(tmp_path):
    """The terminal closed (SIGHUP) while a command works: it unwinds as from Ctrl-C, exit 129."""
    code = ("import os, signal, time\n"
            "from personalign.cli import _signals\n"
            "try:\n"
            "    with _signals.handle_signals():\n"
            "        os.kill(os.getpid(), signal.SIGHUP)\n"
            "        time.sleep(30)\n"
            "except KeyboardInterrupt as exc:\n"
            "    print(_signals.exit_code(exc), _signals.message(exc))\n")
    proc = _python(code, tmp_path)
    assert proc.stdout.strip() == "129 interrupted (SIGHUP): no complete result written", proc.stderr[-2000:]
