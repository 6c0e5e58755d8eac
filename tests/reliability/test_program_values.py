"""Issue 38 item 6: every value of a saved program is checked before use.

* ``metadata.personalign.decision_rule``: its schema (:class:`DecisionRuleRecord`): a string, NaN
  or infinite value, a top share outside (0, 1], an unknown kind, a unit that is not a list of
  names... are refused at load (a string rule replaced ``--out`` with all-error rows, then crashed;
  a NaN threshold made every row false and a top share of 2.0 every row true, silently);
* the majority program's ``value`` must be of the stage's output type (``"no"`` is not a bool);
  ``fitted: false`` and a missing threshold are refused at load, not as a traceback per row;
* shared state keys (``threshold``, ``C``, ``features``, ``top_fraction``, ...) by type and range;
* ``.npz`` weights: array shapes and dtypes are read from the ``.npy`` headers before any array is
  decompressed (a 1 MB file was inflated to 866 MB before its shape was refused).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest

from personalign.errors import DataError
from personalign.programs.saved import PROGRAM_FILE, load_program, read_npz, save_program
from tests.conftest import ROOT, cli_env
from tests.reliability.hostile import DATA, STAGE, run_cli
from tests.reliability.test_saved_programs import D, _edit, _fake_logreg

RULE = {"kind": "threshold", "value": 0.5, "cv_objective": 0.7, "raw_objective": None, "n": 40, "n_groups": 5,
        "n_splits": 5, "unit": None, "min_unit": 1, "fallback": None, "per_group": [], "candidates": []}


@pytest.fixture
def ruled(tmp_path) -> Path:
    """A relevance minilm-logreg (fake weights) carrying a valid threshold rule."""
    d = save_program(_fake_logreg(), tmp_path / "prog", stage="relevance", strategy="minilm-logreg")
    _edit(d, lambda doc: doc["metadata"]["personalign"].__setitem__("decision_rule", dict(RULE)))
    program, meta = load_program(d)
    assert meta["decision_rule"]["value"] == 0.5 and program.rule.kind == "threshold"
    return d


def _refused(directory: Path, *needles: str, stage=None) -> str:
    with pytest.raises(DataError) as err:
        load_program(directory, stage=stage)
    msg = str(err.value)
    assert "\n" not in msg and str(directory) in msg, msg
    for needle in needles:
        assert needle in msg, (needle, msg)
    return msg


RULE_ATTACKS = [
    ("value string", {"value": "x"}, "decision_rule.value"),
    ("value numeric string", {"value": "0.5"}, "decision_rule.value"),
    ("value NaN", {"value": float("nan")}, "finite"),
    ("value infinite", {"value": float("inf")}, "finite"),
    ("top share 2.0", {"kind": "top_share", "value": 2.0}, "(0, 1]"),
    ("top share 0", {"kind": "top_share", "value": 0.0}, "(0, 1]"),
    ("unknown kind", {"kind": "always-yes"}, "decision_rule.kind"),
    ("unit of objects", {"kind": "offset", "unit": [{"a": 1}]}, "decision_rule.unit.0"),
    ("unit a string", {"kind": "offset", "unit": "topic"}, "decision_rule.unit"),
    ("fallback NaN", {"fallback": float("nan")}, "decision_rule.fallback"),
    ("min_unit 0", {"min_unit": 0}, "decision_rule.min_unit"),
    ("value a bool", {"value": True}, "decision_rule.value"),
    ("unknown key", {"lm": "openai/x"}, "decision_rule.lm"),
]


@pytest.mark.parametrize("name,change,needle", RULE_ATTACKS, ids=[a[0] for a in RULE_ATTACKS])
def test_tampered_decision_rule_is_refused_at_load(ruled, name, change, needle):
    _edit(ruled, lambda doc: doc["metadata"]["personalign"]["decision_rule"].update(change))
    _refused(ruled, needle)


def test_a_rule_that_is_not_an_object_is_refused(ruled):
    _edit(ruled, lambda doc: doc["metadata"]["personalign"].__setitem__("decision_rule", "yes"))
    _refused(ruled, "decision_rule")


def test_string_rule_leaves_out_untouched_in_predict_batch(ruled, tmp_path):
    """The CLI end to end: exit 2, one line, and the existing --out file is not replaced."""
    _edit(ruled, lambda doc: doc["metadata"]["personalign"]["decision_rule"].update({"value": "x"}))
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"id": "a", "attribute": "The user is vegan.", "prompt": "Plan dinner."}) + "\n")
    out = tmp_path / "out.jsonl"
    out.write_text("previous\n")
    proc, _ = run_cli(tmp_path, "predict", "batch", "relevance", "--program", str(ruled), "--data", str(rows),
                      "--out", str(out))
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "decision_rule.value" in lines[0], proc.stderr[-2000:]
    assert out.read_text() == "previous\n" and proc.stdout == ""


# --- the strategies' own state ------------------------------------------------------------------

def _majority(tmp_path: Path, value) -> Path:
    from personalign.stages import resolve_stage

    st = resolve_stage(str(STAGE))
    program = st.registry.create("majority")
    program.value = True
    d = save_program(program, tmp_path / "maj", stage=st.name, stage_ref=st.ref, strategy="majority",
                     signature=st.signature_record())
    load_program(d, stage=str(STAGE))  # the untampered program loads
    _edit(d, lambda doc: doc.__setitem__("value", value))
    return d


@pytest.mark.parametrize("value", ["no", "yes", 1, 0.0, None, [True], {"v": True}])
def test_majority_value_must_be_of_the_output_type(tmp_path, value):
    _refused(_majority(tmp_path, value), "state.value", stage=str(STAGE))


def test_majority_of_the_right_type_predicts_it(tmp_path):
    program, _ = load_program(_majority(tmp_path, False), stage=str(STAGE))
    assert program(preference="p", question="q", option="o").follows is False


STATE_ATTACKS = [
    ("fitted false", {"fitted": False}, "state.fitted"),
    ("threshold null", {"threshold": None}, "no threshold"),
    ("threshold a string", {"threshold": "0.5"}, "state.threshold"),
    ("C negative", {"C": -1.0}, "state.C"),
    ("C zero", {"C": 0}, "state.C"),
    ("features not strings", {"features": [1, 2]}, "state.features"),
]


@pytest.mark.parametrize("name,change,needle", STATE_ATTACKS, ids=[a[0] for a in STATE_ATTACKS])
def test_tampered_state_value_is_refused_at_load(ruled, name, change, needle):
    _edit(ruled, lambda doc: doc.update(change))
    _refused(ruled, needle)


# --- weights: header first ----------------------------------------------------------------------

def _bomb_npz(path: Path, real: dict, big: str, n: int) -> None:
    """An npz whose ``big`` array's header promises ``n`` float64 zeros (deflated to ~n/1000 bytes)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, arr in real.items():
            with zf.open(f"{name}.npy", "w", force_zip64=True) as fh:
                if name != big:
                    np.lib.format.write_array(fh, arr)
                    continue
                np.lib.format.write_array_header_1_0(fh, {"descr": "<f8", "fortran_order": False, "shape": (n,)})
                chunk = b"\0" * (1 << 20)
                for _ in range(n * 8 // len(chunk)):
                    fh.write(chunk)


PEAK = """
import sys
from personalign.errors import DataError
from personalign.programs.saved import load_program
try:
    load_program(sys.argv[1])
except DataError as exc:
    print(exc)
# this process's peak resident memory (VmHWM, reset by exec; ru_maxrss would carry the parent's)
hwm = [line for line in open("/proc/self/status") if line.startswith("VmHWM:")][0]
print(int(hwm.split()[1]) // 1024)  # MB
"""


def test_npz_shape_is_read_from_the_header_before_inflating(ruled, tmp_path):
    weights = ruled / "minilm_logreg.npz"
    with np.load(weights) as z:
        real = {k: z[k] for k in z.files}
    n = 64 * 2**20  # 512 MB of float64 once inflated
    _bomb_npz(weights, real, "coef", n)
    assert weights.stat().st_size < 2 * 2**20
    digest = hashlib.sha256(weights.read_bytes()).hexdigest()
    _edit(ruled, lambda doc: doc["metadata"]["personalign"]["weights"].__setitem__("minilm_logreg.npz", digest))
    _refused(ruled, "coef", f"shape ({n},), expected ({D},)")
    # the weights reader alone allocates next to nothing to refuse it
    tracemalloc.start()
    try:
        with pytest.raises(DataError):
            read_npz(weights, {"coef": (D,), "intercept": (), "mean": (D,), "scale": (D,)})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20, f"{peak / 2**20:.0f} MB allocated to refuse it"
    # a whole load in a fresh process: its peak resident memory stays far below the 512 MB
    if not Path("/proc/self/status").exists():
        return
    script = tmp_path / "peak.py"
    script.write_text(PEAK)
    proc = subprocess.run([sys.executable, str(script), str(ruled)], capture_output=True, text=True, timeout=300,
                          env=cli_env(PYTHONPATH=str(ROOT)))
    message, peak_mb = proc.stdout.strip().splitlines()
    assert "shape" in message and int(peak_mb) < 400, proc.stdout


def test_npz_object_dtype_is_refused_from_the_header(tmp_path):
    path = tmp_path / "w.npz"
    np.savez(path, coef=np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(DataError) as err:
        read_npz(path, {"coef": (1,)})
    assert "pickled" in str(err.value)


def test_unchanged_weights_still_load(ruled):
    program, _ = load_program(ruled)
    assert program.undecided.head.coef_.shape == (D,)


def test_program_json_of_the_own_task_example_loads(tmp_path):
    """The shipped example's compile output passes every new check (no false refusal)."""
    proc, _ = run_cli(tmp_path, "compile", str(STAGE), "--strategy", "majority", "--data", str(DATA), "--out",
                      str(tmp_path / "p"), "--no-track")
    assert proc.returncode == 0, proc.stderr[-2000:]
    program, meta = load_program(tmp_path / "p", stage=str(STAGE))
    assert meta["strategy"] == "majority" and isinstance(program.value, bool)
    assert (tmp_path / "p" / PROGRAM_FILE).exists()
