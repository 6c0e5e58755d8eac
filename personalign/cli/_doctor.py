"""``personalign doctor``: what this installation is and how fast it runs here."""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata
from pathlib import Path

from personalign.cli._output import print_json

PACKAGES = ("personalign", "dspy", "litellm", "llama_cpp_python", "torch", "sentence-transformers", "mlflow",
            "optuna", "pydantic", "numpy", "scikit-learn", "scipy", "bm25s", "typer", "rich")


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def collect(*, bench: bool, lm: str, cache_dir: Path | None, rehash: bool = False, full: bool = False) -> dict:
    """Everything ``doctor`` reports, as one JSON-able dict. Model files are assembled into the
    model cache if missing and sha256-verified: from their stamps (no hashing) unless a file
    changed since it was stamped or ``rehash`` is set. Without ``full`` (or ``bench``) neither
    DSPy nor litellm nor llama.cpp is imported, so a warm ``doctor`` answers in about a second;
    ``full`` adds the wiring checks (litellm routes ``local/...`` with JSON-schema support, DSPy's
    cache configured, llama.cpp's system info)."""
    from personalign.lm import DEFAULT_MODEL, MODELS, current_settings, how_verified, model_file
    from personalign.settings import default_tracking_uri, models_dir

    full = full or bench
    cache = _cache_dir(cache_dir, full)
    settings = current_settings()
    models = {}
    for spec in MODELS.values():
        path, sha = model_file(spec.model_string, rehash=rehash)
        models[spec.model_string] = {
            "file": str(path), "sha256": sha, "verified": True, "verified_by": how_verified(path),
            "bytes": path.stat().st_size,
            "pinned_sha256": spec.split.sha256 if spec.split else None,
            "source": spec.distribution, "license": spec.license, "description": spec.description,
            "default": spec.model_string == DEFAULT_MODEL,
            "chat_format": "gguf template",
        }
    info = {
        "personalign": _version("personalign"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "versions": {p: _version(p) for p in PACKAGES},
        "backend": "llama.cpp in-process via litellm custom provider 'local'",
        "default_model": DEFAULT_MODEL,
        "lm_override": os.environ.get("PERSONALIGN_LM") or None,
        "kv_prefix_reuse": settings.reuse_prefix,
        "models": models,
        "threads": settings.n_threads,
        "n_ctx": settings.n_ctx,
        "seed": settings.seed,
        "cache_dir": str(cache),
        "models_dir": str(models_dir()),
        "tracking_uri": default_tracking_uri(),
        "offline": {k: os.environ.get(k) for k in ("LITELLM_LOCAL_MODEL_COST_MAP", "HF_HUB_OFFLINE")},
        "full": full,
    }
    if full:
        import llama_cpp

        from personalign.lm import grammar_constrained

        for name, m in models.items():
            m["grammar_constrained"] = grammar_constrained(name)
        info["grammar_constrained"] = all(m["grammar_constrained"] for m in models.values())
        info["llama_cpp_system_info"] = llama_cpp.llama_print_system_info().decode().strip()
    if bench:
        from personalign.lm import bench_model

        info["bench"] = [bench_model(m) for m in ([lm] if lm else list(models))]
    return info


def _cache_dir(cache_dir: Path | None, configure: bool) -> Path:
    """The DSPy cache directory, checked writable; configured in DSPy only when ``configure``."""
    from personalign.lm import check_cache_dir, configure_cache

    return configure_cache(cache_dir) if configure else check_cache_dir(cache_dir)


def run_doctor(*, json_out: bool, bench: bool, lm: str, cache_dir: Path | None, rehash: bool = False,
               full: bool = False) -> None:
    info = collect(bench=bench, lm=lm, cache_dir=cache_dir, rehash=rehash, full=full)
    if json_out:
        print_json(info)
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title=f"personalign {info['personalign']} doctor", show_header=False)
    for key in ("python", "platform", "backend", "default_model", "grammar_constrained", "threads", "n_ctx",
                "cache_dir", "models_dir", "tracking_uri"):
        if key in info:
            table.add_row(key, str(info[key]))
    for name, m in info["models"].items():
        table.add_row(name + (" (default)" if m["default"] else ""),
                      f"{m['file']}\nsha256 {m['sha256']} (verified: {m['verified_by']})\n{m['description']}")
    table.add_row("versions", ", ".join(f"{k} {v}" for k, v in info["versions"].items() if v))
    for b in info.get("bench", []):
        table.add_row(f"bench {b['model']}", f"prompt {b['prompt_tokens_per_s']} tok/s, generation {b['gen_tokens_per_s']} tok/s; "
                      f"{b['seconds_per_forward_pass']} s per forward pass, {b['seconds_per_generation']} s per typed "
                      f"call (kept in {b['kept_in']} for the cost line of a run)")
    console.print(table)
