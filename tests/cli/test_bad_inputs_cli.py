"""Every hole of issue 15 through the real command line: one ``error:`` line, exit 2, nothing
written (no runs/, no DSPy cache). Cases come from the table of ``benchmarks/bad_inputs.py``; the
benchmark runs all of them, this test the ones the attack found."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DEMO, ROOT, cli_env

_spec = importlib.util.spec_from_file_location("bad_inputs_bench", ROOT / "benchmarks" / "bad_inputs.py")
sys.path.insert(0, str(ROOT / "benchmarks"))
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)
TABLE = dict(bench.cases())

FOUND_BY_THE_ATTACK = [
    # tracebacks
    "eval missing weights", "eval corrupt weights", "eval pickled weights", "eval wrong-shape weights",
    "eval missing-key weights", "eval mistyped state", "eval missing state key", "data validate huge int",
    "data validate deep nesting", "data validate /dev/zero", "compile one-class train", "compile out is a file",
    "predict binary attributes", "run sft-export binary questions", "sweep binary space", "sweep strategies 5",
    # wrong successes
    "eval nan threshold", "compare empty lm", "sweep strategies []",
    # hang
    "data validate fifo",
    # a cache folder used to be created before validation
    "compare unknown strategy", "compare one-class train",
]


def test_the_benchmark_table_is_large_and_covers_every_command():
    assert len(TABLE) >= 60
    assert {name.split()[0] for name in TABLE} >= {"data", "compare", "compile", "eval", "predict", "sweep", "run"}
    assert set(FOUND_BY_THE_ATTACK) <= set(TABLE)


@pytest.mark.parametrize("name", FOUND_BY_THE_ATTACK)
def test_bad_input_is_one_clean_line(name):
    row = bench.run_case(name, TABLE[name])
    assert row["outcome"] == "clean", row


def test_predict_save_onto_an_existing_program_leaves_no_stale_files(tmp_path):
    target = Path(bench._program(tmp_path))  # a minilm-logreg program with its weights file
    (target / "extra-from-an-old-save.txt").write_text("stale")
    env = cli_env(tmp_path / "runs")
    proc = subprocess.run([sys.executable, "-m", "personalign", "predict", "relevance", "--prompt", "Plan my dinner",
                           "-a", "The user is vegan.", "--strategy", "bm25", "--data", str(DEMO), "--save",
                           str(target), "--json"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(p.name for p in target.iterdir()) == ["program.json", "signature.py"]  # bm25 has no weights: nothing stale
    meta = json.loads((target / "program.json").read_text())["metadata"]["personalign"]
    assert meta["strategy"] == "bm25"


@pytest.mark.parametrize("complete,failed,said", [(0, 4, "every trial"), (1, 3, "1 of the 2 trials asked for")])
def test_a_sweep_with_fewer_completed_trials_than_asked_exits_1(monkeypatch, capsys, complete, failed, said):
    """The CLI turns a sweep with fewer COMPLETE + PRUNED trials than asked into exit 1 after its summary."""
    import typer

    import personalign
    from personalign.cli.sweep import sweep

    def some_failed(*args, **kwargs):
        return personalign.SweepReport(stage="relevance", data={
            "study": "s", "storage": "x", "n_complete": complete, "n_pruned": 0, "n_fail": failed, "n_trials": 2,
            "ran": 4, "seconds": 1.0, "lm_calls": 0, "metric": "f1", "dashboard": "d", "best": None})

    monkeypatch.setattr(personalign, "sweep", some_failed)
    with pytest.raises(typer.Exit) as ei:
        sweep(stage="relevance", data=DEMO, space=None, n_trials=2, storage=None, study_name=None, n_jobs=1,
              split="val", train_split="train", seed=0, lm=None, api_base=None, lm_kwargs=None, limit=None,
              n_boot=10, export=False, heartbeat=10, grace=40, cache_dir=None, no_cache=True, tracking_uri=None,
              no_track=True, json_out=True)
    assert ei.value.exit_code == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["n_fail"] == failed and said in err
