"""Issue 25 through the command line (each verb in its own process), the conformance suite on the
example's stage file, and the one slow test on the real 0.5B model. Fixtures: test_own_task.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT, cli_env
from tests.stages.test_own_task import EXAMPLE, MOCK, _refs, _run_names, entry_point_site, task  # noqa: F401

# --- the CLI, each verb in its own process ------------------------------------------------------

def _cli(args, env, cwd):
    proc = subprocess.run([sys.executable, "-m", "personalign.testing.mock_provider", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.mark.parametrize("form", ["toml", "py", "entry-point"])
def test_the_cli_on_a_users_stage(form, task, entry_point_site, tmp_path):
    ref = _refs(task)[form]
    full = form == "toml"
    runs = tmp_path / "runs"
    env = cli_env(runs, PYTHONPATH=f"{ROOT}:{entry_point_site}")
    data = str(task / "data.jsonl")
    track = ["--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"]
    assert "ok: 60 rows" in _cli(["stage", "validate", ref, "--data", data], env, tmp_path).stdout
    if full:  # the other forms differ only in how the stage is found: validate, compile, eval
        names = "majority,minilm-logreg,predict,predict@bootstrap"
        res = json.loads(_cli(["compare", ref, "--data", data, "--strategies", names, "--lm", MOCK, "--n-boot",
                               "20", "--json", *track], env, tmp_path).stdout)
        assert ",".join(r["name"] for r in res["strategies"]) == "all-yes," + names and res["stage"] == "option-follows"
        assert all("vs_first" in r for r in res["strategies"][1:])
    out = tmp_path / "prog"
    _cli(["compile", ref, "--strategy", "minilm-logreg", "--data", data, "--out", str(out), "--json", *track],
         env, tmp_path)
    ev = json.loads(_cli(["eval", ref, "--program", str(out), "--data", data, "--split", "test", "--json",
                          "--n-boot", "50", *track], env, tmp_path).stdout)
    assert ev["stage"] == "option-follows" and ev["n"] == 12 and ev["strategy"] == "minilm-logreg"
    runs = _run_names(tmp_path)
    assert any("compile option-follows" in n for n in runs), runs
    assert any("eval option-follows" in n for n in runs), runs
    if full:
        assert any("compare option-follows" in n for n in runs), runs
        sw = json.loads(_cli(["sweep", ref, "--data", data, "--n-trials", "3", "--lm", MOCK, "--n-boot", "20",
                              "--storage", f"sqlite:///{tmp_path / 'optuna.db'}", "--json", *track],
                             env, tmp_path).stdout)
        assert sw["n_counted"] == min(3, sw["space_size"] or 3) and sw["stage"] == "option-follows"  # repeats not counted


@pytest.mark.slow
def test_yes_prob_compiles_on_the_real_small_model(task, runs_dir, tmp_path):
    """The one real-model run (the 0.5B Qwen, a few rows; run under flock): yes-prob's threshold is
    fitted by grouped CV on the real margins and the saved program scores the test rows."""
    import personalign

    rows = [json.loads(line) for line in (task / "data.jsonl").read_text().splitlines()]
    keep = [r for r in rows if r["topic"] in ("food", "exercise", "budget", "coffee")]
    small = tmp_path / "small.jsonl"
    small.write_text("".join(json.dumps(r) + "\n" for r in keep))
    model = "local/qwen2.5-coder-0.5b-instruct"
    compiled = personalign.compile(str(task / "stage.toml"), "yes-prob", small, lm=model, out=tmp_path / "yp")
    assert isinstance(compiled.info["details"]["threshold"], float)
    ev = personalign.evaluate(str(task / "stage.toml"), tmp_path / "yp", small, split="test", n_boot=50)
    assert ev["n"] == 6 and ev["failures"] == 0


from personalign.testing import StageTestCase  # noqa: E402


class TestOwnStageConformance(StageTestCase):
    """The conformance suite every built-in stage passes, on the example's stage file."""

    stage = str(EXAMPLE / "stage.toml")
    slow = ("yes-prob",)  # needs an embedded model's log-probabilities

    def make_lm(self, strategy):
        if strategy in self.slow:  # next-token log-probabilities: the tiny embedded model
            from personalign.lm import TINY_MODEL, make_lm

            return make_lm(TINY_MODEL)
        return super().make_lm(strategy)

    def examples(self):
        from personalign.stages.ref import resolve_stage

        rows = resolve_stage(self.stage).load(EXAMPLE / "data.jsonl")
        return [r for r in rows if r.split == "train"][:12] + [r for r in rows if r.split == "val"][:6]
