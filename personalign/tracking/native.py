"""MLflow-native records of a personalign run, beside the params/metrics/artifacts of
:mod:`personalign.tracking`: what an MLflow user looks for in the UI.

* **Dataset inputs** (:func:`log_dataset`): the evaluation (or training) rows as an MLflow
  dataset (``mlflow.data.from_pandas``: ids, input fields, gold label) logged with
  ``mlflow.log_input``; the data file's sha256 is the input tag ``sha256`` (MLflow's own digest
  column is too short for it) and part of the dataset's name.
* **Prediction tables** (:func:`log_predictions`): ``predictions.json`` (ids, inputs,
  predictions, correctness, errors) and the same rows as an MLflow table
  (``mlflow.log_table``, artifact ``predictions_table.json``: the UI's "Evaluations"/table view).
* **Prompt registry** (:func:`register_prompt`): a compiled program's prompt (instructions,
  fields, demos: :func:`personalign.programs.export.prompt_text`) registered as a new version of
  the prompt ``<stage>-<strategy>`` (``mlflow.genai.register_prompt``); the optimizer, model and
  run are version tags. Programs without an LM prompt are not registered.
* **Traces** (:func:`lm_traces`): see its docstring for what is traced and the cap.
* **Run names**: :func:`personalign.tracking.mlflow.run_name`.

Each takes the :class:`~personalign.tracking.store.Tracker` of the run (the MLflow callback's) and
redacts secrets like it does. None of this reaches the network.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import threading
import warnings
from pathlib import Path
from typing import Any, Iterator, Sequence

from personalign.redaction import redact

DEFAULT_MAX_TRACES = 50  # per lm_traces block; PERSONALIGN_MAX_TRACES overrides (0 turns traces off)
PREDICTIONS_TABLE = "predictions_table.json"


def model_label(lm: str | None) -> str:
    """The short name of a model string: ``local/smollm2-135m-instruct`` -> ``smollm2-135m-instruct``."""
    return (lm or "no-lm").rstrip("/").split("/")[-1]


def _cell(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return redact(value)
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    return redact(json.dumps(value, ensure_ascii=False, default=str))


def example_rows(stage, examples: Sequence) -> list[dict[str, Any]]:
    """One dict per example: ``id``, the stage's input fields (lists/dicts as JSON text) and ``gold``."""
    rows = []
    for i, ex in enumerate(examples):
        row = {"id": str(getattr(ex, "id", None) or i)}
        row.update({k: _cell(getattr(ex, k, None)) for k in stage.inputs})
        try:
            row["gold"] = _cell(stage.gold(ex))
        except Exception:  # noqa: BLE001 -- unlabelled rows (predict) have no gold
            row["gold"] = None
        rows.append(row)
    return rows


def log_dataset(tracker, stage, examples: Sequence, *, data: str | os.PathLike, sha256: str, split: str | None,
                context: str = "evaluation") -> None:
    """Log ``examples`` (rows of ``split`` of ``data``) as an MLflow dataset input of the active run.

    The dataset is named ``<file stem>:<split>@<sha256[:12]>``; its input tags are ``sha256`` (of
    the whole data file), ``split``, ``stage`` and MLflow's ``mlflow.data.context`` (``context``).
    """
    if not examples:
        return
    import mlflow
    import pandas as pd

    tracker.check()
    frame = pd.DataFrame(example_rows(stage, examples))
    # MLflow warns that a local path "can be interpreted in multiple ways" (both local files) and
    # pandas warns about MLflow's use of its API: neither is the user's to act on
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dataset = mlflow.data.from_pandas(frame, source=Path(str(data)).resolve().as_uri(), targets="gold",
                                          name=f"{Path(str(data)).stem}:{split}@{sha256[:12]}")
    mlflow.log_input(dataset, context=context, tags={"sha256": sha256, "split": str(split), "stage": stage.name})


def prediction_rows(stage, examples: Sequence, report: dict) -> list[dict[str, Any]]:
    """``example_rows`` plus ``prediction`` and, when scored, ``correct`` per example."""
    rows = example_rows(stage, examples)
    correct = report.get("correct") or [None] * len(rows)
    for row, pred, ok in zip(rows, report.get("predictions") or [None] * len(rows), correct):
        row["prediction"] = _cell(pred)
        row["correct"] = None if ok is None else (float(ok) if not isinstance(ok, bool) else ok)
    return rows


def log_predictions(tracker, stage, examples: Sequence, report: dict, artifact_file: str = "predictions.json") -> None:
    """Log ``predictions.json`` (``{"ids", "inputs", "predictions", "correct", "errors"}``) and
    the per-example table (:data:`PREDICTIONS_TABLE`) into the active run."""
    rows = prediction_rows(stage, examples, report)
    tracker.log_dict({"ids": [r["id"] for r in rows],
                      "inputs": [{k: r[k] for k in stage.inputs} for r in rows],
                      "predictions": report.get("predictions"), "correct": report.get("correct"),
                      "errors": report.get("errors")}, artifact_file)
    import mlflow

    columns = {key: [r.get(key) for r in rows] for key in (rows[0] if rows else {})}
    with warnings.catch_warnings():  # pandas deprecation warnings raised inside MLflow
        warnings.simplefilter("ignore")
        mlflow.log_table(columns, artifact_file=PREDICTIONS_TABLE)


_PROMPT_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


def prompt_name(stage: str, strategy: str) -> str:
    """The registry name of a compiled prompt: ``<stage>-<strategy>`` (characters MLflow does not
    allow in a prompt name become ``-``), e.g. ``relevance-zero-shot``."""
    return _PROMPT_NAME.sub("-", f"{stage}-{strategy}")


def register_prompt(tracker, program, *, stage: str, strategy: str, compile_info: dict | None = None,
                    lm: str | None = None, run_id: str | None = None) -> dict | None:
    """Register the prompt of a compiled ``program`` as a new version of ``<stage>-<strategy>``.

    The version records **what compile kept** (``compile_info["chosen"]``: ``uncompiled`` when the
    teleprompter's program lost on dev, ``bootstrap+rule``, ...): its tags ``optimizer`` (the
    teleprompter run) and ``kept``, and a commit message that says "compiled with X" only when the
    compiled program was kept.

    Returns ``{"name", "version", "uri"}`` (``uri`` is ``prompts:/<name>/<version>``, loadable
    with ``mlflow.genai.load_prompt``), or None when the program has no predictor (no LM prompt).
    """
    if program is None or not list(program.named_predictors()):
        return None
    import mlflow

    from personalign.programs.export import prompt_text

    tracker.check()
    info = compile_info or {}
    optimizer = info.get("optimizer")
    kept = info.get("chosen") or (optimizer or "uncompiled")
    name = prompt_name(stage, strategy)
    tags = {"stage": stage, "strategy": strategy, "optimizer": optimizer or "none", "kept": kept, "lm": lm or "none",
            **({"mlflow_run_id": run_id} if run_id else {})}
    how = (f" compiled with {optimizer}" if optimizer and not kept.startswith("uncompiled") else
           f" uncompiled ({optimizer} did not beat it on dev)" if optimizer else "")
    version = mlflow.genai.register_prompt(name=name, template=redact(prompt_text(program)),
                                           commit_message=f"{strategy}{how}" + (f" on {lm}" if lm else ""), tags=tags)
    return {"name": name, "version": int(version.version), "uri": f"prompts:/{name}/{version.version}"}


def max_traces() -> int:
    """The trace cap of an :func:`lm_traces` block: ``PERSONALIGN_MAX_TRACES`` (default
    :data:`DEFAULT_MAX_TRACES`).

    Raises:
        ConfigurationError: the variable is not an integer from 0 to 1,000,000.
    """
    from personalign.settings import env_settings

    value = env_settings().MAX_TRACES
    return DEFAULT_MAX_TRACES if value is None else value


_KEY_SECRET = re.compile(r"(api[_-]?key|secret|password|authorization)", re.I)


def _redact_span(span) -> None:
    """MLflow span processor: redact secrets in a span's inputs, outputs and attributes."""
    if span.inputs is not None:
        span.set_inputs(redact(span.inputs))
    if span.outputs is not None:
        span.set_outputs(redact(span.outputs))
    for key, value in list((span.attributes or {}).items()):
        clean = "***" if _KEY_SECRET.search(key) else _attribute(key, value)
        if clean != value:
            span.set_attribute(key, clean)


def _attribute(key: str, value):
    """A span attribute redacted under its own name (``extra_headers``: every header value); an
    attribute holding a JSON object or list as text is redacted as that object."""
    if isinstance(value, str) and value[:1] in "{[":
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if isinstance(parsed, (dict, list)):
            clean = redact(parsed, key)
            return value if clean == parsed else json.dumps(clean, ensure_ascii=False)
    return redact(value, key)


def _trace_cap_callback(cap: int, tags: dict[str, str]):
    """A DSPy callback that counts top-level program calls as they begin and marks the first
    ``cap`` of them (per thread: calls run side by side) as traced; :func:`_gated` passes only
    those calls' events on to MLflow's callback, so the cap holds with any number in flight."""
    from dspy.utils.callback import BaseCallback

    class TraceCap(BaseCallback):
        def __init__(self):
            self.stats = {"traced": 0, "limit": cap, "capped": False, "trace_ids": [], "calls": []}
            self._depth = threading.local()
            self._lock = threading.Lock()
            self._started = 0  # top-level calls begun (more begin than have ended when calls are in flight)

        def tracing(self) -> bool:
            """Whether the current thread's top-level call is one of the traced ones."""
            return getattr(self._depth, "traced", False)

        def on_module_start(self, call_id, instance, inputs):
            depth = getattr(self._depth, "n", 0)
            self._depth.n = depth + 1
            if depth == 0:
                # Module.__call__(*args, **kwargs): the program's inputs are its keyword arguments
                self._depth.inputs = {**(inputs.get("kwargs") or {}),
                                      **{k: v for k, v in inputs.items() if k not in ("args", "kwargs")}}
                with self._lock:
                    self._started += 1
                    self._depth.traced = self._started <= cap
                    self.stats["capped"] = self.stats["capped"] or not self._depth.traced

        def on_module_end(self, call_id, outputs, exception=None):
            self._depth.n = max(0, getattr(self._depth, "n", 1) - 1)
            if self._depth.n == 0 and self.tracing():
                import mlflow

                # MLflow's own callback runs after this one: the root span is still open when traced
                span = mlflow.get_current_active_span()
                if span is not None:
                    if tags:
                        mlflow.update_current_trace(tags=tags)
                    with self._lock:
                        self.stats["traced"] += 1
                        self.stats["trace_ids"].append(span.trace_id)
                        self.stats["calls"].append({"trace_id": span.trace_id, "raised": exception is not None,
                                                    "inputs": getattr(self._depth, "inputs", None) or {}})

    return TraceCap()


_GATED_EVENTS = ("module", "lm", "adapter_format", "adapter_parse", "tool")


def _gated(inner, counter):
    """``inner`` (MLflow's DSPy callback) seeing only the events of the calls ``counter`` traces;
    evaluation-level events always."""
    from dspy.utils.callback import BaseCallback

    class Gated(BaseCallback):
        def on_evaluate_start(self, *a, **k):
            return inner.on_evaluate_start(*a, **k)

        def on_evaluate_end(self, *a, **k):
            return inner.on_evaluate_end(*a, **k)

    def forward(name):
        def method(self, *a, **k):
            if counter.tracing():
                return getattr(inner, name)(*a, **k)
        return method

    for event in _GATED_EVENTS:
        for end in ("start", "end"):
            setattr(Gated, f"on_{event}_{end}", forward(f"on_{event}_{end}"))
    return Gated()


@contextlib.contextmanager
def lm_traces(tracker, *, limit: int | None = None, tags: dict[str, Any] | None = None) -> Iterator[dict]:
    """Log DSPy program calls made inside the block, with their LM calls, as MLflow traces.

    Uses DSPy's MLflow integration (``mlflow.dspy.autolog``), decided as follows:

    * **What**: each top-level call of a DSPy program (one example) is one trace, linked to the
      active run, with child spans for its predictors, the adapter's formatting/parsing and each LM
      call (messages sent, completion, model, token usage). Cache hits are traced too.
    * **When**: the calls of evaluations (``compare``, ``eval``, ``personalign run``; also inside
      DSPy's ``Evaluate``: ``log_traces_from_eval=True``). Compile calls are
      not traced (``log_traces_from_compile=False``): a teleprompter makes hundreds to thousands
      of calls per compile, already counted in the run's ``compile_lm_calls``. Sweeps
      (``personalign sweep``) log no traces: trials x examples would be millions.
    * **Cap**: at most ``limit`` traces per block (default :func:`max_traces`: 50, or
      ``PERSONALIGN_MAX_TRACES``; 0 turns traces off) -- the first ``limit`` top-level calls to
      begin (in evaluation order at one call in flight); later calls run untraced.
      ``compare`` opens one block per strategy, so it keeps up to ``limit`` traces of each.
    * **Tags**: ``tags`` (e.g. ``{"strategy": "zero-shot"}``) are set on every trace, prefixed
      ``personalign.``, so the Traces tab can be filtered by strategy.
    * **Secrets**: an MLflow span processor redacts every span's inputs, outputs and attributes
      (:func:`personalign.redaction.redact`); DSPy's integration already drops ``api_key`` and
      ``api_base`` from LM attributes. Limit: a span's exception event (message, stack trace)
      is stored as raised -- MLflow's span processors cannot edit events; hosted providers mask
      keys in their error messages.
    * **Export**: MLflow's asynchronous export (``MLFLOW_ENABLE_ASYNC_TRACE_LOGGING=true`` unless
      set), flushed when the block ends: every trace is in the store then. Exported as each call
      ended (synchronous), 32 calls in flight wrote to one SQLite store at once: the 192-row
      hosted evaluation took 38 s tracked against 4 s untracked; 6.7 s with the async export.

    Yields ``{"traced", "limit", "capped", "trace_ids", "calls"}`` (updated as calls run; see
    :func:`link_traces`); ``calls`` holds one ``{"trace_id", "inputs", "raised"}`` per traced call,
    in call order (the program's keyword arguments; ``raised``: the call raised), which
    :func:`personalign.tracking.assess.assess_traces` maps back to the rows. A no-op (yielding
    ``traced=0``) when tracking is off, or (with ``"off"``: the reason) when called from a thread
    that does not own DSPy's settings (``dspy.configure`` is single-owner; autolog needs it).
    """
    cap = max_traces() if limit is None else max(0, int(limit))
    if cap == 0:
        yield {"traced": 0, "limit": 0, "capped": False, "trace_ids": [], "calls": []}
        return
    # Export through MLflow's background queue (flushed when the block ends, below); its at-exit
    # flush says so at INFO on every program exit: kept to warnings.
    os.environ.setdefault("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "true")
    logging.getLogger("mlflow.tracing.export.async_export_queue").setLevel(logging.WARNING)
    import dspy
    import mlflow

    tracker.check()
    counter = _trace_cap_callback(cap, {f"personalign.{k}": str(v) for k, v in (tags or {}).items()})
    before = list(dspy.settings.callbacks)
    try:
        mlflow.dspy.autolog(log_traces=True, log_traces_from_compile=False, log_traces_from_eval=True,
                            log_compiles=False, log_evals=False, silent=True)
        dspy.settings.configure(callbacks=[counter, *dspy.settings.callbacks])  # the cap runs before MLflow's
    except RuntimeError as exc:  # DSPy's settings belong to another thread: run untraced
        yield {"traced": 0, "limit": 0, "capped": False, "trace_ids": [], "calls": [], "off": str(exc)[:200]}
        return
    from mlflow.dspy.callback import MlflowCallback

    # Inside any dspy.context (a CallCounter, dspy.track_usage) DSPy reads a snapshot of its settings
    # taken when that block began: the callbacks configured above would not be seen. The block's
    # own context names them.
    current = list(dspy.settings.callbacks)
    ml = next((c for c in current if isinstance(c, MlflowCallback)), None) or MlflowCallback()
    others = [c for c in current if c is not counter and not isinstance(c, MlflowCallback)]
    try:
        with mlflow.tracing.configure(span_processors=[_redact_span]), \
                dspy.context(callbacks=[counter, *others, _gated(ml, counter)], track_usage=True):
            yield counter.stats
    finally:
        mlflow.dspy.autolog(disable=True, silent=True)
        dspy.settings.configure(callbacks=before)
        with contextlib.suppress(Exception):
            mlflow.flush_trace_async_logging()  # every trace of the block in the store


def link_traces(tracker, stats: dict, run_id: str | None = None) -> None:
    """Link the traces of an :func:`lm_traces` block (``stats``) to ``run_id`` (default: the
    tracker's current run) as well -- e.g. to a compare's child run, opened after its evaluation."""
    ids = list(stats.get("trace_ids") or [])
    client = tracker.client()
    run_id = run_id or getattr(tracker, "run_id", None)
    if client is None or not ids or not run_id:
        return
    for lo in range(0, len(ids), 100):  # MLflow links at most 100 per call
        client.link_traces_to_run(ids[lo: lo + 100], run_id)


def _flat_numbers(obj: dict, prefix: str = "") -> dict[str, Any]:
    """Numeric entries (and ``[low, high]`` CIs) of ``obj`` and of its nested dicts, keys joined by ``.``."""
    from personalign.tracking.store import numeric_metrics

    out: dict[str, Any] = {}
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flat_numbers(value, f"{name}."))
        elif numeric_metrics({name: value}):
            out[name] = value
    return out


def log_runner_result(tracker, out: dict) -> None:
    """Log a runner's result into the active run: ``result.json``, its numeric entries as metrics
    (``<metric>/<strategy>`` for each row of ``strategies``) and one child run per strategy."""
    tracker.log_dict(out, "result.json")
    rows = [r for r in out.get("strategies") or [] if isinstance(r, dict) and "name" in r]
    top = _flat_numbers({k: v for k, v in out.items() if k != "strategies"})
    for row in rows:
        label = str(row["name"]).replace("@", " at ")
        top.update({f"{k}/{label}": v for k, v in _flat_numbers(row).items()})
    tracker.log_metrics(top)
    for row in rows:
        with tracker.run(str(row["name"]), nested=True, params={"strategy": row["name"]}):
            tracker.log_metrics(_flat_numbers(row))


__all__ = ["PREDICTIONS_TABLE", "example_rows", "link_traces", "lm_traces", "log_dataset", "log_predictions",
           "log_runner_result", "max_traces", "model_label", "prediction_rows", "prompt_name", "register_prompt"]
