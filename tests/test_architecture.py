"""The package's shape, read from its source (README "Architecture"): layers flow one way, stage
packages share code only through ``programs/common``, no private name crosses a package, files
stay short. Every import counts, including the lazy ones inside functions."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "personalign"

# data -> signatures/programs -> optimizers -> compile/evaluate -> compare/sweep -> cli
LAYERS = {
    0: {"errors", "registry", "_env", "_paths", "_versions", "settings", "resources", "stores"},
    1: {"data", "metrics", "lm", "preprocess", "diversity", "tracking", "processes", "record"},
    2: {"signatures", "programs"},
    3: {"optimizers"},
    4: {"compile_service", "evaluation", "objectives", "predict", "judge_validation", "tracking_native"},
    5: {"compare", "crossval", "sweep", "runners", "workflows"},
    6: {"cli", "testing", "api", "__main__", ""},
}
LAYER = {name: level for level, names in LAYERS.items() for name in names}
MAX_LINES = 400


def _module_name(path: Path) -> tuple[str, str]:
    """(module, package it lives in) for a file under personalign/."""
    parts = ("personalign",) + path.relative_to(ROOT).with_suffix("").parts
    if parts[-1] == "__init__":
        mod = ".".join(parts[:-1])
        return mod, mod
    mod = ".".join(parts)
    return mod, mod.rsplit(".", 1)[0]


def _imports() -> list[tuple[str, int, str, list[str]]]:
    """(importing module, line, imported module, imported names) for every import of personalign."""
    out = []
    for path in sorted(ROOT.rglob("*.py")):
        mod, pkg = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if target.split(".")[0] == "personalign":
                    out.append((mod, node.lineno, target, [a.name for a in node.names]))
            elif isinstance(node, ast.Import):
                out.extend((mod, node.lineno, a.name, []) for a in node.names if a.name.split(".")[0] == "personalign")
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
          for src, line, tgt, _ in IMPORTS
          if LAYER[_top(tgt)] > LAYER[_top(src)] and not src.endswith("__main__")]
    assert up == []


def test_stage_packages_do_not_import_each_other():
    stages = {p.parent.name for p in (ROOT / "programs").glob("*/__init__.py")} - {"common"}
    cross = []
    for src, line, tgt, _ in IMPORTS:
        s, t = src.split("."), tgt.split(".")
        if len(s) > 2 and len(t) > 2 and s[1] == t[1] == "programs" and s[2] in stages and t[2] in stages \
                and s[2] != t[2]:
            cross.append(f"{src}:{line} imports {tgt}")
    assert cross == []


def test_no_private_name_crosses_a_package():
    """A ``_private`` module or name is used only inside its own top-level package
    (``personalign._env`` and ``personalign._paths``, the root package's own, excepted)."""
    leaks = []
    for src, line, tgt, names in IMPORTS:
        if _top(src) == _top(tgt):
            continue
        private_module = any(_private(p) for p in tgt.split(".")[2:])
        private_names = [n for n in names if _private(n)]
        if private_module or private_names:
            leaks.append(f"{src}:{line} imports {tgt} {private_names or ''}")
    assert leaks == []


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


def test_no_package_cycle():
    graph: dict[str, set[str]] = {}
    for src, _, tgt, _ in IMPORTS:  # entry shims (``python -m``) are outside the layers
        if _top(src) != _top(tgt) and _top(src) and not src.endswith("__main__"):
            graph.setdefault(_top(src), set()).add(_top(tgt))

    def reaches(a: str, b: str, seen: set[str]) -> bool:
        return any(n == b or (n not in seen and (seen.add(n) or reaches(n, b, seen))) for n in graph.get(a, ()))

    assert [a for a in graph if reaches(a, a, set())] == []


@pytest.mark.parametrize("path", sorted(ROOT.rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_files_stay_short(path):
    assert len(path.read_text(encoding="utf-8").splitlines()) <= MAX_LINES
