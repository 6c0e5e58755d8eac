"""Agreement stays bounded on many annotators (the fresh attack: 200,000 annotators on one row ran
pairwise Cohen's κ over 2·10^10 pairs, killed at 120 s)."""

from __future__ import annotations

import pytest

from personalign.data.annotations import MAX_PER_ROW, check_annotations
from personalign.errors import DataError
from personalign.labels.agreement import MAX_PAIRWISE, agreement


def test_a_row_with_too_many_annotators_is_one_line():
    with pytest.raises(DataError) as refused:
        check_annotations({f"a{i}": True for i in range(MAX_PER_ROW + 1)}, "ann.jsonl", 3, lambda v: None)
    assert "ann.jsonl:3" in str(refused.value) and f"at most {MAX_PER_ROW:,}" in str(refused.value)


def test_pairwise_kappa_is_skipped_beyond_its_bound_and_says_so():
    n = MAX_PAIRWISE + 50
    items = {f"r{j}": {f"a{i}": (i + j) % 3 == 0 for i in range(n)} for j in range(4)}
    out = agreement(items)
    assert out["pairwise"] == [] and f"{n:,} annotators" in out["pairwise_skipped"]
    assert out["n_annotators"] == n and out["fleiss"] is not None
    small = agreement({f"r{j}": {f"a{i}": (i + j) % 2 == 0 for i in range(3)} for j in range(4)})
    assert len(small["pairwise"]) == 3 and small["pairwise_skipped"] is None
