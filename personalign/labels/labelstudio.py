"""Label Studio's task/annotation JSON, to and from canonical rows.

Label Studio (https://labelstud.io/guide/task_format) keeps a project as a JSON array of tasks::

    {"id": 1, "data": {"id": "demo-000", "prompt": "...", "attribute": "...", ...},
     "annotations": [{"completed_by": {"email": "ann01@personalign.invalid"}, "was_cancelled": false,
                      "result": [{"from_name": "relevant", "to_name": "prompt", "type": "choices",
                                  "value": {"choices": ["Yes"]}}], ...}]}

Export: ``data`` is the canonical row without ``annotations``; each annotator's label is one
annotation whose single ``choices`` result names the stage's output field (``from_name``) and its
first input field (``to_name``), and the choice's text (``Yes``/``No`` for a bool output, the
value itself for a list of labels). ``completed_by`` is ``{"email": ...}`` -- how Label Studio
matches an imported annotation to one of its users -- with ``NAME@personalign.invalid`` for an
annotator name that is not an e-mail address (``.invalid`` is a reserved, never-routable domain).
:func:`labeling_config` is the matching Label Studio labeling config.

Import reads such a file (a task array, or one task object), Label Studio's own JSON exports
included: cancelled (skipped) and empty annotations are not labels; the ``choices`` result of the
output field (or the only ``choices`` result) is the label, as
:meth:`~personalign.labels.spec.LabelSpec.from_text` reads it. When one annotator annotated a task
twice, the later annotation counts. An annotation's annotator is, in this order:

* the name an explicit mapping gives its user id or e-mail (``--annotator-map 2=alice,3=bob@lab.org``);
* its ``completed_by`` e-mail (``@personalign.invalid`` removed) -- an export with user details
  (``label-studio export``, an export snapshot) expands ``completed_by`` to ``{"id", "email", ...}``,
  and a bare user id elsewhere in the file takes the e-mail its id has there;
* else ``ls-user-ID``: Label Studio's default JSON export writes bare user ids. A person who also
  labelled under their name (``label serve``) would then be counted twice, so such an import is
  refused when the store holds named annotators, and any id the mapping leaves out is refused.

Label Studio's JSON-MIN export is refused with one line saying so: it writes Label Studio's task id
over the row's ``id``, so its labels cannot be matched to the rows.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

from personalign.errors import DataError
from personalign.labels.rowfile import ANNOTATIONS

DOMAIN = "@personalign.invalid"
USER_ID_NAME = re.compile(r"ls-user-\d+")
"""The annotator name of a Label Studio user id that came without an e-mail (``ls-user-ID``)."""


def _email(annotator: str) -> str:
    return annotator if "@" in annotator else annotator + DOMAIN


def _choice_text(spec, value: Any) -> str:
    return next(c.text for c in spec.choices if type(c.value) is type(value) and c.value == value)


def to_tasks(spec, rows: list[dict[str, Any]], times: dict | None = None) -> list[dict[str, Any]]:
    """Label Studio tasks of canonical ``rows`` (``times``: ``(row_id, annotator) -> datetime`` of
    stored labels, written as ``created_at``). Raises LabelValueError for an annotation the stage
    does not allow."""
    times = times or {}
    tasks, n_ann = [], 0
    for i, row in enumerate(rows, start=1):
        data = {k: v for k, v in row.items() if k != ANNOTATIONS}
        anns = []
        for who, value in sorted((row.get(ANNOTATIONS) or {}).items()):
            n_ann += 1
            result = {"id": f"r{n_ann}", "from_name": spec.output.name, "to_name": spec.input_names[0],
                      "type": "choices", "origin": "manual",
                      "value": {"choices": [_choice_text(spec, spec.check(value))]}}
            ann = {"id": n_ann, "completed_by": {"email": _email(who)}, "result": [result],
                   "was_cancelled": False, "ground_truth": False, "task": i}
            when = times.get((row["id"], who))
            if when is not None:
                ann["created_at"] = ann["updated_at"] = when.isoformat().replace("+00:00", "Z")
            anns.append(ann)
        tasks.append({"id": i, "data": data, "annotations": anns})
    return tasks


def labeling_config(spec) -> str:
    """A Label Studio labeling config (XML) for the stage: each input as a ``<Header>`` and a
    ``<Text>``, the output as single ``<Choices>`` with the page's hotkeys."""
    lines = ["<View>"]
    for f in spec.inputs:
        head = f.title + (f" ({f.description})" if f.description else "")
        lines += [f"  <Header value={quoteattr(head)}/>",
                  f"  <Text name={quoteattr(f.name)} value={quoteattr('$' + f.name)}/>"]
    lines.append(f"  <Header value={quoteattr(spec.output.title + '?')}/>")
    lines.append(f"  <Choices name={quoteattr(spec.output.name)} toName={quoteattr(spec.input_names[0])} "
                 'choice="single" showInline="true" required="true">')
    for c in spec.choices:
        key = f" hotkey={quoteattr(c.key)}" if c.key else ""
        lines.append(f"    <Choice value={quoteattr(c.text)}{key}/>")
    lines += ["  </Choices>", "</View>"]
    return "\n".join(lines) + "\n"


def parse_annotator_map(text: str | None) -> dict[str, str]:
    """``{user id or e-mail: annotator name}`` of ``--annotator-map 2=alice,3=bob@lab.org``.

    Raises:
        ConfigurationError: an item that is not ``KEY=NAME``, a key twice, a name that is not one.
    """
    from personalign.errors import ConfigurationError
    from personalign.labels.queue import check_annotator
    from personalign.labels.spec import LabelValueError

    out: dict[str, str] = {}
    for item in (text or "").split(","):
        key, eq, name = (part.strip() for part in item.partition("="))
        if not item.strip():
            continue
        if not eq or not key or not name:
            raise ConfigurationError(f"--annotator-map: {item.strip()!r} is not ID=NAME (e.g. 2=alice,3=bob@lab.org)")
        if key in out:
            raise ConfigurationError(f"--annotator-map: {key} is mapped twice")
        try:
            out[key] = check_annotator(name)
        except LabelValueError as exc:
            raise ConfigurationError(f"--annotator-map {key}={name}: {exc}") from None
    return out


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _users(tasks: list) -> dict[int, str]:
    """``{user id: e-mail}`` of the expanded ``completed_by`` objects in ``tasks``."""
    out = {}
    for task in tasks:
        for ann in (task.get("annotations") or task.get("completions") or []) if isinstance(task, dict) else []:
            who = ann.get("completed_by") if isinstance(ann, dict) else None
            if isinstance(who, dict) and _is_id(who.get("id")) and isinstance(who.get("email"), str) and who["email"]:
                out[who["id"]] = who["email"]
    return out


def _named(names: dict[str, str], uid: Any, email: str | None) -> str | None:
    """The mapping's name of a user id or e-mail (with or without ``@personalign.invalid``)."""
    keys = ([str(uid)] if _is_id(uid) else []) + ([email, email.removesuffix(DOMAIN)] if email else [])
    return next((names[k] for k in keys if k in names), None)


def _annotator(completed_by: Any, where, users: dict[int, str], names: dict[str, str]) -> str:
    """The annotator of an annotation (see the module doc): the mapping's name of its user id or
    e-mail, its e-mail, or ``ls-user-ID``."""
    from personalign.labels.queue import check_annotator
    from personalign.labels.spec import LabelValueError

    if isinstance(completed_by, dict):
        name = completed_by.get("email") or completed_by.get("username")
        if not isinstance(name, str) or not name:
            raise where("completed_by", "has no email; personalign needs to know who labelled")
        name = _named(names, completed_by.get("id"), name) or name.removesuffix(DOMAIN)
    elif _is_id(completed_by):
        email = users.get(completed_by)
        name = _named(names, completed_by, email) or (email.removesuffix(DOMAIN) if email else f"ls-user-{completed_by}")
    elif completed_by is None:
        raise where("completed_by", "missing; personalign needs to know who labelled")
    else:
        raise where("completed_by", f"expected a user object or id, got {type(completed_by).__name__}")
    try:
        return check_annotator(name)
    except LabelValueError as exc:
        raise where("completed_by", str(exc)) from None


def _label(spec, ann: dict, where) -> Any:
    """The label of one annotation, or None when it holds none (cancelled, empty)."""
    from personalign.labels.spec import LabelValueError

    if ann.get("was_cancelled"):
        return None
    result = ann.get("result")
    if not isinstance(result, list):
        raise where("result", "expected a list of results")
    picks = [r for r in result if isinstance(r, dict) and r.get("type") == "choices"]
    named = [r for r in picks if r.get("from_name") == spec.output.name]
    if not picks:
        return None
    if not named and len({r.get("from_name") for r in picks}) > 1:
        raise where("result", f"several choices results and none from_name '{spec.output.name}'")
    pick = (named or picks)[-1]
    choices = (pick.get("value") or {}).get("choices") if isinstance(pick.get("value"), dict) else None
    at = f"result.{result.index(pick)}.value.choices"
    if not isinstance(choices, list) or len(choices) != 1:
        raise where(at, f"expected one choice, got {choices!r}"[:160])
    try:
        return spec.from_text(choices[0])
    except LabelValueError as exc:
        raise where(at, str(exc)) from None


def _row(spec, task: dict, where) -> dict[str, Any]:
    data = task.get("data")
    if not isinstance(data, dict):
        raise where("data", "missing or not an object")
    row = dict(data)
    rid = row.get("id", task.get("id"))
    if isinstance(rid, int) and not isinstance(rid, bool):
        rid = str(rid)
    if not isinstance(rid, str) or not rid.strip():
        raise where("data.id", "missing (and no task id): every row needs an id")
    row["id"] = rid
    for name in spec.input_names:
        if row.get(name) is None:
            raise where(f"data.{name}", f"missing (an input of stage {spec.stage}: {', '.join(spec.input_names)})")
    if row.get(ANNOTATIONS) is not None and not isinstance(row[ANNOTATIONS], dict):
        raise where(f"data.{ANNOTATIONS}", "expected an object {annotator: label}")
    return row


def read_tasks(path: str | Path, spec, *, names: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Canonical rows (with ``annotations``) of a Label Studio JSON file, in task order; ``names``:
    ``{user id or e-mail: annotator}`` (:func:`parse_annotator_map`).

    Raises:
        DataError: one line naming the file, the task's line and the field: not a task array,
            Label Studio's JSON-MIN export, a task without ``data`` or an id, a missing input field,
            an annotation without an annotator, a user id ``names`` does not map (when given), a
            choice the stage does not allow, two tasks with one id.
    """
    return _read(path, spec, names or {})[0]


def _read(path, spec, names: dict[str, str]) -> tuple[list[dict[str, Any]], dict]:
    """``(rows, {user id: where})`` of :func:`read_tasks`: the user ids left as ``ls-user-ID``, each
    with a function making the DataError of its first annotation (refused here when ``names`` is
    given)."""
    from personalign.data.files import array_element_lines, read_json

    doc = read_json(path)
    tasks = [doc] if isinstance(doc, dict) else doc
    if not isinstance(tasks, list):
        raise DataError(path, None, None, "expected a JSON array of Label Studio tasks")
    lines = array_element_lines(path, len(tasks)) if isinstance(doc, list) else [1]
    first = tasks[0] if tasks else None
    if isinstance(first, dict) and "data" not in first and {"annotator", "annotation_id"} & set(first):
        raise DataError(path, lines[0], "[0]", "this is Label Studio's JSON-MIN export, which writes Label Studio's "
                        "task id over each row's id, so its labels cannot be matched to the rows; export the "
                        "project as JSON")
    rows, seen, users, unmapped = [], {}, _users(tasks), {}
    for i, task in enumerate(tasks):
        def where(fld: str, problem: str, _i=i, _pre="") -> DataError:
            return DataError(path, lines[_i], f"[{_i}].{_pre}{fld}".rstrip("."), problem)

        if not isinstance(task, dict):
            raise DataError(path, lines[i], f"[{i}]", f"expected a task object, got {type(task).__name__}")
        row = _row(spec, task, where)
        if row["id"] in seen:
            raise where("data.id", f"duplicate id {row['id']!r} (first in task {seen[row['id']]})")
        seen[row["id"]] = i
        merged = dict(row.get(ANNOTATIONS) or {})
        anns = task.get("annotations", task.get("completions")) or []
        if not isinstance(anns, list):
            raise where("annotations", "expected a list")
        for j, ann in enumerate(anns):
            def at(fld: str, problem: str, _i=i, _j=j) -> DataError:
                return where(fld, problem, _i, f"annotations.{_j}.")

            if not isinstance(ann, dict):
                raise at("", "expected an annotation object")
            value = _label(spec, ann, at)
            if value is not None:
                uid = ann.get("completed_by")
                who = _annotator(uid, at, users, names)
                if _is_id(uid) and who == f"ls-user-{uid}" and uid not in unmapped:  # no e-mail, no name
                    unmapped[uid] = lambda problem, _at=at: _at("completed_by", problem)
                merged[who] = value
        if merged:
            row[ANNOTATIONS] = merged
        rows.append(row)
    if names and unmapped:
        uid, err = next(iter(unmapped.items()))
        raise err(f"Label Studio user id {uid} is not in --annotator-map and the file has no e-mail for it "
                  f"(ids without one: {', '.join(map(str, unmapped))})")
    return rows, unmapped


def export_label_studio(rows_path, out_path, stage, *, store_url: str | None = None,
                        config_path: str | Path | None = None):
    """Write ``rows_path`` with the store's labels of ``stage`` as Label Studio tasks at
    ``out_path`` (and the labeling config at ``config_path``), atomically; returns the
    :class:`~personalign.labels.export.Exported`. Raises what
    :func:`~personalign.labels.export.merge_labels` raises."""
    from personalign.data.files import check_output, write_text
    from personalign.labels.export import merge_labels
    from personalign.labels.spec import label_spec
    from personalign.stages import resolve_stage
    from personalign.record import write_json

    spec = label_spec(resolve_stage(stage))
    target = check_output(out_path)
    config = None if config_path is None else check_output(config_path, argument="config")
    exported = merge_labels(rows_path, store_url=store_url, stage=spec.stage, spec=spec)
    write_json(target, to_tasks(spec, exported.rows, exported.times))
    if config is not None:
        write_text(config, labeling_config(spec))
    return exported


def import_label_studio(path, stage, *, out_path=None, store_url: str | None = None, replace: bool = False,
                        names: dict[str, str] | None = None) -> dict:
    """Read Label Studio tasks (:func:`read_tasks`, ``names`` its mapping) and write them as
    canonical JSONL at ``out_path`` and/or put their labels into the store at ``store_url`` (one
    transaction: all or none). A stored label that differs from the file's is kept unless ``replace``.

    Returns ``{"rows", "labels", "annotators", "added", "same", "replaced"}`` (the last three: in the
    store). Raises DataError for a bad task, or for user ids without an e-mail (``ls-user-ID``) when
    the store holds named annotators (a person would be counted twice); ConfigurationError for
    neither output or differing stored labels without ``replace``; StoreError. Nothing is written then.
    """
    from personalign.data.digest import file_sha256
    from personalign.data.files import check_output, write_jsonl
    from personalign.errors import ConfigurationError
    from personalign.labels.spec import label_spec
    from personalign.labels.store import LabelStore
    from personalign.stages import resolve_stage

    if out_path is None and store_url is None:
        raise ConfigurationError("label import: give --out ROWS.jsonl, --store URL, or both")
    spec = label_spec(resolve_stage(stage))
    target = None if out_path is None else check_output(out_path)
    rows, unmapped = _read(path, spec, names or {})
    labels = [(r["id"], who, v) for r in rows for who, v in (r.get(ANNOTATIONS) or {}).items()]
    facts = {"rows": len(rows), "labels": len(labels), "annotators": sorted({w for _, w, _ in labels}),
             "added": 0, "same": 0, "replaced": 0}
    if store_url is not None:
        store = LabelStore(store_url, write=True)
        try:
            _refuse_unnamed(unmapped, store)
            stored = {(lab.row_id, lab.annotator): lab.value for lab in store.labels(spec.stage) if not lab.skipped}
            differ = [(r, w, v) for r, w, v in labels if (r, w) in stored and stored[(r, w)] != v]
            if differ and not replace:
                r, w, v = differ[0]
                raise ConfigurationError(f"{len(differ)} labels in {path} differ from the store's (first: row {r!r}, "
                                         f"annotator {w}: store {stored[(r, w)]!r}, file {v!r}); nothing was written; "
                                         "--replace overwrites them")
            sha = file_sha256(path)
            new = [(spec.stage, r, w, v, sha) for r, w, v in labels if stored.get((r, w), object()) != v]
            facts["same"], facts["replaced"] = len(labels) - len(new), len(differ)
            facts["added"] = len(new) - len(differ)
            store.register_rows(spec.stage, sha, str(path), len(rows))
            store.put_many(new)
        finally:
            store.close()
    if target is not None:
        write_jsonl(target, rows)
    return facts


def _refuse_unnamed(unmapped: dict, store) -> None:
    """Raise DataError when the file leaves user ids (``unmapped``, of :func:`_read`) as
    ``ls-user-ID`` and ``store`` holds named annotators: the people labelling under a name would be
    counted again under their id."""
    named = [a for a in store.annotators() if not USER_ID_NAME.fullmatch(a)]
    if not unmapped or not named:
        return
    uid, err = next(iter(unmapped.items()))
    ids = ("user ids " if len(unmapped) > 1 else "user id ") + ", ".join(map(str, unmapped))
    raise err(f"Label Studio {ids} without an e-mail (Label Studio's default JSON export), and the store "
              f"holds named annotators ({', '.join(named[:5])}{' ...' if len(named) > 5 else ''}): as ls-user-{uid} a "
              f"person would be counted twice; nothing was written; export with user details (label-studio export "
              f"PROJECT JSON) or pass --annotator-map {','.join(f'{i}=NAME' for i in list(unmapped)[:3])}")


__all__ = ["DOMAIN", "USER_ID_NAME", "export_label_studio", "import_label_studio", "labeling_config",
           "parse_annotator_map", "read_tasks", "to_tasks"]
