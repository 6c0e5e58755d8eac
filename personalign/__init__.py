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

Importing it is cheap: it sets offline defaults and defines the verbs; heavy libraries load when
first used.
"""

from personalign._env import apply_offline_defaults
from personalign._versions import check_versions

apply_offline_defaults()
check_versions()  # one line and exit 2 on an untested dspy/optuna/mlflow/litellm release

__version__ = "0.1.0"

from personalign._verbs import (  # noqa: E402  (after the offline defaults)
    CompiledProgram,
    ComparisonReport,
    Cost,
    EvalReport,
    PredictReport,
    Report,
    SweepReport,
    compare,
    compile,
    cost_gate,
    evaluate,
    load_program,
    predict,
    predict_relevance,
    sweep,
)
from personalign.errors import ArgumentError, ConfigurationError, DataError, Declined, PersonalignError  # noqa: E402
from personalign.tracking import (  # noqa: E402
    Callbacks,
    ConfigureCache,
    MLflowCallback,
    RecordCallback,
    RunCallback,
    RunInfo,
)

_STAGES = ("Objective", "Stage", "StageSpec", "declare_stage", "get_objective", "resolve_stage")


def __getattr__(name: str):
    """The stage names (:mod:`personalign.stages`), imported on first use (pydantic)."""
    if name in _STAGES:
        import personalign.stages as stages

        return getattr(stages, name)
    raise AttributeError(f"module 'personalign' has no attribute {name!r}")


__all__ = ["ArgumentError", "Callbacks", "CompiledProgram", "ComparisonReport", "ConfigurationError", "ConfigureCache",
           "Cost", "DataError", "Declined", "EvalReport", "MLflowCallback", "PersonalignError", "PredictReport",
           "RecordCallback", "Report", "RunCallback", "RunInfo", "SweepReport", "__version__", "compare", "compile",
           "cost_gate", "evaluate", "load_program", "predict", "predict_relevance", "sweep", *_STAGES]
