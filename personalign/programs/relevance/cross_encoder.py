"""Learned selector: a MiniLM cross-encoder fine-tuned on (prompt, attribute) pairs on the CPU.

Base: the packaged all-MiniLM-L6-v2 weights (:func:`personalign.lm.embedder.model_dir`) loaded as
``sentence_transformers.CrossEncoder(model_dir, num_labels=1)`` -- a BERT encoder reading the pair
jointly with a fresh one-logit head. Training (in ``compile``, via
:class:`personalign.optimizers.LearnedSelectorFit`): AdamW, ``BCEWithLogitsLoss`` with
``pos_weight = n_negative / n_positive`` (class weighting for the rare positive), ``epochs`` passes
over shuffled mini-batches, inputs truncated to ``max_length`` tokens. (A plain torch loop rather
than ``CrossEncoder.fit``/``CrossEncoderTrainer``, which need the ``datasets`` and ``accelerate``
packages.) The score is the sigmoid of the logit, in [0, 1]; the threshold comes from
leave-one-prompt-out CV inside train, never from in-sample scores.

Cost on 2 CPU cores: about ``epochs x n_train / 100`` minutes per fit for the recenter train split
(long LIMA prompts); LearnedSelectorFit does n_prompts + 1 fits.

Saving (no pickle): :meth:`MiniLMCrossEncoder.dump_state` -> JSON ``{"threshold", "epochs",
"max_length", "batch_size", "lr", "fitted"}``; :meth:`MiniLMCrossEncoder.save_weights(dir)` writes
``dir/cross_encoder/`` with ``CrossEncoder.save_pretrained`` (config, tokenizer,
``model.safetensors``); :meth:`MiniLMCrossEncoder.load_weights(dir)` loads that directory.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Sequence


from personalign.programs.relevance._scorer import RelevanceScorer

WEIGHTS_DIR = "cross_encoder"
_load_lock = threading.Lock()


def _load(path: Path, max_length: int, seed: int | None = None):
    import torch
    from sentence_transformers import CrossEncoder
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    with _load_lock:
        if seed is not None:
            torch.manual_seed(seed)  # the fresh classification head is randomly initialized
        return CrossEncoder(str(path), num_labels=1, device="cpu", max_length=max_length, local_files_only=True)


class MiniLMCrossEncoder(RelevanceScorer):
    """Relevant when ``sigmoid(cross_encoder(attribute, prompt)) >= threshold``.

    Args:
        epochs: passes over train per fit (default 1: the CPU budget; more epochs overfit the 3
            train prompts).
        max_length: token limit of the (attribute, prompt) pair; the prompt is truncated.
        batch_size: pairs per optimizer step.
        lr: AdamW learning rate.
        threshold: decision threshold on the probability; None until compiled.

    Raises:
        RuntimeError: scoring before :meth:`fit` / :meth:`load_weights`, or predicting without a
            threshold.
        ModelFileError: the packaged MiniLM weights are missing.
    """

    optimizer = "personalign.optimizers.learned:LearnedSelectorFit"  # its own fit (trainable)

    fit_with = "LearnedSelectorFit"

    uses_lm = False

    def __init__(self, epochs: int = 1, max_length: int = 256, batch_size: int = 16, lr: float = 3e-5,
                 threshold: float | None = None) -> None:
        super().__init__()
        self.epochs = int(epochs)
        self.max_length = int(max_length)
        self.batch_size = int(batch_size)
        self.lr = float(lr)
        self.threshold = threshold
        self._ce = None

    def deepcopy(self):
        # torch modules deep-copy fine, but a compiled copy should not share or duplicate the
        # encoder needlessly: copy settings, then copy the encoder's weights if fitted.
        import copy

        clone = type(self)(self.epochs, self.max_length, self.batch_size, self.lr, self.threshold)
        if self._ce is not None:
            clone._ce = copy.deepcopy(self._ce)
        return clone

    @property
    def fitted(self) -> bool:
        return self._ce is not None

    def fit(self, examples: Sequence, *, seed: int = 0) -> "MiniLMCrossEncoder":
        """Fine-tune from the packaged MiniLM weights on ``examples`` (their ``relevant`` labels)."""
        import random

        import torch

        from personalign.lm.embedder import model_dir

        labels = [bool(e.relevant) for e in examples]
        n_pos = sum(labels)
        if n_pos == 0 or n_pos == len(labels):
            raise ValueError("MiniLMCrossEncoder.fit needs both relevant and irrelevant examples")
        ce = _load(model_dir(), self.max_length, seed=seed)
        model, tok = ce.model, ce.tokenizer
        torch.manual_seed(seed)
        opt = torch.optim.AdamW(model.parameters(), lr=self.lr)
        loss_fn = torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor((len(labels) - n_pos) / n_pos))
        order = list(range(len(examples)))
        rng = random.Random(seed)
        model.train()
        for _ in range(self.epochs):
            rng.shuffle(order)
            for start in range(0, len(order), self.batch_size):
                batch = [examples[i] for i in order[start:start + self.batch_size]]
                enc = tok([e.attribute for e in batch], [e.prompt for e in batch], padding=True,
                          truncation="only_second", max_length=self.max_length, return_tensors="pt")
                logits = model(**enc).logits.squeeze(-1)
                target = torch.tensor([float(bool(e.relevant)) for e in batch])
                loss = loss_fn(logits, target)
                loss.backward()
                opt.step()
                opt.zero_grad()
        model.eval()
        self._ce = ce
        return self

    def score_batch(self, examples: Sequence) -> list[float]:
        """Probability of relevant per example (shape (n,))."""
        import torch

        if self._ce is None:
            raise RuntimeError("MiniLMCrossEncoder is not fitted: compile it with LearnedSelectorFit or load_weights()")
        if not examples:
            return []
        model, tok = self._ce.model, self._ce.tokenizer
        model.eval()
        out: list[float] = []
        with torch.inference_mode():
            for start in range(0, len(examples), 32):
                batch = examples[start:start + 32]
                enc = tok([e.attribute for e in batch], [e.prompt for e in batch], padding=True,
                          truncation="only_second", max_length=self.max_length, return_tensors="pt")
                out.extend(torch.sigmoid(model(**enc).logits.squeeze(-1)).tolist())
        return [float(v) for v in out]

    def dump_state(self, *args, **kwargs) -> dict:
        return {"threshold": self.threshold, "epochs": self.epochs, "max_length": self.max_length,
                "batch_size": self.batch_size, "lr": self.lr, "fitted": self.fitted}

    def load_state(self, state: dict) -> "MiniLMCrossEncoder":
        self.threshold = state.get("threshold")
        for key in ("epochs", "max_length", "batch_size"):
            if key in state:
                setattr(self, key, int(state[key]))
        if "lr" in state:
            self.lr = float(state["lr"])
        return self

    def save_weights(self, directory: Path) -> Path:
        """Write the fine-tuned encoder to ``directory/cross_encoder/`` (safetensors); returns it."""
        if self._ce is None:
            raise RuntimeError("MiniLMCrossEncoder is not fitted: nothing to save")
        path = Path(directory) / WEIGHTS_DIR
        path.mkdir(parents=True, exist_ok=True)
        self._ce.save_pretrained(str(path), safe_serialization=True)
        return path

    def load_weights(self, directory: Path) -> "MiniLMCrossEncoder":
        """Load ``directory/cross_encoder/`` written by :meth:`save_weights`.

        Raises:
            FileNotFoundError: the directory is missing.
        """
        path = Path(directory) / WEIGHTS_DIR
        if not (path / "config.json").exists():
            raise FileNotFoundError(f"no cross-encoder weights under {path}")
        self._ce = _load(path, self.max_length)
        return self
