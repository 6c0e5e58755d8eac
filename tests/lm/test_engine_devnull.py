"""llama-cpp-python's two module-level /dev/null files must not print ``ResourceWarning: unclosed file``
at interpreter exit (they did after a leave-one-group-out compare, on the demo's stderr)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("llama_cpp")


def _stderr(code: str) -> str:
    return subprocess.run([sys.executable, "-W", "always::ResourceWarning", "-c", code],
                          capture_output=True, text=True, timeout=120, check=True).stderr


def test_llama_cpp_alone_warns_at_exit_when_resource_warnings_show():
    assert "unclosed file" in _stderr("import llama_cpp")  # the condition the engine repairs


def test_the_engines_devnull_files_close_quietly_and_still_suppress_output():
    code = ("import llama_cpp._utils as u\n"
            "from personalign.lm._engine import _quiet_devnull, _QuietDevNull\n"
            "_quiet_devnull(); _quiet_devnull()\n"
            "assert isinstance(u.outnull_file, _QuietDevNull) and isinstance(u.errnull_file, _QuietDevNull)\n"
            "import sys\n"
            "with u.suppress_stdout_stderr(disable=False):\n"
            "    print('hidden'); print('hidden', file=sys.stderr)\n"
            "print('shown')\n")
    out = subprocess.run([sys.executable, "-W", "always::ResourceWarning", "-c", code],
                         capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout == "shown\n"
    assert out.stderr == ""
