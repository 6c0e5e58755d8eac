"""Issue 38 item 5: an interrupt that lands inside a garbage-collector finalizer is not swallowed.

Python runs a signal handler between any two bytecodes of the main thread, also inside a
``__del__``, a ``weakref.finalize`` callback or a ``gc.callbacks`` hook (SQLAlchemy closes pooled
connections in such callbacks); an exception raised there is printed as "Exception ignored in ..."
and dropped, so ``compare`` ran on and wrote a complete result with exit 0. Now the interrupt is
raised again in the code the finalizer interrupted (:mod:`personalign.cli._signals`).

Reproduced with processes that spend nearly all their time inside finalizers (the signal lands in
one nearly every time: without the fix every try below ends "completed", exit 0), over many tries
of SIGINT and SIGTERM; and end to end, a tracked ``compare`` whose collector runs a slow callback.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT, cli_env
from tests.reliability.hostile import DATA, STAGE
from tests.reliability.test_interrupts import _statuses

HARNESS = '''
import gc, sys, time, weakref
from personalign.cli import _signals

mode, sleep = sys.argv[1], 0.02


class Slow:
    def __init__(self):
        self.me = self  # a cycle: freed inside gc.collect()

    def __del__(self):
        time.sleep(sleep)


class Plain:
    pass


def slow_callback(phase, info):
    if phase == "start":
        time.sleep(sleep)


def churn():
    if mode == "del":
        Slow()
        gc.collect()
    elif mode == "finalize":
        o = Plain()
        weakref.finalize(o, time.sleep, sleep)
        del o
    else:
        gc.collect()


if mode == "gc-callback":
    gc.callbacks.append(slow_callback)
with _signals.handle_signals():
    try:
        print("ready", flush=True)
        t0 = time.time()
        while time.time() - t0 < 4:
            churn()
    except KeyboardInterrupt as exc:
        print("interrupted", flush=True)
        raise SystemExit(_signals.exit_code(exc))
print("completed", flush=True)
'''

TRIES = 8  # per finalizer kind and signal: 48 interrupts in all


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("mode", ["del", "finalize", "gc-callback"])
def test_interrupt_inside_a_finalizer_always_ends_the_run(tmp_path, mode, sig):
    script = tmp_path / "harness.py"
    script.write_text(HARNESS)
    outcomes = []
    for i in range(TRIES):
        proc = subprocess.Popen([sys.executable, str(script), mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=cli_env(PYTHONPATH=str(ROOT)))
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.3 + 0.037 * i)  # a different phase of the finalizer each try
        sent = time.monotonic()
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
        outcomes.append((proc.returncode, out.strip(), time.monotonic() - sent, err[-500:]))
    assert all(rc == 128 + sig and out == "interrupted" for rc, out, _, _ in outcomes), outcomes
    assert all("Exception ignored" not in err and "Traceback" not in err for *_, err in outcomes), outcomes
    assert max(s for _, _, s, _ in outcomes) < 2.0, outcomes  # raised at once, not at the end of the loop


WRAPPER = '''
import gc, sys, time
from personalign.testing.mock_provider import main


def slow_collection(phase, info):  # most of the command's time is spent inside the collector
    if phase == "start":
        time.sleep(0.004)


gc.callbacks.append(slow_collection)
main()
'''


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_tracked_compare_interrupted_while_collecting_writes_no_result(tmp_path, sig):
    wrapper = tmp_path / "wrapper.py"
    wrapper.write_text(WRAPPER)
    for i in range(3):
        runs = tmp_path / f"runs{i}"
        proc = subprocess.Popen([sys.executable, str(wrapper), "compare", str(STAGE), "--data", str(DATA),
                                 "--strategies", "predict", "--lm", "mock/x-150ms", "--no-cache"],
                                cwd=tmp_path, env=cli_env(runs, PYTHONPATH=str(ROOT)), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        deadline = time.time() + 180
        while proc.poll() is None and time.time() < deadline and "RUNNING" not in _statuses(runs / "mlflow.db"):
            time.sleep(0.01)
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        time.sleep(0.4 + 0.3 * i)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 128 + sig, (i, proc.returncode, err[-3000:])
        assert "Exception ignored" not in err and "Traceback" not in err, err[-3000:]
        assert err.rstrip().splitlines()[-1].startswith(f"interrupted ({signal.Signals(sig).name})"), err[-1000:]
        assert not list((runs / "compare").glob("*.json")) if (runs / "compare").exists() else True
        assert set(_statuses(runs / "mlflow.db")) == {"KILLED"}, _statuses(runs / "mlflow.db")
