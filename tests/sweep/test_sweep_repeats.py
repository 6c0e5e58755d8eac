"""A sweep does not repeat itself, sets the stage's reference constant beside its best, and stores
each trial's report as short user attributes (issue 46, items 3 and 5): fast, LM-free, on
``examples/own_task``."""

from __future__ import annotations

import json

import optuna
import pytest
from optuna.trial import TrialState

from tests.conftest import ROOT

EXAMPLE = ROOT / "examples" / "own_task"
CONSTANTS = 'strategies = ["all-yes", "all-no", "majority"]\n[pruner]\nkind = "none"\n'


def _sweep(tmp_path, space_text: str = CONSTANTS, **kw):
    import personalign
    from personalign.lm import configure_cache

    configure_cache(tmp_path / "cache", enabled=False)
    space = tmp_path / "space.toml"
    space.write_text(space_text)
    kw.setdefault("storage", f"journal:{tmp_path / 'optuna.journal'}")
    kw.setdefault("study_name", "s")
    return personalign.sweep(str(EXAMPLE / "stage.toml"), EXAMPLE / "data.jsonl", space=space, split="val",
                             n_boot=50, progress=kw.pop("progress", False), callbacks=[], **kw).to_dict()


def _study(out):
    from personalign.sweeps import open_storage

    return optuna.load_study(study_name=out["study"], storage=open_storage(out["storage"]))


def test_a_repeated_configuration_reuses_its_value_and_is_not_counted(runs_dir, tmp_path, monkeypatch):
    """6 trials asked of a space of 3 configurations: each runs once (compiled and scored once),
    a repeat reuses the finished trial's value without work and is not counted, and the sweep
    stops with a message once all 3 have run -- a success, not 'fewer trials than asked'."""
    from personalign.sweeps.objective import Objective

    scored: list[str] = []
    real = Objective._score

    def counting(self, trial, config):
        scored.append(config.strategy)
        return real(self, trial, config)

    monkeypatch.setattr(Objective, "_score", counting)
    out = _sweep(tmp_path, n_trials=6, seed=3)
    assert sorted(scored) == ["all-no", "all-yes", "majority"], scored  # each configuration did work once
    assert (out["n_distinct"], out["space_size"], out["n_counted"], out["exhausted"]) == (3, 3, 3, True)
    trials = _study(out).get_trials(states=(TrialState.COMPLETE,))
    reused = [t for t in trials if "same_as" in t.user_attrs]
    assert out["n_reused"] == len(reused) == len(trials) - 3
    for t in reused:
        first = next(f for f in trials if f.number == t.user_attrs["same_as"])
        assert t.params == first.params and t.value == first.value and "same_as" not in first.user_attrs
        assert (t.user_attrs["lm_calls"], t.user_attrs["seconds"]) == (0, 0.0)
    assert "every configuration of the search space has run (3)" in out["stop_reason"]

    again = _sweep(tmp_path, n_trials=6, seed=3)  # resumed: nothing left to try, no trial started
    assert again["ran"] == 0 and again["exhausted"] and sorted(scored) == ["all-no", "all-yes", "majority"]


def test_the_summary_says_how_many_distinct_configurations_ran_and_the_space_size(runs_dir, tmp_path):
    from personalign._verbs.render import sweep_lines

    lines = sweep_lines(_sweep(tmp_path, n_trials=5, seed=0))
    assert "3 distinct configurations ran of the 3 in the search space" in "\n".join(lines)
    assert any(line.startswith("stopped: every configuration of the search space has run (3)") for line in lines)


def test_the_space_size_counts_a_parameter_only_where_it_applies():
    import tomllib

    from personalign.stages import resolve_stage
    from personalign.sweeps.space import SearchSpace
    from personalign.sweeps.space_size import space_size
    from tests.sweep.conftest import MOCK_SPACE

    st = resolve_stage("relevance")
    finite = MOCK_SPACE.replace("temperature = { low = 0.0, high = 1.0 }", "")
    # 2 strategies x (no optimizer + labeled with k in 0..4)
    assert space_size(SearchSpace.from_dict(st, tomllib.loads(finite))) == 2 * (1 + 5)
    assert space_size(SearchSpace.from_dict(st, tomllib.loads(MOCK_SPACE))) is None  # a float range: unbounded
    stepped = finite.replace("[lm]\n", "[lm]\ntemperature = { low = 0.0, high = 1.0, step = 0.5 }\n")
    assert space_size(SearchSpace.from_dict(st, tomllib.loads(stepped))) == 2 * 3 * (1 + 5)


def test_the_reference_constant_is_beside_the_best_in_summary_and_program(runs_dir, tmp_path):
    """The best of a space of majority alone ties answering yes to every row: the summary and the
    exported program.json set all-yes beside it, on the same rows, and say the best does not beat it."""
    from personalign._verbs.render import sweep_lines

    out = _sweep(tmp_path, 'strategies = ["majority"]\n[pruner]\nkind = "none"\n', n_trials=1)
    ref = out["reference"]
    assert (ref["strategy"], ref["objective"], ref["n"]) == ("all-yes", "f1", out["n"])
    assert ref["value"] == pytest.approx(out["best"]["value"]) and ref["best_beats_it"] is False
    text = "\n".join(sweep_lines(out))
    assert "reference: the constant all-yes f1 0.667" in text and "does not beat the constant all-yes" in text
    meta = json.loads(open(out["program_json"]).read())["metadata"]["personalign"]  # program.json as written
    assert meta["compile"]["sweep"]["reference"]["strategy"] == "all-yes"
    assert meta["compile"]["sweep"]["reference"]["best_beats_it"] is False


def test_a_best_that_beats_the_reference_says_so(runs_dir, tmp_path):
    from personalign.sweeps.reference import versus_best

    ref = {"strategy": "all-yes", "objective": "f1", "value": 0.5, "n": 10}
    assert versus_best(ref, 0.7)["best_beats_it"] is True and "note" not in versus_best(ref, 0.7)
    assert "does not beat the constant all-yes" in versus_best(ref, 0.4)["note"]


def test_trial_attributes_are_short_and_read_back_with_optuna_load_study(runs_dir, tmp_path):
    out = _sweep(tmp_path, 'strategies = ["all-yes"]\n[pruner]\nkind = "none"\n', n_trials=1)
    (trial,) = _study(out).trials
    attrs = trial.user_attrs
    assert "report" not in attrs  # no single long JSON line
    assert (attrs["strategy"], attrs["objective"], attrs["lm_calls"]) == ("all-yes", "f1", 0)
    assert attrs["f1"] == trial.value and attrs["interval"] == "range over groups"  # 2 topics in val: a range
    assert attrs["low"] <= attrs["f1"] <= attrs["high"] and isinstance(attrs["seconds"], float)
    for key in ("strategy", "objective", "f1", "low", "high", "lm_calls", "seconds"):
        assert len(json.dumps(attrs[key])) < 40, key
    from personalign.sweeps.attrs import trial_report

    report = trial_report(trial)  # reassembled as the one report the export and MLflow record
    assert report["f1_range"] == [attrs["low"], attrs["high"]] and report["precision"] == attrs["report.precision"]
    assert out["best"]["report"] == report


def test_an_older_study_with_the_long_report_line_is_still_read():
    from optuna.distributions import CategoricalDistribution
    from optuna.trial import create_trial

    from personalign.stages import resolve_stage
    from personalign.sweeps.attrs import trial_report
    from personalign.sweeps.space import SearchSpace
    from personalign.sweeps.trust import trusted_trials

    report = {"n": 9, "f1": 0.5, "f1_ci": [0.3, 0.7], "objective": "f1", "lm_calls": 0, "seconds": 1.5}
    old = create_trial(params={"strategy": "majority"}, value=0.5, user_attrs={"report": report},
                       distributions={"strategy": CategoricalDistribution(["majority"])})
    assert trial_report(old) == report
    space = SearchSpace.from_dict(resolve_stage(str(EXAMPLE / "stage.toml")), {"strategies": ["majority"]})
    assert trusted_trials([old], space)[0] == [old]


def test_the_command_line_stops_an_exhausted_space_with_a_message_and_exit_0(tmp_path):
    """``--n-trials 6`` of a space of 3: each configuration once, the stop line, the summary's
    count and the reference, exit 0 (not 'fewer trials than asked')."""
    from tests.cli.test_cli import run_cli
    from tests.conftest import cli_env

    (tmp_path / "space.toml").write_text(CONSTANTS)
    proc = run_cli("sweep", str(EXAMPLE / "stage.toml"), "--data", str(EXAMPLE / "data.jsonl"), "--space",
                   str(tmp_path / "space.toml"), "--n-trials", "6", "--split", "val", "--no-track", "--n-boot", "50",
                   "--storage", f"journal:{tmp_path / 'optuna.journal'}", env=cli_env(tmp_path / "runs"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "stopping: every configuration of the search space has run (3); nothing is left to try" in proc.stderr
    assert "3 distinct configurations ran of the 3 in the search space" in proc.stdout
    assert "reference: the constant all-yes f1 " in proc.stdout
    ran = [line for line in proc.stderr.splitlines() if line.startswith("trial ") and "result reused" not in line]
    assert len(ran) == 3, proc.stderr
