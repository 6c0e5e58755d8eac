"""The space language's schema at the door (issue 28): every malformed space file is one line
naming the file, the key and the value; a space never names code or a model; YAML is bounded.

The cases are the table of ``benchmarks/bad_inputs_sweep.py`` (files generated per test): each one
in-process through :meth:`SearchSpace.load`, a sample through the real command line.
"""

from __future__ import annotations

import importlib.util
import sys
import time

import pytest

from personalign.errors import PersonalignError
from personalign.stages import resolve_stage as get_stage
from personalign.sweeps import SearchSpace
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
_spec = importlib.util.spec_from_file_location("bad_inputs_sweep", ROOT / "benchmarks" / "bad_inputs_sweep.py")
table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(table)
CASES = {name: rest for name, *rest in table.SPACE_CASES}
STAGE = get_stage("relevance")


@pytest.mark.parametrize("name", list(CASES))
def test_a_bad_space_file_is_one_line_naming_file_key_and_value(tmp_path, name):
    fname, content, key, value = CASES[name]
    path = tmp_path / fname
    path.write_text(content)
    with pytest.raises(PersonalignError) as err:
        SearchSpace.load(STAGE, path)
    message = str(err.value)
    assert "\n" not in message
    assert str(path) in message, message
    assert key in message, message
    assert value in message, message


def test_the_issue_cases_are_all_in_the_table():
    named = {"pruner a string", "pruner negative", "choices nested list", "optimizer a dict", "temperature nan",
             "temperature inf", "temperature -inf", "step a string", "step zero", "step negative", "C negative",
             "C a string", "unknown feature name", "fit a string", "yaml billion laughs"}
    assert named <= set(CASES)


def test_a_billion_laughs_yaml_fails_in_under_two_seconds(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(table.billion_laughs(levels=12, width=10))  # 10**11 expansions if aliases were followed
    t0 = time.perf_counter()
    with pytest.raises(PersonalignError, match="aliases"):
        SearchSpace.load(STAGE, path)
    assert time.perf_counter() - t0 < 2.0


def test_a_space_never_imports_a_module_it_names(tmp_path, monkeypatch):
    marker = tmp_path / "imported"
    (tmp_path / "evil_space_mod.py").write_text(
        f"open({str(marker)!r}, 'w').write('ran')\nclass Judge: pass\nclass Opt: pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    texts = ['strategies = ["evil_space_mod:Judge"]\n',
             'strategies = ["zero-shot"]\n[lm]\noptimizer = ["evil_space_mod:Opt"]\n',
             'strategies = ["bm25"]\n[strategy."evil_space_mod:Judge"]\nx = 1\n',
             'strategies = ["minilm-logreg"]\n[strategy.minilm-logreg]\nC = "evil_space_mod:Judge"\n',
             f'strategies = ["{tmp_path}/evil_space_mod.py:Judge"]\n']
    for i, text in enumerate(texts):
        path = tmp_path / f"space{i}.toml"
        path.write_text(text)
        with pytest.raises(PersonalignError, match="cannot name code"):
            SearchSpace.load(STAGE, path)
    assert "evil_space_mod" not in sys.modules
    assert not marker.exists()


def test_valid_forms_of_the_language(tmp_path):
    path = tmp_path / "space.toml"
    path.write_text('strategies = "zero-shot, minilm-logreg"\n'
                    '[pruner]\nkind = "median"\nn_startup_trials = 0\ninterval_steps = 2\n'
                    '[lm]\ntemperature = { low = 0, high = 1 }\noptimizer = "labeled"\n'
                    '[optimizer.labeled]\nk = { low = 0, high = 6, step = 2 }\n'
                    '[strategy.minilm-logreg]\nfeatures = { value = ["attribute", "cosine"] }\n'
                    'C = [0.01, 0.1]\n')
    space = SearchSpace.load(STAGE, path)
    assert space.strategies == ["zero-shot", "minilm-logreg"]
    assert space.temperature.kind == "float"  # integer bounds, still a temperature range
    assert space.pruner == {"kind": "median", "n_startup_trials": 0, "n_warmup_steps": 1, "interval_steps": 2,
                            "n_min_trials": 1}
    assert type(space.make_pruner()).__name__ == "MedianPruner"

    def pick(dim):
        if dim.kind == "fixed":
            return dim.value
        if dim.name == "strategy":
            return "minilm-logreg"
        return dim.choices[-1] if dim.kind == "categorical" else dim.high

    cfg = space.configure(pick)
    assert cfg.strategy_kwargs == {"features": ["attribute", "cosine"], "C": 0.1}
    assert STAGE.registry.create("minilm-logreg", **cfg.strategy_kwargs).features == ["attribute", "cosine"]


@pytest.mark.parametrize("name", ["pruner a string", "temperature nan", "C negative", "unknown feature name",
                                  "yaml billion laughs", "strategy a module reference"])
def test_through_the_command_line(name):
    import bad_inputs as bench

    rows = dict(bench.cases())
    row = bench.run_case(f"sweep space {name}", rows[f"sweep space {name}"])
    assert row["outcome"] == "clean", row
    _fname, _content, key, value = CASES[name]
    assert key in row["error"] and value in row["error"], row
