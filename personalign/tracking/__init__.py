"""Tracking, injected into the verbs as callbacks (:class:`RunCallback`): MLflow runs
(:class:`MLflowCallback`), the run record of ``--results`` (:class:`RecordCallback`), the LM cache
(:class:`ConfigureCache`). The work never asks whether it is tracked: an untracked run is one
with no callbacks. :func:`runs_page_url`: where ``personalign ui`` opens (the experiment's runs list);
:func:`check_tracking_uri`: a store checked, bounded, before any work.

    import personalign
    from personalign.tracking import MLflowCallback

    personalign.compare("relevance", "all-yes,style-rank", "examples/relevance_demo.jsonl",
                        callbacks=[MLflowCallback("sqlite:///runs/mlflow.db")])
"""

from personalign.tracking.callbacks import Callbacks, Candidate, RunCallback, RunInfo
from personalign.tracking.mlflow import MLflowCallback
from personalign.tracking.records import ConfigureCache, RecordCallback
from personalign.tracking.runs_view import runs_page_url
from personalign.stores import check_tracking_uri  # noqa: E402  (a store is checked before any work)

__all__ = ["Callbacks", "Candidate", "ConfigureCache", "MLflowCallback", "RecordCallback", "RunCallback", "RunInfo",
           "check_tracking_uri", "runs_page_url"]
