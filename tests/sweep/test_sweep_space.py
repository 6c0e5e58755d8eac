"""Search space files, storage URLs and worker liveness of ``personalign sweep`` (fast, no LM)."""

from __future__ import annotations

import subprocess
import sys
import time

import optuna
import pytest

from personalign.errors import ConfigurationError, DataError
from personalign.sweeps import (
    DEFAULT_SPACE,
    HEARTBEAT_ATTR,
    WORKER_ATTR,
    SearchSpace,
    is_stale,
    open_storage,
    redact_url,
    worker_alive,
    worker_id,
)
from personalign.sweeps.storage import trial_id
from personalign.stages import resolve_stage as get_stage
from tests.conftest import ROOT

STAGE = get_stage("relevance")


def test_the_example_space_file_is_the_default_space():
    from_file = SearchSpace.load(STAGE, ROOT / "examples" / "sweep_relevance.toml")
    assert from_file.raw == SearchSpace.load(STAGE, None).raw == {**DEFAULT_SPACE}
    assert from_file.sha256 == SearchSpace.from_dict(STAGE, DEFAULT_SPACE).sha256


def test_yaml_and_toml_give_the_same_space(tmp_path):
    (tmp_path / "s.toml").write_text('strategies = ["bm25", "minilm-logreg"]\n[fit]\nbeta = { low = 0.5, high = 2.0 }\n')
    (tmp_path / "s.yaml").write_text("strategies: [bm25, minilm-logreg]\nfit:\n  beta: {low: 0.5, high: 2.0}\n")
    a, b = SearchSpace.load(STAGE, tmp_path / "s.toml"), SearchSpace.load(STAGE, tmp_path / "s.yaml")
    assert a.sha256 == b.sha256 and a.strategies == ["bm25", "minilm-logreg"]


def _cfg(space: SearchSpace, params: dict):
    return space.configure(lambda dim: dim.sample(optuna.trial.FixedTrial(params)))


def test_parameters_are_sampled_only_where_they_apply():
    space = SearchSpace.from_dict(STAGE, DEFAULT_SPACE)
    sampled: list[str] = []

    def pick(dim):
        sampled.append(dim.name)
        return {"strategy": "zero-shot", "optimizer": "labeled", "temperature": 0.3, "labeled.k": 2}[dim.name]

    cfg = space.configure(pick)
    assert sampled == ["strategy", "temperature", "optimizer", "labeled.k"]
    assert (cfg.optimizer, cfg.optimizer_settings, cfg.temperature, cfg.name) == ("labeled", {"k": 2}, 0.3,
                                                                                  "zero-shot@labeled")
    sampled.clear()
    cfg = space.configure(lambda d: (sampled.append(d.name), {"strategy": "minilm-logreg", "fit.beta": 1.5,
                                                              "minilm-logreg.C": 0.1}[d.name])[1])
    assert sampled == ["strategy", "fit.beta", "minilm-logreg.C"]  # no temperature/optimizer for a learned selector
    assert cfg.fit_settings == {"beta": 1.5} and cfg.strategy_kwargs == {"C": 0.1} and cfg.optimizer is None
    sampled.clear()
    cfg = space.configure(lambda d: (sampled.append(d.name), {"strategy": "minilm-cosine"}[d.name])[1])
    assert sampled == ["strategy"]  # ThresholdFit accepts no beta: not sampled
    # fixed values apply without being sampled
    fixed = SearchSpace.from_dict(STAGE, {**DEFAULT_SPACE, "strategies": ["zero-shot"]})
    cfg = _cfg(fixed, {"strategy": "zero-shot", "temperature": 0.0, "optimizer": "bootstrap",
                       "bootstrap.max_bootstrapped_demos": 1, "bootstrap.max_labeled_demos": 0})
    assert cfg.optimizer_settings == {"max_bootstrapped_demos": 1, "max_labeled_demos": 0, "max_rounds": 1}


def test_a_space_can_name_the_decision_rule():
    space = SearchSpace.from_dict(STAGE, {**DEFAULT_SPACE, "strategies": ["zero-shot"], "optimizer": {
        "bootstrap": {"max_bootstrapped_demos": 1, "decision_rule": ["auto", "none"]}}})
    cfg = _cfg(space, {"strategy": "zero-shot", "temperature": 0.0, "optimizer": "bootstrap",
                       "bootstrap.decision_rule": "none"})
    assert cfg.optimizer_settings == {"max_bootstrapped_demos": 1, "decision_rule": "none"}


@pytest.mark.parametrize("text, needle", [
    ('strategies = ["bm25"]\n[bogus]\nx = 1\n', "unknown section"),
    ('strategies = ["no-such"]\n', "strategies = 'no-such': unknown relevance strategy"),
    ('strategies = ["zero-shot"]\n[lm]\noptimizer = ["threshold-fit"]\n', "not a teleprompter"),
    ('strategies = ["zero-shot"]\n[optimizer.labeled]\nkk = 3\n', "'kk' is not a setting of labeled"),
    ('strategies = ["bm25"]\n[strategy.bm25]\nC = 1.0\n', "'C' is not an argument of bm25"),
    ('strategies = ["bm25"]\n[strategy.no-such]\nC = 1.0\n', "[strategy.no-such] = 'no-such': unknown relevance strategy"),
    ('strategies = ["minilm-logreg"]\n[strategy.minilm-logreg]\nC = { low = 1.0, high = 0.1 }\n', "low (1.0) > high (0.1)"),
    ('strategies = ["minilm-logreg"]\n[strategy.minilm-logreg]\nC = { low = 0.0, high = 1.0, log = true }\n',
     "a log range needs low > 0"),
    ('strategies = ["bm25"]\n[fit]\ngamma = 2\n', "[fit] gamma: accepted by no fit of a relevance strategy"),
    ('strategies = ["bm25"]\n[pruner]\nkind = "hyperband"\n', "[pruner] kind = 'hyperband': must be 'median' or 'none'"),
    ('strategies = ["bm25"]\n[evaluation]\nminibatch_size = 0\n', "[evaluation] minibatch_size = 0: must be greater than or equal to 1"),
])
def test_bad_space_files_name_the_file_and_the_key(tmp_path, text, needle):
    path = tmp_path / "space.toml"
    path.write_text(text)
    with pytest.raises(ConfigurationError) as err:
        SearchSpace.load(STAGE, path)
    assert needle in str(err.value) and str(path) in str(err.value)


def test_unparsable_space_files_give_the_line(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('strategies = ["bm25"]\n[fit\nbeta = 1\n')
    with pytest.raises(DataError) as err:
        SearchSpace.load(STAGE, bad)
    assert err.value.line == 2 and str(bad) in str(err.value)
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("strategies: [bm25\nfit: 1\n")
    with pytest.raises(DataError):
        SearchSpace.load(STAGE, bad_yaml)
    with pytest.raises(DataError, match="not found"):
        SearchSpace.load(STAGE, tmp_path / "missing.toml")


def test_storage_urls(tmp_path):
    assert redact_url("postgresql://user:s3cret@127.0.0.1:5432/optuna") == "postgresql://user:***@127.0.0.1:5432/optuna"
    assert redact_url("journal:/x/y.journal") == "journal:/x/y.journal"
    journal = open_storage(f"journal:{tmp_path / 'j' / 'optuna.journal'}")
    assert isinstance(journal, optuna.storages.JournalStorage) and journal.get_heartbeat_interval() == 10
    rdb = open_storage(f"sqlite:///{tmp_path / 'db' / 'optuna.db'}")
    assert rdb.get_heartbeat_interval() == 10 and (tmp_path / "db" / "optuna.db").exists()
    with pytest.raises(ConfigurationError, match="unsupported --storage"):
        open_storage("runs/optuna.db")
    with pytest.raises(ConfigurationError, match=r"cannot open --storage postgresql://u:\*\*\*@127.0.0.1:1/x"):
        open_storage("postgresql://u:pw@127.0.0.1:1/x")  # nothing listens on port 1: one line, password hidden


def test_worker_liveness():
    assert worker_alive(worker_id()) is True
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    host, boot, ns, _, ticks, _ = worker_id().split("|")
    assert worker_alive(f"{host}|{boot}|{ns}|{child.pid}|{ticks}|tok") is False  # gone (pid reuse: start time differs)
    assert worker_alive(f"{host}|{boot}|{child.pid}|{ticks}") is False  # an older version's id: read as before
    assert worker_alive(f"other-host|{boot}|1|1") is None  # another machine: only heartbeats can tell
    assert worker_alive(None) is None


def test_stale_trials_by_pid_and_by_journal_heartbeat(tmp_path):
    storage = open_storage(f"journal:{tmp_path / 'optuna.journal'}", grace_period=40)
    study = optuna.create_study(storage=storage, study_name="s")
    alive, dead, remote_fresh, remote_old = (study.ask() for _ in range(4))
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    host, boot, ns, _, ticks, _ = worker_id().split("|")
    storage.set_trial_system_attr(trial_id(storage, "s", alive.number), WORKER_ATTR, worker_id())
    storage.set_trial_system_attr(trial_id(storage, "s", dead.number), WORKER_ATTR,
                                  f"{host}|{boot}|{ns}|{child.pid}|{ticks}|tok")
    for t, beat in ((remote_fresh, time.time()), (remote_old, time.time() - 600)):
        storage.set_trial_system_attr(trial_id(storage, "s", t.number), WORKER_ATTR, "elsewhere|x|1|1")
        storage.set_trial_system_attr(trial_id(storage, "s", t.number), HEARTBEAT_ATTR, beat)
    frozen = {t.number: t for t in study.get_trials()}
    verdict = [is_stale(frozen[t.number], storage) for t in (alive, dead, remote_fresh, remote_old)]
    assert verdict == [False, True, False, True]


def test_default_spaces_are_per_stage_data_and_unchanged():
    """The default space of every stage (its study names carry its sha256) is what it was before
    the defaults became data; relevance's is its STAGE_SPACES entry over the common sections."""
    from personalign.stages import all_stages
    from personalign.sweeps import STAGE_SPACES

    expected = {"extraction": "b500033ae597b86d", "judge": "2e8ef6609d865f7f", "mcq": "e46bdcf32ff7dd33",
                "perspectives": "b30585bceed02358", "relevance": "5ab7d949d5243907", "respond": "7338eda07b3d31a2",
                "verification": "996251590d65efc2", "violation": "219594e34818b2ed"}  # typed,all-no (was typed,never)
    got = {name: SearchSpace.load(st, None).sha256[:16] for name, st in all_stages().items()}
    assert got == expected
    assert set(STAGE_SPACES) <= set(expected)
    assert SearchSpace.load(STAGE, None).raw["strategies"] == STAGE_SPACES["relevance"]["strategies"]


def test_the_space_makes_its_pruner():
    assert type(SearchSpace.from_dict(STAGE, DEFAULT_SPACE).make_pruner()) is optuna.pruners.MedianPruner
    none = SearchSpace.from_dict(STAGE, {**DEFAULT_SPACE, "pruner": {"kind": "none"}})
    assert type(none.make_pruner()) is optuna.pruners.NopPruner
