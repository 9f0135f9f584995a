"""The confidence instruments of the design, created once per meter provider and recorded per scorecard.

Used by the span processor, the decorator and the gateway alike. Every attribute value recorded here comes
from a closed set (label, action, tier, dimension name, warning code and severity), never an id or free text,
and every measurement is recorded in the scored span's context so trace-based exemplars point at that span.
"""

from __future__ import annotations

import importlib.metadata
import math
from typing import TYPE_CHECKING

from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.trace import NonRecordingSpan, SpanContext

from .. import semconv
from .attributes import dimension_names, dimension_score, score_int

if TYPE_CHECKING:
    from ..scoring.models import ConfidenceScorecard

__all__ = ["ConfidenceInstruments", "span_context_as_parent"]

#: Meter (and logger) scope of everything ``rag_confidence.otel`` records.
METER_NAME = "rag_confidence"


def package_version() -> str:
    """The installed distribution's version, for the meter scope."""
    try:
        return importlib.metadata.version("rag-confidence")
    except importlib.metadata.PackageNotFoundError:  # running from a source tree that was never installed
        return ""


def span_context_as_parent(span_context: SpanContext) -> Context:
    """A context whose current span is ``span_context``: what ``record()`` and ``emit()`` need in ``on_end``.

    In ``on_end`` the ending span is no longer current; without this, exemplars and log records would point at
    its parent or at nothing.
    """
    return trace.set_span_in_context(NonRecordingSpan(span_context))


class ConfidenceInstruments:
    """The five confidence instruments on one meter provider.

    >>> from opentelemetry.sdk.metrics import MeterProvider
    >>> from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    >>> reader = InMemoryMetricReader()
    >>> instruments = ConfidenceInstruments(MeterProvider(metric_readers=[reader]))
    >>> # context = span_context_as_parent(span.get_span_context())
    >>> # instruments.record(scorecard, duration_s=0.0004, context=context)
    """

    def __init__(self, meter_provider: metrics.MeterProvider | None = None) -> None:
        meter = metrics.get_meter(METER_NAME, package_version(), meter_provider=meter_provider)
        self._score = meter.create_histogram(
            semconv.METRIC_SCORE,
            unit=semconv.UNIT_SCORE,
            description="Confidence total of scored RAG answers (0-100).",
            explicit_bucket_boundaries_advisory=semconv.SCORE_BUCKETS,
        )
        self._tier_score = meter.create_histogram(
            semconv.METRIC_TIER_SCORE,
            unit=semconv.UNIT_SCORE,
            description="Tier scores of scored RAG answers (tier1 core, tier2 extensions; 0-100).",
            explicit_bucket_boundaries_advisory=semconv.SCORE_BUCKETS,
        )
        self._dimension_score = meter.create_histogram(
            semconv.METRIC_DIMENSION_SCORE,
            unit=semconv.UNIT_SCORE,
            description="Normalized score (0-100) of each active confidence dimension.",
            explicit_bucket_boundaries_advisory=semconv.SCORE_BUCKETS,
        )
        self._warnings = meter.create_counter(
            semconv.METRIC_WARNINGS,
            unit=semconv.UNIT_WARNING,
            description="Scorecard warnings, by code and severity.",
        )
        self._duration = meter.create_histogram(
            semconv.METRIC_SCORING_DURATION,
            unit=semconv.UNIT_SECONDS,
            description="CPU-bound time spent extracting signals and computing one scorecard.",
            explicit_bucket_boundaries_advisory=semconv.SCORING_DURATION_BUCKETS,
        )

    def record(
        self, scorecard: ConfidenceScorecard, duration_s: float | None = None, context: Context | None = None
    ) -> None:
        """Record one scorecard on every instrument, in ``context`` (the scored span's; see
        :func:`span_context_as_parent`). ``duration_s`` None records no duration."""
        total = score_int(scorecard.total)
        if total is not None:
            self._score.record(
                total,
                {
                    semconv.METRIC_ATTR_LABEL: str(scorecard.label),
                    semconv.METRIC_ATTR_ACTION: str(scorecard.recommended_action),
                },
                context=context,
            )
        for tier, tier_name in ((scorecard.tier1, semconv.TIER1), (scorecard.tier2, semconv.TIER2)):
            tier_score = score_int(tier.score) if tier is not None else None
            if tier_score is not None:
                self._tier_score.record(tier_score, {semconv.METRIC_ATTR_TIER: tier_name}, context=context)
        for name in dimension_names(scorecard):
            normalized = dimension_score(getattr(scorecard.dimensions, name).normalized)
            if normalized is not None:
                self._dimension_score.record(
                    normalized, {semconv.METRIC_ATTR_DIMENSION: name}, context=context
                )
        for warning in scorecard.meta.warnings:
            self._warnings.add(
                1,
                {
                    semconv.METRIC_ATTR_WARNING_CODE: str(warning.code),
                    semconv.METRIC_ATTR_WARNING_SEVERITY: str(warning.severity),
                },
                context=context,
            )
        if duration_s is not None and math.isfinite(duration_s) and duration_s >= 0:
            self._duration.record(duration_s, context=context)
