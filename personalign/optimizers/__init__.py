"""Optimizers: one keyword-only contract, ``compile(program, *, trainset, valset)``.

Every optimizer takes all of its configuration (seed included) in ``__init__`` and returns
``(compiled_program, CompileResult)``. Wrappers over DSPy teleprompters (one per file, on
:class:`~personalign.optimizers._teleprompter.TeleprompterOptimizer`) and the fitting of learned
strategies live behind :class:`Optimizer`; :data:`OPTIMIZERS` maps CLI names to classes (the
metric comes from the stage: wrappers have no stage defaults; normally
:func:`personalign.compile_service.compile_program` builds them)::

    opt = OPTIMIZERS.create("bootstrap", **stage.teleprompter_kwargs(), lm=lm, seed=0, max_bootstrapped_demos=2)
    compiled, result = opt.compile(judge, trainset=train, valset=val)
"""

from personalign.optimizers.base import CompileResult, Optimizer
from personalign.optimizers.threshold import ThresholdFit
from personalign.optimizers.references import OptimizerRegistry
from personalign.registry import OptimizerInfo, Registry

_P = "personalign.optimizers"

OPTIMIZERS: Registry[OptimizerInfo] = OptimizerRegistry("optimizer", [
    OptimizerInfo("labeled", f"{_P}.labeled:LabeledFewShot",
                  "DSPy LabeledFewShot: k labeled train examples as demos", "teleprompter"),
    OptimizerInfo("bootstrap", f"{_P}.bootstrap:BootstrapFewShot",
                  "DSPy BootstrapFewShot: demos from the program's own traces the metric accepts", "teleprompter"),
    OptimizerInfo("bootstrap-rs", f"{_P}.bootstrap_rs:BootstrapRS",
                  "DSPy BootstrapFewShotWithRandomSearch: best of several bootstrapped demo sets on valset",
                  "teleprompter"),
    OptimizerInfo("mipro", f"{_P}.mipro:MIPROv2",
                  "DSPy MIPROv2: instruction proposals x demo sets searched with Optuna TPE (bounded trials)",
                  "teleprompter"),
    OptimizerInfo("copro", f"{_P}.copro:COPRO",
                  "DSPy COPRO: coordinate ascent over generated instructions", "teleprompter"),
    OptimizerInfo("simba", f"{_P}.simba:SIMBA",
                  "DSPy SIMBA: mini-batch ascent with self-reflective rules and demos", "teleprompter"),
    OptimizerInfo("gepa", f"{_P}.gepa:GEPA",
                  "DSPy GEPA: reflective instruction evolution from textual feedback (relevance_feedback)",
                  "teleprompter"),
    OptimizerInfo("knn", f"{_P}.knn:KNNFewShot",
                  "DSPy KNNFewShot: the k nearest train examples (MiniLM) as demos at each call", "teleprompter"),
    OptimizerInfo("threshold-fit", f"{_P}.threshold:ThresholdFit",
                  "fit a scorer's decision threshold (max train F1)", "fit"),
    OptimizerInfo("corpus-threshold-fit", f"{_P}.cv_threshold:CorpusThresholdFit",
                  "prepare a scorer's label-free train corpus (BM25), then fit its threshold", "fit"),
    OptimizerInfo("learned-selector-fit", f"{_P}.learned:LearnedSelectorFit",
                  "fit a learned selector; threshold from grouped cross-validation", "fit"),
])


def __getattr__(name: str):
    # lazy: these import dspy / programs/ only when used
    lazy = {
        "LearnedSelectorFit": f"{_P}.learned",
        "CorpusThresholdFit": f"{_P}.cv_threshold",
        "TeleprompterOptimizer": f"{_P}._teleprompter",
        "LabeledFewShot": f"{_P}.labeled",
        "BootstrapFewShot": f"{_P}.bootstrap",
        "BootstrapRS": f"{_P}.bootstrap_rs",
        "MIPROv2": f"{_P}.mipro",
        "COPRO": f"{_P}.copro",
        "SIMBA": f"{_P}.simba",
        "GEPA": f"{_P}.gepa",
        "KNNFewShot": f"{_P}.knn",
        "relevance_feedback": "personalign.programs.relevance.metrics",
    }
    if name in lazy:
        from personalign.registry import resolve

        return resolve(f"{lazy[name]}:{name}")
    raise AttributeError(name)


__all__ = ["CompileResult", "Optimizer", "OPTIMIZERS", "OptimizerInfo", "ThresholdFit",
           "LearnedSelectorFit", "CorpusThresholdFit", "TeleprompterOptimizer", "LabeledFewShot",
           "BootstrapFewShot", "BootstrapRS", "MIPROv2", "COPRO", "SIMBA", "GEPA", "KNNFewShot",
           "relevance_feedback"]
