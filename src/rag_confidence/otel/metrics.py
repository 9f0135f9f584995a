"""The confidence instruments of the design, created once per meter provider and recorded per scorecard.

Used by the span processor, the decorator and the gateway alike. Every attribute value recorded here comes
from a closed set (label, action, tier, dimension name, warning code and severity), never an id or free text,
and every measurement is recorded in the scored span's context so trace-based exemplars point at that span.
"""

from __future__ import annotations

import functools
import importlib.metadata
import math
import os
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.trace import NonRecordingSpan, SpanContext

from .. import semconv
from ..scoring._build import scorecard_data
from .attributes import DIMENSIONS, active_dimensions, dimension_score, score_int

if TYPE_CHECKING:
    from ..scoring.models import ConfidenceScorecard

__all__ = ["ConfidenceInstruments", "shared_instruments", "span_context_as_parent"]

#: Meter (and logger and tracer) scope of everything ``rag_confidence.otel`` records.
METER_NAME = semconv.INSTRUMENTATION_SCOPE


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
        self,
        scorecard: ConfidenceScorecard,
        duration_s: float | None = None,
        context: Context | None = None,
        *,
        warnings: bool = True,
    ) -> None:
        """Record one scorecard on every instrument, in ``context`` (the scored span's; see
        :func:`span_context_as_parent`). ``duration_s`` None records no duration; ``warnings`` False leaves
        the warnings counter to :meth:`count_warnings` (for callers that score answers in batches)."""
        data = scorecard_data(scorecard)
        total = score_int(data["total"])
        if total is not None:
            self._score.record(
                total, _label_action(str(data["label"]), str(data["recommendedAction"])), context=context
            )
        for key, attributes in _TIER_ATTRIBUTES:
            tier = data[key]
            tier_score = score_int(tier["score"]) if tier is not None else None
            if tier_score is not None:
                self._tier_score.record(tier_score, attributes, context=context)
        for names, dimension in active_dimensions(data):
            normalized = dimension_score(dimension["normalized"])
            if normalized is not None:
                self._dimension_score.record(normalized, _DIMENSION_ATTRIBUTES[names.name], context=context)
        if warnings:
            self.count_warnings(((scorecard, context),))
        if duration_s is not None and math.isfinite(duration_s) and duration_s >= 0:
            self._duration.record(duration_s, context=context)

    def count_warnings(self, scored: Sequence[tuple[ConfidenceScorecard, Context | None]]) -> None:
        """Count the warnings of several scorecards: one measurement per warning code and severity, carrying
        their number, in the context of the last scorecard with that warning (where its exemplar points).
        The counter's totals are those of :meth:`record` per scorecard, with fewer measurements."""
        counts: dict[tuple[str, str], list[Any]] = {}
        for scorecard, context in scored:
            for warning in scorecard_data(scorecard)["meta"]["warnings"]:
                key = (str(warning["code"]), str(warning["severity"]))
                entry = counts.get(key)
                if entry is None:
                    counts[key] = [1, context]
                else:
                    entry[0] += 1
                    entry[1] = context
        for (code, severity), (count, context) in counts.items():
            self._warnings.add(count, _warning(code, severity), context=context)


# Metric attribute sets come from closed sets, so each is built once and shared by every measurement: the SDK
# copies what it keeps and never writes to them, and nothing here does either. Plain dicts on purpose: the SDK
# checks attribute types per measurement, and a dict passes those checks faster than a read-only proxy.
_TIER_ATTRIBUTES: tuple[tuple[str, Mapping[str, str]], ...] = (
    ("tier1", {semconv.METRIC_ATTR_TIER: semconv.TIER1}),
    ("tier2", {semconv.METRIC_ATTR_TIER: semconv.TIER2}),
)
_DIMENSION_ATTRIBUTES: dict[str, Mapping[str, str]] = {
    names.name: {semconv.METRIC_ATTR_DIMENSION: names.name} for names in DIMENSIONS
}


@functools.lru_cache(maxsize=64)
def _label_action(label: str, action: str) -> Mapping[str, str]:
    return {semconv.METRIC_ATTR_LABEL: label, semconv.METRIC_ATTR_ACTION: action}


@functools.lru_cache(maxsize=256)
def _warning(code: str, severity: str) -> Mapping[str, str]:
    return {semconv.METRIC_ATTR_WARNING_CODE: code, semconv.METRIC_ATTR_WARNING_SEVERITY: severity}


_SHARED: weakref.WeakKeyDictionary[metrics.MeterProvider, ConfidenceInstruments] = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.Lock()


def _new_lock_after_fork() -> None:
    # Another thread of the parent may have held it at the fork: the child's first decorator would wait for ever.
    global _SHARED_LOCK
    _SHARED_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_new_lock_after_fork)


def shared_instruments(meter_provider: metrics.MeterProvider | None = None) -> ConfidenceInstruments:
    """The instruments of ``meter_provider`` (the global one when None), created on its first use and shared.

    Every decorator and processor would otherwise create its own: on the API's proxy provider (no SDK set up
    yet) each creation is a proxy meter and five proxy instruments the API keeps for good, so a decorator
    applied per request, or processors created one after another, grew the process without bound.
    """
    provider = meter_provider if meter_provider is not None else metrics.get_meter_provider()
    try:
        with _SHARED_LOCK:
            found = _SHARED.get(provider)
            if found is None:
                found = _SHARED[provider] = ConfidenceInstruments(provider)
            return found
    except TypeError:  # a provider that cannot be weakly referenced or hashed: instruments of its own
        return ConfidenceInstruments(provider)
