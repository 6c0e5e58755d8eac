"""The one place that talks to MLflow: runs, params, metrics, artifacts.

Default store: ``sqlite:///runs/mlflow.db`` with artifacts under ``runs/mlartifacts``; any
tracking URI (e.g. an ``mlflow server`` at http://127.0.0.1:5000) by argument. View with
``mlflow ui --backend-store-uri sqlite:///runs/mlflow.db``.

Secrets are never logged: parameter values whose key names a key, token, secret or password are
replaced by ``***``, and any value equal to an API key/token found in the environment is too.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path
from typing import Any, Iterator

_SECRET_KEY = re.compile(r"(api[_-]?key|token|secret|password|authorization|api[_-]?base)", re.I)
_ENV_SECRET = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)", re.I)


def _env_secrets() -> list[str]:
    return [v for k, v in os.environ.items() if _ENV_SECRET.search(k) and v and len(v) >= 8]


def redact(value: Any, key: str = "") -> Any:
    """Redact secrets in a param value (recursively for dicts/lists)."""
    if key and _SECRET_KEY.search(key):
        return "***"
    if isinstance(value, dict):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    if isinstance(value, str):
        for secret in _env_secrets():
            if secret in value:
                value = value.replace(secret, "***")
    return value


def _flatten(prefix: str, obj: Any, out: dict[str, Any]) -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = obj


class Tracker:
    """MLflow runs for personalign commands.

    Args:
        tracking_uri: MLflow tracking URI (default ``sqlite:///<runs>/mlflow.db``).
        experiment: experiment name (default ``personalign``).
        enabled: False makes every method a no-op (``--no-track``).
    """

    def __init__(self, tracking_uri: str | None = None, experiment: str = "personalign", enabled: bool = True):
        from personalign.settings import default_tracking_uri, runs_dir

        self.enabled = enabled
        self.tracking_uri = tracking_uri or default_tracking_uri()
        self.experiment = experiment
        self._artifact_root = runs_dir() / "mlartifacts"
        self._ready = False

    def check(self) -> None:
        """Open the tracking store now.

        Raises:
            ConfigurationError: the URI is unsupported or its store cannot be created (one line).
        """
        if not self.enabled:
            return
        from personalign.errors import ConfigurationError

        try:
            self._setup()
        except Exception as exc:  # noqa: BLE001 -- MLflow raises many types for bad URIs
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise ConfigurationError(f"cannot use MLflow tracking URI '{self.tracking_uri}': {type(exc).__name__}: "
                                     f"{first}; pass --tracking-uri URI or --no-track") from None

    def _setup(self):
        import mlflow

        if not self._ready:
            if self.tracking_uri.startswith("sqlite:///"):
                Path(self.tracking_uri[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
            mlflow.set_tracking_uri(self.tracking_uri)
            client = mlflow.MlflowClient()
            exp = client.get_experiment_by_name(self.experiment)
            if exp is None:
                location = None
                if self.tracking_uri.startswith("sqlite:"):
                    self._artifact_root.mkdir(parents=True, exist_ok=True)
                    location = self._artifact_root.as_uri()
                client.create_experiment(self.experiment, artifact_location=location)
            mlflow.set_experiment(self.experiment)
            self._ready = True
        return mlflow

    @contextlib.contextmanager
    def run(self, name: str, *, params: dict[str, Any] | None = None, tags: dict[str, str] | None = None,
            nested: bool = False) -> Iterator["Tracker"]:
        """Open a run (a child of the active run when ``nested``); closes it FAILED on an exception."""
        if not self.enabled:
            yield self
            return
        mlflow = self._setup()
        previous = getattr(self, "run_id", None)
        with mlflow.start_run(run_name=name, nested=nested, tags=tags) as active:
            self.run_id = active.info.run_id
            if params:
                self.log_params(params)
            try:
                yield self
            finally:
                if nested:
                    self.run_id = previous

    def log_params(self, params: dict[str, Any]) -> None:
        if not self.enabled:
            return
        flat: dict[str, Any] = {}
        _flatten("", redact(params), flat)
        self._setup().log_params({k: str(v)[:6000] for k, v in flat.items()})

    def log_metrics(self, metrics: dict[str, Any], prefix: str = "") -> None:
        """Log numeric metrics; a ``[low, high]`` CI becomes ``name_ci_low`` / ``name_ci_high``."""
        if not self.enabled:
            return
        out: dict[str, float] = {}
        for k, v in metrics.items():
            key = f"{prefix}{k}"
            if isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, (int, float)) for x in v):
                out[f"{key}_low"], out[f"{key}_high"] = float(v[0]), float(v[1])
            elif isinstance(v, bool):
                out[key] = float(v)
            elif isinstance(v, (int, float)) and v == v:
                out[key] = float(v)
        self._setup().log_metrics(out)

    def log_dict(self, obj: Any, artifact_file: str) -> None:
        if self.enabled:
            self._setup().log_text(json.dumps(redact(obj), indent=2, default=str), artifact_file)

    def log_text(self, text: str, artifact_file: str) -> None:
        if self.enabled:
            self._setup().log_text(redact(text), artifact_file)

    def log_artifact(self, path: str | os.PathLike) -> None:
        if self.enabled:
            self._setup().log_artifact(str(path))
