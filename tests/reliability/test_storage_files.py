"""Issue 38 item 4: sweep storages that block or crash, study names that escape ``runs/programs``,
and hostile studies whose trials are not points of the user's search space.

Each refusal: exit 2, one line, nothing written, within a bound (a FIFO blocked forever before).
A study holding a fake best trial (``strategy = cot``, value 1.0, not in the user's space) no
longer has it reported as best or exported: only trusted trials are (:mod:`personalign.sweeps.trust`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import TrialState, create_trial

from personalign.sweeps.trust import trial_problem, trusted_trials
from tests.reliability.hostile import DATA, STAGE, refused_cleanly, run_cli

SPACE = 'strategies = ["majority"]\n[pruner]\nkind = "none"\n'
BOUND = 30


def _sweep(tmp_path, *extra: str) -> tuple[str, ...]:
    space = tmp_path / "space.toml"
    if not space.exists():
        space.write_text(SPACE)
    return ("sweep", str(STAGE), "--data", str(DATA), "--space", str(space), "--n-trials", "1", "--no-track", *extra)


def test_journal_fifo_is_refused_not_waited_on(tmp_path):
    args = _sweep(tmp_path, "--storage", "journal:q.journal")
    os.mkfifo(tmp_path / "q.journal")
    _, seconds = refused_cleanly(tmp_path, *args, needles=("q.journal", "is a FIFO"), timeout=60)
    assert seconds < BOUND


@pytest.mark.parametrize("content", [b"garbage {{{\n", b'{"op_code": 99}\n', b"[1, 2]\n",
                                     b'{"op_code": 0, "worker_id": "w", "study_name": "s", "directions": "up"}\n',
                                     bytes(range(256)) * 4], ids=["not-json", "unknown-op", "array", "bad-field",
                                                                  "binary"])
def test_journal_holding_garbage_is_one_line_naming_the_file(tmp_path, content):
    args = _sweep(tmp_path, "--storage", "journal:g.journal")
    (tmp_path / "g.journal").write_bytes(content)
    refused_cleanly(tmp_path, *args, needles=("g.journal", "not an Optuna journal"))
    assert (tmp_path / "g.journal").read_bytes() == content  # not appended to


@pytest.mark.parametrize("kind", ["fifo", "directory", "not-a-database"])
def test_sqlite_storage_that_is_no_database_is_one_line(tmp_path, kind):
    args = _sweep(tmp_path, "--storage", f"sqlite:///{tmp_path / 'o.db'}")
    target = tmp_path / "o.db"
    {"fifo": lambda: os.mkfifo(target), "directory": target.mkdir,
     "not-a-database": lambda: target.write_text("hello\n" * 50)}[kind]()
    _, seconds = refused_cleanly(tmp_path, *args, needles=("o.db",), timeout=60)
    assert seconds < BOUND


@pytest.mark.parametrize("name", ["../../../x", "a/b", "..", ".hidden", "-rf", "x" * 129, "name with space", "é"])
def test_unsafe_study_name_is_refused_and_nothing_escapes(tmp_path, name):
    case = tmp_path / "case"
    case.mkdir()
    refused_cleanly(case, *_sweep(case, "--study-name", name), needles=("--study-name",))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["case"]


def _hostile_study(url: str, trials: list) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name="h", storage=url, direction="maximize")
    for t in trials:
        study.add_trial(t)


def test_fake_best_trial_outside_the_space_is_neither_reported_nor_exported(tmp_path):
    url = f"sqlite:///{tmp_path / 'hostile.db'}"
    majority = CategoricalDistribution(["majority"])
    _hostile_study(url, [
        # a point of the space with a parameter the space does not sample
        create_trial(params={"strategy": "majority", "evil": 3},
                     distributions={"strategy": majority, "evil": CategoricalDistribution([3])}, value=1.0),
        # no strategy at all: a strategy the user never listed, under another name
        create_trial(params={"strat": "cot"}, distributions={"strat": CategoricalDistribution(["cot"])}, value=1.0),
        # an infinite value (would win any comparison, and be reused for every later majority trial)
        create_trial(params={"strategy": "majority"}, distributions={"strategy": majority}, value=float("inf")),
    ])
    proc, _ = run_cli(tmp_path, *_sweep(tmp_path, "--storage", url, "--study-name", "h", "--n-trials", "4",
                                        "--json"), timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    best = result["best"]
    assert best["number"] >= 3 and best["params"] == {"strategy": "majority"} and best["value"] < 1.0, best
    assert set(result["untrusted_trials"]) == {"0", "1", "2"}, result["untrusted_trials"]
    assert result["program"].endswith(f"trial{best['number']}")
    exported = sorted(p.name for p in (tmp_path / "runs" / "programs").iterdir())
    assert exported == [f"option-follows-sweep-h-trial{best['number']}"], exported
    assert "warning: 3 complete trial(s) of study h ignored" in proc.stderr
    assert "same parameters as trial" not in proc.stderr  # the infinite value was not reused


def test_stored_trials_of_another_space_are_refused_before_any_trial(tmp_path):
    url = f"sqlite:///{tmp_path / 'hostile.db'}"
    _hostile_study(url, [create_trial(params={"strategy": "cot"},
                                      distributions={"strategy": CategoricalDistribution(["cot"])}, value=1.0)])
    before = (tmp_path / "hostile.db").stat().st_size
    args = _sweep(tmp_path, "--storage", url, "--study-name", "h")
    proc, _ = run_cli(tmp_path, *args)
    line = [x for x in proc.stderr.splitlines() if x.strip()]
    assert proc.returncode == 2 and len(line) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "holds trials of another search space" in line[0] and "'strategy'" in line[0], line[0]
    assert not (tmp_path / "runs" / "programs").exists() and not (tmp_path / "runs" / "cache").exists()
    study = optuna.load_study(study_name="h", storage=url)
    assert len(study.trials) == 1 and (tmp_path / "hostile.db").stat().st_size >= before


# --- the trust rule itself ----------------------------------------------------------------------

def _space(text: str):
    from personalign.stages import resolve_stage
    from personalign.sweeps.space import SearchSpace
    from personalign.sweeps.space_schema import read_space_file

    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "s.toml"
        p.write_text(text)
        return SearchSpace.from_dict(resolve_stage(str(STAGE)), read_space_file(p), str(p))


def test_trial_problem_checks_every_dimension():
    space = _space('strategies = ["majority", "minilm-logreg"]\n[pruner]\nkind = "none"\n'
                   '[strategy.minilm-logreg]\nC = { low = 0.01, high = 1.0, log = true }\n')
    strat = CategoricalDistribution(["majority", "minilm-logreg"])

    wide = FloatDistribution(0.001, 1.0, log=True)  # a hostile trial records its own distribution

    def trial(params, value=0.5, state=TrialState.COMPLETE):
        dists = {k: (wide if k == "minilm-logreg.C" else strat if k == "strategy" else CategoricalDistribution([v]))
                 for k, v in params.items()}
        return create_trial(params=params, distributions=dists, value=value if state == TrialState.COMPLETE else None,
                            state=state)

    assert trial_problem(trial({"strategy": "majority"}), space) is None
    assert trial_problem(trial({"strategy": "minilm-logreg", "minilm-logreg.C": 0.1}), space) is None
    assert "missing" in trial_problem(trial({"strategy": "minilm-logreg"}), space)
    assert "not in the search space" in trial_problem(
        trial({"strategy": "minilm-logreg", "minilm-logreg.C": 0.005}), space)  # below the range
    assert "not sampled" in trial_problem(trial({"strategy": "majority", "minilm-logreg.C": 0.1}), space)
    assert "not a finite number" in trial_problem(trial({"strategy": "majority"}, value=float("inf")), space)
    assert "state" in trial_problem(trial({"strategy": "majority"}, state=TrialState.PRUNED), space)
    trusted, refused = trusted_trials([trial({"strategy": "majority"}), trial({"strategy": "minilm-logreg"})], space)
    assert len(trusted) == 1 and list(refused.values()) == ["parameter minilm-logreg.C missing"]


@pytest.mark.parametrize("report, why", [
    ({"f1": "hacked", "objective": "f1"}, "is text"),
    ({"f1": 0.5, "precision": "1.0"}, "is text"),
    ({"f1": 0.5, "f1_ci": [0.1, float("nan")]}, "is not finite"),
    ({"f1": 0.5, "objective": "accuracy"}, "not this sweep's objective"),
    ({"f1": 0.99, "objective": "f1"}, "is not the trial's value"),
    ({"f1": 0.5, "resampling": {"unit": [[[[[[[1]]]]]]]}}, "nested deeper"),
    ({"f1": 0.5, "lm_calls": {"n": float("inf")}}, "is not finite"),
    ("0.5", "not an object"),
    ({"f1": 0.5, "n": 10 ** 30}, "beyond 64 bits"),
    ({"f1": 0.5, "f1_by_group": {"g\x1b[31m\n": 0.5}}, "not short plain text"),
    ({"f1": 0.5, "f1_by_group": {"g" * 2200: 0.5}}, "not short plain text"),
])
def test_a_trial_whose_report_is_not_figures_is_untrusted(report, why):
    """A forged trial with valid parameters cannot carry text or non-finite figures into the
    exported program's ``metrics`` (the fresh attack of issue 38)."""
    space = _space(SPACE)
    dist = {"strategy": CategoricalDistribution(["majority"])}
    forged = create_trial(params={"strategy": "majority"}, distributions=dist, value=0.5, user_attrs={"report": report})
    assert why in trial_problem(forged, space)
    real = {"n": 9, "f1": 0.5, "f1_ci": None, "f1_range": [0.4, 0.6], "f1_by_group": {"p1": 0.4, "p2": 0.6},
            "resampling": {"unit": "prompt_id", "n_clusters": 2, "n_boot": 1000}, "objective": "f1",
            "cluster_levels": {"names": ["prompt_id"], "levels": [["p1", "p2"]]}, "lm_calls": 0, "seconds": 1.5}
    fine = create_trial(params={"strategy": "majority"}, distributions=dist, value=0.5, user_attrs={"report": real})
    assert trial_problem(fine, space) is None


@pytest.mark.parametrize("layout", ["shard file a FIFO", "shard a FIFO", "top file a directory"])
def test_cache_dir_entries_of_the_wrong_kind_are_one_line(tmp_path, layout):
    """DSPy's disk cache under --cache-dir (diskcache shards 000, 001, ... with cache.db): a FIFO
    would block SQLite and a directory crash it; refused before anything opens it (fresh attack)."""
    import os

    from personalign.lm import CacheDirError, check_cache_dir

    cache = tmp_path / "cache"
    cache.mkdir()
    if layout == "shard file a FIFO":
        (cache / "000").mkdir()
        os.mkfifo(cache / "000" / "cache.db")
    elif layout == "shard a FIFO":
        os.mkfifo(cache / "000")
    else:
        (cache / "cache.db").mkdir()
    with pytest.raises(CacheDirError, match="is not a (regular file|directory)") as exc:
        check_cache_dir(cache)
    assert "\n" not in str(exc.value)
