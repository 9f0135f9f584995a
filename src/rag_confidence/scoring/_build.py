"""Plain scorecard dicts -> result models.

The data was produced by the scorer from validated input, so models are built directly rather than validated
again (validating a whole scorecard costs more than scoring it). The top level is built at once; the nested
parts when first read (see :class:`~rag_confidence.scoring.models.ConfidenceScorecard`).
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

from .models import (
    ConfidenceScorecard,
    ConfidenceWarning,
    DimensionBreakdown,
    Dimensions,
    DimensionScore,
    ScorecardMeta,
    Tier1Result,
    Tier2Result,
)

M = TypeVar("M", bound=BaseModel)
_new_object = object.__new__
_set = object.__setattr__
_TOP_FIELDS = frozenset(ConfidenceScorecard.model_fields)


def _new(cls: type[M], values: dict[str, Any], fields_set: frozenset[str] | None = None) -> M:
    instance = _new_object(cls)
    _set(instance, "__dict__", values)
    _set(instance, "__pydantic_fields_set__", set(values if fields_set is None else fields_set))
    _set(instance, "__pydantic_extra__", None)
    _set(instance, "__pydantic_private__", None)
    return instance


def scorecard_model(card: dict[str, Any]) -> ConfidenceScorecard:
    """The scorecard model of a plain scorecard (as ``scorer.score_plain`` returns it)."""
    instance = _new(
        ConfidenceScorecard,
        {
            "total": card["total"],
            "label": card["label"],
            "label_color": card["labelColor"],
            "recommended_action": card["recommendedAction"],
            "action_reason": card["actionReason"],
        },
        _TOP_FIELDS,
    )
    _set(instance, "__pydantic_private__", {"_plain": card})
    return instance


def scorecard_data(card: ConfidenceScorecard) -> dict[str, Any]:
    """The scorecard as plain camelCase data, the shape ``scorer.score_plain`` returns.

    A scorecard whose nested parts were never read still holds the data it was built from, which is returned
    as is (treat it as read-only); otherwise the model is dumped. Attribute and metric mapping read this, so
    the span path never builds the nested models nobody asked for.
    """
    private = card.__pydantic_private__
    plain = None if private is None else private.get("_plain")
    if plain is not None:
        return plain  # type: ignore[no-any-return]
    return card.model_dump(by_alias=True)


def _warning(item: dict[str, Any]) -> ConfidenceWarning:
    return _new(
        ConfidenceWarning,
        {
            "code": item["code"],
            "severity": item["severity"],
            "message": item["message"],
            "path": item.get("path"),
        },
    )


def _dimension(item: dict[str, Any] | None) -> DimensionScore | None:
    if item is None:
        return None
    parts = item["breakdown"]
    return _new(
        DimensionScore,
        {
            "raw": item["raw"],
            "max": item["max"],
            "normalized": item["normalized"],
            "explanation": item["explanation"],
            "breakdown": _new(
                DimensionBreakdown,
                {
                    "components": parts["components"],
                    "adjustments": parts["adjustments"],
                    "diagnostics": parts["diagnostics"],
                    "uncapped_raw": parts["uncappedRaw"],
                    "raw": parts["raw"],
                },
            ),
            "warnings": [_warning(w) for w in item["warnings"]],
        },
    )


def nested_fields(card: dict[str, Any]) -> dict[str, Any]:
    """The scorecard's nested fields (tiers, dimensions, meta) as models."""
    dims = card["dimensions"]
    meta = card["meta"]
    tier_one = card["tier1"]
    tier_two = card["tier2"]
    return {
        "tier1": None if tier_one is None else _new(Tier1Result, dict(tier_one)),
        "tier2": None if tier_two is None else _new(Tier2Result, dict(tier_two)),
        "dimensions": _new(
            Dimensions,
            {
                "grounding": _dimension(dims["grounding"]),
                "retrieval": _dimension(dims["retrieval"]),
                "consistency": _dimension(dims["consistency"]),
                "relevance": _dimension(dims.get("relevance")),
                "authority": _dimension(dims.get("authority")),
                "corpus": _dimension(dims.get("corpus")),
                "freshness": _dimension(dims.get("freshness")),
                "index_integrity": _dimension(dims.get("indexIntegrity")),
            },
        ),
        "meta": _new(
            ScorecardMeta,
            {
                "algorithm_version": meta["algorithmVersion"],
                "schema_version": meta["schemaVersion"],
                "raw_total": meta["rawTotal"],
                "max_possible": meta["maxPossible"],
                "active_extensions": meta["activeExtensions"],
                "active_dimensions": meta["activeDimensions"],
                "missing_signals": meta["missingSignals"],
                "warnings": [_warning(w) for w in meta["warnings"]],
                "weights": meta["weights"],
            },
        ),
    }
