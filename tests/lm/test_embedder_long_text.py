"""A huge text field costs no more than MiniLM reads of it (a 50 MB message was tokenized whole)."""

import time

import numpy as np


def test_a_long_text_embeds_as_the_model_reads_it_and_a_huge_one_quickly():
    from personalign.lm.embedder import MAX_CHARS, embed, get_model

    words = " ".join(f"word{i % 997} preference" for i in range(12000))  # ~190k chars, >> 256 word pieces
    assert len(words) > MAX_CHARS
    mine = embed([words])[0]
    full = get_model().encode([words], normalize_embeddings=True, convert_to_numpy=True)[0]
    assert np.allclose(mine, full, atol=1e-5), "the cut changed the embedding"
    huge = "tea " * 12_500_000  # 50 MB
    start = time.perf_counter()
    embed([huge])
    assert time.perf_counter() - start < 30
