"""Stage references: the one resolver of every way a user names a stage.

A **stage reference** is any of (checked in this order):

* a :class:`~personalign.programs.stages.Stage` object -- returned as it is;
* ``path/to/stage.toml`` -- a stage file (:mod:`personalign.programs.stage_file`);
* ``path/to/file.py:ATTR`` -- ``ATTR`` of a Python file (imported from its path, as
  ``inspect eval my_task.py@task`` does);
* ``package.module:ATTR`` -- ``ATTR`` of an importable module;
* a built-in stage name (``relevance``; :func:`personalign.programs.stages.builtin_stage`);
* a name an installed package publishes in the entry-point group :data:`ENTRY_POINT_GROUP`
  (``[project.entry-points."personalign.stages"] mine = "my_pkg.stages:STAGE"``).

``ATTR`` may be a ``Stage`` or a function of no arguments returning one. A resolved stage carries
its reference in ``Stage.ref`` (files as absolute paths), which saved programs record as
``stage_ref``. :func:`stage_for_program` is the loading side and the safety rule: a saved program
never makes personalign import a file or module by itself -- only built-in and entry-point stages
resolve from the program alone; any other ``stage_ref`` needs the caller to name the stage.
"""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path
from typing import Any

ENTRY_POINT_GROUP = "personalign.stages"


def import_file(path: str | Path) -> Any:
    """:func:`personalign.registry.import_file` (the one file importer)."""
    from personalign.registry import import_file as _import_file

    return _import_file(path)


def resolve_ref(ref: str, base: str | Path | None = None) -> Any:
    """The object ``ref`` names: ``file.py:ATTR`` (relative to ``base``, default the working
    directory) or ``module:ATTR``; a ``module`` that is a ``.py`` file beside ``base`` is imported
    from there (``metric = "mymod:fn"`` next to a stage file).

    Raises:
        ConfigurationError: malformed reference, missing file/module/attribute, or an import error.
    """
    from personalign.errors import ConfigurationError

    left, sep, attr = str(ref).rpartition(":")
    if not sep or not left or not attr:
        raise ConfigurationError(f"'{ref}': expected 'module:ATTR' or 'path/to/file.py:ATTR'")
    base_dir = Path(base) if base is not None else Path.cwd()
    if left.endswith(".py") or "/" in left or "\\" in left:
        path = Path(left).expanduser()
        module = import_file(path if path.is_absolute() else base_dir / path)
    elif base is not None and (base_dir / (left.replace(".", "/") + ".py")).is_file():
        module = import_file(base_dir / (left.replace(".", "/") + ".py"))
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


def entry_point_names() -> list[str]:
    """Names published under :data:`ENTRY_POINT_GROUP` by installed packages (nothing imported)."""
    return list(installed_entry_points())


def installed_entry_points() -> dict[str, str]:
    """``{name: "module:attr"}`` of every stage published under :data:`ENTRY_POINT_GROUP`
    (nothing imported; on a duplicate name the first installed wins, as :func:`resolve_stage`)."""
    from importlib.metadata import entry_points

    out: dict[str, str] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        out.setdefault(ep.name, ep.value)
    return dict(sorted(out.items()))


def _entry_point(name: str):
    from importlib.metadata import entry_points

    found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    return found[0] if found else None


def _as_stage(obj: Any, ref: str) -> Any:
    from personalign.errors import ConfigurationError
    from personalign.programs.stages import Stage

    if callable(obj) and not isinstance(obj, (Stage, type)):
        obj = obj()
    if not isinstance(obj, Stage):
        raise ConfigurationError(f"'{ref}' is a {type(obj).__name__}, not a personalign Stage")
    return obj if obj.ref == ref else dataclasses.replace(obj, ref=ref)


def is_file_ref(ref: str) -> bool:
    """True when ``ref`` names a stage file or a file/module attribute (not a bare name)."""
    return ref.endswith(".toml") or ":" in ref or "/" in ref or "\\" in ref


def resolve_stage(ref: Any) -> Any:
    """The :class:`~personalign.programs.stages.Stage` that ``ref`` names (see the module docstring).

    Raises:
        ConfigurationError: an unknown name (lists built-ins and entry points), a reference that
            does not import, or an object that is not a Stage.
        DataError: a malformed stage file (names the file, line and key).
    """
    from personalign.errors import ConfigurationError
    from personalign.programs.stages import Stage, all_stages, builtin_stage

    if isinstance(ref, Stage):
        return ref
    if not isinstance(ref, (str, Path)) or not str(ref).strip():
        raise ConfigurationError(f"a stage is a name, a Stage, 'module:ATTR', 'file.py:ATTR' or a stage .toml; "
                                 f"got {ref!r}")
    text = str(ref).strip()
    if text.endswith(".toml"):
        from personalign.programs.stage_file import load_stage_file

        return load_stage_file(text)
    if ":" in text:
        left, _, attr = text.rpartition(":")
        if left.endswith(".py") or "/" in left:
            left = str(Path(left).expanduser().resolve())
        return _as_stage(resolve_ref(f"{left}:{attr}"), f"{left}:{attr}")
    stage = builtin_stage(text)
    if stage is not None:
        return stage
    ep = _entry_point(text)
    if ep is not None:
        try:
            obj = ep.load()
        except Exception as exc:  # noqa: BLE001
            raise ConfigurationError(f"stage entry point '{text}' ({ep.value}) does not import: "
                                     f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}") from None
        return _as_stage(obj, text)
    if "/" in text or Path(text).suffix:
        raise ConfigurationError(f"'{text}': a stage file ends in .toml; a Python stage is 'file.py:ATTR'")
    available = list(all_stages()) + entry_point_names()
    raise ConfigurationError(f"unknown stage '{text}'; available: {', '.join(available)} "
                             "(or a stage .toml, 'module:ATTR', 'file.py:ATTR')")


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
    from personalign.errors import ConfigurationError

    recorded = meta.get("stage_ref") or meta["stage"]
    if stage is not None:
        st = resolve_stage(stage)
        if st.name != meta["stage"]:
            raise ConfigurationError(f"{path} is a saved {meta['stage']} program, not a {st.name} program")
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


def _shown(value: Any) -> str:
    return ", ".join(map(str, value)) if isinstance(value, list) else str(value)


__all__ = ["ENTRY_POINT_GROUP", "entry_point_names", "installed_entry_points", "import_file", "is_file_ref", "resolve_ref", "resolve_stage",
           "stage_for_program", "stage_ref_of"]
