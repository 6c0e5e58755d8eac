"""Which process is this, and is that process alive: worker identity for runs and trials.

A worker is one process (its threads share its identity): ``host|boot_id|pid|start_ticks``. The
start time tells a reused pid apart. MLflow runs (:mod:`personalign.tracking`) and sweep trials
(:mod:`personalign.sweeps`) record it so that the runs and trials of a killed process can be closed.
Standard library only.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()[:8]
    except OSError:
        return "-"


def _start_ticks(pid: int) -> str:
    """Start time of process ``pid`` in clock ticks since boot ("-" where /proc is missing)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "-"


def worker_id() -> str:
    """``host|boot_id|pid|start_ticks`` of this process: unique even when pids are reused."""
    return f"{socket.gethostname()}|{_boot_id()}|{os.getpid()}|{_start_ticks(os.getpid())}"


def worker_alive(worker: str | None) -> bool | None:
    """True/False for a worker of this machine (its process exists / is gone), None for another
    machine or an unparsable id (liveness then comes from heartbeats)."""
    if not worker:
        return None
    try:
        host, boot, pid_s, ticks = worker.split("|")
        pid = int(pid_s)
    except ValueError:
        return None
    if host != socket.gethostname() or boot != _boot_id():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state in ("Z", "X"):
            return False
    except (OSError, IndexError):
        pass
    return ticks == "-" or _start_ticks(pid) == ticks


__all__ = ["worker_alive", "worker_id"]
