"""llama-cpp-python's two module-level /dev/null files must not print ``ResourceWarning: unclosed file``
at interpreter exit (they did after a leave-one-group-out compare, on the demo's stderr)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("llama_cpp")


def _stderr(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stderr


# a warning issued inside catch_warnings + "always" (as compare does around compile) leaves the C side
# of the warnings machinery on that context's filter list, so the exit checks run against "always"
STALE = ("import warnings, llama_cpp\n"
         "with warnings.catch_warnings(record=True):\n"
         "    warnings.simplefilter('always')\n"
         "    warnings.warn('inside', UserWarning)\n")


def test_llama_cpp_files_warn_at_exit_after_a_warning_inside_catch_warnings():
    assert _stderr(STALE).count("unclosed file") == 2  # the condition the engine repairs


def test_the_engine_makes_the_exit_use_the_real_filters():
    code = "from personalign.lm._exit import quiet_exit\nquiet_exit(); quiet_exit()\n" + STALE + "print('ran')\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout == "ran\n" and out.stderr == ""
