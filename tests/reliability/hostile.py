"""Helpers of the issue-38 reliability tests: run the CLI in a case directory of its own and check
the promises of a refused command (exit 2, one ``error:`` line, no traceback, nothing written)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import ROOT, cli_env

OWN = ROOT / "examples" / "own_task"
STAGE = OWN / "stage.toml"
DATA = OWN / "data.jsonl"
MOCK = ROOT / "benchmarks" / "_mock_lm.py"


def snapshot(d: Path) -> set[str]:
    """Every path under ``d`` (files and directories), relative."""
    return {str(p.relative_to(d)) for p in d.rglob("*")}


def run_cli(case: Path, *args: str, timeout: float = 120, mock: bool = False, env: dict | None = None):
    """``personalign ARGS`` (through the mock LM provider when ``mock``) with cwd ``case`` and
    ``case/runs`` as the runs directory; returns ``(CompletedProcess, seconds)``."""
    e = cli_env(case / "runs", PYTHONPATH=str(ROOT), **(env or {}))
    e.pop("PERSONALIGN_CACHE_DIR", None)
    e.pop("DSPY_CACHEDIR", None)
    argv = [sys.executable, str(MOCK)] if mock else [sys.executable, "-m", "personalign"]
    t0 = time.monotonic()
    proc = subprocess.run([*argv, *args], capture_output=True, text=True, cwd=case, env=e, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    return proc, time.monotonic() - t0


def refused(proc, *needles: str) -> str:
    """Assert exit 2 and exactly one stderr line ``error: ...`` holding every needle; returns it."""
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert lines[0].startswith("error: "), lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def refused_cleanly(case: Path, *args: str, needles: tuple[str, ...] = (), timeout: float = 120,
                    mock: bool = False, env: dict | None = None) -> tuple[str, float]:
    """Run a command that must be refused and leave ``case`` as it found it (no runs/, no cache,
    no file); returns ``(the error line, seconds)``."""
    before = snapshot(case)
    proc, seconds = run_cli(case, *args, timeout=timeout, mock=mock, env=env)
    line = refused(proc, *needles)
    written = sorted(snapshot(case) - before)
    assert written == [], f"a refused command wrote {written[:10]}: {line}"
    assert proc.stdout == "", proc.stdout[:500]
    return line, seconds


def closed_port() -> int:
    """A loopback TCP port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SilentServer:
    """A loopback TCP server that accepts connections and never answers (a hung tracking server)."""

    def __init__(self) -> None:
        import threading

        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted.append(conn)

    def close(self) -> None:
        self._stop = True
        self._thread.join(timeout=5)
        for c in self.accepted:
            c.close()
        self.sock.close()

    def __enter__(self) -> "SilentServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
