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
from ..scoring._build import scorecard_data
from ..scoring.models import Dimensions

if TYPE_CHECKING:
    from ..scoring.models import ConfidenceScorecard
    from ..signals import ExtractedSignals

__all__ = [
    "DIMENSIONS",
    "DimensionNames",
    "active_dimensions",
    "dimension_names",
    "dimension_score",
    "scorecard_attributes",
    "score_int",
]


def dimension_names(scorecard: ConfidenceScorecard) -> list[str]:
    """The snake_case names of the scorecard's active dimensions, in the model's field order.

    These are the ``<name>`` in ``rag.confidence.dimension.<name>.score`` and the values of the
    ``rag.confidence.dimension`` metric attribute (``index_integrity``, never ``indexIntegrity``).
    """
    return [dimension.name for dimension, _ in active_dimensions(scorecard_data(scorecard))]


class DimensionNames:
    """One dimension's names: its key in plain scorecard data, its snake_case name, its span attributes."""

    __slots__ = ("key", "max_attribute", "name", "raw_attribute", "score_attribute")

    def __init__(self, key: str, name: str) -> None:
        self.key = key
        self.name = name
        self.score_attribute = semconv.dimension_score_attribute(name)
        self.raw_attribute = semconv.dimension_raw_attribute(name)
        self.max_attribute = semconv.dimension_max_attribute(name)


# In the model's field order, which is the order attributes and metric points are written in.
DIMENSIONS: tuple[DimensionNames, ...] = tuple(
    DimensionNames(field.alias or name, name) for name, field in Dimensions.model_fields.items()
)


def active_dimensions(data: Mapping[str, Any]) -> list[tuple[DimensionNames, Mapping[str, Any]]]:
    """The active dimensions of plain scorecard ``data`` with their plain results."""
    dimensions = data["dimensions"]
    found = []
    for names in DIMENSIONS:
        result = dimensions.get(names.key)
        if result is not None:
            found.append((names, result))
    return found


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
    # Read from the plain data: the nested models are built only if the application reads them.
    data = scorecard_data(scorecard)
    attributes: dict[str, AttributeValue] = {}
    total = score_int(data["total"])
    if total is not None:  # NaN only for non-finite inputs; an absent total is more honest than a fake 0
        attributes[semconv.RAG_CONFIDENCE_TOTAL] = total
    attributes[semconv.RAG_CONFIDENCE_LABEL] = str(data["label"])
    attributes[semconv.RAG_CONFIDENCE_ACTION] = str(data["recommendedAction"])
    attributes[semconv.RAG_CONFIDENCE_LABEL_COLOR] = str(data["labelColor"])
    attributes[semconv.RAG_CONFIDENCE_ACTION_REASON] = str(data["actionReason"])
    for tier, score_key, label_key in (
        (data["tier1"], semconv.RAG_CONFIDENCE_TIER1_SCORE, semconv.RAG_CONFIDENCE_TIER1_LABEL),
        (data["tier2"], semconv.RAG_CONFIDENCE_TIER2_SCORE, semconv.RAG_CONFIDENCE_TIER2_LABEL),
    ):
        if tier is None:
            continue
        tier_score = score_int(tier["score"])
        if tier_score is not None:
            attributes[score_key] = tier_score
        attributes[label_key] = str(tier["label"])
    meta = data["meta"]
    attributes[semconv.RAG_CONFIDENCE_WARNINGS] = [str(warning["code"]) for warning in meta["warnings"]]
    attributes[semconv.RAG_CONFIDENCE_MISSING_SIGNALS] = [str(name) for name in meta["missingSignals"]]
    attributes[semconv.RAG_CONFIDENCE_ACTIVE_DIMENSIONS] = [str(name) for name in meta["activeDimensions"]]
    source_inputs = inputs if inputs is not None else (extracted.inputs if extracted is not None else None)
    candidates = source_inputs.get("candidates") if source_inputs is not None else None
    attributes[semconv.RAG_CONFIDENCE_CANDIDATES] = len(candidates) if isinstance(candidates, Sequence) else 0
    attributes[semconv.RAG_CONFIDENCE_DERIVED_SIGNALS] = (
        [str(name) for name in extracted.derived] if extracted is not None else []
    )
    attributes[semconv.RAG_CONFIDENCE_ALGORITHM_VERSION] = str(meta["algorithmVersion"])
    attributes[semconv.RAG_CONFIDENCE_SCHEMA_VERSION] = str(meta["schemaVersion"])
    for names, dimension in active_dimensions(data):
        normalized = dimension_score(dimension["normalized"])
        if normalized is not None:
            attributes[names.score_attribute] = normalized
        attributes[names.raw_attribute] = float(dimension["raw"])
        attributes[names.max_attribute] = float(dimension["max"])
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
