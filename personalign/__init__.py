"""personalign: compile human-aligned LLM personalization pipelines.

Each personalization stage is a DSPy program with a typed signature, compared, compiled and swept
against human labels. The public API is this module:

* the verbs -- :func:`compile`, :func:`evaluate`, :func:`compare`, :func:`sweep`, :func:`predict`,
  :func:`predict_relevance`, :func:`load_program` -- plain functions with typed results
  (:class:`CompiledProgram`, :class:`EvalReport`, :class:`ComparisonReport`, :class:`SweepReport`,
  :class:`PredictReport`) whose ``str()`` is the table the command line prints;
* stages -- :func:`declare_stage`, :func:`resolve_stage`, :class:`Stage`, :class:`StageSpec`,
  :class:`Objective`, :func:`get_objective`;
* tracking, injected as callbacks -- :class:`RunCallback`, :class:`MLflowCallback`,
  :class:`RecordCallback`, :class:`ConfigureCache`.

Importing it is cheap: it sets offline defaults; each public name is imported from its module on
first use (``personalign.compare`` imports the verbs, never dspy), after the library versions are
checked (:func:`personalign._versions.check_versions`; the console script checks them first).
"""

from personalign._env import apply_offline_defaults

apply_offline_defaults()

__version__ = "0.1.0"

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (18 ms of the console script's start)
if TYPE_CHECKING:  # what type checkers and the API docs (mkdocstrings) read; at run time: __getattr__
    from personalign._verbs import (CompiledProgram, ComparisonReport, Cost, EvalReport, PredictReport, Report,
                                    SweepReport, compare, compile, cost_gate, evaluate, load_program, predict,
                                    predict_relevance, sweep)
    from personalign.errors import ArgumentError, ConfigurationError, DataError, Declined, PersonalignError
    from personalign.stages import Objective, Stage, StageSpec, declare_stage, get_objective, resolve_stage
    from personalign.tracking import (Callbacks, ConfigureCache, MLflowCallback, RecordCallback, RunCallback,
                                      RunInfo)

#: public name -> the module defining it; each is imported on first use (PEP 562), so that
#: ``import personalign`` -- and the console script's start, which a Ctrl-C may interrupt -- stays
#: short (:mod:`personalign._launch`).
_PUBLIC = {
    **dict.fromkeys(("CompiledProgram", "ComparisonReport", "Cost", "EvalReport", "PredictReport", "Report",
                     "SweepReport", "compare", "compile", "cost_gate", "evaluate", "load_program", "predict",
                     "predict_relevance", "sweep"), "personalign._verbs"),
    **dict.fromkeys(("ArgumentError", "ConfigurationError", "DataError", "Declined", "PersonalignError"),
                    "personalign.errors"),
    **dict.fromkeys(("Callbacks", "ConfigureCache", "MLflowCallback", "RecordCallback", "RunCallback", "RunInfo"),
                    "personalign.tracking"),
    **dict.fromkeys(("Objective", "Stage", "StageSpec", "declare_stage", "get_objective", "resolve_stage"),
                    "personalign.stages"),
}


def __getattr__(name: str):
    """A public name (:data:`_PUBLIC`), imported from its module on first use and kept. The first
    one checks the library versions first (:func:`personalign._versions.check_versions`: one line
    and exit 2 on an untested dspy/optuna/mlflow/litellm release)."""
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'personalign' has no attribute {name!r}")
    import importlib

    from personalign._versions import check_versions

    check_versions()

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})


__all__ = ["__version__", *sorted(_PUBLIC)]
