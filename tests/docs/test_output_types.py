"""The output types a stage file may declare are the same everywhere (issue 37, item 7): every
"``type = ... # bool | int | ...``" comment of a stage file (the pages, ``examples/``, the ``stage
init`` template, the spec's docstring) and the unknown-type error name exactly
:data:`personalign.stages.spec.TYPES` and a list, and each of those types validates with its data."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs.conftest import PAGES, ROOT


def _type_comments() -> list[tuple[str, str]]:
    from personalign.stages import spec

    sources = [*((p, p.read_text(encoding="utf-8")) for p in PAGES),
               *((p, p.read_text(encoding="utf-8")) for p in sorted((ROOT / "examples").rglob("*.toml"))),
               ("personalign stage init (spec.TEMPLATE)", spec.TEMPLATE), ("personalign/stages/spec.py docstring", spec.__doc__)]
    return [(str(Path(str(w)).relative_to(ROOT)) if isinstance(w, Path) else w, m.group(1))
            for w, text in sources for m in re.finditer(r'(?m)^\s*type\s*=\s*\S[^#\n]*#\s*(.+)$', text)]


TYPE_COMMENTS = _type_comments()


def _type_names(alternatives: str) -> set[str]:
    names = set()
    for alt in alternatives.split("|"):
        alt = alt.strip()
        names.add("list" if alt.startswith("[") or "list" in alt else alt.split()[0])
    return names


def test_the_type_comments_are_found():
    wheres = {w for w, _ in TYPE_COMMENTS}
    assert {"README.md", "docs/own-task.md", "personalign stage init (spec.TEMPLATE)"} <= wheres, wheres


@pytest.mark.parametrize("where,alternatives", TYPE_COMMENTS, ids=[w for w, _ in TYPE_COMMENTS])
def test_a_stated_list_of_output_types_is_what_a_stage_file_accepts(where, alternatives):
    from personalign.stages.spec import TYPES

    assert _type_names(alternatives) == {*TYPES, "list"}, f"{where}: {alternatives!r}; a stage file accepts {TYPES} and a list"


def test_the_unknown_type_error_offers_every_accepted_type():
    from pydantic import ValidationError

    from personalign.stages.spec import TYPES, OutputSpec

    with pytest.raises(ValidationError) as caught:
        OutputSpec(name="x", type="complex")
    message = str(caught.value)
    assert all(re.search(rf"\b{t}\b", message) for t in TYPES) and "list" in message, message


@pytest.mark.parametrize("typ,value", [("bool", True), ("int", 3), ("float", 0.25), ("str", "high")])
def test_every_output_type_the_docs_offer_validates_with_its_data(typ, value, tmp_path):
    """``stage validate``'s checks (a stage file and rows of that type) accept every type listed."""
    import json

    from personalign.stages import check_data, resolve_stage
    from personalign.stages.spec import TYPES

    assert typ in TYPES
    kind = "binary" if typ == "bool" else "scored"
    (tmp_path / "m.py").write_text("def score(example, pred, trace=None):\n    return 1.0\n")
    (tmp_path / "s.toml").write_text(
        f'name = "t"\ninstructions = "Decide."\nkind = "{kind}"\nlabel = "y"\n'
        + ('metric = "m.py:score"\n' if kind == "scored" else "")
        + f'[inputs]\ntext = "a text"\n[output]\nname = "y"\ntype = "{typ}"\n')
    rows = [{"id": f"r{i}", "split": s, "text": f"t{i}", "y": value if typ != "bool" else i % 2 == 0}
            for i, s in enumerate(["train"] * 4 + ["val"] * 2)]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    facts = check_data(resolve_stage(str(tmp_path / "s.toml")), tmp_path / "d.jsonl", train_split="train")
    assert facts["n"] == 6
