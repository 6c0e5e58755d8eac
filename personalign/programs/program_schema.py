"""What may be in a saved ``program.json``, and the loading rule: a file never chooses the model.

A saved program is data: instructions, demos, fitted numbers and a record of how it was made.
DSPy's own ``Predict.load_state`` would also restore, from the file, an LM (``"lm": {"model":
"openai/...", "extra_headers": ..., "_dspy_lm_class": ...}``) and set any other key of a
predictor's state as an attribute (``config`` becomes LM call keywords, ``callbacks`` run code).
personalign refuses all of that before DSPy sees it:

* every predictor state (each name of ``program.named_predictors()``, and the plain-DSPy copy at
  the top of the file) must fit :class:`PredictorState` (``extra="forbid"``; ``lm`` must be null);
* the metadata must fit :class:`ProgramMetadata` (``extra="forbid"``);
* no object anywhere in the state (demos aside: they are user data) may carry a key that
  configures a client: :data:`CLIENT_KEYS`;
* the model a load may default to is an embedded ``local/...`` model recorded in the file
  (:func:`choose_model`); a remote one is never chosen by a file, and a program whose fitted
  numbers belong to one model is refused with another.

Every refusal is a one-line :class:`~personalign.errors.DataError` (file, key, what was found),
exit 2 in the CLI. Nothing is dropped silently: a file that carries an LM is refused, not
"cleaned", because its author meant it to run against that LM.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from personalign.errors import ConfigurationError, DataError

FORMAT = 2

# keys that configure an LM client, its transport or code hooks; never allowed in a saved state
CLIENT_KEYS = frozenset({
    "lm", "_dspy_lm_class", "adapter", "callbacks", "config", "extra_headers", "headers", "api_base", "base_url",
    "api_key", "api_version", "model_list", "launch_kwargs", "train_kwargs", "finetuning_model", "provider",
    "extended_signature",
})


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class SignatureFieldState(_Strict):
    """One field of a DSPy signature state: its prompt prefix and description (text only)."""

    prefix: str
    description: str


class SignatureState(_Strict):
    """``Signature.dump_state()``: the instructions and each field's prefix/description."""

    instructions: str
    fields: list[SignatureFieldState]


class PredictorState(_Strict):
    """``dspy.Predict.dump_state()`` as personalign saves it: text and examples, no LM.

    ``lm`` is always null (the caller's LM is the only LM); ``fields`` is DSPy's per-output
    decision configuration (numbers and text, validated again by DSPy)."""

    traces: list[Any] = Field(default_factory=list)
    train: list[Any] = Field(default_factory=list)
    demos: list[dict[str, Any]] = Field(default_factory=list)
    signature: SignatureState
    fields: dict[str, dict[str, Any]] = Field(default_factory=dict)
    lm: Literal[None] = None


RULE_KINDS = ("threshold", "top_share", "zscore", "offset")  # personalign.programs.decision.KINDS
_Finite = Annotated[float, Field(allow_inf_nan=False)]


class DecisionRuleRecord(_Strict):
    """``metadata.personalign.decision_rule``: a fitted rule (:class:`~personalign.programs.decision.
    DecisionRule`) as saved, every value checked before the rule decides anything: ``kind`` one of
    :data:`RULE_KINDS`; ``value``, ``fallback``, ``cv_objective`` finite numbers (``top_share``:
    ``value`` a share in (0, 1]); ``n``, ``n_groups``, ``n_splits`` counts; ``min_unit`` >= 1;
    ``unit`` field names; ``band`` (the yes-rate guard) two shares ``[low, high]`` in [0, 1];
    ``reason`` text."""

    kind: Literal[RULE_KINDS]  # type: ignore[valid-type]
    value: _Finite
    cv_objective: _Finite
    raw_objective: Optional[_Finite] = None
    n: Annotated[int, Field(ge=0)]
    n_groups: Annotated[int, Field(ge=0)]
    n_splits: Annotated[int, Field(ge=0)]
    unit: Optional[list[Annotated[str, Field(min_length=1)]]] = None
    min_unit: Annotated[int, Field(ge=1)] = 1
    fallback: Optional[_Finite] = None
    per_group: list[dict[str, Any]] = Field(default_factory=list)
    candidates: list[dict[str, Any]] = Field(default_factory=list)
    band: Optional[list[Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]]] = None
    reason: Optional[Annotated[str, Field(max_length=2000)]] = None

    @model_validator(mode="after")
    def _share(self) -> "DecisionRuleRecord":
        if self.kind == "top_share" and not 0 < self.value <= 1:
            raise ValueError(f"a top_share rule's value is a share in (0, 1], got {self.value}")
        if self.band is not None and (len(self.band) != 2 or self.band[0] > self.band[1]):
            raise ValueError(f"a rule's band is [low, high] with low <= high, got {self.band}")
        return self


class ProgramMetadata(BaseModel):
    """Schema of ``metadata.personalign`` in ``program.json`` (``extra="forbid"``).

    ``lm`` and ``compile``/``metrics`` are records of how the program was made; ``lm`` is a default
    only when it names an embedded model (:func:`choose_model`). ``stage_ref`` names the stage a
    program was compiled for when that stage is not built in (a file or ``module:attr``): such a
    program loads only when the caller passes that stage (a built-in stage name is not enough: the
    program was compiled against the referenced code, which loading never imports;
    :func:`personalign.stages.ref.check_same_stage`). ``format`` (an integer, 1 to :data:`FORMAT`)
    and ``weights`` (files inside the program folder with their sha256) are checked by
    :mod:`personalign.programs.integrity`. ``signature`` is the stage's signature at compile time
    (:meth:`~personalign.stages.Stage.signature_record`), checked when the program loads."""

    model_config = ConfigDict(extra="forbid")
    format: int = FORMAT
    stage: str = Field("relevance", min_length=1)
    strategy: str = Field(min_length=1)
    stage_ref: str | None = None
    state_keys: list[str] | None = None
    lm: str | None = None
    compile: dict[str, Any] | None = None
    metrics: dict[str, Any] | None = None
    versions: dict[str, str] = Field(default_factory=dict)
    data: str | None = None
    data_sha256: str | None = None
    weights: dict[str, str] = Field(default_factory=dict)
    decision_rule: DecisionRuleRecord | None = None
    signature: dict[str, Any] | None = None


def _describe(value: Any) -> str:
    """A short, secret-free description of a refused value (never a header or a key's value)."""
    if isinstance(value, dict):
        model = value.get("model")
        return f"an object (model '{model}')" if isinstance(model, str) else f"an object of {len(value)} key(s)"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    return f"a {type(value).__name__}"


def _refuse(path: Path, key: str, value: Any) -> DataError:
    return DataError(path, None, key, f"a saved program may not configure the LM client ({_describe(value)}); "
                                      "the caller's --lm is the only LM: remove the key or re-save the program")


def check_no_client(value: Any, path: Path, key: str) -> None:
    """Refuse any object under ``value`` carrying a :data:`CLIENT_KEYS` key (``lm: null`` is allowed);
    ``demos`` lists are user examples and are not searched.

    Raises:
        DataError: names the file and the dotted key.
    """
    if isinstance(value, dict):
        for k, v in value.items():
            sub = f"{key}.{k}"
            if k in CLIENT_KEYS and not (k == "lm" and v is None):
                raise _refuse(path, sub, v)
            if k != "demos":
                check_no_client(v, path, sub)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            check_no_client(v, path, f"{key}.{i}")


def check_predictor_state(state: Any, path: Path, key: str) -> None:
    """``state`` fits :class:`PredictorState`.

    Raises:
        DataError: one line naming the file, the dotted key and the problem (an ``lm`` that is not
            null, or any key DSPy would set as an attribute, is refused by name).
    """
    if isinstance(state, dict):
        check_no_client({k: v for k, v in state.items() if k != "demos"}, path, key)
    try:
        PredictorState.model_validate(state)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        where = f"{key}.{loc}" if loc else key
        if err["type"] == "extra_forbidden":
            raise DataError(path, None, where, "not part of a saved predictor (allowed: "
                            + ", ".join(PredictorState.model_fields) + ")") from None
        raise DataError(path, None, where, err["msg"]) from None


def check_document(doc: dict, state: dict, predictor_names: list[str], path: Path) -> None:
    """Check a whole ``program.json`` object: predictor states, the plain-DSPy copy at the top,
    and no client configuration anywhere outside demos.

    Raises:
        DataError: names the file and the key.
    """
    check_no_client(state, path, "state")
    for name in predictor_names:
        if name in state:
            check_predictor_state(state[name], path, f"state.{name}")
    copy = {k: v for k, v in doc.items() if k != "metadata" and k not in state}
    if not copy:
        return
    check_no_client(copy, path, "")  # the plain-DSPy copy of the one wrapped module
    if "signature" in copy:
        check_predictor_state(copy, path, "(top level)")
    else:
        for k, v in copy.items():
            check_predictor_state(v, path, k)


def is_embedded(model: str | None) -> bool:
    """True for a ``local/NAME`` string naming an embedded model (no network, no key)."""
    from personalign.lm import MODELS, is_local

    return bool(model) and is_local(model) and model.split("/", 1)[1] in MODELS


def choose_model(meta: dict[str, Any], lm: str | None, path: str | Path) -> str | None:
    """The model a loaded program runs with: ``lm`` (the caller's) when given; else the embedded
    model the file records (``metadata.personalign.lm``, or a fitted ``state.model``); else None
    (the caller's default). A file never chooses a remote model.

    Raises:
        ConfigurationError: the file records a non-embedded model and ``lm`` is None; or the
            program's fitted numbers (``state.model``, e.g. a yes-probability threshold) belong
            to another model than ``lm``.
    """
    state = meta.get("state") or {}
    fitted = state.get("model") if isinstance(state.get("model"), str) else None
    recorded = meta.get("lm") or fitted
    if not lm and recorded and not is_embedded(recorded):
        raise ConfigurationError(f"{path}: the program records the model '{recorded}', which is not an embedded "
                                 "model; a saved program never chooses a remote model: pass --lm MODEL")
    model = lm or recorded or None
    if fitted and model != fitted:
        raise ConfigurationError(f"{path}: the program's threshold was fitted on {fitted} (its scores are on "
                                 f"that model's scale), not on {model}; pass --lm {fitted} or recompile")
    return model


__all__ = ["CLIENT_KEYS", "FORMAT", "RULE_KINDS", "DecisionRuleRecord", "PredictorState", "ProgramMetadata", "SignatureState", "check_document",
           "check_no_client", "check_predictor_state", "choose_model", "is_embedded"]
