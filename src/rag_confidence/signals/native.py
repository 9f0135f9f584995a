"""Our own ``rag.signal.*`` attributes: explicit inputs that always win over derived ones."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .. import semconv
from ._values import Reader

_SUPPORT_LEVELS = frozenset({"high", "medium", "low"})
_QUERY_COMPLEXITIES = frozenset({"direct", "inferential", "multi-hop", "comparative"})


def _one_of(allowed: frozenset[str]) -> Callable[[Reader, Any], str | None]:
    """A reader for an enumerated value: case and surrounding space ignored, anything else skipped."""

    def read(reader: Reader, value: Any) -> str | None:
        text = reader.string(value)
        if text is None:
            return None
        lowered = text.strip().lower()
        if lowered not in allowed:
            reader.skip()
            return None
        return lowered

    return read


_support_level = _one_of(_SUPPORT_LEVELS)
_query_complexity = _one_of(_QUERY_COMPLEXITIES)


def _note(reader: Reader, value: Any) -> str | None:
    # An empty note is meaningful to the algorithm (no ambiguity), so it is kept as given.
    if isinstance(value, str):
        return value
    # Several notes arrive as a string array (record_signals takes a list): the algorithm reads one text.
    if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
        return "; ".join(item for item in value if item)
    if value is not None:
        reader.skip()
    return None


Parse = Callable[[Reader, Any], Any]

# attribute -> (ScoringInputs path, parser). A path with a dot goes into a nested object.
FIELDS: Mapping[str, tuple[str, Parse]] = {
    semconv.RAG_SIGNAL_SUPPORT_LEVEL: ("supportLevel", _support_level),
    semconv.RAG_SIGNAL_HAS_CONFLICT: ("hasConflict", Reader.boolean),
    semconv.RAG_SIGNAL_CONFLICTING_CANDIDATE_COUNT: ("conflictingCandidateCount", Reader.count),
    semconv.RAG_SIGNAL_FAITHFULNESS_SCORE: ("faithfulnessScore", Reader.unit),
    semconv.RAG_SIGNAL_ANSWER_RELEVANCE_SCORE: ("answerRelevanceScore", Reader.unit),
    semconv.RAG_SIGNAL_CITATION_COUNT: ("citationCount", Reader.count),
    semconv.RAG_SIGNAL_CITATION_COVERAGE_SCORE: ("citationCoverageScore", Reader.unit),
    semconv.RAG_SIGNAL_INVALID_CITATION_COUNT: ("invalidCitationCount", Reader.count),
    semconv.RAG_SIGNAL_QUERY_COMPLEXITY: ("queryComplexity", _query_complexity),
    semconv.RAG_SIGNAL_DOCUMENTS_SILENT: ("documentsSilent", Reader.boolean),
    semconv.RAG_SIGNAL_REQUIRES_EXPERT_REVIEW: ("requiresExpertReview", Reader.boolean),
    semconv.RAG_SIGNAL_AMBIGUITY_NOTES: ("ambiguityNotes", _note),
    semconv.RAG_SIGNAL_EXTERNAL_CONSTRAINT_NOTE: ("externalConstraintNote", _note),
    semconv.RAG_SIGNAL_CLAIMS_TOTAL: ("claimSupport.totalClaims", Reader.count),
    semconv.RAG_SIGNAL_CLAIMS_SUPPORTED: ("claimSupport.supportedClaims", Reader.count),
    semconv.RAG_SIGNAL_CLAIMS_UNSUPPORTED: ("claimSupport.unsupportedClaims", Reader.count),
    semconv.RAG_SIGNAL_CLAIMS_CONTRADICTED: ("claimSupport.contradictedClaims", Reader.count),
    semconv.RAG_SIGNAL_CORPUS_TYPE_COUNT: ("corpusTypeCount", Reader.count),
    semconv.RAG_SIGNAL_CORPUS_PRESENT_TYPES: ("presentTypes", Reader.strings),
    semconv.RAG_SIGNAL_CORPUS_MISSING_RELEVANT_TYPE: ("missingRelevantType", Reader.boolean),
    semconv.RAG_SIGNAL_CORPUS_MISSING_TYPES: ("missingTypes", Reader.strings),
    semconv.RAG_SIGNAL_INDEX_EXPECTED_EMBEDDING_MODEL_VERSION: (
        "indexIntegrity.expectedEmbeddingModelVersion",
        Reader.string,
    ),
    semconv.RAG_SIGNAL_INDEX_ACTUAL_EMBEDDING_MODEL_VERSION: (
        "indexIntegrity.actualEmbeddingModelVersion",
        Reader.string,
    ),
    semconv.RAG_SIGNAL_INDEX_SOURCE_VERSION_MATCH_RATIO: (
        "indexIntegrity.sourceVersionMatchRatio",
        Reader.unit,
    ),
    semconv.RAG_SIGNAL_INDEX_STALE_INDEXED_DOCUMENT_RATIO: (
        "indexIntegrity.staleIndexedDocumentRatio",
        Reader.unit,
    ),
    semconv.RAG_SIGNAL_INDEX_FAILED_INGESTION_COUNT: ("indexIntegrity.failedIngestionCount", Reader.count),
    semconv.RAG_SIGNAL_INDEX_ACL_FILTER_CONFIRMED: ("indexIntegrity.aclFilterConfirmed", Reader.boolean),
    semconv.RAG_SIGNAL_INDEX_DELETED_SOURCE_LEAKAGE_COUNT: (
        "indexIntegrity.deletedSourceLeakageCount",
        Reader.count,
    ),
}

_FIELD_KEYS = frozenset(FIELDS)

# The ``rag.signal.*`` attribute each ``record_signals(**kwargs)`` keyword sets, for the otel layer: the keyword
# is the attribute name without ``rag.signal.``, dots as underscores (``claims_total``, ``index_acl_...``).
ATTRIBUTE_BY_KEYWORD: Mapping[str, str] = {
    name.removeprefix(semconv.RAG_SIGNAL_PREFIX).replace(".", "_"): name for name in FIELDS
}


# What each reader takes, in words, for record_signals' warning about a value extraction will skip.
_TAKES = {
    "unit": "a number within 0..1",
    "count": "a whole number, 0 or more",
    "boolean": "True or False",
    "string": "a string",
    "strings": "a list of strings",
}
_TAKES_BY_ATTRIBUTE = {
    semconv.RAG_SIGNAL_SUPPORT_LEVEL: "high, medium or low",
    semconv.RAG_SIGNAL_QUERY_COMPLEXITY: "direct, inferential, multi-hop or comparative",
    semconv.RAG_SIGNAL_AMBIGUITY_NOTES: "a string or a list of strings",
    semconv.RAG_SIGNAL_EXTERNAL_CONSTRAINT_NOTE: "a string",
}


def refused(attributes: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The ``rag.signal.*`` attributes among ``attributes`` that extraction would skip (and count in
    ``rag.confidence.signals.skipped``), each with what it takes.

    >>> refused({"rag.signal.faithfulness_score": 1.5, "rag.signal.support_level": "high"})
    [('rag.signal.faithfulness_score', 'a number within 0..1')]
    """
    found: list[tuple[str, str]] = []
    for attribute, value in attributes.items():
        spec = FIELDS.get(attribute)
        if spec is None or value is None:
            continue
        reader = Reader()
        spec[1](reader, value)
        if reader.skipped:
            takes = _TAKES_BY_ATTRIBUTE.get(attribute) or _TAKES.get(getattr(spec[1], "__name__", ""), "")
            found.append((attribute, takes or "another value"))
    return found


def read_native(attributes: Mapping[str, Any], reader: Reader) -> dict[str, Any]:
    """The ``rag.signal.*`` values of one span as flat ScoringInputs paths (``claimSupport.totalClaims``)."""
    found: dict[str, Any] = {}
    # Most spans carry no ``rag.signal.*`` at all: one C-level pass over the keys tells them apart.
    if isinstance(attributes, dict):
        # A dict's key view tests membership from whichever side is shorter.
        if attributes.keys().isdisjoint(_FIELD_KEYS):
            return found
    elif _FIELD_KEYS.isdisjoint(attributes):
        return found
    # Walk whichever is shorter.
    if len(attributes) < len(FIELDS):
        present = [(key, FIELDS[key]) for key in attributes if key in FIELDS]
    else:
        present = [(key, spec) for key, spec in FIELDS.items() if key in attributes]
    for attribute, (path, parse) in present:
        value = attributes.get(attribute)
        if value is None:
            continue
        parsed = parse(reader, value)
        if parsed is not None:
            found[path] = parsed
    return found
