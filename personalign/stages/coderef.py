"""The rule for the code a stage file names (``metric``, ``objective``, ``[strategies]``, ``signature``,
``loader``): checked without importing anything, and only in the stage file's own folder,
personalign's own modules or an installed entry point (:func:`check_ref`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from personalign.errors import ConfigurationError

STRATEGY_GROUP = "personalign.strategies"
"""The entry-point group an installed package publishes strategies in."""
PACKAGE_ROOT = Path(__file__).resolve().parents[1]


def check_ref(ref: Any, base: str | Path, *, key: str, kind: str = "object", entry_group: str | None = None) -> str:
    """A code reference written in a stage file, checked **without importing anything**, as the
    target :func:`personalign.registry.resolve` imports when the reference is first used.

    A reference is one of: ``file.py:ATTR`` or ``sub/file.py:ATTR`` (a file in the stage file's
    folder ``base``: no absolute path, no ``..``, no symlink leading out), ``mod:ATTR`` where
    ``mod.py`` lies in that folder, ``personalign.<module>:ATTR`` (the package's own code), or --
    with ``entry_group`` -- a name an installed package publishes in that entry-point group. The
    file is parsed (``ast``), never run: ``ATTR`` must be bound at its top level (``kind="class"``:
    a class definition or an assignment). Any other module is refused: a stage file never makes
    personalign import code outside its own folder.

    Returns:
        ``"/absolute/file.py:ATTR"``, ``"personalign.module:ATTR"`` or the entry point's
        ``"module:attr"`` (its metadata, not loaded).

    Raises:
        ConfigurationError: ``"<key> = <ref>: <problem>"``.
    """
    def bad(problem: str) -> ConfigurationError:
        return ConfigurationError(f"{key} = {ref!r}: {problem}")

    if not isinstance(ref, str) or not ref.strip():
        raise bad("expected 'file.py:ATTR' (a file beside the stage file)")
    if ":" not in ref:
        if entry_group is None:
            raise bad("expected 'file.py:ATTR' (a file beside the stage file) or 'personalign.module:ATTR'")
        from importlib.metadata import entry_points

        eps = [ep for ep in entry_points(group=entry_group) if ep.name == ref]
        if not eps:
            raise bad(f"no 'file.py:Class' and no entry point of that name in group {entry_group}")
        return eps[0].value
    left, _, attr = ref.rpartition(":")
    if not left or not attr.isidentifier():
        raise bad("expected 'file.py:ATTR' (a file beside the stage file) or 'personalign.module:ATTR'")
    base_dir = Path(base).resolve()
    if left.endswith(".py") or "/" in left or "\\" in left:
        rel = Path(left)
        if rel.is_absolute() or left.startswith("~") or ".." in rel.parts:
            raise bad("a file reference is relative to the stage file's folder (no absolute path, no '..')")
        path = (base_dir / rel).resolve()
        if not path.is_relative_to(base_dir):
            raise bad(f"{rel} leads out of the stage file's folder {base_dir}")
    elif left.split(".")[0] == "personalign":
        parts = left.split(".")
        if not all(p.isidentifier() for p in parts):
            raise bad(f"'{left}' is not a module name")
        stem = PACKAGE_ROOT.joinpath(*parts[1:])
        path = stem / "__init__.py" if stem.is_dir() else stem.with_suffix(".py")
        if not path.is_file():
            raise bad(f"personalign has no module '{left}'")
        _check_defined(path, attr, kind, bad)
        return f"{left}:{attr}"
    else:
        if not all(p.isidentifier() for p in left.split(".")):
            raise bad(f"'{left}' is not a module name")
        path = base_dir.joinpath(*left.split(".")).with_suffix(".py")
        if not path.is_file():
            raise bad(f"no file {path.name} in the stage file's folder {base_dir}; a stage file names code in "
                      "its own folder, personalign's own modules or an installed entry point, never another module")
    if not path.is_file():
        raise bad(f"{path}: no such Python file")
    _check_defined(path, attr, kind, bad)
    return f"{path}:{attr}"


def _check_defined(path: Path, attr: str, kind: str, bad) -> None:
    """``attr`` is bound at the top level of the Python file ``path`` (read, parsed, not run)."""
    import ast

    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError) as exc:
        raise bad(f"{path.name} does not parse: {type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:120]}")
    bound: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            bound[node.name] = "class"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            bound[node.name] = "function"
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        bound[n.id] = "assignment"
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                bound[(a.asname or a.name).split(".")[0]] = "import"
    if attr not in bound:
        raise bad(f"{path.name} defines no '{attr}' at its top level")
    if kind == "class" and bound[attr] == "function":
        raise bad(f"'{attr}' in {path.name} is a function, not a dspy.Module subclass")


__all__ = ["PACKAGE_ROOT", "STRATEGY_GROUP", "check_ref"]
