"""Sampling: the processor scores what the SDK samples; the decorator scores every call.

The SDK hands span processors only sampled (recording) spans, so with a ratio sampler the processor scores
that share of answers and its cost scales with it. ``@scored_answer`` still returns a scorecard for an
unsampled call (its caller gates on it), built from ``record_signals`` and ``signals(result)``; its metrics are
recorded without exemplars there, since no stored trace could be pointed at.

Expected scorecards come from ``compute_confidence`` on inputs written out by hand.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import HistogramDataPoint
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased, TraceIdRatioBased

from rag_confidence import semconv
from rag_confidence.otel import last_scorecard, record_signals, scored_answer
from rag_confidence.scoring import compute_confidence
from tests.test_otel_processor import (
    DOCS,
    Pipeline,
    expected_candidates,
    make_pipeline,
    retrieval_attributes,
    run_rag_trace,
)


def _sampled(pipeline: Pipeline, sampler: Any) -> Pipeline:
    """The same pipeline behind a tracer provider with ``sampler``."""
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(pipeline.processor)
    pipeline.tracer_provider = provider
    return pipeline


@pytest.fixture(params=["simple", "batch-background"])
def kind(request: pytest.FixtureRequest) -> Iterator[str]:
    yield request.param


def test_unsampled_traces_never_reach_the_processor(kind: str) -> None:
    pipeline = _sampled(make_pipeline(kind), ALWAYS_OFF)
    try:
        for _ in range(5):
            run_rag_trace(pipeline)
        assert pipeline.spans() == {}
        stats = pipeline.processor.stats()
        assert (stats.spans_received, stats.answers_scored, stats.pending_traces) == (0, 0, 0)
        assert semconv.METRIC_SCORE not in pipeline.metrics()
    finally:
        pipeline.tracer_provider.shutdown()


def test_with_a_ratio_sampler_exactly_the_sampled_answers_are_scored(kind: str) -> None:
    pipeline = _sampled(make_pipeline(kind), ParentBased(TraceIdRatioBased(0.5)))
    try:
        traces = 40
        for _ in range(traces):
            run_rag_trace(pipeline)
        pipeline.tracer_provider.force_flush()
        finished = pipeline.exporter.get_finished_spans()
        roots = [span for span in finished if span.name == "rag.pipeline"]
        # Whole traces are kept or dropped (ParentBased): three spans per sampled trace, none in between.
        assert len(finished) == 3 * len(roots)
        assert 0 < len(roots) < traces  # 40 random trace ids at 0.5: both outcomes occur
        expected = compute_confidence(
            {
                "supportLevel": "high",
                "hasConflict": False,
                "faithfulnessScore": 0.88,
                "candidates": expected_candidates(DOCS),
            }
        )
        for root in roots:
            assert (root.attributes or {})[semconv.RAG_CONFIDENCE_TOTAL] == expected.total
        stats = pipeline.processor.stats()
        assert stats.answers_scored == len(roots)
        assert stats.spans_received == stats.spans_forwarded == len(finished)
        (point,) = pipeline.metrics()[semconv.METRIC_SCORE].data.data_points
        assert isinstance(point, HistogramDataPoint)
        assert point.count == len(roots)
    finally:
        pipeline.tracer_provider.shutdown()


def test_the_decorator_scores_an_unsampled_call_from_its_recorded_signals() -> None:
    pipeline = _sampled(make_pipeline("simple"), ALWAYS_OFF)
    tracer = pipeline.tracer

    @scored_answer(
        meter_provider=pipeline.meter_provider,
        tracer_provider=pipeline.tracer_provider,
        signals=lambda result: {"candidates": expected_candidates(DOCS)},
    )
    def answer(question: str) -> str:
        # This retrieval span is not sampled either: its documents reach the scorecard only through signals().
        with tracer.start_as_current_span("retrieve", attributes=retrieval_attributes(DOCS)):
            pass
        record_signals(support_level="medium", has_conflict=False)
        return f"About {question}: see [1]."

    try:
        assert answer("refunds").startswith("About refunds")
        card = last_scorecard()
        expected = compute_confidence(
            {"supportLevel": "medium", "hasConflict": False, "candidates": expected_candidates(DOCS)}
        )
        assert card is not None
        assert (card.total, card.label, card.recommended_action) == (
            expected.total,
            expected.label,
            expected.recommended_action,
        )
        assert pipeline.spans() == {}  # nothing sampled, nothing exported
        # The measurement is taken (the caller's answers are counted); no exemplar, as no trace is stored.
        (point,) = pipeline.metrics()[semconv.METRIC_SCORE].data.data_points
        assert isinstance(point, HistogramDataPoint)
        assert point.count == 1 and point.sum == expected.total
        assert not point.exemplars
    finally:
        pipeline.tracer_provider.shutdown()
