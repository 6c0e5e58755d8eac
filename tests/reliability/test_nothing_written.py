"""Issue 38 item 9: a refused command writes nothing -- no ``runs/cache``, no store, no study.

Refusals that came after the cache was configured (``on_ready``) left ``runs/cache`` behind: a
tracking store that cannot be used (checked now when the command's Tracker is made, before any
work: :func:`personalign.stores.check_tracking_uri`) and the sweep's storage, study and model
(checked now before ``on_ready``). Each case: exit 2, one ``error:`` line, the case directory
exactly as it was (its prepared inputs aside), within a bound.
"""

from __future__ import annotations

import os

import pytest

from tests.reliability.hostile import DATA, STAGE, closed_port, refused_cleanly, run_cli

SPACE = 'strategies = ["majority"]\n[pruner]\nkind = "none"\n'
LM_SPACE = 'strategies = ["predict"]\n[pruner]\nkind = "none"\n'
BOUND = 45


def _program(case):
    from personalign.programs.saved import save_program
    from personalign.stages import resolve_stage

    st = resolve_stage(str(STAGE))
    program = st.registry.create("majority")
    program.value = True
    save_program(program, case / "prog", stage=st.name, stage_ref=st.ref, strategy="majority",
                 signature=st.signature_record())
    return str(case / "prog")


def _space(case, text=SPACE):
    (case / "space.toml").write_text(text)
    return str(case / "space.toml")


COMMANDS = {
    "compare": lambda c: ["compare", str(STAGE), "--data", str(DATA), "--strategies", "majority"],
    "compare --cv": lambda c: ["compare", str(STAGE), "--data", str(DATA), "--strategies", "majority", "--cv",
                               "groups"],
    "compile": lambda c: ["compile", str(STAGE), "--strategy", "majority", "--data", str(DATA), "--out", "p"],
    "eval": lambda c: ["eval", str(STAGE), "--program", _program(c), "--data", str(DATA)],
    "sweep": lambda c: ["sweep", str(STAGE), "--data", str(DATA), "--space", _space(c), "--n-trials", "1"],
}


def _garbage_db(case):
    (case / "g.db").write_text("not a database\n" * 20)
    return f"sqlite:///{case / 'g.db'}"


def _db_directory(case):
    (case / "runs" / "mlflow.db").mkdir(parents=True)
    return None  # the default URI: runs/mlflow.db


TRACKING = {"unreachable server": lambda c: f"http://127.0.0.1:{closed_port()}", "store is a directory": _db_directory,
            "store not a database": _garbage_db}
TRACKING_CASES = [(cmd, bad) for cmd in COMMANDS for bad in TRACKING
                  if not (bad == "store not a database" and cmd in ("compare --cv", "eval"))]


@pytest.mark.parametrize("command,bad", TRACKING_CASES, ids=[f"{c}: {b}" for c, b in TRACKING_CASES])
def test_bad_tracking_store_leaves_nothing(tmp_path, command, bad):
    argv = COMMANDS[command](tmp_path)
    uri = TRACKING[bad](tmp_path)
    if uri is not None:
        argv += ["--tracking-uri", uri]
    _, seconds = refused_cleanly(tmp_path, *argv, needles=("tracking",) if bad == "unreachable server" else ())
    assert seconds < BOUND


def _sweep(case, *extra, space=SPACE):
    return ["sweep", str(STAGE), "--data", str(DATA), "--space", _space(case, space), "--n-trials", "1",
            "--no-track", *extra]


def _journal_garbage(case):
    (case / "j.journal").write_text('{"op_code": 0, "study_name": "s"}\nnot json\n')
    return _sweep(case, "--storage", f"journal:{case / 'j.journal'}")


def _journal_fifo(case):
    os.mkfifo(case / "j.journal")
    return _sweep(case, "--storage", f"journal:{case / 'j.journal'}")


def _storage_directory(case):
    (case / "o.db").mkdir()
    return _sweep(case, "--storage", f"sqlite:///{case / 'o.db'}")


def _other_space(case):
    import optuna
    from optuna.distributions import CategoricalDistribution
    from optuna.trial import create_trial

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url = f"sqlite:///{case / 'o.db'}"
    study = optuna.create_study(study_name="s", storage=url, direction="maximize")
    study.add_trial(create_trial(params={"strategy": "cot"}, value=0.5,
                                 distributions={"strategy": CategoricalDistribution(["cot"])}))
    return _sweep(case, "--storage", url, "--study-name", "s")


def _other_identity(case):
    """A study made by an earlier sweep with another --limit, in a storage outside runs/."""
    url = f"sqlite:///{case / 'o.db'}"
    first = _sweep(case, "--storage", url, "--study-name", "s", "--limit", "4", "--no-cache")
    proc, _ = run_cli(case, *first)
    assert proc.returncode == 0, proc.stderr[-2000:]
    import shutil

    shutil.rmtree(case / "runs")  # the first sweep's own outputs: not what is checked
    return _sweep(case, "--storage", url, "--study-name", "s")


def _unknown_model(case):
    return _sweep(case, "--lm", "nosuchprovider/model", space=LM_SPACE)


SWEEP = {"journal holding garbage": (_journal_garbage, "not an Optuna journal"),
         "journal is a FIFO": (_journal_fifo, "is a FIFO"),
         "storage is a directory": (_storage_directory, "is a directory"),
         "study of another space": (_other_space, "another search space"),
         "study made with other inputs": (_other_identity, "was created with a different"),
         "unknown model": (_unknown_model, "unknown model string")}


@pytest.mark.parametrize("bad", list(SWEEP))
def test_refused_sweep_leaves_nothing(tmp_path, bad):
    build, needle = SWEEP[bad]
    argv = build(tmp_path)
    _, seconds = refused_cleanly(tmp_path, *argv, needles=(needle,), timeout=120)
    assert seconds < BOUND
