"""The verbs, re-exported by :mod:`personalign`: plain functions with typed results. Objects in --
a stage reference, a strategy name or ``dspy.Module``, a data path or a list of ``dspy.Example``,
a model string or ``dspy.LM``, callbacks -- typed results out. The command line calls them."""

from personalign._verbs.compare import compare
from personalign._verbs.compile import compile
from personalign._verbs.cost import Cost
from personalign._verbs.cost_gate import cost_gate
from personalign._verbs.evaluate import evaluate, load_program
from personalign._verbs.predict import predict
from personalign._verbs.relevance import predict_relevance
from personalign._verbs.reports import (
    CompiledProgram,
    ComparisonReport,
    EvalReport,
    PredictReport,
    Report,
    SweepReport,
)
from personalign._verbs.sweep import sweep

__all__ = ["CompiledProgram", "ComparisonReport", "Cost", "EvalReport", "PredictReport", "Report", "SweepReport",
           "compare", "compile", "cost_gate", "evaluate", "load_program", "predict", "predict_relevance", "sweep"]
