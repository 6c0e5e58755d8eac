"""Typed DSPy signatures, one per task. Importing a signature imports dspy."""

from __future__ import annotations

__all__ = ["RelevanceSignature"]


def __getattr__(name: str):
    if name == "RelevanceSignature":
        from personalign.signatures.relevance import RelevanceSignature

        return RelevanceSignature
    raise AttributeError(name)
