"""Every default the documentation states is the code's default (issue 37, item 10).

The pages (``README.md``, ``docs/*.md``, ``runs/README.md``), the docstrings the API reference
renders (every ``::: path`` directive) and the command line's help texts are read for statements
of a default, found by their phrasing, not from a hand list:

* an option's default in prose: ``--split`` (default ``dev``), ``--heartbeat`` seconds (default
  10), ``--ties negative`` (default), "``--a``, ``--b`` ... by default: ``x``, ``y``" -- checked
  against the typer command's own default (``typer.main.get_command``), or, for an option whose
  default is computed (``None`` in the signature), against the function that computes it
  (:func:`~tests.docs.conftest.computed`); a paragraph that names commands (``personalign sweep``, ```eval```) is held
  to every one of them that has the option, any other paragraph to every command that has it;
* a path under the runs folder stated as a default (``sqlite:///runs/optuna.db``) -- one of the
  defaults :func:`personalign.settings` and the label store compute;
* the default model, wherever a page, a rendered docstring or a ``--help`` text names one
  ("default the embedded Qwen2.5-Coder-1.5B", "``local/...`` (default)");
* the settings tables (a ``PERSONALIGN_*`` variable and a ``default`` column) -- against what the
  code does with the variable unset (:func:`_setting_defaults`);
* tables of a pydantic model's keys with a ``default`` column (the search-space schema);
* (``test_output_types.py``) every "``type = ... # bool | int | ...``" comment of a stage file.

A statement this file cannot check fails with what to add, so a new kind of default is checked
from the day it is documented.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
from pathlib import Path

import pytest

from tests.docs.conftest import (PAGES, ROOT, as_written, blocks, commands, commands_with, computed, literals, same,
                                 shown, tables)


# -- 1. option defaults in prose ------------------------------------------------------------------------

_OPT = r"`--[a-z][a-z0-9-]*(?: [^`]*)?`"
_SEP = r"(?:,\s+and\s+|,\s*|\s+and\s+)"
_VAL = r"(?:`[^`]+`|-?\d+(?:\.\d+)?\b)"
_TEXT = r"(?:[^`;.]|\.(?=\S))"  # no code span, no sentence end ("1.5B" stays inside)
OPTION_DEFAULT = re.compile(  # "`--opt` (default", "`--opt`, default", "`--opt` seconds (default"
    rf"(?P<opts>{_OPT}(?:{_SEP}{_OPT})*)(?:\s+[a-z]+)?[\s,(]*\bdefaults?\b(?:\s+(?:to|is))?:?"
    rf"(?:(?:{_TEXT}(?<!:)){{0,60}}:)?\s*(?P<vals>{_VAL}(?:{_SEP}{_VAL})*)")
OPTION_VALUE_DEFAULT = re.compile(r"`(?P<flag>--[a-z][a-z0-9-]*) (?P<val>[^`]+)`\s*\(default\)")


def _named_commands(text: str) -> set[str]:
    """Commands a paragraph names: ``personalign label next``, ``` `sweep` ```."""
    named = set()
    for path in commands():
        first = path.split()[0]
        if re.search(rf"personalign {re.escape(path)}\b", text) or re.search(rf"`{re.escape(path)}`", text) \
                or (path == first and re.search(rf"personalign {re.escape(first)}\b", text)):
            named.add(path)
    return named


def _option_statements() -> list[tuple[str, str, str, str]]:
    """``(where, flag, stated value, paragraph)`` of every option default stated on the pages."""
    found = []
    for page in PAGES:
        for line, text in blocks(page):
            where = f"{page.relative_to(ROOT)}:{line}"
            for m in OPTION_DEFAULT.finditer(text):
                flags = re.findall(r"`(--[a-z][a-z0-9-]*)", m.group("opts"))
                vals = [v.strip("`") for v in re.findall(_VAL, m.group("vals"))]
                if len(flags) == 1:
                    vals = vals[:1]
                assert len(flags) == len(vals), (f"{where}: cannot pair the options {flags} with the defaults {vals}; "
                                                 "write one default per option")
                found += [(where, f, v, text) for f, v in zip(flags, vals)]
            found += [(where, m.group("flag"), m.group("val"), text) for m in OPTION_VALUE_DEFAULT.finditer(text)]
    return found


OPTION_STATEMENTS = _option_statements()


def test_the_option_statements_are_found():
    """The reader finds the statements the pages make (a broken pattern would check nothing)."""
    flags = {flag for _, flag, _, _ in OPTION_STATEMENTS}
    assert {"--split", "--n-trials", "--heartbeat", "--grace", "--n-boot", "--tracking-uri", "--ties"} <= flags, flags


@pytest.mark.parametrize("where,flag,value,text", OPTION_STATEMENTS,
                         ids=[f"{w} {f} {v}" for w, f, v, _ in OPTION_STATEMENTS])
def test_a_stated_option_default_is_the_commands_default(where, flag, value, text, unset):
    options = commands_with(flag)
    assert options, f"{where}: {flag} is no option of any command"
    named = _named_commands(text) & set(options)  # a paragraph naming commands speaks of them, else of all
    held_to = {path: options[path] for path in (named or options)}
    actual = {}
    for path, param in held_to.items():
        default = param.default
        if default is None:
            assert flag in computed(), (f"{where}: {flag}'s default is computed by the command; add the function "
                                         f"that computes it to computed() in {Path(__file__).name}")
            default = computed()[flag]()
        actual[path] = default
    wrong = {path: d for path, d in actual.items() if not same(value, d, unset)}
    assert not wrong, (f"{where}: the docs say {flag} defaults to {value!r}; the code: "
                       + ", ".join(f"{path} {shown(d, unset)!r}" for path, d in wrong.items())
                       + ("" if named else " (the paragraph names no command, so it speaks of every command with "
                          f"{flag}: name the commands it means)"))


# -- 2. paths under the runs folder stated as a default ------------------------------------------------

RUNS_DEFAULT = re.compile(rf"\bdefault\b{_TEXT.replace('[^`;.]', '[^`;.]')}{{0,80}}?`(?P<path>(?:sqlite:///)?(?:\./|<)?runs>?/[^`]*)`")


def _runs_statements() -> list[tuple[str, str]]:
    return [(f"{page.relative_to(ROOT)}:{line}", m.group("path"))
            for page in PAGES for line, text in blocks(page) for m in RUNS_DEFAULT.finditer(text)]


RUNS_STATEMENTS = _runs_statements()


def test_the_runs_statements_are_found():
    assert {as_written(p) for _, p in RUNS_STATEMENTS} >= {"sqlite:///runs/mlflow.db", "sqlite:///runs/optuna.db"}


@pytest.mark.parametrize("where,path", RUNS_STATEMENTS, ids=[f"{w} {p}" for w, p in RUNS_STATEMENTS])
def test_a_stated_runs_default_is_one_the_code_computes(where, path, unset):
    from personalign.labels.store import default_store_url
    from personalign.settings import cache_dir, default_sweep_storage, default_tracking_uri, runs_dir

    computed = {shown(f(), unset) for f in (default_tracking_uri, default_sweep_storage, default_store_url,
                                             cache_dir, runs_dir)}
    assert as_written(path).rstrip("/") in computed, f"{where}: {path} is no default the code computes: {sorted(computed)}"


# -- 3. the default model -------------------------------------------------------------------------------

def _model_pattern() -> tuple[re.Pattern, dict[str, str]]:
    from personalign.lm import MODELS

    names = {}
    for name in MODELS:  # registry names, e.g. qwen2.5-coder-1.5b-instruct; model strings local/NAME
        short = name.removeprefix("local/").removesuffix("-instruct")
        names[short.lower()] = name if name.startswith("local/") else f"local/{name}"
    alias = "|".join(sorted((re.escape(s) for s in names), key=len, reverse=True))
    return re.compile(rf"(?:local/)?(?P<model>{alias})(?:-instruct)?", re.I), names


def _model_statements(text: str) -> list[str]:
    """The models ``text`` names as the default (forward: "default ... MODEL"; backward: "MODEL (default)")."""
    model, names = _model_pattern()
    found = []
    for m in re.finditer(r"(?<!previous )(?<!earlier )(?<!old )\bdefault\b(?![_)])", text, re.I):
        window = re.split(r"[;]|\.\s", text[m.end():m.end() + 70])[0]
        hit = model.search(window)
        if hit:
            found.append(names[hit.group("model").lower()])
    found += [names[h.group("model").lower()] for h in re.finditer(rf"{model.pattern}`*\s*\(default\)", text, re.I)]
    return found


def _rendered_docstrings() -> list[tuple[str, str]]:
    """``(where, docstring)`` of every object a ``::: path`` directive renders, with its public members."""
    out = []
    for page in PAGES:
        for path in re.findall(r"(?m)^::: ([\w.]+)", page.read_text(encoding="utf-8")):
            module, _, attr = path.rpartition(".")
            obj = getattr(importlib.import_module(module), attr)
            out.append((f"{path} ({page.name})", inspect.getdoc(obj) or ""))
            if inspect.isclass(obj):
                out += [(f"{path}.{k}", inspect.getdoc(v) or "") for k, v in vars(obj).items()
                        if not k.startswith("_") and inspect.getdoc(v)]
    return out


def _help_texts() -> list[tuple[str, str]]:
    out = []
    for path, cmd in commands().items():
        out.append((f"personalign {path} --help", cmd.help or ""))
        out += [(f"personalign {path} {'/'.join(p.opts)}", getattr(p, "help", None) or "") for p in cmd.params]
    return out


def _model_sources() -> list[tuple[str, str]]:
    pages = [(f"{page.relative_to(ROOT)}:{line}", text) for page in PAGES for line, text in blocks(page)]
    return pages + _rendered_docstrings() + _help_texts()


MODEL_STATEMENTS = [(where, name) for where, text in _model_sources() for name in _model_statements(text)]


def test_the_model_statements_are_found():
    wheres = " ".join(w for w, _ in MODEL_STATEMENTS)
    assert "docs/getting-started.md" in wheres and "personalign compare --lm" in wheres and "docs/relevance.md" in wheres, wheres


@pytest.mark.parametrize("where,name", MODEL_STATEMENTS, ids=[f"{w} {n}" for w, n in MODEL_STATEMENTS])
def test_a_stated_default_model_is_the_default_model(where, name, unset):
    from personalign.lm import default_model

    assert name == default_model(), f"{where}: names {name} as the default model; it is {default_model()}"


# -- 4. the settings tables ---------------------------------------------------------------------------

# a default cell without a literal value: what the words claim about the code's value (None: nothing)
SETTING_WORDS = {"all cores": lambda v: v == (os.cpu_count() or 1), "on": lambda v: v is True,
                 "off": lambda v: v is False, "(unset)": None, "the shipped default": None, "the installed file": None}


def _setting_defaults(runs: Path) -> dict[str, object]:
    """Each ``PERSONALIGN_*`` setting's value when unset, from the code that applies it."""
    from personalign.lm import LocalSettings, default_model
    from personalign.settings import cache_dir, models_dir, runs_dir
    from personalign.tracking.native import max_traces
    from tests.conftest import shared_data_dir

    local = LocalSettings.from_env()
    return {"RUNS_DIR": runs_dir(), "CACHE_DIR": cache_dir(), "MODELS_DIR": models_dir(), "N_CTX": local.n_ctx,
            "THREADS": local.n_threads, "SEED": local.seed, "KV_REUSE": local.reuse_prefix,
            "BATCH_DECODE": local.batch_decode, "MAX_TRACES": max_traces(), "LM": default_model(),
            "SHARED_DATA": os.path.relpath(shared_data_dir(), ROOT), "GGUF_<MODEL>": None}


def _setting_rows() -> list[tuple[str, str, str]]:
    rows = []
    for page in PAGES:
        for _, head, body in tables(page):
            if "default" not in head:
                continue
            col = head.index("default")
            for line, cells in body:
                m = re.fullmatch(r"`PERSONALIGN_([A-Z_<>]+)`", cells[0])
                if m and col < len(cells):
                    rows.append((f"{page.relative_to(ROOT)}:{line}", m.group(1), cells[col]))
    return rows


SETTING_ROWS = _setting_rows()


def test_the_settings_tables_are_found():
    pages = {w.split(":")[0] for w, _, _ in SETTING_ROWS}
    assert {"docs/getting-started.md", "docs/reliability.md"} <= pages, pages


@pytest.mark.parametrize("where,name,cell", SETTING_ROWS, ids=[f"{w} {n}" for w, n, _ in SETTING_ROWS])
def test_a_settings_table_states_the_codes_default(where, name, cell, unset):
    defaults = _setting_defaults(unset)
    assert name in defaults, (f"{where}: PERSONALIGN_{name} has no rule here; add what the code does with it unset "
                              f"to _setting_defaults() in {Path(__file__).name}")
    actual = defaults[name]
    values = literals(cell) or ([cell] if re.fullmatch(r"-?\d[\d,]*(\.\d+)?", cell) else [])
    if values:
        for value in values:
            assert same(value, actual, unset), (f"{where}: PERSONALIGN_{name} defaults to {value!r} in the docs, "
                                                 f"{shown(actual, unset)!r} in the code")
        return
    words = cell.strip().lower()
    assert words in SETTING_WORDS, (f"{where}: cannot check the default {cell!r} of PERSONALIGN_{name}: state it as a "
                                    f"`value`, or add what the words claim to SETTING_WORDS")
    check = SETTING_WORDS[words]
    assert check is None or check(actual), f"{where}: PERSONALIGN_{name} is {cell!r} in the docs, {actual!r} in the code"


# -- 5. tables of a pydantic model's keys ---------------------------------------------------------------

def _model_key_rows() -> list[tuple[str, str, str, str]]:
    """``(where, model path, key cell, default cell)`` of tables with ``key`` and ``default`` columns; the
    model is the last ``personalign....`` class named before the table."""
    rows = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8").splitlines()
        for line, head, body in tables(page):
            if not {"key", "default"} <= set(head):
                continue
            before = "\n".join(text[:line])
            named = re.findall(r"`(personalign(?:\.\w+)+)`", before)
            assert named, f"{page.name}:{line}: a key table names no model before it"
            rows += [(f"{page.relative_to(ROOT)}:{n}", named[-1], cells[head.index("key")], cells[head.index("default")])
                     for n, cells in body]
    return rows


MODEL_KEY_ROWS = _model_key_rows()


def test_the_key_tables_are_found():
    assert any(m.endswith("SpaceFile") for _, m, _, _ in MODEL_KEY_ROWS)


def _written_value(text: str):
    text = text.strip().strip("`")
    if text.lower() == "none":
        return None
    if re.fullmatch(r'"[^"]*"', text):
        return text.strip('"')
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return ...  # words: a default computed elsewhere


@pytest.mark.parametrize("where,model,keys,default", MODEL_KEY_ROWS, ids=[f"{w} {k}" for w, _, k, _ in MODEL_KEY_ROWS])
def test_a_key_tables_default_is_the_models_default(where, model, keys, default):
    module, _, attr = model.rpartition(".")
    cls = getattr(importlib.import_module(module), attr)
    names = literals(keys)
    section = None
    written = [v.strip() for v in default.split(",")] if len(names) > 1 else [default]
    assert len(written) == len(names), f"{where}: {len(names)} keys, {len(written)} defaults"
    for name, value in zip(names, written):
        m = re.fullmatch(r"\[([\w.-]+)\]\s*(\S+)", name)
        if m:
            section, name = m.group(1), m.group(2)
        section_name = section.split(".")[0] if section else None
        instance = cls.model_fields[section_name].default if section_name else cls()
        if section_name and (name.isupper() or "." in section):  # [optimizer.NAME] KEY: the section's own default
            actual = instance
        elif section_name:
            actual = getattr(instance, name)
        else:
            actual = cls.model_fields[name].default
        expected = _written_value(value)
        if expected is ...:
            assert actual is None, f"{where}: {name}: the docs describe a computed default, the model's is {actual!r}"
        elif expected is None:
            assert actual in (None, {}, []), f"{where}: {name}: the docs say none, the model's default is {actual!r}"
        else:
            assert actual == expected, f"{where}: {name} defaults to {value} in the docs, {actual!r} in {model}"
