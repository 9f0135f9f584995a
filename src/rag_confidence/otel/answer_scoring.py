"""One answer's spans in, one scorecard and its span attributes out: shared by processor and decorator.

Signals are extracted from the answer's spans, explicit overrides (``signals(result)`` of the decorator)
are laid over them, and the scoring core computes the scorecard. Nothing here touches a span or an
instrument: the callers decide where the result goes.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.util.types import AttributeValue

from ..scoring import create_scorer
from ..scoring.models import ConfidenceScorecard, ScoringConfig
from ..signals import ExtractedSignals, SignalOptions, extract_signals
from ..signals.records import SpanRecord
from .attributes import scorecard_attributes

__all__ = ["AnswerScorer", "ScoredAnswer", "merge_inputs"]

# Inputs that are objects in ScoringInputs: an override sets their keys one by one rather than replacing them.
_NESTED_INPUTS = ("claimSupport", "indexIntegrity")


@dataclass(frozen=True, slots=True)
class ScoredAnswer:
    """The result of scoring one answer: the scorecard, what it was computed from, and its span attributes."""

    scorecard: ConfidenceScorecard
    inputs: Mapping[str, Any]
    extracted: ExtractedSignals
    attributes: Mapping[str, AttributeValue]
    duration_s: float


class AnswerScorer:
    """Scores answers with one scoring config and one set of signal options (both validated up front)."""

    def __init__(
        self,
        config: ScoringConfig | Mapping[str, Any] | None = None,
        signal_options: SignalOptions | None = None,
    ) -> None:
        # Validate once, where the application sets things up, so a bad config fails there and not per span.
        self._scorer = create_scorer(config)
        self.signal_options = signal_options

    def score(self, spans: Sequence[SpanRecord], overrides: Mapping[str, Any] | None = None) -> ScoredAnswer:
        """Score the spans of one answer (the answer span included); ``overrides`` win over extraction.

        Raises the scoring core's typed errors when the assembled inputs are invalid; callers on the span path
        catch them.
        """
        started = time.perf_counter()
        explicit = dict(overrides) if overrides else None
        if explicit and any(key in explicit for key in _NESTED_INPUTS):
            # Extraction replaces a whole input by an explicit one; a partial claimSupport/indexIntegrity from
            # the caller should only replace the keys it names.
            base = extract_signals(spans, self.signal_options).inputs
            explicit = merge_inputs({key: base[key] for key in _NESTED_INPUTS if key in base}, explicit)
        extracted = extract_signals(spans, self.signal_options, explicit=explicit)
        # Extraction's own output needs no second validation (see Scorer._compute_extracted); a caller's
        # overrides are checked like any input.
        if explicit:
            scorecard = self._scorer.compute(extracted.inputs)
        else:
            scorecard = self._scorer._compute_extracted(extracted.inputs)
        duration_s = time.perf_counter() - started
        attributes = scorecard_attributes(scorecard, extracted)
        return ScoredAnswer(scorecard, extracted.inputs, extracted, attributes, duration_s)


def merge_inputs(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` inputs with ``overrides`` laid over them; ``claimSupport``/``indexIntegrity`` merge by key.

    >>> merge_inputs({"supportLevel": "medium", "claimSupport": {"totalClaims": 4}},
    ...              {"supportLevel": "high", "claimSupport": {"supportedClaims": 3}})
    {'supportLevel': 'high', 'claimSupport': {'totalClaims': 4, 'supportedClaims': 3}}
    """
    merged = dict(base)
    for key, value in overrides.items():
        current = merged.get(key)
        if key in _NESTED_INPUTS and isinstance(current, Mapping) and isinstance(value, Mapping):
            merged[key] = {**current, **value}
        else:
            merged[key] = value
    return merged
