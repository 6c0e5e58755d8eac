"""``predict``: its default training data ships in the package (a wheel install has it), and a
program is flagged when it is evaluated on rows it was fitted on."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile

import pytest

from tests.cli.test_cli import run_cli
from tests.conftest import DEMO, ROOT, cli_env


def test_default_training_data_is_inside_the_package():
    import personalign
    from personalign._verbs.relevance import default_training_data

    path = default_training_data()
    assert path.is_file() and path.parent.parent.resolve() == ROOT.joinpath("personalign").resolve()
    assert DEMO.resolve() == path.resolve()  # examples/relevance_demo.jsonl is the same file
    assert path.read_bytes().count(b"\n") > 50 and personalign.__file__


@pytest.mark.slow  # builds a wheel (offline, no build isolation)
def test_the_wheel_ships_the_default_training_data(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(ROOT / "personalign", src / "personalign", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                           "-q", "-w", str(tmp_path / "dist"), str(src)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    wheel = next((tmp_path / "dist").glob("personalign-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "personalign/resources/relevance_demo.jsonl" in names


def test_predict_save_on_a_full_file_warns_and_eval_flags_fitted_rows(tmp_path):
    env = cli_env(tmp_path / "runs")
    full, held = tmp_path / "full", tmp_path / "held"
    proc = run_cli("predict", "relevance", "--strategy", "bm25", "--prompt", "Plan my dinners.", "-a", "I am vegan.",
                   "--data", str(DEMO), "--save", str(full), env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "fitted on every row" in proc.stderr and "including split(s) val" in proc.stderr
    proc = run_cli("eval", "relevance", "--program", str(full), "--data", str(DEMO), "--split", "val", "--json",
                   "--no-track", env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["warnings"] and "fitted on split(s) train, val" in out["warnings"][0]
    assert out["warnings"][0] in proc.stderr

    # fitted on train only: val is held out, train is not
    proc = run_cli("predict", "relevance", "--strategy", "bm25", "--prompt", "Plan my dinners.", "-a", "I am vegan.",
                   "--data", str(DEMO), "--fit-split", "train", "--save", str(held), "--json", env=env)
    assert proc.returncode == 0 and json.loads(proc.stdout)["warnings"] == [], proc.stderr[-2000:]
    val = json.loads(run_cli("eval", "relevance", "--program", str(held), "--data", str(DEMO), "--split", "val",
                             "--json", "--no-track", env=env).stdout)
    assert "warnings" not in val
    train = run_cli("eval", "relevance", "--program", str(held), "--data", str(DEMO), "--split", "train", "--json",
                    "--no-track", env=env)
    assert "fitted on split(s) train" in json.loads(train.stdout)["warnings"][0]


def test_predict_without_data_uses_the_packaged_labels_and_says_so(tmp_path):
    proc = run_cli("predict", "relevance", "--strategy", "bm25", "--prompt", "Plan my dinners.", "-a", "I am vegan.",
                   "--json", env=cli_env(tmp_path / "runs"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert "packaged with personalign" in out["warnings"][0] and len(out["predictions"]) == 1


def test_a_saved_rank_program_on_one_attribute_says_it_used_the_fallback(tmp_path):
    """A program that ranks inside one user's attributes for a prompt (style-rank: top share of
    groups of 5 or more) cannot rank a single attribute: it decides by its fallback threshold, and
    the table and the JSON say so; six attributes are ranked and carry no such line."""
    env = cli_env(tmp_path / "runs")
    saved = tmp_path / "style"
    attrs = ["The user is vegan.", "The user plays chess.", "The user has two children.", "The user likes jazz.",
             "The user values concise answers.", "The user is allergic to peanuts."]
    many = [x for a in attrs for x in ("-a", a)]
    proc = run_cli("predict", "relevance", "--strategy", "style-rank", "--prompt", "Plan my dinners.", *many,
                   "--data", str(DEMO), "--fit-split", "train", "--save", str(saved), "--json", env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert all(r["decision"] is None for r in json.loads(proc.stdout)["predictions"])
    threshold = json.loads((saved / "program.json").read_text())["threshold"]
    one = run_cli("predict", "relevance", "--program", str(saved), "--prompt", "Plan my dinners.", "-a", attrs[0],
                  env=env)
    assert one.returncode == 0, one.stderr[-2000:]
    lines = one.stdout.strip().splitlines()
    assert len(lines) == 2 and lines[0].endswith(attrs[0]), one.stdout
    assert lines[1].startswith("decision: fallback threshold ")
    assert "(no pool of 5 or more to rank against; batch prediction uses top_share@prompt_id+user_id)" in lines[1]
    assert lines[1].split()[3] == f"{threshold:.4g}"  # the saved small-group threshold decided
    row = json.loads(run_cli("predict", "relevance", "--program", str(saved), "--prompt", "Plan my dinners.", "-a",
                             attrs[0], "--json", env=env).stdout)["predictions"][0]
    assert row["decision"] == lines[1].removeprefix("decision: ")
    assert row["relevant"] == (row["score"] >= threshold)
    many_out = run_cli("predict", "relevance", "--program", str(saved), "--prompt", "Plan my dinners.", *many, env=env)
    assert many_out.returncode == 0 and "decision:" not in many_out.stdout, many_out.stdout
