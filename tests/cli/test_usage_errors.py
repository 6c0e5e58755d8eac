"""Click's usage errors (a bad value, a missing or unknown option, an unknown command) are one line
``error: <message> (try '... --help')`` on stderr, exit 2 -- and Ctrl-C still prints the interrupt
line and exits 130 (both through the real entry point, in a subprocess)."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from tests.conftest import DEMO, ROOT, cli_env

INTERRUPT_LINE = "interrupted (SIGINT): no complete result written"  # no MLflow run was open

CASES = {
    "negative --limit": (["compare", "relevance", "--data", str(DEMO), "--limit", "-5"],
                         "error: Invalid value for '--limit'", "(try 'personalign compare --help')"),
    "missing option": (["predict", "relevance", "-a", "x"], "error: Missing option '--prompt'",
                       "(try 'personalign predict relevance --help')"),
    "missing argument": (["stage", "validate"], "error: Missing argument", "stage validate --help"),
    "unknown option": (["compare", "relevance", "--bogus"], "error: No such option: --bogus", "compare --help"),
    "unknown root option": (["--bogus"], "error: No such option: --bogus", "(try 'personalign --help')"),
    "unknown command": (["nosuch"], "error: No such command 'nosuch'", "(try 'personalign --help')"),
    "--n-boot too large": (["compare", "relevance", "--data", str(DEMO), "--n-boot", "1000000000000"],
                           "error: Invalid value for '--n-boot'", "(try 'personalign compare --help')"),
    "--n-trials too large": (["sweep", "relevance", "--data", str(DEMO), "--n-trials", "99999999999"],
                             "error: Invalid value for '--n-trials'", "(try 'personalign sweep --help')"),
    "not an integer": (["sweep", "relevance", "--n-trials", "x"], "error: Invalid value for '--n-trials'",
                       "sweep --help"),
}

#: A throwaway command that gets a real SIGINT while it runs, through personalign.cli.main.
SELF_INTERRUPT = """
import os, signal, sys, time
import personalign.cli as cli

@cli.app.command("self-interrupt")
def self_interrupt(n: int = 1) -> None:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(30)

sys.argv[0] = "personalign"
cli.main(sys.argv[1:])
"""


#: The console script's own code (``personalign = personalign._launch:main``), named as it is installed.
ENTRY = "import sys; sys.argv[0] = 'personalign'; from personalign._launch import main; main()"


def _run(args: list[str], tmp_path, *, code: str = ENTRY) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-c", code, *args]
    return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=cli_env(tmp_path / "runs"),
                          stdin=subprocess.DEVNULL, timeout=120)


@pytest.mark.parametrize("case", list(CASES))
def test_a_usage_error_is_one_line_exit_2(case, tmp_path):
    args, start, hint = CASES[case]
    proc = _run(args, tmp_path)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and lines[0].startswith(start) and lines[0].endswith(")") and hint in lines[0], lines
    assert "Usage:" not in proc.stderr and "Traceback" not in proc.stderr and proc.stdout == ""


def test_help_and_no_arguments_still_print_the_help(tmp_path):
    helped = _run(["compare", "--help"], tmp_path)
    assert helped.returncode == 0 and "Usage: personalign compare" in helped.stdout and helped.stderr == ""
    bare = _run([], tmp_path)
    assert "Usage: personalign [OPTIONS] COMMAND" in bare.stdout + bare.stderr and "error:" not in bare.stderr


def test_ctrl_c_still_prints_its_line_and_exits_130(tmp_path):
    proc = _run(["self-interrupt"], tmp_path, code=SELF_INTERRUPT)
    assert proc.returncode == 128 + signal.SIGINT, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines() == [INTERRUPT_LINE], proc.stderr[-2000:]
    usage = _run(["self-interrupt", "--n", "x"], tmp_path, code=SELF_INTERRUPT)  # the same app, a usage error
    lines = usage.stderr.strip().splitlines()
    assert usage.returncode == 2 and len(lines) == 1, usage.stderr
    assert lines[0].startswith("error: Invalid value for '--n'") and "self-interrupt --help" in lines[0]


def test_seed_flag_takes_what_the_environment_takes():
    """--seed and PERSONALIGN_SEED accept the same range (llama.cpp seeds are uint32): -1 and
    2**32 are usage errors, not a numpy traceback after the cache was written."""
    from personalign.cli._options import SEED_MAX
    from personalign.settings import SEED_MAX as SETTINGS_SEED_MAX

    assert SEED_MAX == SETTINGS_SEED_MAX


def test_count_bounds_are_the_settings_bounds():
    """The CLI's --n-boot / --n-trials bounds (kept light in cli/_options) are the library's."""
    from personalign import settings
    from personalign.cli import _options

    assert (_options.N_BOOT_MAX, _options.N_TRIALS_MAX) == (settings.N_BOOT_MAX, settings.N_TRIALS_MAX)


def test_a_value_with_a_newline_or_an_escape_cannot_forge_a_second_line(tmp_path):
    """Every ``error:`` line is one line: a newline, a carriage return or an ANSI escape inside a
    value the message quotes is printed as its escape (the fresh attack split an error in two)."""
    proc = _run(["compare", "relevance", "--data", "no\nerror: forged\x1b[31m.jsonl"], tmp_path)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "\\nerror: forged\\x1b[31m" in lines[0] and "\x1b" not in proc.stderr


def test_deeply_nested_lm_kwargs_are_one_line(tmp_path):
    for depth in (5000, 100):
        value = '{"x": ' + "[" * depth + "]" * depth + "}"
        proc = _run(["compare", "relevance", "--data", str(DEMO), "--strategies", "all-yes", "--no-track",
                     "--lm-kwargs", value], tmp_path)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert proc.returncode == 2 and len(lines) == 1 and "nested" in lines[0], proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr
