"""Issue 38 item 8 (the parts outside the stage-file code): values that crashed or passed silently.

* integers in settings are plain digits: ``PERSONALIGN_N_CTX='4096.0'`` and ``'4_096'`` are refused;
* ``--lm-kwargs`` values of known keys are typed (``num_retries`` an integer >= 0, ``timeout``
  > 0, ``temperature``/``top_p`` numbers, ``max_tokens`` an integer): one line, not a TypeError;
* a lone surrogate (``"\\ud800"``) in an id or an input is refused at read, one line naming the
  file, the line and the field: tracked ``compare`` crashed inside MLflow and ``predict batch``
  after printing partial JSONL;
* NaN / Infinity gold labels are refused at read; a non-finite figure is written as ``null``
  (listed under ``non_finite_as_null``): no run writes a NaN or Infinity literal;
* a group or unit value that is an object, a list, a boolean or a float is refused.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from personalign.errors import DataError
from tests.reliability.hostile import DATA, STAGE, refused_cleanly, run_cli

COMPARE = ("compare", str(STAGE), "--data", str(DATA), "--strategies", "majority")


def _strict_json(text: str):
    """``json.loads`` that refuses NaN / Infinity (what other JSON readers do)."""
    def refuse(token):
        raise ValueError(f"non-JSON number {token}")
    return json.loads(text, parse_constant=refuse)


def _rows(path: Path, change) -> Path:
    rows = [json.loads(x) for x in DATA.read_text().splitlines() if x.strip()]
    change(rows)
    path.write_text("".join(json.dumps(r, ensure_ascii=True) + "\n" for r in rows))
    return path


# --- settings and kwargs ------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["4096.0", "4_096", "+4096", "1e3", "0x1000", "\u0664\u0660\u0669\u0666"])
def test_integer_settings_are_plain_digits(tmp_path, value):
    refused_cleanly(tmp_path, *COMPARE, "--no-track", env={"PERSONALIGN_N_CTX": value},
                    needles=("PERSONALIGN_N_CTX=", "an integer from 512 to 32768"))


def test_integer_setting_in_plain_digits_still_reads(monkeypatch):
    from personalign.settings import env_settings

    monkeypatch.setenv("PERSONALIGN_N_CTX", " 4096 ")
    monkeypatch.setenv("PERSONALIGN_SEED", "0")
    assert env_settings().N_CTX == 4096 and env_settings().SEED == 0


KWARGS = [('{"num_retries": "x"}', "'num_retries' must be an integer"), ('{"num_retries": -1}', "num_retries"),
          ('{"num_retries": true}', "num_retries"), ('{"timeout": "x"}', "'timeout' must be a number of seconds > 0"),
          ('{"timeout": 0}', "timeout"), ('{"timeout": 1e999}', "timeout"), ('{"temperature": "hot"}', "temperature"),
          ('{"top_p": 1.5}', "top_p"), ('{"max_tokens": 1.5}', "max_tokens"), ('{"max_tokens": 0}', "max_tokens")]


@pytest.mark.parametrize("kwargs,needle", KWARGS, ids=[k for k, _ in KWARGS])
def test_lm_kwargs_of_the_wrong_type_are_one_line(tmp_path, kwargs, needle):
    refused_cleanly(tmp_path, "compare", str(STAGE), "--data", str(DATA), "--strategies", "predict", "--lm",
                    "mock/x", "--lm-kwargs", kwargs, "--no-track", mock=True, needles=("--lm-kwargs", needle))


def test_num_retries_in_lm_kwargs_reaches_the_model(tmp_path, monkeypatch, mock_handler):
    """The TypeError case ('got multiple values for keyword argument num_retries') now runs."""
    proc, _ = run_cli(tmp_path, "compare", str(STAGE), "--data", str(DATA), "--strategies", "predict", "--lm",
                      "mock/x", "--lm-kwargs", '{"num_retries": 1, "timeout": 5}', "--no-track", "--json", mock=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    from personalign.lm import make_lm

    monkeypatch.setenv("PERSONALIGN_LM_KWARGS", '{"num_retries": 4}')
    assert make_lm("mock/x", load=False).transient_retries == 4  # the one retry policy's count (DSPy's own: 0)


# --- lone surrogates ----------------------------------------------------------------------------

def test_lone_surrogate_id_is_refused_before_tracked_compare(tmp_path):
    data = _rows(tmp_path / "d.jsonl", lambda rows: rows[3].__setitem__("id", "x\ud800"))
    refused_cleanly(tmp_path, "compare", str(STAGE), "--data", str(data), "--strategies", "majority",
                    needles=("d.jsonl:4", "field 'id'", "surrogate"))


def test_lone_surrogate_input_is_refused_before_predict_batch_prints(tmp_path):
    program = tmp_path / "p"
    proc, _ = run_cli(tmp_path, "compile", str(STAGE), "--strategy", "majority", "--data", str(DATA), "--out",
                      str(program), "--no-track")
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = _rows(tmp_path / "u.jsonl", lambda rows: rows[5].__setitem__("option", "a \udc00 b"))
    line, _ = refused_cleanly(tmp_path, "predict", "batch", str(STAGE), "--program", str(program), "--data",
                              str(data), needles=("u.jsonl:6", "field 'option'", "surrogate"))


def test_surrogate_pairs_are_text():
    from personalign.data.strict_json import check_json_values

    text = '{"a": "\\ud83d\\ude00"}'
    check_json_values(json.loads(text), text, "f", 1)  # an emoji: no error


# --- non-finite numbers -------------------------------------------------------------------------

SCORED = """name = "rate-it"
summary = "How well does an option fit?"
instructions = "Rate how well the option fits the preference, 0 to 1."
kind = "scored"
label = "rating"
group_key = "topic"
metric = "metric.py:closeness"

[inputs]
preference = "the user's stated preference"
option = "one recommended option"

[output]
name = "rating"
type = "float"
description = "fit from 0 to 1"
"""


def _scored(tmp_path: Path, gold=lambda i: [0.0, 0.5, 1.0][i % 3], metric="1.0 - abs(example.rating - pred.rating)"):
    (tmp_path / "stage.toml").write_text(SCORED)
    (tmp_path / "metric.py").write_text(f"def closeness(example, pred, trace=None):\n    return {metric}\n")
    rows = [{"id": f"r{i}", "split": ["train", "val"][i % 2], "topic": f"t{i % 4}", "preference": "p",
             "option": f"o{i}", "rating": gold(i)} for i in range(24)]
    text = "".join(json.dumps(r) + "\n" for r in rows)  # json.dumps writes NaN / Infinity for such floats
    (tmp_path / "data.jsonl").write_text(text)
    return tmp_path / "stage.toml", tmp_path / "data.jsonl"


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")], ids=["NaN", "Infinity", "-Infinity"])
def test_non_finite_gold_of_a_scored_stage_is_refused(tmp_path, bad):
    stage, data = _scored(tmp_path, gold=lambda i: bad if i == 7 else 0.5)
    refused_cleanly(tmp_path, "compare", str(stage), "--data", str(data), "--strategies", "majority", "--no-track",
                    needles=("data.jsonl:8", "field 'rating'", "not a finite number"))


def test_an_overflowing_number_is_refused(tmp_path):
    data = _rows(tmp_path / "d.jsonl", lambda rows: None)
    data.write_text(data.read_text().replace('"topic": "food"', '"topic": 1e400', 1))
    refused_cleanly(tmp_path, *COMPARE[:3], str(data), "--strategies", "majority", "--no-track",
                    needles=("d.jsonl:1", "field 'topic'", "not a finite number"))


def test_metric_returning_nan_is_one_line(tmp_path):
    stage, data = _scored(tmp_path, metric='float("nan")')
    proc, _ = run_cli(tmp_path, "compare", str(stage), "--data", str(data), "--strategies", "majority", "--no-track")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    last = proc.stderr.rstrip().splitlines()[-1]  # after the progress bar and the import note
    assert last.startswith("error: ") and "metric 'closeness' returned nan for example 'r1'" in last, last
    assert not (tmp_path / "runs" / "compare").exists()  # no result, no figure


def test_non_finite_figures_are_written_as_null_with_a_note(tmp_path):
    """A multiclass stage whose val split holds one class: kappa is undefined (NaN). The result
    file and the --json summary are strict JSON; the NaN is null, listed."""
    text = STAGE.read_text().replace('kind = "binary"', 'kind = "multiclass"').replace(
        'type = "bool"', 'type = ["yes", "no", "partly"]').replace('objective = "f1"', 'objective = "kappa"')
    (tmp_path / "mc.toml").write_text("\n".join(x for x in text.splitlines() if not x.startswith("positive")))
    data = _rows(tmp_path / "mc.jsonl", lambda rows: [r.__setitem__("follows", "yes") for r in rows])
    proc, _ = run_cli(tmp_path, "compare", str(tmp_path / "mc.toml"), "--data", str(data), "--strategies",
                      "majority", "--no-track", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = _strict_json(proc.stdout)
    row = summary["strategies"][0]
    assert row["objective"] is None  # undefined, so null: never a NaN literal, never a number
    # any other figure that was not finite is null too, and listed
    assert all(row[k.split(".")[2]] is None for k in summary.get("non_finite_as_null", []) if k.startswith("strategies.0."))
    for path in (tmp_path / "runs" / "compare").glob("*.json"):
        _strict_json(path.read_text())


def test_dumps_never_writes_a_non_json_number():
    import numpy as np

    from personalign.data.strict_json import NOTE_KEY, dumps
    from personalign.record import write_json

    obj = {"a": math.nan, "b": [1.0, math.inf, np.float64("-inf")], "c": {"d": 2}}
    out = _strict_json(dumps(obj))
    assert out == {"a": None, "b": [1.0, None, None], "c": {"d": 2}, NOTE_KEY: ["a", "b.1", "b.2"]}
    assert _strict_json(dumps([math.nan])) == [None]


def test_record_files_are_strict_json(tmp_path):
    from personalign.record import write_json

    path = write_json(tmp_path / "r.json", {"value": math.nan})
    assert _strict_json(path.read_text()) == {"value": None, "non_finite_as_null": ["value"]}


# --- group values -------------------------------------------------------------------------------

BAD_GROUPS = [({"a": 1}, "an object"), (["food"], "a list"), (True, "a boolean"), (1.5, "a number with a fraction")]


@pytest.mark.parametrize("value,kind", BAD_GROUPS, ids=[k for _, k in BAD_GROUPS])
def test_unit_field_of_a_predict_batch_row_must_be_a_string_or_an_integer(tmp_path, value, kind):
    program = tmp_path / "p"
    proc, _ = run_cli(tmp_path, "compile", str(STAGE), "--strategy", "minilm-logreg", "--data", str(DATA), "--out",
                      str(program), "--no-track", timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rule = json.loads((program / "program.json").read_text())["metadata"]["personalign"]["decision_rule"]
    assert rule["unit"] == ["topic"], rule  # the example's rule decides within each topic
    data = _rows(tmp_path / "g.jsonl", lambda rows: rows[2].__setitem__("topic", value))
    refused_cleanly(tmp_path, "predict", "batch", str(STAGE), "--program", str(program), "--data", str(data),
                    needles=("g.jsonl:3", "field 'topic'", kind, "must be a string or an integer"))


@pytest.mark.parametrize("value,kind", BAD_GROUPS + [(None, "missing")], ids=[k for _, k in BAD_GROUPS] + ["null"])
def test_check_group_fields(value, kind):
    from personalign.data.inputs import check_group_fields

    with pytest.raises(DataError) as err:
        check_group_fields({"topic": value}, ["topic"], "d.jsonl", 4)
    assert str(err.value).startswith("d.jsonl:4: field 'topic': ") and kind in str(err.value)
    check_group_fields({"topic": "food", "n": 3}, ["topic", "n"], "d.jsonl", 4)  # strings and integers pass


@pytest.mark.parametrize("value", [{"a": 1}, ["food"]], ids=["object", "list"])
def test_group_key_of_a_stage_file_row_must_be_a_string_or_an_integer(tmp_path, value):
    data = _rows(tmp_path / "g.jsonl", lambda rows: rows[2].__setitem__("topic", value))
    refused_cleanly(tmp_path, "compare", str(STAGE), "--data", str(data), "--strategies", "majority", "--no-track",
                    needles=("g.jsonl:3", "field 'topic'"))


def test_a_misspelt_required_key_is_named(tmp_path):
    """A row whose label key is misspelt ('follws') is refused as missing the label, and the line
    names the key it does have (issue 37: the unknown key was not named)."""
    rows = [json.loads(x) for x in DATA.read_text().splitlines()][:3]
    rows[1]["follws"] = rows[1].pop("follows")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc, _ = run_cli(tmp_path, "stage", "validate", str(STAGE), "--data", str(bad))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == ("error: bad.jsonl:2: field 'follows': missing (the stage's label field); "
                                   "the row has 'follws' (a misspelling of 'follows'?)").replace("bad.jsonl", str(bad)), \
        proc.stderr
