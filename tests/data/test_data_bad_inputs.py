"""The malformed-file corpus under tests/fixtures/bad: every file gives one line naming the
file, the line and the field (where one applies), exit code 2, and nothing is written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from personalign.cli.data import main
from personalign.data.kinds import validate
from personalign.errors import DataError

ROOT = Path(__file__).resolve().parents[2]
BAD = ROOT / "tests" / "fixtures" / "bad"

# (file, kind, line, field, fragment of the problem). line/field None where none applies
# (empty file, file-level errors, bytes that are not JSON at all).
CASES = [
    ("relevance_truncated_line.jsonl", "relevance", 2, None, "invalid JSON"),
    ("relevance_missing_field.jsonl", "relevance", 3, "label", "missing"),
    ("relevance_wrong_type.jsonl", "relevance", 1, "prompt_index", "expected int, got string"),
    ("relevance_label_out_of_range.jsonl", "relevance", 2, "label", "must be 0 or 1, got 2"),
    ("empty.jsonl", "relevance", None, None, "file is empty"),
    ("relevance_non_utf8.jsonl", "relevance", 2, None, "not valid UTF-8"),
    ("relevance_duplicate_ids.jsonl", "relevance", 3, "attribute", "duplicate id"),
    ("relevance_not_an_object.jsonl", "relevance", 2, None, "expected a JSON object"),
    ("relevance_rate_contradicts_label.jsonl", "relevance", 1, "label", "contradicts human_yes_rate"),
    ("canonical_relevance_int_label.jsonl", "relevance", 2, "relevant", "valid boolean"),
    ("canonical_mcq_gold_out_of_range.jsonl", "mcq", 1, "gold_index", "out of range for 3 options"),
    ("canonical_verification_unknown_field.jsonl", "verification", 1, "acepted", "unknown field"),
    ("canonical_rating_out_of_scale.jsonl", "rating", 1, "ratings.concise", "less than or equal to 5"),
    ("recenter_raw_bad_vote.jsonl", "recenter-raw", 1, "relevance_judgments.1.relevant", "expected boolean"),
    ("prefeval_mcq_three_options.json", "prefeval-mcq", 13, "classification_task_options", "expected 4 options"),
    ("prefeval_persona_missing_turn_field.json", "prefeval-persona", 2, "conversation.1.assistant", "missing"),
    ("prefeval_choice_aligned_not_an_option.json", "prefeval-choice", 2, "aligned_op", "not one of the options"),
    ("cupid_bad_role.jsonl", "cupid", 2, "prior_interactions.0.dialogue.1.role", "got 'bot'"),
    ("cupid_empty_array.json", "cupid", None, None, "no rows"),
    ("personamem_wrong_header/questions_32k.csv", "personamem", 1, "correct_answer", "missing column"),
    ("personamem_missing_contexts/questions_32k.csv", "personamem", None, None, "shared-contexts file not found"),
    ("personamem_bad_answer/questions_32k.csv", "personamem", 3, "correct_answer", "only 4 options"),
]


def test_corpus_is_large_enough():
    assert len(CASES) >= 15
    listed = {c[0].split("/")[0] for c in CASES}
    on_disk = {p.name for p in BAD.iterdir()}
    assert on_disk <= listed, f"untested fixtures: {on_disk - listed}"


@pytest.mark.parametrize("name, kind, line, field, fragment", CASES, ids=[c[0] for c in CASES])
def test_bad_file_one_line_error(name, kind, line, field, fragment, capsys):
    path = BAD / name
    with pytest.raises(DataError) as ei:
        validate(path, kind)
    err = ei.value
    assert (err.line, err.field) == (line, field)
    assert fragment in err.problem
    msg = str(err)
    assert "\n" not in msg
    if name.startswith("personamem_missing_contexts"):
        assert msg.startswith(str(path.with_name("shared_contexts_32k.jsonl")))  # names the missing file
    else:
        where = f"{path}:{line}: " if line else f"{path}: "
        assert msg.startswith(where + (f"field '{field}': " if field else ""))
    # through the CLI: exit code 2, exactly one line on stderr, nothing on stdout
    assert main(["validate", str(path), "--kind", kind]) == 2
    out, errout = capsys.readouterr()
    assert out == "" and errout.count("\n") == 1 and msg in errout


@pytest.mark.parametrize("name, kind", [("relevance_label_out_of_range.jsonl", "relevance"),
                                        ("personamem_missing_contexts/questions_32k.csv", "personamem")])
def test_cli_subprocess_exit_code_and_nothing_written(name, kind, tmp_path):
    before = sorted(p.relative_to(BAD) for p in BAD.rglob("*"))
    for cmd in ("validate", "stats"):
        r = subprocess.run([sys.executable, "-c", "import sys; from personalign.cli.data import main; sys.exit(main())",
                            cmd, str(BAD / name), "--kind", kind], cwd=tmp_path, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 2, r.stderr
        assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []
    assert sorted(p.relative_to(BAD) for p in BAD.rglob("*")) == before


def test_unknown_kind(capsys):
    assert main(["validate", str(BAD / "empty.jsonl"), "--kind", "nope"]) == 2
    assert "unknown kind 'nope'" in capsys.readouterr().err
