"""What signal extraction may be told: metadata key maps, citation patterns, defaults and score rules."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Literal

from ..errors import ConfigValidationError
from .records import SpanRecord

SupportLevel = Literal["high", "medium", "low"]
ScoreScale = Literal["max", "squash", "clamp"]

# Candidate field -> metadata keys tried in order (first present, well-typed value wins). ``id`` and ``score``
# are also the keys a LangChain retriever must put into ``Document.metadata``: the OpenInference LangChain
# tracer records no id or score of its own.
DEFAULT_DOCUMENT_KEYS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "id": ("id", "doc_id", "document_id", "documentId", "docId", "chunk_id"),
        "score": ("score", "relevance_score", "relevanceScore", "similarity_score", "similarity", "_score"),
        "distance": ("distance", "_distance"),
        "documentType": ("document_type", "documentType", "doc_type", "type"),
        "lastUpdated": ("last_updated", "lastUpdated", "updated_at", "updatedAt", "last_modified"),
        "contentHash": ("content_hash", "contentHash", "hash", "sha256"),
        "extractionQuality": ("extraction_quality", "extractionQuality"),
        "authorityRank": ("authority_rank", "authorityRank"),
        "isAmendment": ("is_amendment", "isAmendment"),
        "rank": ("rank",),
    }
)

# ScoringInputs field (or ``answer`` / ``citations``) -> keys of a structured (JSON object) answer.
DEFAULT_ANSWER_KEYS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "answer": ("answer", "text", "response", "output", "content"),
        "citations": ("citations", "sources", "references", "cited_documents", "citedDocuments"),
        "supportLevel": ("support_level", "supportLevel"),
        "faithfulnessScore": ("faithfulness_score", "faithfulnessScore", "faithfulness"),
        "answerRelevanceScore": ("answer_relevance_score", "answerRelevanceScore", "answer_relevance"),
        "hasConflict": ("has_conflict", "hasConflict"),
        "documentsSilent": ("documents_silent", "documentsSilent"),
        "requiresExpertReview": ("requires_expert_review", "requiresExpertReview"),
    }
)

# Each pattern's first group is the marker's reference; a reference may list several (``[1, 3]``), split on
# commas and semicolons. Markdown links (``[text](url)``) are not matched by the defaults.
# Every repetition is bounded, and no two neighbouring parts can match the same character: the answer text is a
# model's output, which a user may steer, and a pattern that backtracks over it (``[doc____...`` against
# ``[-_:\s]+[\w.\-]+``) would hold the GIL for minutes on a few dozen kilobytes.
DEFAULT_CITATION_PATTERNS: tuple[str, ...] = (
    r"\[\^([^\[\]\s]{1,256})\]",  # [^2]
    # [1], [1, 3], [1-3], [1–3], [1, 3-5]: a range's dash (hyphen, en or em dash) is read in citations.py
    r"\[(\d{1,18}(?:\s{0,8}[-–—]\s{0,8}\d{1,18})?"
    r"(?:\s{0,8}[,;]\s{0,8}\d{1,18}(?:\s{0,8}[-–—]\s{0,8}\d{1,18})?){0,255})\](?!\()",
    # [doc-3], [doc3], [source: 2], [ref 4], [Source 1, Source 3] -- but not a bare word such as [docs] or
    # [references]. A reference's tail cannot hold a list separator, so a list splits one way only.
    r"(?i)\[((?:doc|document|source|src|ref|chunk)(?:[-_:\s]{1,8}[^\W_][\w.\-]{0,255}|\d[\w.\-]{0,255})"
    r"(?:\s{0,8}[,;]\s{0,8}(?:doc|document|source|src|ref|chunk)"
    r"(?:[-_:\s]{1,8}[^\W_][\w.\-]{0,255}|\d[\w.\-]{0,255})){0,255})\](?!\()",
)

# Evaluation names (OpenInference ``evaluations.*``, GenAI ``gen_ai.evaluation.name``) read as inputs,
# lower-cased and with ``-``/space as ``_`` before lookup.
DEFAULT_EVALUATION_NAMES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "faithfulnessScore": ("faithfulness", "groundedness", "hallucination_free", "faithfulness_score"),
        "answerRelevanceScore": (
            "answer_relevance",
            "answer_relevancy",
            "relevance",
            "relevancy",
            "qa_relevance",
        ),
    }
)


@dataclass(frozen=True)
class SignalOptions:
    """How spans are read into scoring inputs. Every field has a default; override what your pipeline needs.

    >>> options = SignalOptions(
    ...     document_keys={**DEFAULT_DOCUMENT_KEYS, "id": ("source_id",)},
    ...     default_support_level="low",
    ... )
    >>> options.document_keys["id"]
    ('source_id',)
    """

    #: Candidate field -> document metadata keys, tried in order. See :data:`DEFAULT_DOCUMENT_KEYS`.
    document_keys: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: DEFAULT_DOCUMENT_KEYS)
    #: Structured answer keys. See :data:`DEFAULT_ANSWER_KEYS`.
    answer_keys: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: DEFAULT_ANSWER_KEYS)
    #: Citation marker regexes; group 1 holds the reference (document id or 1-based position).
    citation_patterns: tuple[str, ...] = DEFAULT_CITATION_PATTERNS
    #: Evaluation names read as faithfulness / answer relevance.
    evaluation_names: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: DEFAULT_EVALUATION_NAMES)
    #: ``supportLevel`` when no span, answer or evaluation provides or implies one (listed in ``derived``).
    default_support_level: SupportLevel = "medium"
    #: Faithfulness (or supported-claim share) at or above which support is ``high`` / ``medium``.
    support_thresholds: tuple[float, float] = (0.8, 0.5)
    #: Method name of reranker output scores in ``retrievalScores``.
    rerank_method: str = "rerank"
    #: Name a retrieval span's method; None falls back to the built-in rule (see ``docs/signals.md``).
    method_namer: Callable[[SpanRecord], str | None] | None = None
    #: Scores above 1 (BM25, inner products): ``max`` divides a span's scores by its largest, ``squash`` maps
    #: s to s/(1+s), ``clamp`` cuts at 1. Negative scores are clamped to 0; distances become 1/(1+d).
    score_scale: ScoreScale = "max"
    #: First position a numeric citation marker refers to (``[1]`` is the first document).
    citation_position_base: int = 1
    #: Also count any bracketed token equal to a retrieved document's id (``[8f3c-...]``) as a valid citation;
    #: bracketed tokens matching no id are ignored, not counted invalid (they may be ordinary brackets).
    citation_bracketed_ids: bool = True

    def __post_init__(self) -> None:
        # Options are set up once, by the application: fail there, loudly, not later on span data.
        if self.default_support_level not in ("high", "medium", "low"):
            raise ConfigValidationError(
                "default_support_level must be 'high', 'medium' or 'low', "
                f"not {self.default_support_level!r}",
                path="default_support_level",
            )
        high, medium = self.support_thresholds
        if not 0.0 <= medium <= high <= 1.0:
            raise ConfigValidationError(
                "support_thresholds must be (high, medium) with 0 <= medium <= high <= 1",
                path="support_thresholds",
            )
        if self.score_scale not in ("max", "squash", "clamp"):
            raise ConfigValidationError(
                f"score_scale must be 'max', 'squash' or 'clamp', not {self.score_scale!r}",
                path="score_scale",
            )
        for index, pattern in enumerate(self.citation_patterns):
            try:
                compiled = re.compile(pattern)
            except re.error as error:
                raise ConfigValidationError(
                    f"citation pattern {pattern!r} is not a valid regex: {error}",
                    path=f"citation_patterns[{index}]",
                ) from error
            if compiled.groups < 1:
                raise ConfigValidationError(
                    f"citation pattern {pattern!r} needs a group holding the reference",
                    path=f"citation_patterns[{index}]",
                )

    @cached_property
    def evaluation_lookup(self) -> Mapping[str, str]:
        """Normalized evaluation name -> input name (``answer_relevancy`` -> ``answerRelevanceScore``)."""
        return {
            normalize_evaluation_name(alias): target
            for target, aliases in self.evaluation_names.items()
            for alias in aliases
        }

    @cached_property
    def document_key_index(self) -> Mapping[str, tuple[tuple[str, int], ...]]:
        """Metadata key -> ``(field, position in that field's key list)`` for every field it may fill.

        Metadata objects hold a handful of keys while the key map lists dozens: looking each metadata key up
        here once costs less than trying every mapped key on every document.
        """
        index: dict[str, list[tuple[str, int]]] = {}
        for name, keys in self.document_keys.items():
            for position, key in enumerate(keys):
                index.setdefault(key, []).append((name, position))
        return {key: tuple(spots) for key, spots in index.items()}

    @cached_property
    def compiled_citation_patterns(self) -> tuple[re.Pattern[str], ...]:
        """The citation patterns, compiled once (validated when the options were made)."""
        return tuple(re.compile(pattern) for pattern in self.citation_patterns)


def normalize_evaluation_name(name: str) -> str:
    """Evaluation names compare lower-cased, with ``-`` and spaces as ``_``."""
    return name.strip().lower().replace("-", "_").replace(" ", "_")
