"""An OpenAI-compatible server on loopback for tests and benchmarks: llama-cpp-python's own
``python -m llama_cpp.server`` (extra ``llama-cpp-python[server]``) serving an embedded model's
GGUF from the model cache, so the same weights run embedded and behind an endpoint.

    with llama_server("local/qwen2.5-coder-0.5b-instruct") as srv:
        lm = make_lm(srv.model, api_base=srv.api_base)

The server gets the embedded engine's context size and threads (:func:`personalign.lm.current_settings`)
and its output goes to a log file (``srv.log``), read back when it fails to start.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

# Request kwargs that make llama-cpp-python's server decode as the embedded engine does: its chat
# endpoint applies repeat_penalty 1.1 by default; the embedded engine applies none.
LLAMA_CPP_SERVER_KWARGS = {"extra_body": {"repeat_penalty": 1.0}}


@dataclass(frozen=True)
class Server:
    """A running server: ``model`` (the litellm string to use), ``api_base``, ``log`` file, ``pid``."""

    model: str
    api_base: str
    log: Path
    pid: int


def server_available() -> str | None:
    """None when ``llama_cpp.server`` can be imported here, else why not (for a skip reason)."""
    try:
        import llama_cpp.server.app  # noqa: F401
    except Exception as exc:  # noqa: BLE001 -- a missing extra (fastapi, uvicorn, sse-starlette ...)
        return f"llama-cpp-python's server extra is not installed ({exc}); pip install 'llama-cpp-python[server]'"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def llama_server(model: str = "local/qwen2.5-coder-0.5b-instruct", *, timeout_s: float = 300.0,
                 alias: str | None = None) -> Iterator[Server]:
    """Serve an embedded model's GGUF on ``127.0.0.1`` for the ``with`` block; stopped after.

    Raises:
        RuntimeError: the server did not answer ``/v1/models`` within ``timeout_s`` (the message
            ends with its log's last lines).
    """
    from personalign.lm import current_settings, model_file

    path, _ = model_file(model)
    settings = current_settings()
    name = alias or model.split("/", 1)[-1]
    port = _free_port()
    log = Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(path), "--model_alias", name,
           "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(settings.n_ctx),
           "--n_threads", str(settings.n_threads), "--n_threads_batch", str(settings.n_threads),
           "--seed", str(settings.seed), "--verbose", "False"]
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=dict(os.environ))
    api_base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace").strip().splitlines()[-5:]
                raise RuntimeError(f"llama_cpp.server did not start (exit {proc.poll()}): " + " | ".join(tail))
            try:
                with urllib.request.urlopen(f"{api_base}/models", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        yield Server(model=f"openai/{name}", api_base=api_base, log=log, pid=proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


__all__ = ["LLAMA_CPP_SERVER_KWARGS", "Server", "llama_server", "server_available"]
