"""A real instrumentor on a provider of its own, for the tests of provider-native retrieval and citations.

Each test module's fixtures pick the instrumentor and the processor: the SDK's ``SimpleSpanProcessor`` exports
the spans as recorded, :func:`confidence_processor` through ``ConfidenceSpanProcessor``, as an application
would.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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


class LoopbackService:
    """A model API on loopback (there is no network here): every POST is answered by ``respond(path, body)``,
    which returns the content type and the bytes to send. ``url`` is the base URL for the real client."""

    def __init__(self, respond: Callable[[str, bytes], tuple[str, bytes]]) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                content_type, data = respond(self.path, self.rfile.read(int(self.headers["content-length"])))
                self.send_response(200)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
