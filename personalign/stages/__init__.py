"""Stages: what a personalization stage is (:class:`Stage`, built from a :class:`StageSpec`), its
set objective (:class:`Objective`) and how one is found (:func:`resolve_stage`).

Every stage -- built-in, a user's ``stage.toml``, :func:`declare_stage` in Python -- is declared
in the one schema (:mod:`personalign.stages.spec`) and built the one way
(:meth:`Stage.from_spec`), so it gets the same generic strategies and the same checks.
"""

from personalign.stages.canonical import check_data, stage_data_warnings
from personalign.stages.objective import OBJECTIVES, Objective, get_objective
from personalign.stages.ref import (
    ENTRY_POINT_GROUP,
    all_stages,
    builtin_names,
    declare_stage,
    installed_entry_points,
    load_stage_file,
    resolve_stage,
)
from personalign.stages.spec import StageSpec, template
from personalign.stages.stage import Stage, reference_strategy, split_of, splits_present

__all__ = ["ENTRY_POINT_GROUP", "OBJECTIVES", "Objective", "Stage", "StageSpec", "all_stages", "builtin_names", "check_data",
           "declare_stage", "get_objective", "installed_entry_points", "load_stage_file",
           "reference_strategy", "resolve_stage", "split_of", "splits_present", "stage_data_warnings", "template"]
