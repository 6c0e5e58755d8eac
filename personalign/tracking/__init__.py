"""Tracking, injected into the verbs as callbacks (:class:`RunCallback`): MLflow runs
(:class:`MLflowCallback`), the run record of ``--results`` (:class:`RecordCallback`), the LM cache
(:class:`ConfigureCache`). The work never asks whether it is tracked: an untracked run is one
with no callbacks. :func:`runs_page_url`: where ``personalign ui`` opens (the experiment's runs list).

    import personalign
    from personalign.tracking import MLflowCallback

    personalign.compare("relevance", "all-yes,style-rank", "examples/relevance_demo.jsonl",
                        callbacks=[MLflowCallback("sqlite:///runs/mlflow.db")])
"""

from personalign.tracking.callbacks import Callbacks, Candidate, RunCallback, RunInfo
from personalign.tracking.mlflow import MLflowCallback
from personalign.tracking.records import ConfigureCache, RecordCallback
from personalign.tracking.runs_view import runs_page_url

__all__ = ["Callbacks", "Candidate", "ConfigureCache", "MLflowCallback", "RecordCallback", "RunCallback", "RunInfo",
           "runs_page_url"]
