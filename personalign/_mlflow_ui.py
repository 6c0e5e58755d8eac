"""The server of ``personalign ui``: ``mlflow server`` whose app answers its own page only.

MLflow 3's security middleware (``mlflow/server/fastapi_security.py``, ``security_utils.py``) lets
every loopback origin through, on any port, whatever ``--cors-allowed-origins`` says: its CORS
allowance matches ``http://localhost:*``, ``http://127.0.0.1:*`` and ``http://[::1]:*``, and its
refusal of cross-origin writes exempts the same origins. Any page served from another port of the
machine could list, create and delete experiments and runs.

``python -m personalign._mlflow_ui ARGS`` is ``mlflow server ARGS`` with uvicorn serving
:data:`app` in place of MLflow's app (``mlflow.server.fastapi_app:app``): the same app behind
:class:`personalign.origin.OwnOrigin`, held to the hosts of ``--allowed-hosts`` (which ``mlflow
server`` hands its workers as ``MLFLOW_SERVER_ALLOWED_HOSTS``). Without that variable the worker
does not start: the server is never served unguarded.
"""

from __future__ import annotations

import os
import sys

MLFLOW_APP = "mlflow.server.fastapi_app:app"
GUARDED_APP = "personalign._mlflow_ui:app"
HOSTS_ENV = "MLFLOW_SERVER_ALLOWED_HOSTS"


def guarded_app():
    """MLflow's ASGI app behind :class:`~personalign.origin.OwnOrigin` for ``$MLFLOW_SERVER_ALLOWED_HOSTS``.

    Raises:
        RuntimeError: the variable is unset or empty.
    """
    from personalign.origin import OwnOrigin

    hosts = [h.strip() for h in os.environ.get(HOSTS_ENV, "").split(",") if h.strip()]
    if not hosts or "*" in hosts:
        raise RuntimeError(f"personalign ui: {HOSTS_ENV} must name the server's own host:port (got {hosts!r})")
    from mlflow.server.fastapi_app import app as mlflow_app

    return OwnOrigin(mlflow_app, hosts, "the MLflow UI")


def __getattr__(name: str):
    """``app``, built on first access: in uvicorn's worker only, not in the launcher."""
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    global app
    app = guarded_app()
    return app


def main(argv: list[str]) -> None:
    """Run ``mlflow server *argv`` with uvicorn serving :data:`GUARDED_APP`.

    Raises:
        SystemExit: MLflow builds its server command otherwise than this module knows (another
            release): the server is not started unguarded.
    """
    import mlflow.server
    from mlflow.cli import cli

    build = getattr(mlflow.server, "_build_uvicorn_command", None)
    if build is None:
        raise SystemExit(f"personalign ui: MLflow {mlflow.__version__} has no _build_uvicorn_command; "
                         "cannot serve its UI behind personalign's origin check")

    def guarded(uvicorn_opts, host, port, workers, app_name, *args, **kwargs):
        if app_name != MLFLOW_APP:
            raise SystemExit(f"personalign ui: MLflow serves {app_name!r}, not {MLFLOW_APP!r}; "
                             "cannot serve it behind personalign's origin check")
        return build(uvicorn_opts, host, port, workers, GUARDED_APP, *args, **kwargs)

    mlflow.server._build_uvicorn_command = guarded
    cli.main(args=["server", *argv], prog_name="mlflow")


if __name__ == "__main__":
    main(sys.argv[1:])
