"""Process-wide offline defaults, applied before any heavy library is imported.

personalign never reaches the network at import or run time. Some libraries do unless told
otherwise: litellm fetches a remote model cost map at import (13-20 s stall offline),
Hugging Face libraries look up hubs, MLflow sends telemetry. Each default below is set only when
the user has not set the variable, so an explicit choice always wins.
"""

from __future__ import annotations

import os

OFFLINE_DEFAULTS = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_TELEMETRY": "False",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "DSPY_DISABLE_TELEMETRY": "1",
}


def apply_offline_defaults() -> None:
    """Set the offline environment defaults (idempotent, never overrides the user's values)."""
    for key, value in OFFLINE_DEFAULTS.items():
        os.environ.setdefault(key, value)
