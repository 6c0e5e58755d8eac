"""Stage 2 strategies: decide which user attributes should change the answer to a prompt.

Every strategy is a ``dspy.Module`` whose ``forward(attribute, prompt)`` returns a
``dspy.Prediction`` with ``relevant: bool`` (the :class:`RelevanceSignature` output) and
``score: float | None``. Strategies that score in bulk also implement
``predict_batch(examples) -> list[Prediction]``; trainable ones are compiled by their registry
default optimizer (``optimizer=``) and save their learned parameters with ``dump_state()`` (JSON)
and, for array weights, ``save_weights(dir)`` / ``load_weights(dir)`` (npz / safetensors, no pickle).

The Python call for predictions is :func:`personalign.predict_relevance`.

The stage itself is declared in ``stage.toml`` beside this file, in the schema of a user's stage
file (:mod:`personalign.stages.spec`); ``personalign.resolve_stage("relevance")`` builds it.
"""
