"""The package's shape, read from its source (docs/architecture.md): layers flow one way, no module
imports another that imports it back, stage packages share code only through ``programs/common``,
no private name crosses a package, the command line enters through the public API only, tracking
is injected (no ``tracker is None`` branch), files stay short. Every import counts, the lazy ones
inside functions included."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "personalign"

# errors/registry -> data/metrics/lm -> signatures/stages -> programs -> optimizers
#   -> compile/evaluate/tracking -> sweeps/runners/labels -> the verbs -> cli
LAYERS = {
    0: {"errors", "registry", "redaction", "_env", "_paths", "_versions", "settings", "resources", "stores", "origin"},
    1: {"data", "metrics", "lm", "preprocess", "diversity", "processes", "record"},
    2: {"signatures", "stages"},
    3: {"programs"},
    4: {"optimizers"},
    5: {"compile_service", "evaluation", "judge_validation", "tracking"},
    6: {"sweeps", "runners", "labels", "results_page"},
    7: {"_verbs", "results"},
    8: {"cli", "testing", "__main__", "_launch", "_mlflow_ui", ""},
}
LAYER = {name: level for level, names in LAYERS.items() for name in names}
MAX_LINES = 400
PUBLIC = {"personalign", "personalign.errors", "personalign.stages", "personalign.tracking", "personalign.data",
          "personalign.lm", "personalign.runners", "personalign.settings", "personalign.record",
          "personalign.redaction", "personalign.labels", "personalign.results_page", "personalign.results"}
"""What the command line may import from: the package's public API (each module's ``__all__``)."""


def _module_name(path: Path) -> tuple[str, str]:
    """(module, package it lives in) for a file under personalign/."""
    parts = ("personalign",) + path.relative_to(ROOT).with_suffix("").parts
    if parts[-1] == "__init__":
        mod = ".".join(parts[:-1])
        return mod, mod
    mod = ".".join(parts)
    return mod, mod.rsplit(".", 1)[0]


MODULES = {_module_name(p)[0] for p in ROOT.rglob("*.py")}


def _file_imports(path: Path, pkg: str = "") -> list[tuple[int, str, list[str]]]:
    """(line, imported module, imported names) of every import of personalign in the file at
    ``path`` (``pkg``: the package a relative import is relative to)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] == "personalign":
                out.append((node.lineno, target, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out.extend((node.lineno, a.name, []) for a in node.names if a.name.split(".")[0] == "personalign")
    return out


def _imports() -> list[tuple[str, int, str, list[str]]]:
    """(importing module, line, imported module, imported names) for every import of personalign."""
    out = []
    for path in sorted(ROOT.rglob("*.py")):
        mod, pkg = _module_name(path)
        out += [(mod, *found) for found in _file_imports(path, pkg)]
    return out


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


IMPORTS = _imports()


def test_every_top_level_module_has_a_layer():
    tops = {_top(_module_name(p)[0]) for p in ROOT.rglob("*.py")}
    assert tops - set(LAYER) == set()


def test_no_import_from_a_higher_layer():
    up = [f"{src}:{line} imports {tgt} (layer {LAYER[_top(src)]} -> {LAYER[_top(tgt)]})"
          for src, line, tgt, _ in IMPORTS if LAYER[_top(tgt)] > LAYER[_top(src)]]
    assert up == []


def _edges() -> dict[str, set[str]]:
    """Module -> the modules it imports (``from pkg import name`` counts ``pkg.name`` when that is a
    module); a package's ``__init__`` re-exporting its own modules is not an edge back to it."""
    graph: dict[str, set[str]] = {}
    for src, _, tgt, names in IMPORTS:
        targets = [f"{tgt}.{n}" if f"{tgt}.{n}" in MODULES else tgt for n in names] or [tgt]
        for t in targets:
            if t != src and t in MODULES and not src.startswith(t + "."):
                graph.setdefault(src, set()).add(t)
    return graph


def test_no_import_circle_between_modules():
    """No module imports (directly or through others) a module that imports it back."""
    graph = _edges()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert circles == []


def test_stage_packages_do_not_import_each_other():
    stages = {p.parent.name for p in (ROOT / "programs").glob("*/__init__.py")} - {"common"}
    cross = []
    for src, line, tgt, _ in IMPORTS:
        s, t = src.split("."), tgt.split(".")
        if len(s) > 2 and len(t) > 2 and s[1] == t[1] == "programs" and s[2] in stages and t[2] in stages \
                and s[2] != t[2]:
            cross.append(f"{src}:{line} imports {tgt}")
    assert cross == []


REEXPORTS_VERBS = ("", "results")
"""The public modules that re-export the verbs' package ``_verbs``: the root (the verbs, their
reports) and :mod:`personalign.results` (a result's record and leave-one-group-out figures)."""


ROOT_PRIVATE = ("_env", "_paths", "_versions", "_launch")


def test_no_private_name_crosses_a_package():
    """A ``_private`` module or name is used only inside its own top-level package (the root's
    ``_env``, ``_paths``, ``_versions`` and ``_launch`` -- the console script, also run by
    ``python -m personalign`` -- excepted, and the verbs' package ``_verbs``, which the root and
    :mod:`personalign.results` re-export)."""
    leaks = []
    for src, line, tgt, names in IMPORTS:
        if _top(src) == _top(tgt) or (_top(tgt) in ROOT_PRIVATE and _top(src) in ("", "__main__")) or (
                _top(tgt) == "_verbs" and _top(src) in REEXPORTS_VERBS):
            continue
        private_module = any(_private(p) for p in tgt.split(".")[1:]) and _top(tgt) not in ROOT_PRIVATE
        private_names = [n for n in names if _private(n)]
        if private_module or private_names:
            leaks.append(f"{src}:{line} imports {tgt} {private_names or ''}")
    assert leaks == []


BENCHMARKS = ROOT.parent / "benchmarks"
BENCHMARK_PRIVATE_KNOWN = {
    "personalign.lm._engine": "the engine's own timings (batched_decode, lm_overhead, prefix_reuse)",
    "personalign.lm._batch": "the batched decoder measured directly (batched_decode)",
    "personalign.runners._common": "mean_ci (respond, perspectives)",
    "personalign.programs.relevance.ensemble": "_probe_member, the +probe rows (relevance_newprompt)",
    "personalign.optimizers.decision": "_best_value, the threshold search (relevance_newprompt)",
    "personalign.programs.relevance.ranked": "_groups, the ranking's groups (relevance)",
}
"""Private personalign modules and names benchmarks/ still reach into, each with what for: a list
to shrink, never to grow (a stale entry fails too)."""


def _benchmark_private_imports() -> dict[str, list[str]]:
    """Imported module -> ``file:line`` of each import in benchmarks/ of a private personalign
    module (a ``_name`` part) or of a private name from one."""
    found: dict[str, list[str]] = {}
    for path in sorted(BENCHMARKS.rglob("*.py")):
        for line, tgt, names in _file_imports(path):
            if any(_private(p) for p in tgt.split(".")[1:]) or any(_private(n) for n in names):
                found.setdefault(tgt, []).append(f"{path.relative_to(BENCHMARKS.parent)}:{line}")
    return found


def test_benchmarks_import_no_private_personalign_module():
    """benchmarks/ use the public API (:mod:`personalign`, :mod:`personalign.results`, ...): no
    ``personalign._private`` package at all, and deeper private modules or names only as listed in
    :data:`BENCHMARK_PRIVATE_KNOWN`."""
    found = _benchmark_private_imports()
    top_private = [f"{w} imports {tgt}" for tgt, where in found.items() if _private(_top(tgt)) for w in where]
    assert top_private == []
    assert {t: w for t, w in found.items() if t not in BENCHMARK_PRIVATE_KNOWN} == {}
    assert set(BENCHMARK_PRIVATE_KNOWN) - set(found) == set(), "no longer imported: drop from BENCHMARK_PRIVATE_KNOWN"


def test_the_command_line_imports_only_the_public_api():
    """``personalign/cli/`` calls the public verbs and names: it imports from ``personalign`` and
    the public modules (:data:`PUBLIC`), names in their ``__all__``, and its own ``cli`` helpers."""
    bad = []
    for src, line, tgt, names in IMPORTS:
        if _top(src) != "cli" or _top(tgt) == "cli":
            continue
        if tgt not in PUBLIC:
            bad.append(f"{src}:{line} imports {tgt}")
            continue
        exported = set(getattr(importlib.import_module(tgt), "__all__", ()))
        bad += [f"{src}:{line} imports {tgt}.{n} (not in its __all__)" for n in names if n not in exported]
    assert bad == []


def test_tracking_is_injected_never_branched_on():
    """No ``tracker is None`` / ``if tracker`` / ``tracker.enabled`` style branch in the package:
    an untracked run is a run with no callbacks."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
                names = [n.id for n in ast.walk(node.left) if isinstance(n, ast.Name)]
            elif isinstance(node, (ast.If, ast.IfExp)) and isinstance(node.test, ast.Name):
                names = [node.test.id]
            elif isinstance(node, ast.Attribute) and node.attr == "enabled":
                names = [n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)]
            found += [f"{path.relative_to(ROOT)}:{node.lineno}" for n in names if "tracker" in n.lower()]
    assert found == []


def test_no_private_module_of_another_library_is_imported():
    """Optuna, DSPy, litellm, MLflow ... are used through their public modules only."""
    leaks = []
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            leaks += [f"{path.relative_to(ROOT)}:{node.lineno} imports {n}" for n in names
                      if n.split(".")[0] != "personalign" and any(_private(p) for p in n.split("."))]
    assert leaks == []


@pytest.mark.parametrize("path", sorted(ROOT.rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_files_stay_short(path):
    assert len(path.read_text(encoding="utf-8").splitlines()) <= MAX_LINES
