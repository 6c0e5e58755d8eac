"""Issue 38 item 2: a stage file runs no code it was not asked to.

``stage validate`` and ``data validate --kind STAGE`` check the code a stage file names (``metric``,
``objective``, ``[strategies]``, ``default_strategies``) without importing it; a reference resolves
only to a file in the stage file's own folder, personalign's own modules or an installed entry
point; a verb that imports such a file says which, on one line, before it does.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from tests.conftest import ROOT

EXAMPLE = ROOT / "examples" / "own_task"
GOOD = (EXAMPLE / "stage.toml").read_text()


def _evil(folder, name: str, body: str) -> None:
    """A module that leaves a marker file when it runs, then defines ``body``."""
    marker = folder / f"{name}.RAN"
    (folder / f"{name}.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\nimport dspy\n{body}\n")


@pytest.fixture
def task(tmp_path):
    d = tmp_path / "task"
    d.mkdir()
    for name in ("stage.toml", "data.jsonl"):
        shutil.copy(EXAMPLE / name, d / name)
    _evil(d, "judge", "class Judge(dspy.Module):\n    uses_lm = False\n"
                      "    def forward(self, preference, question, option):\n"
                      "        return dspy.Prediction(follows=True)\n")
    _evil(d, "scoring", "def score(example, pred, trace=None):\n    return 1.0\n"
                        "def agreement(examples, predictions, stage):\n    return 0.5\n")
    return d


def _run(argv, capsys):
    from personalign.cli import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def _marks(folder) -> list[str]:
    return sorted(p.name for p in folder.glob("*.RAN"))


def test_validate_checks_every_code_reference_without_running_it(task, capsys):
    text = GOOD.replace('objective = "f1"', 'objective = "scoring.py:agreement"')
    text = text.replace('[inputs]', 'default_strategies = "mine,majority"\n\n[inputs]')
    text += '\n[strategies]\nmine = "judge.py:Judge"\n'
    (task / "stage.toml").write_text(text)
    code, out, err = _run(["stage", "validate", str(task / "stage.toml"), "--data", str(task / "data.jsonl")], capsys)
    assert code in (0, None), err
    assert "mine" in out and _marks(task) == []
    code, out, err = _run(["data", "validate", str(task / "data.jsonl"), "--kind", str(task / "stage.toml")], capsys)
    assert code in (0, None), err
    assert _marks(task) == [], "data validate --kind STAGE ran the stage's code"


def test_a_scored_stage_metric_beside_the_file_is_checked_not_run(task, capsys):
    text = GOOD.replace('kind = "binary"', 'kind = "scored"').replace('objective = "f1"', 'objective = "mean"')
    text = text.replace('[inputs]', 'metric = "scoring:score"\n\n[inputs]')
    (task / "stage.toml").write_text(text)
    code, out, err = _run(["stage", "validate", str(task / "stage.toml")], capsys)
    assert code in (0, None), err
    assert _marks(task) == []


@pytest.mark.parametrize("key,ref,problem", [
    ("metric", "this:s", "never another module"),
    ("metric", "os.path:join", "never another module"),
    ("objective", "/etc/passwd.py:x", "no absolute path"),
    ("strategies.mine", "../judge.py:Judge", "no absolute path, no '..'"),
    ("strategies.mine", "scoring.py:score", "is a function, not a dspy.Module subclass"),
    ("strategies.mine", "judge.py:Missing", "defines no 'Missing'"),
    ("strategies.mine", "personalign.errors:Nope", "defines no 'Nope'"),
    ("default_strategies", "majority@judge.py:Judge", "never by a code reference"),
])
def test_a_reference_outside_the_rules_is_refused_before_anything_runs(task, capsys, key, ref, problem):
    text = GOOD.replace('kind = "binary"', 'kind = "scored"').replace('objective = "f1"', 'objective = "mean"') \
        if key == "metric" else GOOD
    if key == "metric":
        text = text.replace("[inputs]", f'metric = "{ref}"\n\n[inputs]')
    elif key == "objective":
        text = text.replace('objective = "f1"', f'objective = "{ref}"')
    elif key == "default_strategies":
        text = text.replace("[inputs]", f'default_strategies = "{ref}"\n\n[inputs]')
    else:
        text += f'\n[strategies]\nmine = "{ref}"\n'
    (task / "stage.toml").write_text(text)
    code, out, err = _run(["stage", "validate", str(task / "stage.toml")], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert problem in lines[0] and f"'{key}'" in lines[0], lines[0]
    assert "Beautiful is better than ugly" not in out + err  # `this` never imported
    assert _marks(task) == []


def test_a_symlink_leading_out_of_the_folder_is_refused(task, tmp_path, capsys):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    _evil(outside, "far", "class Judge(dspy.Module):\n    pass\n")
    os.symlink(outside / "far.py", task / "near.py")
    (task / "stage.toml").write_text(GOOD + '\n[strategies]\nmine = "near.py:Judge"\n')
    code, _, err = _run(["stage", "validate", str(task / "stage.toml")], capsys)
    assert code == 2 and "leads out of the stage file's folder" in err
    assert _marks(outside) == []


def test_a_verb_names_the_file_it_imports_before_running_it(task, capsys):
    (task / "stage.toml").write_text(GOOD + '\n[strategies]\nmine = "judge.py:Judge"\n')
    code, out, err = _run(["compare", str(task / "stage.toml"), "--data", str(task / "data.jsonl"),
                           "--strategies", "majority,mine", "--no-track", "--json", "--n-boot", "20"], capsys)
    assert code in (0, None), err
    note = [ln for ln in err.splitlines() if ln.startswith("note: importing code from")]
    assert note == [f"note: importing code from {(task / 'judge.py').resolve()}"], err
    assert _marks(task) == ["judge.RAN"]
    assert [r["name"] for r in json.loads(out)["strategies"]] == ["all-yes", "majority", "mine"]


@pytest.mark.parametrize("key, anchor", [("loader", "[inputs]"), ("objective", None)])
def test_a_code_reference_to_something_not_callable_is_one_line(task, capsys, key, anchor):
    """``loader = "values.py:X"`` where ``X = 1`` (the fresh attack: a TypeError traceback after the
    note naming the file): one line naming the key and what it names instead, exit 2."""
    (task / "values.py").write_text("X = 1\n")
    text = GOOD.replace('objective = "f1"', 'objective = "values.py:X"') if key == "objective" else \
        GOOD.replace(anchor, f'{key} = "values.py:X"\n\n{anchor}')
    (task / "stage.toml").write_text(text)
    code, _, err = _run(["compare", str(task / "stage.toml"), "--data", str(task / "data.jsonl"), "--strategies",
                         "majority", "--no-track", "--n-boot", "10"], capsys)
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2 and len(errors) == 1 and "Traceback" not in err, err[-2000:]
    assert f"{key} = 'values.py:X'" in errors[0] or f"{key} = " in errors[0], errors[0]
    assert "not a function" in errors[0], errors[0]
