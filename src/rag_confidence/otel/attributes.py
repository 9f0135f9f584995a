"""The scorecard as span attributes: one mapping, used by the span processor, the decorator and the gateway.

Only this module decides which ``rag.confidence.*`` attributes an answer span carries, so the in-process and
gateway paths cannot drift apart. It imports nothing from the OpenTelemetry SDK.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry.util.types import AttributeValue

from .. import semconv

if TYPE_CHECKING:
    from ..scoring.models import ConfidenceScorecard
    from ..signals import ExtractedSignals

__all__ = ["dimension_names", "dimension_score", "scorecard_attributes", "score_int"]


def dimension_names(scorecard: ConfidenceScorecard) -> list[str]:
    """The snake_case names of the scorecard's active dimensions, in the model's field order.

    These are the ``<name>`` in ``rag.confidence.dimension.<name>.score`` and the values of the
    ``rag.confidence.dimension`` metric attribute (``index_integrity``, never ``indexIntegrity``).
    """
    dimensions = scorecard.dimensions
    return [name for name in type(dimensions).model_fields if getattr(dimensions, name, None) is not None]


def scorecard_attributes(
    scorecard: ConfidenceScorecard,
    extracted: ExtractedSignals | None = None,
    *,
    inputs: Mapping[str, Any] | None = None,
) -> dict[str, AttributeValue]:
    """Map a scorecard (and what extraction found) to the ``rag.confidence.*`` attributes of the answer span.

    ``inputs`` are the scoring inputs the scorecard was computed from (defaults to ``extracted.inputs``); only
    their candidate count is read. The headline attributes come first. On a live span at its attribute limit
    the SDK evicts the *oldest* attribute for each new one, so set them in reverse order there (the decorator
    does) to keep the total and the action.

    >>> from rag_confidence import compute_confidence
    >>> card = compute_confidence({"supportLevel": "high", "candidates": [
    ...     {"retrievalScores": {"vector": 0.9}, "combinedScore": 0.9}]})
    >>> attributes = scorecard_attributes(card, inputs={"candidates": [{}]})
    >>> attributes["rag.confidence.total"] == card.total, attributes["rag.confidence.candidates"]
    (True, 1)
    """
    attributes: dict[str, AttributeValue] = {}
    total = score_int(scorecard.total)
    if total is not None:  # NaN only for non-finite inputs; an absent total is more honest than a fake 0
        attributes[semconv.RAG_CONFIDENCE_TOTAL] = total
    attributes[semconv.RAG_CONFIDENCE_LABEL] = str(scorecard.label)
    attributes[semconv.RAG_CONFIDENCE_ACTION] = str(scorecard.recommended_action)
    attributes[semconv.RAG_CONFIDENCE_LABEL_COLOR] = str(scorecard.label_color)
    attributes[semconv.RAG_CONFIDENCE_ACTION_REASON] = str(scorecard.action_reason)
    for tier, score_key, label_key in (
        (scorecard.tier1, semconv.RAG_CONFIDENCE_TIER1_SCORE, semconv.RAG_CONFIDENCE_TIER1_LABEL),
        (scorecard.tier2, semconv.RAG_CONFIDENCE_TIER2_SCORE, semconv.RAG_CONFIDENCE_TIER2_LABEL),
    ):
        if tier is None:
            continue
        tier_score = score_int(tier.score)
        if tier_score is not None:
            attributes[score_key] = tier_score
        attributes[label_key] = str(tier.label)

    meta = scorecard.meta
    attributes[semconv.RAG_CONFIDENCE_WARNINGS] = [str(warning.code) for warning in meta.warnings]
    attributes[semconv.RAG_CONFIDENCE_MISSING_SIGNALS] = [str(name) for name in meta.missing_signals]
    attributes[semconv.RAG_CONFIDENCE_ACTIVE_DIMENSIONS] = [str(name) for name in meta.active_dimensions]

    source_inputs = inputs if inputs is not None else (extracted.inputs if extracted is not None else None)
    candidates = source_inputs.get("candidates") if source_inputs is not None else None
    attributes[semconv.RAG_CONFIDENCE_CANDIDATES] = len(candidates) if isinstance(candidates, Sequence) else 0
    attributes[semconv.RAG_CONFIDENCE_DERIVED_SIGNALS] = (
        [str(name) for name in extracted.derived] if extracted is not None else []
    )
    attributes[semconv.RAG_CONFIDENCE_ALGORITHM_VERSION] = str(meta.algorithm_version)
    attributes[semconv.RAG_CONFIDENCE_SCHEMA_VERSION] = str(meta.schema_version)

    for name in dimension_names(scorecard):
        dimension = getattr(scorecard.dimensions, name)
        normalized = dimension_score(dimension.normalized)
        if normalized is not None:
            attributes[semconv.dimension_score_attribute(name)] = normalized
        attributes[semconv.dimension_raw_attribute(name)] = float(dimension.raw)
        attributes[semconv.dimension_max_attribute(name)] = float(dimension.max)

    if extracted is not None:
        for key, value in extracted.diagnostics.items():
            if key.startswith(semconv.RAG_CONFIDENCE_PREFIX) and _is_attribute_value(value):
                attributes[key] = value
    return attributes


def score_int(value: float) -> int | None:
    """A 0-100 score as the integer attributes and metrics carry; None for NaN or infinity."""
    number = float(value)
    if not math.isfinite(number):
        return None
    return max(0, min(100, round(number)))


def dimension_score(normalized: float) -> int | None:
    """A dimension's ``normalized`` value (0-100) as an integer; None when not finite."""
    return score_int(normalized)


def _is_attribute_value(value: object) -> bool:
    if isinstance(value, (str, bool, int, float)):
        return True
    if isinstance(value, (list, tuple)):
        return all(isinstance(item, (str, bool, int, float)) for item in value) and (
            len({type(item) for item in value}) <= 1
        )
    return False
