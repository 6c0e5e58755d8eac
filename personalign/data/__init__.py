"""Data layer: load and validate real formats into typed examples, derive tasks, split.

Importing this package is light (pydantic only; no dspy/torch). Public API:

* schemas — :class:`RelevanceExample`, :class:`VerificationExample`,
  :class:`ExtractionExample`, :class:`PreferenceRatingExample`, :class:`MCQExample`,
  :class:`ProfileExample`, :class:`Turn`, :class:`Session`, :class:`UserHistory`,
  :class:`Attribute`; each example has ``to_dspy()`` with its inputs marked.
* recenter relevance — :func:`load_relevance`, :func:`iter_relevance`,
  :func:`load_recenter_annotations`, :func:`attach_annotator_labels`, :func:`raw_annotation_rows`,
  :func:`annotated_relevance`.
* annotations — per-annotator labels on a row (:mod:`personalign.data.annotations`):
  :func:`check_annotations`, :func:`majority`, :func:`yes_rate`.
* PrefEval — :func:`load_prefeval`, :func:`prefeval_mcq`, :func:`prefeval_choice_mcq`;
  derived tasks :func:`relevance_pairs`, :func:`verification_pairs`,
  :func:`extraction_targets`.
* PersonaMem — :func:`load_personamem`; CUPID — :func:`load_cupid`, :func:`cupid_extraction`.
* canonical JSONL — :func:`read_examples`, :func:`iter_examples`, :func:`write_examples`.
* splits — :func:`group_split`, :func:`assert_no_leakage`, :func:`find_leaks`,
  :func:`assign_split`.
"""

from personalign.data.annotations import check_annotations, majority, yes_rate
from personalign.data.canonical import example_type, iter_examples, read_examples, write_examples
from personalign.data.cupid import CupidInstance, cupid_extraction, load_cupid
from personalign.data.derive import extraction_targets, relevance_pairs, verification_pairs
from personalign.data.personamem import load_personamem
from personalign.data.prefeval import PrefEvalRecord, load_prefeval, prefeval_choice_mcq, prefeval_mcq
from personalign.data.recenter import (
    AnnotationRecord,
    AnnotatorJudgment,
    annotated_relevance,
    annotator_votes,
    attach_annotator_labels,
    raw_annotation_rows,
    iter_relevance,
    load_recenter_annotations,
    load_relevance,
)
from personalign.data.schemas import (
    EXAMPLE_TYPES,
    Attribute,
    ExtractionExample,
    MCQExample,
    PreferenceRatingExample,
    ProfileExample,
    RelevanceExample,
    Session,
    TaskExample,
    Turn,
    UserHistory,
    VerificationExample,
)
from personalign.data.sample import stratified_limit
from personalign.data.kinds import KINDS
from personalign.data.kinds import stats as kind_stats
from personalign.data.kinds import validate as validate_kind
from personalign._paths import check_out_dir, check_out_file
from personalign.data.files import check_input, check_output, iter_jsonl, read_text, write_jsonl, write_text
from personalign.data.inputs import read_inputs
from personalign.data.strict_json import dumps
from personalign.data.splits import assert_no_leakage, assign_split, find_leaks, group_split

__all__ = [
    "EXAMPLE_TYPES", "Attribute", "ExtractionExample", "MCQExample", "PreferenceRatingExample",
    "ProfileExample", "RelevanceExample", "Session", "TaskExample", "Turn", "UserHistory",
    "VerificationExample",
    "AnnotationRecord", "AnnotatorJudgment", "annotator_votes", "attach_annotator_labels",
    "iter_relevance", "load_recenter_annotations", "load_relevance", "raw_annotation_rows", "annotated_relevance",
    "check_annotations", "majority", "yes_rate",
    "PrefEvalRecord", "load_prefeval", "prefeval_choice_mcq", "prefeval_mcq",
    "extraction_targets", "relevance_pairs", "verification_pairs",
    "load_personamem", "CupidInstance", "cupid_extraction", "load_cupid",
    "example_type", "iter_examples", "read_examples", "write_examples",
    "assert_no_leakage", "assign_split", "find_leaks", "group_split",
    "check_input", "check_output", "dumps", "iter_jsonl", "read_inputs", "read_text", "write_jsonl", "write_text",
    "KINDS", "kind_stats", "validate_kind", "stratified_limit", "check_out_dir", "check_out_file",
]
