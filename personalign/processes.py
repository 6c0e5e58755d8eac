"""Which process is this, and is that process alive: worker identity for runs and trials.

A worker is one process (its threads share its identity):
``host|boot_id|pid_ns|pid|start_ticks|token``. The start time tells a reused pid apart; the pid
namespace and a random token drawn once per process tell apart workers that share a hostname but
not a process namespace (containers on the host's name), which must not take each other for dead. MLflow runs (:mod:`personalign.tracking`) and sweep trials
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


def _pid_ns() -> str:
    """This process's pid namespace (``pid:[4026531836]``; "-" where /proc does not say)."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return "-"


_TOKEN: dict[int, str] = {}  # pid -> this process's random token (a forked child draws its own)


def worker_token() -> str:
    """A random token drawn once per process: tells apart two workers with the same host, boot,
    pid and start time (containers whose pid namespace cannot be read)."""
    pid = os.getpid()
    if pid not in _TOKEN:
        import secrets

        _TOKEN[pid] = secrets.token_hex(6)
    return _TOKEN[pid]


def worker_id() -> str:
    """``host|boot_id|pid_ns|pid|start_ticks|token`` of this process: unique even when pids are
    reused or two containers share the host's name."""
    pid = os.getpid()
    return f"{socket.gethostname()}|{_boot_id()}|{_pid_ns()}|{pid}|{_start_ticks(pid)}|{worker_token()}"


def worker_alive(worker: str | None) -> bool | None:
    """True/False for a worker of this machine and process namespace (its process exists / is
    gone), None for another machine or namespace, or an unparsable id (liveness then comes from
    heartbeats). An id of an older version (``host|boot_id|pid|start_ticks``) is read as before."""
    if not worker:
        return None
    fields = worker.split("|")
    try:
        if len(fields) == 4:
            (host, boot, pid_s, ticks), ns, token = fields, None, None
        else:
            host, boot, ns, pid_s, ticks, token = fields
        pid = int(pid_s)
    except ValueError:
        return None
    if host != socket.gethostname() or boot != _boot_id():
        return None
    if ns is not None:
        if pid == os.getpid() and token == worker_token():
            return True  # this process
        mine = _pid_ns()
        if ns != mine or ns == "-" and pid == os.getpid():
            return None  # another process namespace (or one we cannot tell): only heartbeats can tell
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


__all__ = ["worker_alive", "worker_id", "worker_token"]
