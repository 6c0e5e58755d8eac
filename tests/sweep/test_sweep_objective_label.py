"""The sweep names what its values are: the stage's set objective (issue 25 item 7). On violation
(objective kappa, report metric f1) the Optuna axis, the trial lines and the summary say kappa."""

from __future__ import annotations

import json

import optuna

from personalign.stages import resolve_stage as get_stage
import personalign
from personalign.sweeps import objective_name


def test_the_objective_axis_is_named_after_the_set_objective():
    assert objective_name(get_stage("relevance"), "val") == "f1 (val)"
    assert objective_name(get_stage("verification"), "dev") == "f2 (dev)"
    assert objective_name(get_stage("violation"), "dev") == "kappa (dev)"
    assert objective_name(get_stage("judge"), "dev") == "verdict_kappa (dev)"


def test_a_violation_sweep_labels_axis_and_trial_lines_with_kappa(tmp_path, capsys):
    rows = []
    for i in range(16):
        rows.append({"id": f"r{i}", "preference": "I only eat vegan food.", "question": f"Dinner idea {i}?",
                     "response": f"option {i}", "violates": i % 2 == 0, "topic": f"t{i % 4}",
                     "split": "val" if i >= 12 else "train"})
    data = tmp_path / "violation.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    space = tmp_path / "space.toml"
    space.write_text('strategies = ["all-no"]\n[pruner]\nkind = "none"\n')
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    out = personalign.sweep("violation", data, space=space, n_trials=1, storage=url, study_name="v", split="val",
                            n_boot=50, export=False, progress=True).to_dict()
    err = capsys.readouterr().err
    assert out["objective"] == "kappa" and out["n_complete"] == 1
    trial_lines = [line for line in err.splitlines() if line.startswith("trial 0 COMPLETE")]
    assert trial_lines and " kappa 0.000" in trial_lines[0] and " f1 " not in trial_lines[0], err
    study = optuna.load_study(study_name="v", storage=url)
    assert study.metric_names == ["kappa (val)"]
