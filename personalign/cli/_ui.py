"""``personalign ui``: MLflow's UI on the project's store, offline, on loopback only.

Plain ``mlflow ui`` imports litellm, which fetches a remote model cost map at start (a stall, or
a network call, on every launch). This command starts the same server (``mlflow server``) with
personalign's offline environment (:mod:`personalign._env`: ``LITELLM_LOCAL_MODEL_COST_MAP``,
telemetry off), on ``127.0.0.1`` only, with the store personalign writes to.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

LOOPBACK = "127.0.0.1"


def ui_command(tracking_uri: str | None = None, port: int = 5000) -> tuple[list[str], dict[str, str]]:
    """``(argv, env)`` of the MLflow UI server for ``tracking_uri`` (default: personalign's store,
    ``sqlite:///<runs>/mlflow.db``) on ``http://127.0.0.1:<port>``; ``env`` is this process's
    environment plus the offline defaults (the user's explicit values win)."""
    from personalign._env import OFFLINE_DEFAULTS
    from personalign.settings import default_tracking_uri, runs_dir

    uri = tracking_uri or default_tracking_uri()
    argv = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", uri, "--host", LOOPBACK,
            "--port", str(port), "--workers", "1"]
    if uri.startswith("sqlite:"):  # artifacts uploaded through the UI go beside the others, not ./mlartifacts
        argv += ["--artifacts-destination", (runs_dir() / "mlartifacts").resolve().as_uri()]
    env = {**OFFLINE_DEFAULTS, **os.environ}
    return argv, env


def run_ui(*, tracking_uri: str | None, port: int) -> None:
    """Replace this process with the MLflow UI server (Ctrl-C stops it).

    Raises:
        ConfigurationError: the URI is an ``http(s)://`` server (open it directly), or its SQLite
            store does not exist yet.
    """
    from personalign.errors import ConfigurationError
    from personalign.settings import default_tracking_uri

    uri = tracking_uri or default_tracking_uri()
    if uri.startswith(("http://", "https://")):
        raise ConfigurationError(f"{uri} is an MLflow server already: open it in a browser")
    argv, env = ui_command(tracking_uri, port)
    if uri.startswith("sqlite:///"):
        db = Path(uri[len("sqlite:///"):])
        if not db.exists():
            raise ConfigurationError(f"no MLflow store at {db}: run a command first (e.g. `personalign compare`) "
                                     "or pass --tracking-uri URI")
    sys.stderr.write(f"MLflow UI for {uri} at http://{LOOPBACK}:{port} (offline; Ctrl-C stops)\n")
    sys.stderr.flush()
    os.execve(argv[0], argv, env)
