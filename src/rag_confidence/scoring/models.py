"""Pydantic v2 models of everything the scoring core reads and returns.

Field names are snake_case in Python and camelCase on the wire (``model_dump(by_alias=True)`` gives the JSON
shape of the TypeScript package ``transparent-confidence``). Either name is accepted on input.

>>> from rag_confidence.scoring.models import ScoringInputs, Candidate
>>> inputs = ScoringInputs(
...     support_level="high",
...     candidates=[Candidate(retrieval_scores={"semantic": 0.9}, combined_score=0.9, document_id="a")],
... )
>>> inputs.model_dump(by_alias=True, exclude_none=True)["supportLevel"]
'high'

The scoring functions accept these models or plain camelCase dicts; results are always models.
"""

from __future__ import annotations

import datetime
import math
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    Strict,
    model_serializer,
)
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from ._plain import parse_datetime

# Strict: booleans and numeric strings are not numbers here. Non-finite values are allowed on purpose: the
# reference lets NaN and infinities flow into warnings and diagnostics, and so do we.
Num = Annotated[float, Strict()]
Str = Annotated[str, Strict()]
Bool = Annotated[bool, Strict()]


def _datetime(value: object) -> datetime.datetime:
    # Numbers are not dates here (pydantic would read them, and digit-only strings, as Unix times), and a
    # naive datetime is taken as UTC, as the scorer's millisecond arithmetic needs an aware one.
    parsed = parse_datetime(value)
    if parsed is None:
        raise ValueError("expected a datetime or an ISO-8601 string")
    return parsed


DateTime = Annotated[datetime.datetime, BeforeValidator(_datetime)]


def _null_as_nan(value: object) -> object:
    # JSON has no NaN or infinity: our JSON dumps, like the reference's JSON.stringify, write them as null. A
    # result read back from that JSON must still validate, and NaN is the only honest reading of the null.
    return math.nan if value is None else value


class _NullInJson:
    """Marks a result number whose JSON form may be ``null`` (a non-finite value), for the JSON Schema."""

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        inner = handler(schema)
        choices = inner["anyOf"] if set(inner) == {"anyOf"} else [inner]
        return {"anyOf": [*choices, {"type": "null"}]}


# A number in a result. In Python it is always an int or a float (NaN stays a float); ``null`` in JSON reads
# back as NaN. Results are built without validation, so this costs nothing when scoring.
ResultNum = Annotated[int | float, BeforeValidator(_null_as_nan), _NullInJson]

SupportLevel = Literal["high", "medium", "low"]
QueryComplexity = Literal["direct", "inferential", "multi-hop", "comparative"]
DimensionName = Literal[
    "grounding", "retrieval", "consistency", "relevance", "authority", "corpus", "freshness", "indexIntegrity"
]
RecommendedAction = Literal["answer", "review", "abstain"]
WarningSeverity = Literal["info", "warn", "error"]
WarningCode = Literal[
    "deprecated-field",
    "missing-candidates",
    "documents-silent",
    "missing-answer-relevance",
    "missing-faithfulness",
    "missing-conflict-signal",
    "missing-freshness-dates",
    "missing-corpus-count",
    "authority-unclassified",
    "single-retrieval-method",
    "low-citation-coverage",
    "invalid-citations",
    "ambiguous-top-results",
    "input-out-of-range",
    "required-signal-missing",
    "citation-quality-floor",
    "duplicate-content",
    "rank-signal-missing",
    "low-calibration-sample-size",
    "uncalibrated-score",
    "index-integrity-incomplete",
    "embedding-version-mismatch",
    "acl-filter-unconfirmed",
    "deleted-source-leakage",
]
SignalName = Literal[
    "answerRelevanceScore",
    "faithfulnessScore",
    "claimSupport",
    "citationCoverageScore",
    "invalidCitationCount",
    "citationCount",
    "conflictSignal",
    "freshnessDates",
    "corpusTypes",
    "authorityRanks",
    "contentHashes",
    "candidateRanks",
    "indexIntegrity",
]
CalibrationOutcome = Literal["correct", "incorrect", "accepted", "rejected", "escalated"]


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


# Value rules the semantic validator (``validation.py``) enforces, written next to their fields as JSON Schema
# keywords under this key. The structural checker compiled from the models' own schema ignores the key, so
# errors keep the reference's order and wording; :func:`published_json_schema` moves the keywords into place.
_WIRE = "x-rag-confidence-wire"


def _wire(**keywords: Any) -> dict[str, Any]:
    return {_WIRE: keywords}


_INTEGER_AT_LEAST_1 = _wire(minimum=1, multipleOf=1)
_NON_NEGATIVE = _wire(minimum=0)
_COUNT = _wire(minimum=0, multipleOf=1)
_RATIO = _wire(minimum=0, maximum=1)
_MODE = _wire(enum=["diagnostic", "penalize"])
_POSITIVE = _wire(exclusiveMinimum=0)
# What ``parse_datetime`` reads besides RFC 3339: a date alone, or a date-time without offset (taken as UTC).
_DATETIME_FORMS: list[dict[str, Any]] = [
    {"type": "string", "format": "date-time"},
    {"type": "string", "format": "date"},
    {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}[T ]\d{2}(:\d{2}(:\d{2}([.,]\d+)?)?)?$"},
]
_CANONICAL = (
    "The canonical JSON shape, with camelCase keys as the TypeScript package has them. The Python API also"
    " accepts the snake_case field names, and any date-time that datetime.fromisoformat reads."
)


def _publish(node: Any) -> Any:
    if isinstance(node, list):
        return [_publish(item) for item in node]
    if not isinstance(node, dict):
        return node
    if node.get("format") == "date-time" and node.get("type") == "string":
        return {"anyOf": [dict(form) for form in _DATETIME_FORMS]}
    out = {key: _publish(value) for key, value in node.items() if key != _WIRE}
    keywords = node.get(_WIRE)
    if keywords:
        # Into the non-null branch: ``null`` means "not given" and stays valid.
        branches = [b for b in out.get("anyOf", [out]) if b.get("type") != "null"]
        for branch in branches:
            branch.update(keywords)
    return out


# Declared in what ``rag-confidence schema`` prints: tools read a schema without ``$schema`` in their own default
# dialect (draft-07 for some), where ``$defs`` and the 2020-12 keywords pydantic writes mean nothing.
JSON_SCHEMA_DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"


def published_json_schema(model: type[BaseModel], description: bool = True) -> dict[str, Any]:
    """``model``'s JSON Schema as ``rag-confidence schema`` prints it: camelCase keys, the value rules the
    validator enforces (enums, bounds) as keywords, and every date-time form the API reads."""
    schema: dict[str, Any] = {
        "$schema": JSON_SCHEMA_DIALECT,
        **_publish(model.model_json_schema(by_alias=True, mode="validation")),
    }
    if description:
        schema["description"] = f"{schema.get('description', '')} {_CANONICAL}".strip()
    return schema


# --------------------------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------------------------
class Candidate(_Model):
    """One retrieved chunk that was handed to the model."""

    retrieval_scores: dict[str, Num] = Field(
        description="Score of each retrieval method that found it (0-1)."
    )
    combined_score: Num = Field(description="Final fused or reranked score (0-1).")
    document_id: Str | None = Field(default=None, description="Source document id, for diversity.")
    document_type: Str | None = Field(default=None, description="Document type, for authority keywords.")
    authority_rank: Num | None = Field(
        default=None, description="Explicit authority rank; lower is stronger."
    )
    is_amendment: Bool | None = None
    extraction_quality: Num | None = Field(default=None, description="0-1 multiplier on the score.")
    last_updated: DateTime | None = Field(default=None, description="For freshness (UTC if naive).")
    content_hash: Str | None = Field(default=None, description="Identifies duplicate content.")
    rank: Num | None = Field(default=None, description="1-based final position.")


class ClaimSupport(_Model):
    """Claim-level support counts from a claim checker."""

    total_claims: Num
    supported_claims: Num
    unsupported_claims: Num | None = None
    contradicted_claims: Num | None = None


class IndexIntegrityInputs(_Model):
    """Operational health of the index that served the retrieval."""

    expected_embedding_model_version: Str | None = None
    actual_embedding_model_version: Str | None = None
    source_version_match_ratio: Num | None = None
    stale_indexed_document_ratio: Num | None = None
    failed_ingestion_count: Num | None = None
    acl_filter_confirmed: Bool | None = None
    deleted_source_leakage_count: Num | None = None


class ScoringInputs(_Model):
    """Everything known about one answer. Only ``support_level`` and ``candidates`` are required.

    Snake_case field names in Python, the reference's camelCase in JSON (``model_dump(by_alias=True)``):

    >>> inputs = ScoringInputs(
    ...     support_level="high",
    ...     has_conflict=False,
    ...     candidates=[Candidate(retrieval_scores={"dense": 0.9}, combined_score=0.9, document_id="d1")],
    ... )
    >>> inputs.model_dump(by_alias=True, exclude_none=True)["candidates"]
    [{'retrievalScores': {'dense': 0.9}, 'combinedScore': 0.9, 'documentId': 'd1'}]
    """

    support_level: SupportLevel
    candidates: list[Candidate]
    ambiguity_notes: Str | None = None
    requires_expert_review: Bool | None = None
    external_constraint_note: Str | None = None
    documents_silent: Bool | None = None
    has_conflict: Bool | None = None
    conflicting_candidate_count: Num | None = None
    query_complexity: QueryComplexity | None = None
    faithfulness_score: Num | None = None
    claim_support: ClaimSupport | None = None
    citation_count: Num | None = None
    citation_coverage_score: Num | None = None
    invalid_citation_count: Num | None = None
    answer_relevance_score: Num | None = None
    corpus_type_count: Num | None = None
    present_types: list[Str] | None = None
    missing_relevant_type: Bool | None = None
    missing_types: list[Str] | None = None
    index_integrity: IndexIntegrityInputs | None = None


# --------------------------------------------------------------------------------------------------------------
# Config
# --------------------------------------------------------------------------------------------------------------
class ScoreBands(_Model):
    """Score thresholds, highest first; any subset overrides the defaults."""

    full: Num | None = None
    high: Num | None = None
    medium: Num | None = None
    low: Num | None = None


class DuplicateContentConfig(_Model):
    mode: Str | None = Field(
        default=None, json_schema_extra=_MODE, description="'diagnostic' (default) or 'penalize'."
    )
    penalty_per_duplicate: Num | None = Field(default=None, json_schema_extra=_NON_NEGATIVE)
    max_penalty: Num | None = Field(default=None, json_schema_extra=_NON_NEGATIVE)


class RankPenaltyConfig(_Model):
    mode: Str | None = Field(
        default=None, json_schema_extra=_MODE, description="'diagnostic' (default) or 'penalize'."
    )
    after_rank: Num | None = Field(default=None, json_schema_extra=_INTEGER_AT_LEAST_1)
    penalty_per_rank: Num | None = Field(default=None, json_schema_extra=_NON_NEGATIVE)
    max_penalty: Num | None = Field(default=None, json_schema_extra=_NON_NEGATIVE)


class RetrievalConfig(_Model):
    score_bands: ScoreBands | None = None
    default_method_threshold: Num | None = None
    method_thresholds: dict[str, Num] | None = None
    min_confirmed_methods: Num | None = Field(default=None, json_schema_extra=_INTEGER_AT_LEAST_1)
    top_k: Num | None = Field(default=None, json_schema_extra=_INTEGER_AT_LEAST_1)
    min_top_score_gap_for_clear_winner: Num | None = None
    duplicate_content: DuplicateContentConfig | None = None
    rank_penalty: RankPenaltyConfig | None = None


class RelevanceConfig(_Model):
    required: Bool | None = None
    score_bands: ScoreBands | None = None


class AuthorityTier(_Model):
    name: Str
    rank: Num
    keywords: list[Str] | None = None


class AuthorityConfig(_Model):
    tiers: list[AuthorityTier] | None = None
    aggregation: Str | None = Field(default=None, description="'weighted' (default) or 'best'.")
    top_k: Num | None = None


class CorpusConfig(_Model):
    expected_type_count: Num | None = Field(default=None, json_schema_extra=_INTEGER_AT_LEAST_1)
    expected_types: list[Str] | None = None


class FreshnessConfig(_Model):
    max_age_for_full_score: Num | None = None
    penalty_per_month: Num | None = Field(default=None, json_schema_extra=_NON_NEGATIVE)
    hard_cutoff_age: Num | None = None
    now: DateTime | None = Field(default=None, description="Reference time; default: the clock.")
    aggregation: Str | None = Field(default=None, description="'median' (default), 'oldest' or 'newest'.")


class IndexIntegrityConfig(_Model):
    max_failed_ingestions_for_full_score: Num | None = Field(default=None, json_schema_extra=_COUNT)
    stale_ratio_warn_at: Num | None = Field(default=None, json_schema_extra=_RATIO)
    stale_ratio_zero_at: Num | None = Field(default=None, json_schema_extra=_RATIO)
    require_acl_filter_confirmation: Bool | None = None


class Weights(_Model):
    grounding: Num | None = Field(default=None, json_schema_extra=_POSITIVE)
    retrieval: Num | None = Field(default=None, json_schema_extra=_POSITIVE)
    consistency: Num | None = Field(default=None, json_schema_extra=_POSITIVE)
    relevance: Num | None = Field(default=None, json_schema_extra=_POSITIVE)
    authority: Num | None = Field(default=None, json_schema_extra=_POSITIVE)
    corpus: Num | None = Field(default=None, json_schema_extra=_POSITIVE)
    freshness: Num | None = Field(default=None, json_schema_extra=_POSITIVE)
    index_integrity: Num | None = Field(default=None, json_schema_extra=_POSITIVE)


class ActionPolicy(_Model):
    answer_at: Num | None = None
    review_at: Num | None = None
    abstain_below: Num | None = None
    require_tier1_at_least: Num | None = None
    abstain_on_documents_silent: Bool | None = None
    review_on_warnings: list[Str] | None = None
    abstain_on_warnings: list[Str] | None = None


class SignalPolicy(_Model):
    require: list[Str] | None = None
    review_when_missing: list[Str] | None = None
    abstain_when_missing: list[Str] | None = None
    min_citation_coverage_score: Num | None = None
    max_invalid_citation_count: Num | None = None


class ScoringConfig(_Model):
    """Optional extensions and policies. An extension is active when its key is present (even ``{}``).

    >>> config = ScoringConfig.model_validate({"preset": "production-v0.3", "freshness": {}})
    >>> config.preset, config.freshness is not None
    ('production-v0.3', True)
    """

    preset: Str | None = Field(
        default=None, description="'legacy-v0.2', 'balanced-v0.3' or 'production-v0.3'."
    )
    retrieval: RetrievalConfig | None = None
    relevance: RelevanceConfig | None = None
    authority: AuthorityConfig | None = None
    corpus: CorpusConfig | None = None
    freshness: FreshnessConfig | None = None
    index_integrity: IndexIntegrityConfig | None = None
    weights: Weights | None = None
    action_policy: ActionPolicy | None = None
    signal_policy: SignalPolicy | None = None
    validation: Str | None = Field(default=None, description="'warn' (default) or 'strict'.")


# --------------------------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------------------------
class ConfidenceWarning(_Model):
    code: Str
    severity: WarningSeverity
    message: Str
    path: Str | None = None


class DimensionBreakdown(_Model):
    """Machine-readable attribution: ``raw == uncapped_raw + the clamp/cap adjustments``."""

    components: dict[str, ResultNum]
    adjustments: dict[str, ResultNum]
    diagnostics: dict[str, bool | ResultNum | str] | None = None
    uncapped_raw: ResultNum
    raw: ResultNum


class DimensionScore(_Model):
    raw: ResultNum
    max: ResultNum
    normalized: ResultNum
    explanation: str
    breakdown: DimensionBreakdown
    warnings: list[ConfidenceWarning] = Field(default_factory=list)


class Tier1Result(_Model):
    score: ResultNum
    label: Literal["Strong", "Moderate", "Limited", "Insufficient", "Not Addressed"]
    color: Literal["green", "amber", "orange", "red", "gray"]


class Tier2Result(_Model):
    score: ResultNum
    label: Literal["Complete", "Good", "Partial", "Thin"]
    color: Literal["green", "amber", "orange", "red"]


class Dimensions(_Model):
    grounding: DimensionScore
    retrieval: DimensionScore
    consistency: DimensionScore
    relevance: DimensionScore | None = None
    authority: DimensionScore | None = None
    corpus: DimensionScore | None = None
    freshness: DimensionScore | None = None
    index_integrity: DimensionScore | None = None


class ScorecardMeta(_Model):
    algorithm_version: str
    schema_version: str
    raw_total: ResultNum
    max_possible: ResultNum
    active_extensions: list[str]
    active_dimensions: list[DimensionName]
    missing_signals: list[str]
    warnings: list[ConfidenceWarning]
    weights: dict[str, ResultNum]


_LAZY_FIELDS = frozenset({"tier1", "tier2", "dimensions", "meta"})


class ConfidenceScorecard(_Model):
    """The scorecard of one answer.

    ``total`` is an int in 0..100 for finite inputs (NaN only when non-finite inputs reach the weighted
    authority, as in the reference). The scorers build ``tier1``, ``tier2``, ``dimensions`` and ``meta`` on
    first access (or first dump): code that gates on ``total`` and ``recommended_action`` pays only for what
    it reads. The values are computed either way; only their model objects are deferred.

    >>> from rag_confidence import compute_confidence
    >>> card = compute_confidence({"supportLevel": "low", "hasConflict": True, "candidates": []})
    >>> card.total, card.label, card.recommended_action
    (0, 'Insufficient', 'abstain')
    >>> card.model_dump(by_alias=True)["recommendedAction"], [w.code for w in card.meta.warnings][:2]
    ('abstain', ['missing-candidates', 'missing-faithfulness'])
    """

    total: ResultNum
    label: Literal["Strong", "Moderate", "Limited", "Insufficient"]
    label_color: Literal["green", "amber", "orange", "red"]
    recommended_action: RecommendedAction
    action_reason: str
    tier1: Tier1Result | None
    tier2: Tier2Result | None
    dimensions: Dimensions
    meta: ScorecardMeta

    _plain: dict[str, Any] | None = PrivateAttr(default=None)

    def _materialize(self) -> None:
        private = self.__pydantic_private__
        plain = None if private is None else private.get("_plain")
        if plain is None:
            return
        from ._build import nested_fields  # the builders import these models

        self.__dict__.update(nested_fields(plain))
        private["_plain"] = None  # type: ignore[index]

    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any:
            if name in _LAZY_FIELDS:
                self._materialize()
                if name in self.__dict__:
                    return self.__dict__[name]
            return super().__getattr__(name)

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        self._materialize()
        return handler(self)  # type: ignore[no-any-return]

    def __eq__(self, other: object) -> bool:
        self._materialize()
        if isinstance(other, ConfidenceScorecard):
            other._materialize()
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]

    def __iter__(self) -> Any:
        self._materialize()
        return super().__iter__()

    def __repr_args__(self) -> Any:
        self._materialize()
        return super().__repr_args__()

    def __copy__(self) -> ConfidenceScorecard:
        self._materialize()
        return super().__copy__()

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> ConfidenceScorecard:
        self._materialize()
        return super().__deepcopy__(memo)

    def __getstate__(self) -> dict[Any, Any]:
        self._materialize()
        return super().__getstate__()


# --------------------------------------------------------------------------------------------------------------
# Calibration
# --------------------------------------------------------------------------------------------------------------
class CalibrationSample(_Model):
    id: Str | None = None
    total: Num
    recommended_action: RecommendedAction | None = None
    outcome: CalibrationOutcome
    query_type: Str | None = None
    tags: list[Str] | None = None


class BandSpec(_Model):
    min: Num
    max: Num


class CalibrationConfig(_Model):
    positive_outcomes: list[CalibrationOutcome] | None = None
    bands: list[BandSpec] | None = None
    min_samples_per_band: Num | None = None
    target_precision_for_answer: Num | None = None
    target_recall_for_abstain: Num | None = None


class CalibrationBand(_Model):
    min: ResultNum
    max: ResultNum
    count: int
    positive_count: int
    positive_rate: ResultNum
    average_score: ResultNum


class ActionRate(_Model):
    count: int
    positive_rate: ResultNum


class ActionSummary(_Model):
    answer: ActionRate
    review: ActionRate
    abstain: ActionRate


class RecommendedPolicy(_Model):
    answer_at: ResultNum
    review_at: ResultNum
    abstain_below: ResultNum


class CalibrationReport(_Model):
    sample_count: int
    positive_count: int
    positive_rate: ResultNum
    bands: list[CalibrationBand]
    action_summary: ActionSummary
    recommended_policy: RecommendedPolicy
    warnings: list[ConfidenceWarning]


# --------------------------------------------------------------------------------------------------------------
# Evaluator bridges
# --------------------------------------------------------------------------------------------------------------
class ExternalEvaluationSignals(_Model):
    """Signals an evaluation framework produced for one answer; absent fields are ``None``."""

    faithfulness_score: Num | None = None
    answer_relevance_score: Num | None = None
    claim_support: ClaimSupport | None = None
    citation_coverage_score: Num | None = None
    invalid_citation_count: Num | None = None
    citation_count: Num | None = None
    has_conflict: Bool | None = None
    conflicting_candidate_count: Num | None = None


class EvaluationSignalMergeResult(_Model):
    inputs: ScoringInputs
    warnings: list[ConfidenceWarning]


PlainDict = dict[str, Any]
