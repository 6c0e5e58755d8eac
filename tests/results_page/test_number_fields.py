"""Every number a real compare result carries in its strategy rows and human row is a figure the
results page checks (:func:`personalign.results_page.checks.check_figures`, with the result's own
list :data:`personalign.evaluation.NUMBER_FIELDS`): set to text, each is refused naming its field.
A numeric field a result gains that the list lacks fails here."""

from __future__ import annotations

import json

import pytest

import personalign
from personalign.errors import DataError
from personalign.results_page.checks import FREE_FIELDS, check_figures
from tests.stages.test_human_row import annotated  # noqa: F401  (the fixture: 3-5 annotators a row)


def _numbers(obj, path: str):
    """(container, key, dotted field) of every number in ``obj`` outside :data:`FREE_FIELDS`."""
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for key, value in list(items):
        if isinstance(key, str) and key in FREE_FIELDS:
            continue
        field = f"{path}.{key}"
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            yield obj, key, field
        else:
            yield from _numbers(value, field)


def _unchecked(result: dict) -> set[str]:
    """The fields (list indices as ``#``) whose number ``check_figures`` lets through as text."""
    out = set()
    for top in ("strategies", "human"):
        for parent, key, field in list(_numbers(result.get(top), top)):
            value, parent[key] = parent[key], "not a number"
            try:
                check_figures(result, "r.json")
                out.add(".".join("#" if p.isdigit() else p for p in field.split(".")))
            except DataError as exc:  # an interval's item is refused as the interval
                assert field == exc.field or field.startswith(exc.field + "."), (field, exc.field)
            finally:
                parent[key] = value
    return out


@pytest.fixture
def human_results(annotated, tmp_path):  # noqa: F811
    stage, data = annotated
    return [json.loads(json.dumps(personalign.compare(str(stage), "all-yes,majority", data, cv=cv, n_boot=100,
                                                      out_dir=tmp_path / "out").to_dict(), default=str))
            for cv in (None, "groups")]


def test_every_number_of_a_result_is_a_checked_figure(single_split, cv_groups, human_results):
    results = [single_split[0], cv_groups[0], *human_results]
    assert all(r.get("human") for r in human_results) and not any(r.get("human") for r in results[:2])
    assert sum(1 for r in results for _ in _numbers(r["strategies"], "strategies")) > 100
    unchecked = set().union(*map(_unchecked, results))
    assert unchecked == set(), ("numbers the results page lets through unchecked: add their names to "
                                f"personalign.evaluation.NUMBER_FIELDS (or results_page.checks.FREE_FIELDS): {unchecked}")
