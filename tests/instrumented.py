"""A real instrumentor on a provider of its own, for the tests of provider-native retrieval and citations.

Each test module's fixtures pick the instrumentor and the processor: the SDK's ``SimpleSpanProcessor`` exports
the spans as recorded, :func:`confidence_processor` through ``ConfidenceSpanProcessor``, as an application
would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence import semconv
from rag_confidence.otel import ConfidenceSpanProcessor
from rag_confidence.signals import records_from_readable_spans
from rag_confidence.signals.records import SpanRecord


def confidence_processor(exporter: InMemorySpanExporter) -> SpanProcessor:
    return ConfidenceSpanProcessor(SimpleSpanProcessor(exporter))


def traced(
    instrumentor: Any, processor: Callable[[InMemorySpanExporter], SpanProcessor]
) -> Iterator[tuple[InMemorySpanExporter, TracerProvider]]:
    """Instrument on a fresh provider exporting into memory through ``processor``; uninstrument after."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(processor(exporter))
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield exporter, provider
    finally:
        instrumentor.uninstrument()


def records(exporter: InMemorySpanExporter) -> list[SpanRecord]:
    """The exported spans as the signal rules see them."""
    return records_from_readable_spans(exporter.get_finished_spans())


def scored(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    """The exported spans that carry a scorecard."""
    return [
        span
        for span in exporter.get_finished_spans()
        if semconv.RAG_CONFIDENCE_TOTAL in (span.attributes or {})
    ]
