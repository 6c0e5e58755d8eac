"""Saved programs of any stage: one DSPy-loadable ``program.json`` plus weight files, never pickle.

Layout of a saved program directory::

    program.json      DSPy's own save format: the program's ``dump_state()``; for a program that
                      wraps one DSPy module (or has one predictor), that module's state also at the
                      top level, so plain ``dspy.Predict(Signature).load("program.json")`` (or
                      ``dspy.ChainOfThought(Signature).load``) loads its instructions and demos. Our
                      metadata sits under ``metadata.personalign`` (DSPy reads only
                      ``metadata.dependency_versions``):
                      ``{"format", "stage", "strategy", "state_keys", "lm", "compile", "data",
                      "data_sha256", "metrics", "versions", "weights": {file: sha256}}``.
    *.npz / dirs      the strategy's weights, written by its ``save_weights(dir)`` (npz with
                      ``allow_pickle=False`` or safetensors), listed in ``weights``.
    prompt.md         a readable export (``extra_files``): never read on load, not listed.
    signature.py      the compiled signature and ``load()`` for plain DSPy
                      (:mod:`personalign.programs.dspy_signature`): never read nor imported here.

:func:`load_program` is the one validated loader: the metadata against its schema, the state
against the strategy's own (keys, JSON types, ``__init__`` annotations, finite numbers), the format
version and every listed file (inside the folder, its sha256: :mod:`personalign.programs.integrity`),
and npz arrays (:mod:`personalign.programs._weights`) by name,
shape, dtype and finiteness. Every problem is a one-line :class:`~personalign.errors.DataError` naming the file
and the key. Programs saved by earlier versions (top-level ``stage``/``strategy``/``state``) load too.
:func:`save_program` is atomic: a save onto an existing program directory replaces it whole.
A program compiled with a decision rule (:mod:`personalign.programs.decision`: a threshold or a
within-group top share on the program's score) carries it as ``metadata.personalign.decision_rule``;
:func:`load_program` reapplies it.
"""

from __future__ import annotations

import math
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from personalign.errors import ConfigurationError, DataError, PersonalignError
from personalign.programs._weights import read_npz  # noqa: F401  (the npz half of the loader)
from personalign.programs.program_schema import FORMAT, ProgramMetadata, check_document

PROGRAM_FILE = "program.json"
MAX_PROGRAM_BYTES = 256 * 1024**2


def package_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("personalign", "dspy", "litellm", "scikit-learn", "sentence-transformers", "numpy"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


def _sha256(path: Path) -> str:
    from personalign.data.digest import file_sha256

    return file_sha256(path)


def _weight_files(directory: Path) -> dict[str, str]:
    return {p.relative_to(directory).as_posix(): _sha256(p) for p in sorted(directory.rglob("*"))
            if p.is_file() and p.name != PROGRAM_FILE}


def _plain_dspy_state(program) -> dict[str, Any] | None:
    """The state plain DSPy loads: a program wrapping exactly one DSPy built-in module (e.g.
    ``self.judge = dspy.ChainOfThought(Sig)``) gives that module's state (what
    ``dspy.ChainOfThought(Sig).load`` reads); else a program with exactly one predictor gives the
    predictor's state (what ``dspy.Predict(Sig).load`` reads); else None."""
    from personalign.programs.dspy_signature import plain_module

    module = plain_module(program)
    return module.dump_state() if module is not None else None


def _dspy_document(program, meta: dict[str, Any]) -> dict[str, Any]:
    """``program.json``: the program's state, the plain-DSPy state (:func:`_plain_dspy_state`) at
    the top level when its keys do not clash, and DSPy's ``metadata.dependency_versions`` beside ours."""
    from dspy.utils.saving import get_dependency_versions

    state = program.dump_state()
    doc = dict(state)
    single = _plain_dspy_state(program)
    if single and not set(single) & set(state) and "metadata" not in single:
        doc.update(single)
    doc["metadata"] = {"dependency_versions": get_dependency_versions(),
                       "personalign": {**meta, "state_keys": list(state)}}
    return doc


def check_save_target(directory: str | Path) -> Path:
    """Check, before any work, that a program can be saved to ``directory``: absent, an empty
    directory, or a saved program (replaced whole), with a writable parent.

    Raises:
        ConfigurationError: a file; a non-empty directory that holds no saved program (never
            deleted); an unwritable location.
    """
    from personalign._paths import check_out_dir

    directory = Path(directory)
    if directory.is_dir() and any(directory.iterdir()) and not (directory / PROGRAM_FILE).is_file():
        raise ConfigurationError(f"cannot save a program to {directory}: the directory is not empty and holds "
                                 "no saved program; choose another directory")
    check_out_dir(directory, argument="directory", must_be_empty=False)
    if not os.access(directory.absolute().parent, os.W_OK) and directory.absolute().parent.exists():
        raise ConfigurationError(f"cannot save a program to {directory}: {directory.parent} is not writable")
    return directory


def save_program(program, directory: str | Path, *, stage: str, strategy: str, lm: str | None = None,
                 compile_info: dict | None = None, metrics: dict | None = None,
                 extra_files: dict[str, str] | None = None, stage_ref: str | None = None,
                 signature: dict | None = None) -> Path:
    """Save ``program`` as ``directory/program.json`` plus its weight files; returns the directory.

    Atomic: written into a sibling temporary directory that then replaces ``directory``, so a save
    onto an existing program directory leaves none of its old files, and an interrupted save leaves
    the old program (or nothing). ``extra_files`` (name -> text, e.g. ``prompt.md``) go in too.
    ``signature``: the stage's :meth:`~personalign.stages.Stage.signature_record`, checked
    when the program is loaded.

    Raises:
        ConfigurationError: ``directory`` is a file, or a non-empty directory that is not a saved
            program (never deleted), or cannot be written.
    """
    import orjson

    directory = check_save_target(directory)
    rule = getattr(program, "decision_rule", None)  # a compiled decision rule wraps the strategy
    program = getattr(program, "undecided", program)
    tmp = directory.parent / f".{directory.name}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        tmp.mkdir(parents=True)
    except OSError as exc:
        raise ConfigurationError(f"cannot save a program to {directory}: {exc.strerror or exc}") from None
    try:
        if hasattr(program, "save_weights") and getattr(program, "fitted", True):
            program.save_weights(tmp)
        weights = _weight_files(tmp)  # the files the program reads back; not the readable extras
        for name, text in (extra_files or {}).items():
            (tmp / name).write_text(text)
        meta: dict[str, Any] = {"format": FORMAT, "stage": stage, "stage_ref": stage_ref or stage,
                                "strategy": strategy, "lm": lm,
                                "compile": compile_info, "metrics": metrics, "versions": package_versions(),
                                "weights": weights}
        if rule is not None:
            meta["decision_rule"] = rule
        if signature is not None:
            meta["signature"] = signature
        data, sha = (compile_info or {}).get("data"), (compile_info or {}).get("data_sha256")
        if data and sha:  # as recorded at compile (a list of examples: its label, not a temporary file)
            meta["data"], meta["data_sha256"] = str(data), str(sha)
        elif data and Path(data).is_file():
            from personalign.data.digest import file_sha256

            meta["data"], meta["data_sha256"] = str(data), file_sha256(data)
        doc = _dspy_document(program, meta)
        options = (orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS
                   | orjson.OPT_SERIALIZE_NUMPY)
        (tmp / PROGRAM_FILE).write_bytes(orjson.dumps(doc, default=str, option=options))
        from personalign.programs.dspy_signature import FILE, signature_source

        (tmp / FILE).write_text(signature_source(program, doc, stage=stage, strategy=strategy, rule=rule),
                                encoding="utf-8")
        old = None
        if directory.exists():
            old = directory.parent / f".{directory.name}.old-{uuid.uuid4().hex[:8]}"
            directory.rename(old)
        tmp.rename(directory)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return directory


def read_metadata(directory: str | Path) -> tuple[Path, dict[str, Any]]:
    """``(path of program.json, metadata)``: the fields of :class:`ProgramMetadata` plus ``state``
    (the program's state dict). Reads the DSPy layout and the earlier top-level layout.

    Raises:
        DataError: no program.json, not a regular file, unreadable, invalid JSON, not a saved
            personalign program, or metadata that breaks the schema (names the key).
    """
    path, _, meta = _read_document(directory)
    return path, meta


def _read_document(directory: str | Path) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """``(path, the whole JSON object, metadata with state)``; see :func:`read_metadata`."""
    from personalign.data.files import loads_json, read_text

    directory = Path(directory)
    path = directory / PROGRAM_FILE if directory.is_dir() else directory
    if not path.exists():
        raise DataError(path, None, None, "no saved program here (program.json not found)")
    doc = loads_json(read_text(path, what="saved program", max_bytes=MAX_PROGRAM_BYTES), path)
    if not isinstance(doc, dict):
        raise DataError(path, None, None, "not a saved personalign program (expected a JSON object)")
    ours = (doc.get("metadata") or {}).get("personalign") if isinstance(doc.get("metadata"), dict) else None
    where = "metadata.personalign."
    if ours is None:  # format 1: our fields at the top level, the state under "state"
        if "strategy" not in doc:
            raise DataError(path, None, None, "not a saved personalign program (no metadata.personalign.strategy)")
        ours, state, where = {k: v for k, v in doc.items() if k != "state"}, doc.get("state"), ""
        if state is None:
            state = {}
        ours["format"] = 1
    else:
        if not isinstance(ours, dict):
            raise DataError(path, None, "metadata.personalign", "expected an object")
        keys = ours.get("state_keys")
        state = {k: doc[k] for k in keys if k in doc} if isinstance(keys, list) else \
            {k: v for k, v in doc.items() if k != "metadata"}
        if isinstance(keys, list) and (missing := [k for k in keys if k not in doc]):
            raise DataError(path, None, f"state.{missing[0]}", "missing")
    from personalign.programs.integrity import check_format

    check_format(ours, path, where)
    try:
        meta = ProgramMetadata.model_validate(ours).model_dump()
    except ValidationError as exc:
        from personalign.data.files import validation_to_data_error

        err = validation_to_data_error(exc, path, None)
        raise DataError(path, None, f"{where}{err.field}" if err.field else None, err.problem) from None
    if not isinstance(state, dict):
        raise DataError(path, None, "state", f"expected an object, got {type(state).__name__}")
    meta["state"] = state
    return path, doc, meta


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(value), type(value).__name__)


def _check_finite(value: Any, path: Path, key: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise DataError(path, None, key, f"{value} is not a finite number")
    if isinstance(value, dict):
        for k, v in value.items():
            _check_finite(v, path, f"{key}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_finite(v, path, f"{key}.{i}")


def _check_like(saved: Any, fresh: Any, path: Path, key: str) -> None:
    """``saved`` has the JSON type of ``fresh`` (null in ``fresh`` admits anything); objects recurse."""
    if fresh is None:
        return
    if _kind(saved) != _kind(fresh):
        raise DataError(path, None, key, f"expected {_kind(fresh)}, got {_kind(saved)}")
    if isinstance(fresh, dict):
        for k, v in fresh.items():
            if k not in saved:
                raise DataError(path, None, f"{key}.{k}", "missing")
            _check_like(saved[k], v, path, f"{key}.{k}")


def _check_annotations(cls, state: dict, path: Path) -> None:
    """State keys that are ``__init__`` parameters must fit their annotations (e.g. ``threshold:
    float | None``), checked strictly with pydantic."""
    import typing

    from pydantic import TypeAdapter

    try:
        hints = typing.get_type_hints(cls.__init__)
    except Exception:  # noqa: BLE001 -- unresolvable annotations: nothing to check against
        return
    for key, hint in hints.items():
        if key == "return" or key not in state:
            continue
        try:
            adapter = TypeAdapter(hint)
        except Exception:  # noqa: BLE001
            continue
        try:
            adapter.validate_python(state[key], strict=True)
        except ValidationError:
            raise DataError(path, None, f"state.{key}", f"expected {getattr(hint, '__name__', None) or hint}, "
                                                        f"got {_kind(state[key])} {state[key]!r:.60}") from None


def validate_state(program, state: dict, path: Path) -> None:
    """Check ``state`` against ``program``'s own fresh state (see the module docstring).

    Raises:
        DataError: a missing key, a wrong JSON type, an annotation mismatch or a non-finite number.
    """
    _check_finite(state, path, "state")
    fresh = program.dump_state()
    if unknown := [k for k in state if k not in fresh]:
        raise DataError(path, None, f"state.{unknown[0]}", f"not part of a saved {type(program).__name__} "
                                                           f"(its state keys: {', '.join(fresh) or 'none'})")
    for key, value in fresh.items():
        if key not in state:
            raise DataError(path, None, f"state.{key}", "missing")
        _check_like(state[key], value, path, f"state.{key}")
    _check_annotations(type(program), state, path)
    from personalign.programs.state_values import check_values

    check_values(program, state, path)  # ranges, strict types where the fresh state holds None


def load_program(directory: str | Path, *, stage=None):
    """Load and validate a program saved by :func:`save_program`. Returns ``(program, metadata)``.

    ``stage``: a stage reference (:func:`personalign.stages.resolve_stage`); None: the program's
    recorded ``stage_ref``, only when it is a built-in or entry-point stage (a program never makes
    personalign import a file or module the caller did not name;
    :func:`personalign.stages.ref.stage_for_program`).

    Raises:
        DataError: any problem with ``program.json`` or the weights (names the file and the key).
        ConfigurationError: a program of another stage than ``stage``; an unknown stage/strategy;
            a file/module stage not passed by the caller; another signature.
    """
    from personalign.stages.ref import stage_for_program

    from personalign.programs.integrity import check_listed_files

    path, doc, meta = _read_document(directory)
    st = stage_for_program(meta, stage, path)
    check_listed_files(path.parent, meta["weights"], path)  # every strategy: a listed file is checked
    registry = st.registry
    try:
        program = registry.create(meta["strategy"])
    except ConfigurationError as exc:
        raise DataError(path, None, "metadata.personalign.strategy", str(exc)) from None
    state = meta["state"]
    plain = doc if meta["format"] != 1 else {}  # format 1 keeps metadata, not a DSPy copy, at the top
    check_document(plain, state, [name for name, _ in program.named_predictors()], path)
    validate_state(program, state, path)
    try:
        program.load_state(state)
    except PersonalignError:
        raise
    except Exception as exc:  # noqa: BLE001 -- any failure of a strategy's load_state is bad input
        raise DataError(path, None, "state", f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}") from None
    if hasattr(program, "load_weights") and state.get("fitted", True):
        try:
            program.load_weights(path.parent)
        except PersonalignError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise DataError(path.parent, None, None, f"cannot load the weights: {type(exc).__name__}: "
                                                     f"{(str(exc).splitlines() or [''])[0][:200]}") from None
    from personalign.programs.state_values import check_ready

    check_ready(program, state, path)  # fitted, with its threshold: refused here, not once per row
    if meta.get("decision_rule"):
        from personalign.programs.decision import with_rule

        try:
            program = with_rule(program, meta["decision_rule"], st.output, st.decision_group,
                                getattr(program, "positive_output", True))
        except PersonalignError:
            raise
        except Exception as exc:  # noqa: BLE001 -- a malformed rule is bad input
            raise DataError(path, None, "metadata.personalign.decision_rule",
                            f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}") from None
    return program, meta


__all__ = ["PROGRAM_FILE", "ProgramMetadata", "check_save_target", "load_program", "package_versions",
           "read_metadata", "read_npz", "save_program", "validate_state"]
