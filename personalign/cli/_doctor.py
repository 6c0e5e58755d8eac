"""``personalign doctor``: what this installation is and how fast it runs here."""

from __future__ import annotations

import json
import os
import platform
import sys
from importlib import metadata
from pathlib import Path

PACKAGES = ("personalign", "dspy", "litellm", "llama_cpp_python", "torch", "sentence-transformers", "mlflow",
            "optuna", "pydantic", "numpy", "scikit-learn", "scipy", "bm25s", "typer", "rich")


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def collect(*, bench: bool, lm: str, cache_dir: Path | None) -> dict:
    from personalign.lm import DEFAULT_MODEL, MODELS, configure_cache, current_settings, grammar_constrained, model_file
    from personalign.lm.speed import bench_model
    from personalign.settings import default_tracking_uri

    cache = configure_cache(cache_dir)
    settings = current_settings()
    models = {}
    for spec in MODELS.values():
        path, sha = model_file(spec.model_string)
        models[spec.model_string] = {
            "file": str(path), "sha256": sha, "verified": True, "bytes": path.stat().st_size,
            "pinned_sha256": spec.split.sha256 if spec.split else None,
            "source": spec.distribution, "license": spec.license, "description": spec.description,
            "default": spec.model_string == DEFAULT_MODEL,
            "chat_format": "gguf template",
            "grammar_constrained": grammar_constrained(spec.model_string),
        }
    import llama_cpp

    info = {
        "personalign": _version("personalign"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "versions": {p: _version(p) for p in PACKAGES},
        "backend": "llama.cpp in-process via litellm custom provider 'local'",
        "llama_cpp_system_info": llama_cpp.llama_print_system_info().decode().strip(),
        "default_model": DEFAULT_MODEL,
        "lm_override": os.environ.get("PERSONALIGN_LM") or None,
        "kv_prefix_reuse": settings.reuse_prefix,
        "models": models,
        "grammar_constrained": all(m["grammar_constrained"] for m in models.values()),
        "threads": settings.n_threads,
        "n_ctx": settings.n_ctx,
        "seed": settings.seed,
        "cache_dir": str(cache),
        "tracking_uri": default_tracking_uri(),
        "offline": {k: os.environ.get(k) for k in ("LITELLM_LOCAL_MODEL_COST_MAP", "HF_HUB_OFFLINE")},
    }
    if bench:
        info["bench"] = [bench_model(m) for m in ([lm] if lm else list(models))]
    return info


def run_doctor(*, json_out: bool, bench: bool, lm: str, cache_dir: Path | None) -> None:
    info = collect(bench=bench, lm=lm, cache_dir=cache_dir)
    if json_out:
        sys.stdout.write(json.dumps(info) + "\n")
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title=f"personalign {info['personalign']} doctor", show_header=False)
    for key in ("python", "platform", "backend", "default_model", "grammar_constrained", "threads", "n_ctx",
                "cache_dir", "tracking_uri"):
        table.add_row(key, str(info[key]))
    for name, m in info["models"].items():
        table.add_row(name + (" (default)" if m["default"] else ""),
                      f"{m['file']}\nsha256 {m['sha256']} (verified)\n{m['description']}")
    table.add_row("versions", ", ".join(f"{k} {v}" for k, v in info["versions"].items() if v))
    for b in info.get("bench", []):
        table.add_row(f"bench {b['model']}", f"prompt {b['prompt_tokens_per_s']} tok/s, generation {b['gen_tokens_per_s']} tok/s")
    console.print(table)
