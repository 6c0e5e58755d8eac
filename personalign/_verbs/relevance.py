"""``personalign.predict_relevance``: which of one user's attributes should change the answer to a
prompt -- a strategy of the ``relevance`` stage compiled on the fly (on the packaged demo labels by
default) or a saved program. ``personalign predict relevance`` is a thin shell over it.

    from personalign import predict_relevance
    predict_relevance(["The user is vegetarian.", "The user plays chess."],
                      "Suggest a weekly dinner plan.")
    # -> [{"attribute": ..., "relevant": True, "score": 0.71}, {...}]

Saved program layout (no pickle; loading never unpickles): see :mod:`personalign.programs.saved`
-- a directory with a DSPy-loadable ``program.json`` (the strategy's state; our metadata under
``metadata.personalign``) plus the strategy's weight files written by its ``save_weights(dir)``
(``minilm_logreg.npz`` or ``cross_encoder/`` safetensors).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from personalign.errors import ConfigurationError, DataError

DEFAULT_PREDICT_STRATEGY = "minilm-logreg"
"""The strategy ``predict_relevance`` compiles when none is named."""


def _stage():
    from personalign.stages import resolve_stage

    return resolve_stage("relevance")


def default_training_data() -> Path:
    """The demo labels shipped inside the package (``personalign/resources/relevance_demo.jsonl``,
    also ``examples/relevance_demo.jsonl`` of a checkout): present in a wheel install too."""
    from importlib.resources import files

    return Path(str(files("personalign").joinpath("resources", "relevance_demo.jsonl")))


def compile_strategy(strategy: str, *, data: str | Path | None = None, split: str | None = None,
                     lm=None, seed: int = 0, **kwargs):
    """Build ``strategy`` from the registry and, when trainable, compile it with its default optimizer
    (:func:`personalign.compile_service.compile_program`, the one compile path).

    Args:
        strategy: a strategy of the ``relevance`` stage.
        data: labelled relevance JSONL to fit on (default :func:`default_training_data`).
        split: fit on this split only (None: every row of ``data``).
        lm: a ``dspy.LM`` made active while compiling (LLM-scored strategies record its model).
        seed: optimizer seed. ``kwargs`` go to the strategy's constructor.

    Returns:
        ``(program, compile_info | None)``; ``compile_info`` is ``CompileResult.to_dict()``.

    Raises:
        ConfigurationError: unknown strategy. DataError: unreadable data or no examples.
    """
    from personalign.compile_service import compile_program

    stage = _stage()
    info = stage.registry.info(strategy)
    program = stage.registry.create(strategy, **kwargs)
    if not info.trainable:
        return program, None
    path = Path(data) if data else default_training_data()
    if not path.exists():
        raise DataError(path, None, None, f"training data for '{strategy}' not found (pass --data PATH)")
    trainset = stage.load(path, split)
    if not trainset:
        raise DataError(path, None, "split", f"no rows in split '{split}' to fit '{strategy}' on")
    stage.check_fittable(trainset, path, split or "all rows")
    compiled, info_dict = compile_program(stage, strategy, None, trainset, lm=lm, seed=seed, program=program)
    info_dict["data"] = str(path)
    info_dict["fit_splits"] = sorted({str(ex.split) for ex in trainset})  # what `eval` must not score as held out
    return compiled, info_dict


def save_program(program, directory: str | Path, *, strategy: str, lm: str | None = None,
                 compile_info: dict | None = None, metrics: dict | None = None) -> Path:
    """Save a relevance program (:func:`personalign.programs.saved.save_program`)."""
    from personalign.programs.saved import save_program as _save

    return _save(program, directory, stage="relevance", strategy=strategy, lm=lm, compile_info=compile_info,
                 metrics=metrics, signature=_stage().signature_record())


def load_program(directory: str | Path):
    """Load a saved relevance program. Returns ``(program, metadata dict)``.

    Raises:
        ConfigurationError: not a saved relevance program, or an unknown strategy.
    """
    from personalign._verbs.evaluate import load_program as _load

    return _load(directory, stage="relevance", with_metadata=True)


def check_attributes(attributes: Sequence[str]) -> list[str]:
    """The attributes, each non-blank (an empty attribute would be scored as if it were one).

    Raises:
        ConfigurationError: names the 1-based position and the value of the first blank one.
    """
    attrs = list(attributes)
    for i, a in enumerate(attrs, 1):
        if not isinstance(a, str) or not a.strip():
            raise ConfigurationError(f"attribute {i} ({a!r}) is empty; every --attribute must hold text")
    return attrs


def predict_relevance(attributes: Sequence[str] | str, prompt: str, *, strategy: str | None = None,
                      program=None, lm: str | None = None, data: str | Path | None = None,
                      seed: int = 0, split: str | None = None, save: str | Path | None = None,
                      api_base: str | None = None) -> list[dict[str, Any]]:
    """Which of a user's ``attributes`` should change the answer to ``prompt``.

    Args:
        attributes: one attribute or a list (one user's); judged together by batch strategies.
        prompt: the user's new request.
        strategy: registry name (default ``minilm-logreg``); ignored when ``program`` is given.
        program: a compiled program, or the path of one saved by :func:`save_program`.
        lm: model string for LLM strategies (default :func:`personalign.lm.default_model`; with a
            saved ``program``, the embedded model it records).
        data: training data for a trainable strategy compiled on the fly (default
            :func:`default_training_data`, the packaged demo labels; every row is used, or only
            ``split``).
        api_base: an OpenAI-compatible server for a non-embedded ``lm`` (as ``compare``'s).
        save: save the program compiled on the fly to this (new or empty) directory, then predict
            with it. A program fitted on rows of splits other than ``train`` warns that ``eval`` on
            them would score rows it was fitted on; one fitted on the packaged demo labels says so
            (``warnings.warn``).

    Returns:
        one dict per attribute, in order: ``{"attribute", "relevant": bool | None, "score": float | None,
        "decision": str | None}`` (``relevant`` None when an LM call failed). ``decision`` is None when
        the strategy's own rule decided; a program that decides inside a set (rank, top share, z-score
        within one user's attributes for a prompt) given fewer attributes than its smallest set
        decides by its fallback threshold, and ``decision`` says so: ``"fallback threshold X (no pool
        of N or more to rank against; batch prediction uses <rule>@<unit>)"``
        (:func:`personalign.programs.decision.fallback_note`).

    Raises:
        ConfigurationError: unknown strategy/model, bad saved program. DataError: bad training data.
    """
    import contextlib

    import dspy

    import warnings

    registry = _stage().registry
    attrs = check_attributes([attributes] if isinstance(attributes, str) else attributes)
    if not attrs:
        return []
    if not prompt or not prompt.strip():
        raise ConfigurationError("the prompt is empty")
    if save is not None:
        from personalign.errors import ArgumentError
        from personalign.programs.saved import check_save_target

        if program is not None:
            raise ArgumentError("save", "saves a program compiled on the fly; a given program is saved already")
        check_save_target(save)
    model_string = lm
    if program is not None and not isinstance(program, dspy.Module):
        from personalign.programs.program_schema import choose_model

        where = program
        program, meta = load_program(program)
        name = meta["strategy"]
        if registry.info(name).uses_lm:
            model_string = choose_model(meta, model_string, where)
    elif program is None:
        name = strategy or DEFAULT_PREDICT_STRATEGY
    else:
        name = None
    uses_lm = bool(getattr(program, "uses_lm", False)) if name is None else registry.info(name).uses_lm
    lm_obj = None
    if uses_lm:
        from personalign.lm import make_lm, resolve_lm

        lm_obj = make_lm(model_string, api_base=api_base) if api_base and isinstance(model_string, str) \
            else resolve_lm(model_string)
    if program is None:
        program, info = compile_strategy(name, data=data, split=split, lm=lm_obj, seed=seed)
        if data is None and registry.info(name).trainable:
            warnings.warn("fitted on the demo labels packaged with personalign (7 prompts); pass data= (--data) "
                          "to fit on your own labels", UserWarning, stacklevel=2)
        if save is not None:
            save_program(program, save, strategy=name, lm=lm_obj.model if lm_obj else None, compile_info=info)
            held = [s for s in (info or {}).get("fit_splits", []) if s not in ("train", "None")]
            if held:
                warnings.warn(f"{save} was fitted on every row of {info['data']}, including split(s) "
                              f"{', '.join(held)}; `personalign eval` on them scores rows it was fitted on "
                              "(pass split='train' / --fit-split train to hold them out)", UserWarning, stacklevel=2)
    examples = [dspy.Example(attribute=a, prompt=prompt, prompt_id="predict", user_id="predict")
                .with_inputs("attribute", "prompt") for a in attrs]
    if lm_obj is not None:
        from personalign.lm import use

        ctx = use(lm_obj)
    else:
        ctx = contextlib.nullcontext()
    with ctx:
        if hasattr(program, "predict_batch"):
            preds = program.predict_batch(examples)
        else:
            preds = [program(attribute=a, prompt=prompt) for a in attrs]
    out = []
    for a, p in zip(attrs, preds):
        rel = getattr(p, "relevant", None)
        score = getattr(p, "score", None)
        out.append({"attribute": a, "relevant": None if rel is None else bool(rel),
                    "score": None if score is None else float(score),
                    "decision": getattr(p, "decision_note", None)})
    return out


__all__ = ["DEFAULT_PREDICT_STRATEGY", "check_attributes", "compile_strategy", "default_training_data", "load_program",
           "predict_relevance", "save_program"]
