"""The run record (personalign/record.py) and benchmarks' write_results."""

from __future__ import annotations

import json
import sys

import pytest

from tests.conftest import DEMO, ROOT


def _fig(key="a.f1", value=0.5, **kw):
    from personalign.record import figure

    return figure(key, "A's F1", value, metric="f1", **kw)


def test_record_has_every_field_of_the_contract():
    from personalign.data.digest import file_sha256
    from personalign.lm import MODELS
    from personalign.record import KEYS, PACKAGES, run_record

    rec = run_record("demo", [_fig(ci=[0.4, 0.6], n=27)], command="personalign compare relevance",
                     model="local/qwen2.5-coder-0.5b-instruct", adapter="JSONAdapter", data=DEMO,
                     resampling={"unit": "prompt_id", "n_clusters": 7, "n_boot": 1000}, stage="relevance")
    assert list(rec) == list(KEYS)
    assert set(rec["versions"]) == set(PACKAGES) and rec["versions"]["dspy"][0].isdigit()
    assert rec["model"] == {"name": "local/qwen2.5-coder-0.5b-instruct",
                            "sha256": MODELS["qwen2.5-coder-0.5b-instruct"].split.sha256}
    assert rec["data"] == {"path": str(DEMO), "sha256": file_sha256(DEMO)}
    assert len(rec["git_commit"]) >= 40 or rec["git_commit"] == "unknown"
    assert rec["machine"]["cpu_count"] >= 1 and rec["date"][:2] == "20"
    assert rec["figures"][0] == {"key": "a.f1", "label": "A's F1", "strategy": None, "metric": "f1", "value": 0.5,
                                 "ci": [0.4, 0.6], "n": 27, "note": None}


@pytest.mark.parametrize("bad, needle", [
    ({"value": float("nan")}, "figures[0].value"),
    ({"ci": [0.6, 0.4]}, "figures[0].ci"),
    ({"n": -1}, "figures[0].n"),
])
def test_bad_figure_names_the_field_and_writes_nothing(tmp_path, bad, needle):
    from personalign.record import run_record, write_record

    good = _fig()
    rec = run_record("x", [good], command="c")
    rec["figures"] = [{**good, **bad}]
    with pytest.raises(ValueError) as err:
        write_record(tmp_path / "x.json", rec)
    assert needle in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_duplicate_figure_keys_are_refused():
    from personalign.record import run_record

    with pytest.raises(ValueError, match="appears twice"):
        run_record("x", [_fig(), _fig()], command="c")


def test_mlflow_tags_carry_versions_and_provenance():
    from personalign.record import mlflow_tags, run_record

    tags = mlflow_tags(run_record("x", [], command="c", model="openai/gpt-x"))
    assert tags["personalign.model"] == "openai/gpt-x" and tags["personalign.model_sha256"] == "None"
    assert tags["personalign.version.optuna"] and tags["personalign.git_commit"]


def test_benchmarks_write_results(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    sys.modules.pop("_common", None)
    from _common import write_results

    written = write_results("unit", [_fig("b.f1", 0.7)], data=DEMO, stage="relevance", out_dir=tmp_path)
    rec = json.loads((tmp_path / "unit.json").read_text())
    assert rec == written and rec["name"] == "unit" and rec["figures"][0]["value"] == 0.7
    assert rec["data"]["sha256"] and rec["stage"] == "relevance"


def test_name_is_a_slug_and_the_file_stem(tmp_path):
    from personalign.record import run_record, write_record

    with pytest.raises(ValueError, match="lower-case letters, digits and single hyphens"):
        run_record("relevance_lopo", [_fig()], command="c")
    rec = run_record("relevance-lopo", [_fig()], command="c")
    with pytest.raises(ValueError, match="differs from the file name"):
        write_record(tmp_path / "other.json", rec)
    assert write_record(tmp_path / "relevance-lopo.json", rec).exists()


def test_shipped_records_pass_the_contract():
    from personalign.record import validate

    for path in (ROOT / "benchmarks" / "results").glob("*.json"):
        rec = json.loads(path.read_text())
        validate(rec)
        assert rec["name"] == path.stem


def test_slug_makes_any_stage_or_study_name_a_record_name():
    from personalign.record import NAME, slug

    for text in ("compare-My_Stage", "sweep-study 1/2", "___"):
        assert NAME.match(slug(text)), slug(text)
    assert slug("sweep-My_Study") == "sweep-my-study"


def test_group_nouns_are_pluralised_in_english():
    from personalign.record import plural

    assert [plural(n) for n in ("prompt", "family", "topic", "class", "day")] == [
        "prompts", "families", "topics", "classes", "days"]
