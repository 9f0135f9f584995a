"""The public scoring functions: validate at the edge, score plain data, return models."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

from ..errors import ConfigValidationError, InputValidationError
from ._plain import compile_model
from .models import (
    ConfidenceScorecard,
    ConfidenceWarning,
    DimensionBreakdown,
    Dimensions,
    DimensionScore,
    ScorecardMeta,
    ScoringConfig,
    ScoringInputs,
    Tier1Result,
    Tier2Result,
)
from .scorer import score_plain
from .validation import validate_config

InputsLike = ScoringInputs | Mapping[str, Any]
ConfigLike = ScoringConfig | Mapping[str, Any] | None

_check_inputs = compile_model(ScoringInputs, InputValidationError)
_check_config = compile_model(ScoringConfig, ConfigValidationError)


def plain_inputs(inputs: InputsLike) -> dict[str, Any]:
    """Validated inputs as a camelCase dict (the input itself when it needed no change)."""
    return _check_inputs(inputs, "")  # type: ignore[no-any-return]


def plain_config(config: ConfigLike) -> dict[str, Any]:
    """A structurally and semantically validated camelCase config dict."""
    if config is None:
        return {}
    plain: dict[str, Any] = _check_config(config, "")
    validate_config(plain)
    return plain


def compute_confidence(inputs: InputsLike, config: ConfigLike = None) -> ConfidenceScorecard:
    """Score one answer.

    ``inputs`` and ``config`` are models or plain dicts in the reference's camelCase shape (snake_case keys
    and ISO-8601 date strings are accepted too).

    >>> card = compute_confidence({
    ...     "supportLevel": "high",
    ...     "hasConflict": False,
    ...     "candidates": [
    ...         {"retrievalScores": {"semantic": 0.88, "keyword": 0.72}, "combinedScore": 0.88, "documentId": "a"},
    ...         {"retrievalScores": {"semantic": 0.80, "keyword": 0.70}, "combinedScore": 0.80, "documentId": "b"},
    ...     ],
    ... })
    >>> card.total, card.label, card.recommended_action
    (81, 'Moderate', 'review')

    Raises :class:`~rag_confidence.errors.ConfigValidationError` for an invalid config (always) and
    :class:`~rag_confidence.errors.InputValidationError` for wrongly typed inputs, or for any input warning
    when ``validation`` is ``"strict"``.
    """
    return scorecard_model(score_plain(plain_inputs(inputs), plain_config(config)))


class Scorer:
    """A scorer bound to one validated config; see :func:`create_scorer`."""

    __slots__ = ("_config", "config")

    def __init__(self, config: ConfigLike) -> None:
        self._config = plain_config(config)
        self.config: ScoringConfig = ScoringConfig.model_validate(self._config)

    def compute(self, inputs: InputsLike) -> ConfidenceScorecard:
        """Score one answer with the bound config."""
        return scorecard_model(score_plain(plain_inputs(inputs), self._config))

    def compute_plain(self, inputs: InputsLike) -> dict[str, Any]:
        """Like :meth:`compute`, but the scorecard as a plain dict in the reference's JSON shape."""
        return score_plain(plain_inputs(inputs), self._config)


def create_scorer(config: ConfigLike = None) -> Scorer:
    """Validate ``config`` once and return an object whose ``.compute(inputs)`` scores with it.

    >>> scorer = create_scorer({"preset": "production-v0.3", "relevance": {"required": True}})
    >>> scorer.compute({"supportLevel": "low", "candidates": []}).recommended_action
    'abstain'
    """
    return Scorer(config)


# ----------------------------------------------------------------------------------------------------------------
# Plain scorecard -> models. The data was produced by the scorer from validated input, so the models are built
# directly rather than validated again: validation of a full scorecard would cost more than scoring it.
# ----------------------------------------------------------------------------------------------------------------
M = TypeVar("M", bound=BaseModel)


def _new(cls: type[M], values: dict[str, Any]) -> M:
    instance = cls.__new__(cls)
    object.__setattr__(instance, "__dict__", values)
    object.__setattr__(instance, "__pydantic_fields_set__", set(values))
    object.__setattr__(instance, "__pydantic_extra__", None)
    object.__setattr__(instance, "__pydantic_private__", None)
    return instance


def _warning(item: dict[str, Any]) -> ConfidenceWarning:
    return _new(
        ConfidenceWarning,
        {"code": item["code"], "severity": item["severity"], "message": item["message"], "path": item.get("path")},
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


def scorecard_model(card: dict[str, Any]) -> ConfidenceScorecard:
    """Wrap a plain scorecard (as :func:`score_plain` returns it) in the result models."""
    dims = card["dimensions"]
    meta = card["meta"]
    tier_one = card["tier1"]
    tier_two = card["tier2"]
    return _new(
        ConfidenceScorecard,
        {
            "total": card["total"],
            "label": card["label"],
            "label_color": card["labelColor"],
            "recommended_action": card["recommendedAction"],
            "action_reason": card["actionReason"],
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
        },
    )
