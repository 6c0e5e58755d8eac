"""Quality on the embedded default (slow; real human labels): the 1.5B model has relevance signal.

A small fixed sample (48 train pairs, 16 per train prompt, seed 0; val is not used here) keeps
this to about a minute on 2 cores with KV prefix reuse. Measured on the whole val split by
``benchmarks/relevance.py`` and ``benchmarks/local_models.py``; this guards against a default
model, prompt layout or scoring change that takes the signal away (SmolLM2 scored ROC AUC 0.45).
"""

from __future__ import annotations

import random

import pytest

from personalign.data import load_relevance
from tests.conftest import shared_data_dir

pytestmark = pytest.mark.slow

LABELS = shared_data_dir() / "recenter_relevance" / "relevance_labels.jsonl"


@pytest.mark.skipif(not LABELS.exists(), reason="../shared/data is absent (real human relevance labels)")
def test_default_model_yes_prob_ranks_relevant_pairs_above_irrelevant_ones(monkeypatch):
    import dspy
    from sklearn.metrics import roc_auc_score

    from personalign.lm import forward

    # every margin must reach the engine: no margin from an earlier run's DSPy disk cache or this
    # process's memo (else the KV-reuse check below counts nothing)
    monkeypatch.setattr(dspy, "cache", None)
    forward.clear_memory()

    from personalign.lm import DEFAULT_MODEL
    from personalign.lm._engine import get_engine
    from personalign.stages import resolve_stage
    STRATEGIES = resolve_stage("relevance").registry

    rows = [r for r in load_relevance(LABELS) if r.split == "train"]
    sample = []
    for pid in sorted({r.prompt_id for r in rows}):
        sample += random.Random(0).sample([r for r in rows if r.prompt_id == pid], 16)
    exs = [r.to_dspy() for r in sample]
    engine = get_engine(DEFAULT_MODEL)
    p0, e0 = engine.prompt_tokens, engine.evaluated_tokens
    prog = STRATEGIES.create("yes-prob", model=DEFAULT_MODEL)
    scores = prog.score_batch(exs)
    gold = [bool(e.relevant) for e in exs]
    assert 3 <= sum(gold) <= 45
    assert roc_auc_score(gold, scores) >= 0.65, scores
    # grouped by request, only the attribute tail is evaluated after each prompt's first pair
    assert engine.evaluated_tokens - e0 < 0.5 * (engine.prompt_tokens - p0)
