"""personalign: compile human-aligned LLM personalization pipelines.

Each personalization stage (relevance selection first) is a DSPy program with a typed
signature, evaluated and optimized against human labels. Importing this package is cheap: it
sets offline defaults and nothing else; heavy libraries load when first used.
"""

from personalign._env import apply_offline_defaults
from personalign._versions import check_versions

apply_offline_defaults()
check_versions()  # one line and exit 2 on an untested dspy/optuna/mlflow/litellm release

__version__ = "0.1.0"


def load_program(path, *, stage=None, with_metadata: bool = False):
    """Load a program saved by ``personalign compile`` / ``predict --save`` / a sweep export.

    Args:
        path: the saved program's directory, or its ``program.json``.
        stage: a stage reference (name, ``Stage``, ``stage.toml``, ``file.py:ATTR``, ...): refuse a
            program of another stage. Needed for a program of a stage declared in a file or module
            (a saved program never makes personalign import code on its own); built-in and
            entry-point stages load without it.
        with_metadata: also return the metadata (stage, strategy, lm, compile info, metrics, state).

    Returns:
        the ``dspy.Module`` with its decision rule (threshold, ranking, demos, instructions) and
        weights loaded, ready to call; ``(program, metadata dict)`` when ``with_metadata``.

    Raises:
        personalign.errors.DataError: a missing, malformed or tampered ``program.json`` or weights
            file (the message names the file and the key); a file that carries an LM, client
            configuration, headers or callbacks, or any key outside its schema
            (:mod:`personalign.programs.program_schema`): loading never restores them.
        personalign.errors.ConfigurationError: a program of another stage; an unknown strategy; a
            program compiled for a non-built-in stage (``stage_ref``) the caller did not pass.

    The ``program.json`` itself also loads with plain DSPy into the module an LLM strategy wraps:
    ``dspy.Predict(Signature).load(path)`` (relevance ``zero-shot``, ``criteria``) or
    ``dspy.ChainOfThought(Signature).load(path)`` (``cot``).
    """
    from personalign.programs.saved import load_program as _load

    program, meta = _load(path, stage=stage)
    return (program, meta) if with_metadata else program


_VERBS = ("compile", "evaluate", "compare", "sweep")


def __getattr__(name: str):
    """The four verbs (:mod:`personalign.api`), imported on first use so ``import personalign``
    stays light: ``personalign.compile``, ``personalign.evaluate``, ``personalign.compare``,
    ``personalign.sweep``."""
    if name in ("compare", "sweep"):  # modules too: callable as the verb (registry.callable_module)
        import importlib

        return importlib.import_module(f"personalign.{name}")
    if name in _VERBS:
        from personalign import api

        return getattr(api, name)
    raise AttributeError(f"module 'personalign' has no attribute {name!r}")


__all__ = ["__version__", "load_program", *_VERBS]
