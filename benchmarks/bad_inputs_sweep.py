"""Malformed sweep search-space files (``personalign sweep --space``): the cases of issue 28.

:data:`SPACE_CASES` is data: ``(name, file name, content, key, value)`` where ``key`` and ``value``
are what the one error line must name (besides the file). :func:`cases` turns them into rows of
``benchmarks/bad_inputs.py`` (``sweep space ...``); ``tests/sweep/test_space_files.py`` runs every
one in-process and a sample through the command line. Every file is generated here, none stored.
"""

from __future__ import annotations

from pathlib import Path

DEMO = Path(__file__).resolve().parents[1] / "examples" / "relevance_demo.jsonl"

_BM25 = 'strategies = ["bm25"]\n'
_LOGREG = 'strategies = ["minilm-logreg"]\n[strategy.minilm-logreg]\n'
_ZS = 'strategies = ["zero-shot"]\n'


def billion_laughs(levels: int = 12, width: int = 10) -> str:
    """A YAML "billion laughs": ``width ** levels`` expansions through aliases of anchors."""
    lines = ['a0: &a0 ["lol"]']
    for i in range(1, levels):
        refs = ", ".join(f"*a{i - 1}" for _ in range(width))
        lines.append(f"a{i}: &a{i} [{refs}]")
    lines.append(f"strategies: *a{levels - 1}")
    return "\n".join(lines) + "\n"


SPACE_CASES: list[tuple[str, str, str, str, str]] = [
    # (name, file, content, key named in the error, value named in the error)
    ("pruner a string", "s.toml", _BM25 + 'pruner = "median"\n', "[pruner]", "'median'"),
    ("pruner negative", "s.toml", _BM25 + "[pruner]\nn_startup_trials = -1\n", "[pruner] n_startup_trials", "-1"),
    ("pruner warmup a string", "s.toml", _BM25 + '[pruner]\nn_warmup_steps = "1"\n', "[pruner] n_warmup_steps", "'1'"),
    ("pruner unknown kind", "s.toml", _BM25 + '[pruner]\nkind = "hyperband"\n', "[pruner] kind", "'hyperband'"),
    ("pruner unknown key", "s.toml", _BM25 + "[pruner]\npatience = 3\n", "[pruner] patience", "3"),
    ("choices nested list", "s.toml", _LOGREG + "C = [[0.1, 1.0]]\n", "[strategy.minilm-logreg] C", "[0.1, 1.0]"),
    ("optimizer a dict", "s.toml", _ZS + "[lm]\noptimizer = { bootstrap = 1 }\n", "[lm] optimizer",
     "{'bootstrap': 1}"),
    ("strategies a dict", "s.toml", "[strategies]\nbm25 = 1\n", "strategies", "{'bm25': 1}"),
    ("strategies nested list", "s.yaml", "strategies: [[bm25]]\n", "strategies", "['bm25']"),
    ("temperature nan", "s.toml", _ZS + "[lm]\ntemperature = nan\n", "[lm] temperature", "nan"),
    ("temperature inf", "s.toml", _ZS + "[lm]\ntemperature = inf\n", "[lm] temperature", "inf"),
    ("temperature -inf", "s.toml", _ZS + "[lm]\ntemperature = -inf\n", "[lm] temperature", "-inf"),
    ("temperature range to inf", "s.toml", _ZS + "[lm]\ntemperature = { low = 0.0, high = inf }\n",
     "[lm] temperature.high", "inf"),
    ("temperature negative", "s.toml", _ZS + "[lm]\ntemperature = [-0.5, 0.7]\n", "[lm] temperature", "-0.5"),
    ("temperature a string", "s.toml", _ZS + '[lm]\ntemperature = "hot"\n', "[lm] temperature", "'hot'"),
    ("step a string", "s.toml", _ZS + '[optimizer.labeled]\nk = { low = 0, high = 4, step = "1" }\n',
     "[optimizer.labeled] k.step", "'1'"),
    ("step zero", "s.toml", _ZS + "[optimizer.labeled]\nk = { low = 0, high = 4, step = 0 }\n",
     "[optimizer.labeled] k", "'step': 0"),
    ("step negative", "s.toml", _ZS + "[optimizer.labeled]\nk = { low = 0, high = 4, step = -2 }\n",
     "[optimizer.labeled] k", "'step': -2"),
    ("step not dividing the range", "s.toml", _ZS + "[optimizer.labeled]\nk = { low = 0, high = 5, step = 2 }\n",
     "[optimizer.labeled] k", "not a multiple of step"),
    ("step with log", "s.toml", _LOGREG + "C = { low = 0.01, high = 1.0, log = true, step = 0.1 }\n",
     "[strategy.minilm-logreg] C", "'log': True"),
    ("range unknown key", "s.toml", _LOGREG + "C = { low = 0.01, high = 1.0, scale = 2 }\n",
     "[strategy.minilm-logreg] C.scale", "2"),
    ("C negative", "s.toml", _LOGREG + "C = -1.0\n", "[strategy.minilm-logreg] C", "-1.0"),
    ("C range below zero", "s.toml", _LOGREG + "C = { low = -1.0, high = 1.0 }\n", "[strategy.minilm-logreg] C",
     "-1.0"),
    ("C a string", "s.toml", _LOGREG + 'C = "big"\n', "[strategy.minilm-logreg] C", "'big'"),
    ("unknown feature name", "s.toml", _LOGREG + 'features = { value = ["attribute", "smell"] }\n',
     "[strategy.minilm-logreg] features", "'smell'"),
    ("features as choices", "s.toml", _LOGREG + 'features = ["attribute", "cosine"]\n',
     "[strategy.minilm-logreg] features", "'attribute'"),
    ("fit a string", "s.toml", 'strategies = ["minilm-logreg"]\nfit = "beta"\n', "[fit]", "'beta'"),
    ("fit beta negative", "s.toml", 'strategies = ["minilm-logreg"]\n[fit]\nbeta = -2.0\n', "[fit] beta", "-2.0"),
    ("fit beta a string", "s.toml", 'strategies = ["minilm-logreg"]\n[fit]\nbeta = "two"\n', "[fit] beta", "'two'"),
    ("minibatch a string", "s.toml", _BM25 + '[evaluation]\nminibatch_size = "8"\n', "[evaluation] minibatch_size",
     "'8'"),
    ("minibatch a boolean", "s.toml", _BM25 + "[evaluation]\nminibatch_size = true\n",
     "[evaluation] minibatch_size", "True"),
    ("labeled k negative", "s.toml", _ZS + "[optimizer.labeled]\nk = { low = -3, high = 4 }\n",
     "[optimizer.labeled] k", "-3"),
    ("decision rule unknown", "s.toml", _ZS + '[optimizer.labeled]\ndecision_rule = "always"\n',
     "[optimizer.labeled] decision_rule", "'always'"),
    ("optimizer settings a list", "s.toml", _ZS + "[[optimizer.labeled]]\nk = 1\n", "[optimizer.labeled]",
     "[{'k': 1}]"),
    ("strategy twice", "s.toml", 'strategies = ["bm25", "bm25"]\n', "strategies", "['bm25', 'bm25']"),
    ("yaml date choice", "s.yaml", "strategies: [bm25]\nfit:\n  beta: [2024-01-01]\n", "[fit] beta",
     "datetime.date(2024, 1, 1)"),
    ("yaml a scalar", "s.yaml", "5\n", "search space", "int"),
    # code and models a space file may not choose
    ("strategy a module reference", "s.toml", 'strategies = ["os:system"]\n', "strategies", "'os:system'"),
    ("strategy a file reference", "s.toml", 'strategies = ["./evil.py:Judge"]\n', "strategies", "'./evil.py:Judge'"),
    ("optimizer a module reference", "s.toml", _ZS + '[lm]\noptimizer = ["evil_mod:Optimizer"]\n',
     "[lm] optimizer", "'evil_mod:Optimizer'"),
    ("strategy table a module reference", "s.toml", _BM25 + '[strategy."evil_mod:Judge"]\nx = 1\n',
     "[strategy.evil_mod:Judge]", "'evil_mod:Judge'"),
    ("setting a module reference", "s.toml", _LOGREG + 'C = "evil_mod:C"\n', "[strategy.minilm-logreg] C",
     "'evil_mod:C'"),
    ("setting chooses the model", "s.toml", 'strategies = ["yes-prob"]\n[strategy.yes-prob]\n'
     'model = "openai/gpt-4o-mini"\n', "[strategy.yes-prob] model", "--lm"),
    ("key with a newline", "s.toml", _BM25 + '[strategy."bm\\n25"]\nx = 1\n', "[strategy.'bm\\n25']",
     "a name is"),
    ("yaml python tag", "s.yaml", "strategies: [bm25]\nfit: !!python/object/apply:os.system [id]\n", "invalid YAML",
     "python/object"),
    # the loader itself
    ("yaml billion laughs", "s.yaml", billion_laughs(), "aliases", "*name"),
    ("yaml alias", "s.yaml", "base: &b [bm25]\nstrategies: *b\n", "aliases", "*name"),
]


def cases(write) -> list[tuple[str, object]]:
    """Rows of ``benchmarks/bad_inputs.py``: ``(name, build)`` with ``build(case_dir) -> argv``;
    ``write(dir, name, content) -> path`` writes the space file into the case directory."""
    return [(f"sweep space {name}", lambda d, f=fname, c=content: ["sweep", "relevance", "--data", str(DEMO),
                                                                     "--space", write(d, f, c)])
            for name, fname, content, _key, _value in SPACE_CASES]


__all__ = ["SPACE_CASES", "billion_laughs", "cases"]
