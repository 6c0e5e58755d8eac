"""Stage references: the one resolver of every way a stage is named, and the rules for the code a
stage file names.

A **stage reference** is any of (checked in this order):

* a :class:`~personalign.stages.stage.Stage` -- returned as it is;
* ``path/to/stage.toml`` -- a stage file (:mod:`personalign.stages.spec`);
* ``path/to/file.py:ATTR`` -- ``ATTR`` of a Python file (imported from its path, as
  ``inspect eval my_task.py@task`` does); ``package.module:ATTR`` -- of an importable module:
  code the user names on the command line;
* a built-in stage name (``relevance``): the stage file ``personalign/programs/<name>/stage.toml``,
  read by the same path as a user's;
* a name an installed package publishes in the entry-point group :data:`ENTRY_POINT_GROUP`.

``ATTR`` may be a ``Stage`` or a function of no arguments returning one. A resolved stage carries
its reference in ``Stage.ref``. :func:`stage_for_program` is the loading side: a saved program
never makes personalign import a file or module by itself. :func:`check_ref` is the rule for code
a stage file names: checked without importing, only in the file's own folder, personalign's own
modules or an installed entry point.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
import threading
from pathlib import Path
from typing import Any

from personalign.errors import ConfigurationError, DataError
from personalign.registry import import_file
from personalign.stages.coderef import STRATEGY_GROUP, check_ref  # noqa: F401  (re-exported)

ENTRY_POINT_GROUP = "personalign.stages"
BUILTIN_DIR = Path(__file__).resolve().parents[1] / "programs"
_cache: dict[Any, Any] = {}
_lock = threading.RLock()


def builtin_names() -> list[str]:
    """The built-in stages: every ``personalign/programs/<name>/stage.toml`` (nothing imported)."""
    return sorted(p.parent.name for p in BUILTIN_DIR.glob("*/stage.toml"))


def builtin_stage(name: str):
    """The built-in stage called ``name`` (its stage file under ``personalign/programs/``), or None."""
    path = BUILTIN_DIR / name / "stage.toml"
    if not name.isidentifier() or not path.is_file():
        return None
    return load_stage_file(path, ref=None)


def all_stages() -> dict:
    """Every built-in stage, by name (sorted)."""
    return {name: builtin_stage(name) for name in builtin_names()}


_FILE = object()


def load_stage_file(path: str | Path, *, ref: Any = _FILE):
    """The stage a stage file declares (cached per file version), its ``ref`` the absolute path
    (``ref=None``: a built-in stage, known by its name). Its code references are checked, not
    imported (:func:`check_ref`).

    Raises:
        DataError: a malformed file or a reference outside the rules (file, line, key).
    """
    from personalign.data.files import check_input
    from personalign.stages.spec import line_of, parse_stage_file
    from personalign.stages.stage import Stage

    path = check_input(path, what="stage file").resolve()
    st = path.stat()
    ref = str(path) if ref is _FILE else ref
    key = (path, st.st_mtime_ns, st.st_size, ref)
    with _lock:
        if key in _cache:
            return _cache[key]
    spec = parse_stage_file(path)
    try:
        stage = Stage.from_spec(spec, base_dir=path.parent, ref=ref, source=path)
    except DataError as exc:
        if exc.line is not None or not exc.field:
            raise
        line = line_of(path.read_text(encoding="utf-8"), tuple(exc.field.split(".")))
        raise DataError(path, line, exc.field, exc.problem) from None
    with _lock:
        _cache[key] = stage
    return stage


def declare_stage(**fields: Any):
    """A stage from the stage file's keys as keyword arguments: the Python form of a stage file
    (``my_task.py``: ``STAGE = declare_stage(name=..., kind="binary", label=..., inputs={...},
    output={...}, strategies={"mine": MyJudge})``). ``strategies`` values may be classes; file
    references are relative to the calling file.

    Raises:
        DataError: as a stage file would (the key is named).
    """
    from personalign.stages.spec import spec_from_dict
    from personalign.stages.stage import Stage

    strategies = dict(fields.pop("strategies", None) or {})
    refs = {k: v for k, v in strategies.items() if isinstance(v, str)}
    caller = Path(sys._getframe(1).f_code.co_filename).resolve()
    spec = spec_from_dict({**fields, "strategies": refs}, caller)
    return Stage.from_spec(spec, source=caller, base_dir=caller.parent,
                           extra_strategies={k: v for k, v in strategies.items() if k not in refs})


def resolve_ref(ref: str, base: str | Path | None = None) -> Any:
    """The object a reference the user named (on the command line, or in Python) denotes:
    ``file.py:ATTR`` (relative to ``base``, default the working directory) or ``module:ATTR``.

    Raises:
        ConfigurationError: malformed reference, missing file/module/attribute, or an import error.
    """
    left, sep, attr = str(ref).rpartition(":")
    if not sep or not left or not attr:
        raise ConfigurationError(f"'{ref}': expected 'module:ATTR' or 'path/to/file.py:ATTR'")
    base_dir = Path(base) if base is not None else Path.cwd()
    if left.endswith(".py") or "/" in left or "\\" in left:
        path = Path(left).expanduser()
        module = import_file(path if path.is_absolute() else base_dir / path)
    else:
        try:
            module = importlib.import_module(left)
        except ModuleNotFoundError as exc:
            raise ConfigurationError(f"'{ref}': no module named '{exc.name}'") from None
        except Exception as exc:  # noqa: BLE001
            raise ConfigurationError(f"'{ref}': importing {left} failed: {type(exc).__name__}: "
                                     f"{(str(exc).splitlines() or [''])[0][:200]}") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ConfigurationError(f"'{ref}': {left} has no attribute '{attr}'") from None


def installed_entry_points(group: str = ENTRY_POINT_GROUP) -> dict[str, str]:
    """``{name: "module:attr"}`` published under ``group`` by installed packages (nothing imported;
    on a duplicate name the first installed wins)."""
    from importlib.metadata import entry_points

    out: dict[str, str] = {}
    for ep in entry_points(group=group):
        out.setdefault(ep.name, ep.value)
    return dict(sorted(out.items()))


def _as_stage(obj: Any, ref: str) -> Any:
    from personalign.stages.stage import Stage

    if callable(obj) and not isinstance(obj, (Stage, type)):
        obj = obj()
    if not isinstance(obj, Stage):
        raise ConfigurationError(f"'{ref}' is a {type(obj).__name__}, not a personalign Stage")
    return obj if obj.ref == ref else dataclasses.replace(obj, ref=ref)


def is_file_ref(ref: str) -> bool:
    """True when ``ref`` names a stage file or a file/module attribute (not a bare name)."""
    return ref.endswith(".toml") or ":" in ref or "/" in ref or "\\" in ref


def resolve_stage(ref: Any):
    """The :class:`~personalign.stages.stage.Stage` that ``ref`` names (module docstring).

    Raises:
        ConfigurationError: an unknown name (lists built-ins and entry points), a reference that
            does not import, or an object that is not a Stage.
        DataError: a malformed stage file (names the file, line and key).
    """
    from personalign.stages.stage import Stage

    if isinstance(ref, Stage):
        return ref
    if not isinstance(ref, (str, Path)) or not str(ref).strip():
        raise ConfigurationError(f"a stage is a name, a Stage, 'module:ATTR', 'file.py:ATTR' or a stage .toml; "
                                 f"got {ref!r}")
    text = str(ref).strip()
    if text.endswith(".toml"):
        return load_stage_file(text)
    if ":" in text:
        left, _, attr = text.rpartition(":")
        if left.endswith(".py") or "/" in left:
            left = str(Path(left).expanduser().resolve())
        return _as_stage(resolve_ref(f"{left}:{attr}"), f"{left}:{attr}")
    stage = builtin_stage(text)
    if stage is not None:
        return stage
    target = installed_entry_points().get(text)
    if target is not None:
        try:
            module, _, attr = target.partition(":")
            obj = getattr(importlib.import_module(module), attr) if attr else importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001
            raise ConfigurationError(f"stage entry point '{text}' ({target}) does not import: "
                                     f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}") from None
        return _as_stage(obj, text)
    if "/" in text or Path(text).suffix:
        raise ConfigurationError(f"'{text}': a stage file ends in .toml; a Python stage is 'file.py:ATTR'")
    available = builtin_names() + list(installed_entry_points())
    raise ConfigurationError(f"unknown stage '{text}'; available: {', '.join(available)} "
                             "(or a stage .toml, 'module:ATTR', 'file.py:ATTR')" + _near(text, available))


def _near(name: str, names: list[str]) -> str:
    import difflib

    close = difflib.get_close_matches(name, names, n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def stage_ref_of(stage) -> str:
    """The reference a saved program records for ``stage``: its ``ref``, else its name."""
    return getattr(stage, "ref", None) or stage.name


def stage_for_program(meta: dict, stage: Any, path: Any):
    """The stage of a saved program (``meta`` from :func:`personalign.programs.saved.read_metadata`).

    ``stage`` (the caller's reference, or None): resolved and checked against the program's stage
    name. Without it, the program's ``stage_ref`` is resolved only when it is a built-in or
    entry-point name: a ``stage_ref`` naming a file or module is never imported on the program's
    say-so.

    Raises:
        ConfigurationError: a program of another stage; a file/module stage the caller did not pass;
            a program whose recorded signature (inputs, output field, its type, kind, positive
            class) differs from the stage's now.
    """
    recorded = meta.get("stage_ref") or meta["stage"]
    if stage is not None:
        st = resolve_stage(stage)
        if st.name != meta["stage"]:
            raise ConfigurationError(f"{path} is a saved {meta['stage']} program, not a {st.name} program")
        check_same_stage(str(recorded), stage_ref_of(st), path)
    elif is_file_ref(str(recorded)):
        raise ConfigurationError(f"{path} is a program of stage '{meta['stage']}' declared in {recorded}; "
                                 "personalign does not import a file named by a saved program: pass the stage "
                                 f"(personalign eval {recorded} --program ..., or load_program(path, stage=...))")
    else:
        st = resolve_stage(recorded)
    saved = meta.get("signature")
    if saved is not None:  # programs saved before signatures were recorded load unchecked
        now = st.signature_record()
        diff = [f"{k} {_shown(saved[k])} -> {_shown(now[k])}" for k in now if k in saved and saved[k] != now[k]]
        if diff:
            raise ConfigurationError(f"{path} was compiled for another signature of stage '{st.name}' "
                                     f"({'; '.join(diff)}): recompile it for the stage as it is now")
    return st


def _ref_kind(ref: str) -> str:
    """``"toml"``, ``"file"`` (``file.py:ATTR``), ``"module"`` (``module:ATTR``) or ``"name"``
    (a built-in or entry-point name); ``"?"`` for anything else."""
    if ref.endswith(".toml"):
        return "toml"
    left, sep, attr = ref.rpartition(":")
    if sep:
        if not left or not attr.isidentifier():
            return "?"
        return "file" if left.endswith(".py") or "/" in left or "\\" in left else \
            ("module" if all(p.isidentifier() for p in left.split(".")) else "?")
    return "name" if ref and not is_file_ref(ref) else "?"


def check_same_stage(recorded: str, caller: str, path: Any) -> None:
    """A program recorded for the stage reference ``recorded`` is loaded with the caller's stage
    reference ``caller`` (:func:`stage_ref_of`): the same kind of reference (a name, a stage file, a
    ``file.py:ATTR``, a ``module:ATTR``); a name or module the same string; a file the same file, or
    one with the same folder and file name (``own_task/stage.toml``: the project was moved or
    copied) and the same ``ATTR``. Nothing is imported or read; the stage's name and signature are
    checked by :func:`stage_for_program`. A consistency check (only the caller's stage is ever
    used), not a security boundary.

    Raises:
        DataError: naming ``metadata.personalign.stage_ref``.
    """
    field = "metadata.personalign.stage_ref"
    kind, want = _ref_kind(recorded), _ref_kind(caller)
    problem = (f"the program was compiled for the stage {recorded!r:.160}, not {caller!r:.160}: pass that stage, "
               "or compile the program again for this one")
    if kind == "?":
        raise DataError(path, None, field, f"{recorded!r:.160} is not a stage reference (a stage name, a stage "
                                           ".toml, 'file.py:ATTR' or 'module:ATTR')")
    if kind != want:
        raise DataError(path, None, field, problem)
    if kind in ("name", "module"):
        if recorded != caller:
            raise DataError(path, None, field, problem)
        return
    old, _, old_attr = recorded.rpartition(":") if kind == "file" else (recorded, "", "")
    new, _, new_attr = caller.rpartition(":") if kind == "file" else (caller, "", "")
    old_path, new_path = Path(old).expanduser(), Path(new).expanduser()
    try:
        same = old_path.resolve() == new_path.resolve()
    except (OSError, RuntimeError, ValueError):
        same = False
    if old_attr != new_attr or not (same or old_path.parts[-2:] == new_path.parts[-2:]):
        raise DataError(path, None, field, problem)


def _shown(value: Any) -> str:
    return ", ".join(map(str, value)) if isinstance(value, list) else str(value)


__all__ = ["BUILTIN_DIR", "ENTRY_POINT_GROUP", "STRATEGY_GROUP", "all_stages", "builtin_names", "builtin_stage",
           "check_ref", "check_same_stage", "declare_stage", "installed_entry_points", "is_file_ref",
           "load_stage_file", "resolve_ref", "resolve_stage", "stage_for_program", "stage_ref_of"]
