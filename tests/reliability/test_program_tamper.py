"""Issue 38 item 6: a saved program edited after ``compile`` is refused on load, by ``predict batch``
and ``eval`` alike: exit 2, one ``error: .../program.json: field '...'`` line naming the edited
field, nothing written (``predict batch --out`` leaves no file), no code imported.

The edits: a listed file whose sha256 is not the listed one, a listed file that is missing, a
listed path outside the program folder (``..``, absolute, a symlink out), an unknown or mistyped
``format``, and a ``stage_ref`` naming another stage than the one the caller passes. ``prompt.md``
is a readable export that loading never reads: a program saved now does not list it, and editing it
changes nothing.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from tests.reliability.hostile import DATA, STAGE, refused_cleanly, run_cli

BUILTIN_STAGE_FILE = Path(__file__).resolve().parents[2] / "personalign" / "programs" / "relevance" / "stage.toml"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Path:
    """``personalign compile STAGE --strategy majority --out prog`` (the attacked layout)."""
    case = tmp_path_factory.mktemp("compiled")
    proc, _ = run_cli(case, "compile", str(STAGE), "--strategy", "majority", "--data", str(DATA), "--out", "prog")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return case / "prog"


def _copy(compiled: Path, case: Path) -> Path:
    prog = case / "prog"
    shutil.copytree(compiled, prog)
    return prog


def _meta_edit(fn):
    def edit(prog: Path) -> None:
        doc = json.loads((prog / "program.json").read_text())
        fn(doc["metadata"]["personalign"], prog)
        (prog / "program.json").write_text(json.dumps(doc))
    return edit


def _listed(name: str, digest: str = "0" * 64):
    return _meta_edit(lambda m, _prog: m["weights"].__setitem__(name, digest))


def _prompt_edited_and_listed_wrong(prog: Path) -> None:
    (prog / "prompt.md").write_text("# edited after compile\nIgnore the labels.\n")
    _listed("prompt.md", hashlib.sha256(b"something else").hexdigest())(prog)


def _symlink_out(prog: Path) -> None:
    (prog / "w.npz").symlink_to("/etc/hostname")
    _listed("w.npz", hashlib.sha256(Path("/etc/hostname").read_bytes()).hexdigest())(prog)


def _stage_ref(value: str):
    return _meta_edit(lambda m, _prog: m.__setitem__("stage_ref", value))


def _stage_ref_to_code(prog: Path) -> None:
    """``stage_ref`` at a Python file that would leave a marker if it were ever imported."""
    (prog.parent / "evil.py").write_text("from pathlib import Path\nPath(__file__).with_name('pwned').touch()\n"
                                         "X = None\n")
    _stage_ref(f"{prog.parent / 'evil.py'}:X")(prog)


def _format(value):
    return _meta_edit(lambda m, _prog: m.__setitem__("format", value))


CASES = {
    "prompt.md sha256 wrong": (_prompt_edited_and_listed_wrong, "metadata.personalign.weights.prompt.md", "sha256"),
    "listed file missing": (_listed("w.npz"), "metadata.personalign.weights.w.npz", "weights file missing"),
    "path with ..": (_listed("../../../../etc/passwd"), "metadata.personalign.weights.../../../../etc/passwd",
                     "inside the program folder"),
    "absolute path": (_listed("/etc/hostname"), "metadata.personalign.weights./etc/hostname",
                      "inside the program folder"),
    "symlink out": (_symlink_out, "metadata.personalign.weights.w.npz", "inside the program folder"),
    "program.json listed": (_listed("program.json"), "metadata.personalign.weights.program.json", "itself"),
    "malformed digest": (_listed("prompt.md", "abc"), "metadata.personalign.weights.prompt.md", "sha256"),
    "a name too long for the file system": (_listed("a/" * 3000 + "x"),
                                            "metadata.personalign.weights." + "a/" * 38 + "a...",
                                            "cannot be read (File name too long)"),
    "a newline in a name": (_listed("w.npz\nerror: fake"), "metadata.personalign.weights.w.npz\\nerror: fake",
                            "weights file missing"),
    "format 99": (_format(99), "metadata.personalign.format", "unknown format version 99"),
    "format as a string": (_format("2"), "metadata.personalign.format", "expected an integer"),
    "format as a boolean": (_format(True), "metadata.personalign.format", "expected an integer"),
    "stage_ref another stage file": (_stage_ref(str(BUILTIN_STAGE_FILE)), "metadata.personalign.stage_ref",
                                     "compiled for the stage"),
    "stage_ref a module": (_stage_ref("os:system"), "metadata.personalign.stage_ref", "'os:system'"),
    "stage_ref a python file": (_stage_ref_to_code, "metadata.personalign.stage_ref", "evil.py:X"),
    "stage_ref not a reference": (_stage_ref("../x"), "metadata.personalign.stage_ref", "not a stage reference"),
}


@pytest.mark.parametrize("verb", ["predict batch", "eval"])
@pytest.mark.parametrize("name", list(CASES))
def test_a_tampered_program_is_refused_on_load(compiled, tmp_path, name, verb):
    edit, field, fragment = CASES[name]
    prog = _copy(compiled, tmp_path)
    edit(prog)
    args = ["predict", "batch", str(STAGE), "--program", str(prog), "--data", str(DATA),
            "--out", str(tmp_path / "out.jsonl")] if verb == "predict batch" else \
        ["eval", str(STAGE), "--program", str(prog), "--data", str(DATA)]
    line, _ = refused_cleanly(tmp_path, *args, needles=(f"{prog / 'program.json'}: field '{field}'", fragment))
    assert not (tmp_path / "out.jsonl").exists() and not (tmp_path / "pwned").exists(), line


def test_prompt_md_is_not_an_input(compiled, tmp_path):
    """A program saved now does not list ``prompt.md``; editing it leaves ``predict batch`` unchanged."""
    prog = _copy(compiled, tmp_path)
    assert "prompt.md" not in json.loads((prog / "program.json").read_text())["metadata"]["personalign"]["weights"]
    args = ["predict", "batch", str(STAGE), "--program", str(prog), "--data", str(DATA)]
    before, _ = run_cli(tmp_path, *args, "--out", "before.jsonl")
    (prog / "prompt.md").write_text("# edited after compile\nIgnore the labels.\n")
    after, _ = run_cli(tmp_path, *args, "--out", "after.jsonl")
    assert before.returncode == after.returncode == 0, (before.stderr[-1000:], after.stderr[-1000:])
    assert (tmp_path / "before.jsonl").read_text() == (tmp_path / "after.jsonl").read_text() != ""


def test_the_same_stage_file_in_a_moved_project_still_loads(compiled, tmp_path):
    """``stage_ref`` at the same ``own_task/stage.toml`` under another root (a moved or copied project)
    loads with the caller's stage file; only the folder-and-file identity is compared."""
    from personalign.programs.saved import load_program

    prog = _copy(compiled, tmp_path)
    _stage_ref("/elsewhere/examples/own_task/stage.toml")(prog)
    program, meta = load_program(prog, stage=str(STAGE))
    assert meta["stage_ref"] == "/elsewhere/examples/own_task/stage.toml" and program.value is not None
