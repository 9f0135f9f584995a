"""A real instrumentor on a provider of its own, for the tests of provider-native retrieval and citations.

Each test module's fixtures pick the instrumentor and the processor: the SDK's ``SimpleSpanProcessor`` exports
the spans as recorded, :func:`confidence_processor` through ``ConfidenceSpanProcessor``, as an application
would.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar
from unittest import mock

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence import compute_confidence, semconv
from rag_confidence.otel import ConfidenceSpanProcessor
from rag_confidence.signals import (
    ExtractedSignals,
    extract_signals,
    find_answers,
    is_retrieval_span,
    may_hold_answer,
    records_from_readable_spans,
)
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
    with restored_wrapt_patches():
        instrumentor.instrument(tracer_provider=provider)
        try:
            yield exporter, provider
        finally:
            instrumentor.uninstrument()


_ABSENT = object()


@contextlib.contextmanager
def restored_wrapt_patches() -> Iterator[None]:
    """Undo every ``wrapt`` patch applied inside the block that is still in place when it ends.

    An instrumentor's ``uninstrument()`` may leave patches behind: OpenLLMetry's OpenAI instrumentor (0.62)
    passes ``"Completions.create"`` to ``unwrap``, which finds no such attribute on the module and removes
    nothing, so its wrapper (bound to this provider) would trace every later test's calls. Restoring here
    keeps any order of test modules independent of what the last one instrumented.
    """
    # Imported here: the lowest-bounds CI stage imports this module (through test_otel_decorator) without the
    # test extra, and so without wrapt, which only the instrumentors bring.
    import wrapt

    applied: list[tuple[Any, str, Any, Any]] = []
    apply = wrapt.patches.apply_patch

    def recording(parent: Any, attribute: str, replacement: Any) -> None:
        try:
            previous = vars(parent).get(attribute, _ABSENT)
        except TypeError:
            previous = _ABSENT
        applied.append((parent, attribute, replacement, previous))
        apply(parent, attribute, replacement)

    with mock.patch.object(wrapt.patches, "apply_patch", recording):
        try:
            yield
        finally:
            for parent, attribute, replacement, previous in reversed(applied):
                try:
                    current = vars(parent).get(attribute, _ABSENT)
                except TypeError:
                    current = getattr(parent, attribute, _ABSENT)
                if current is not replacement:
                    continue  # unwrapped already, or patched over since by someone else
                if previous is _ABSENT:
                    delattr(parent, attribute)
                else:
                    setattr(parent, attribute, previous)


Traced = tuple[InMemorySpanExporter, TracerProvider]


def traced_fixture(
    instrumentor: Callable[[], Any],
    processor: Callable[[InMemorySpanExporter], SpanProcessor] = confidence_processor,
) -> Any:
    """A pytest fixture yielding :func:`traced` for a fresh ``instrumentor()``: assign it to the fixture's name
    (``openinference = traced_fixture(OpenInferenceInstrumentor)``). Nothing is faked here: the instrumentor is
    the real one; only the service its client calls is each module's fake."""

    @pytest.fixture()
    def fixture() -> Iterator[Traced]:
        yield from traced(instrumentor(), processor)

    return fixture


def openinference_retrieval(
    tracer: trace.Tracer,
    documents: Iterable[tuple[str, float, str]],
    *,
    name: str = "retrieve",
    method: str = "app",
) -> None:
    """The application's own retriever as an application reports it: an OpenInference ``RETRIEVER`` span named
    ``name`` with ``rag.retrieval.method`` ``method`` and one ``retrieval.documents.{i}`` (id, score, content)
    per ``(id, score, text)``. Nothing is faked: this is the application's code, which the tests write."""
    with tracer.start_as_current_span(name) as span:
        span.set_attribute(semconv.OPENINFERENCE_SPAN_KIND, semconv.OPENINFERENCE_KIND_RETRIEVER)
        span.set_attribute(semconv.RAG_RETRIEVAL_METHOD, method)
        for index, (doc_id, score, text) in enumerate(documents):
            prefix = f"{semconv.OI_RETRIEVAL_DOCUMENTS}.{index}."
            span.set_attribute(prefix + semconv.OI_DOCUMENT_ID, doc_id)
            span.set_attribute(prefix + semconv.OI_DOCUMENT_SCORE, score)
            span.set_attribute(prefix + semconv.OI_DOCUMENT_CONTENT, text)


def candidates(documents: Iterable[tuple[str, float, str]], method: str) -> list[dict[str, Any]]:
    """The expected ``candidates`` input for documents one retrieval ``method`` returned in this order, as
    ``(id, score, text)``: the score as reported, the rank by position (written out, not from the code under
    test)."""
    return [
        {"documentId": doc_id, "retrievalScores": {method: score}, "combinedScore": score, "rank": rank}
        for rank, (doc_id, score, _) in enumerate(documents, start=1)
    ]


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


def score_points(reader: InMemoryMetricReader) -> list[HistogramDataPoint]:
    """The data points of the score histogram (``rag.confidence.score``) the processor recorded into
    ``reader``: one per attribute set, each counting the scorecards."""
    data = reader.get_metrics_data()
    assert data is not None
    points = [
        point
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == semconv.METRIC_SCORE
        for point in metric.data.data_points
    ]
    histogram = [point for point in points if isinstance(point, HistogramDataPoint)]
    assert histogram == points
    return histogram


def assert_scored_as(
    exporter: InMemorySpanExporter, expected: dict[str, Any], answer_name: str | None = None
) -> ExtractedSignals:
    """Both paths agree with ``expected``: the gateway's extraction over the exported spans (one answer, named
    ``answer_name`` when given) and the scorecard the in-process processor put on that answer span. Returns the
    extracted signals, for the diagnostics a test checks."""
    (group,) = find_answers(records(exporter))
    if answer_name is not None:
        assert group.answer.name == answer_name
    signals = extract_signals(group.spans)
    assert signals.inputs == expected
    (answer,) = scored(exporter)
    if answer_name is not None:
        assert answer.name == answer_name
    assert answer.attributes is not None
    assert answer.attributes[semconv.RAG_CONFIDENCE_TOTAL] == compute_confidence(expected).total
    return signals


def bare_call_signals(exporter: InMemorySpanExporter) -> ExtractedSignals:
    """The trace of a model call with hosted retrieval and no span of the application's around it: one span, a
    retrieval that may hold an answer, and so its own answer (the root rule). Returns its signals."""
    spans = records(exporter)
    (span,) = spans
    assert is_retrieval_span(span)
    assert may_hold_answer(span.attributes)
    (group,) = find_answers(spans)
    assert group.answer is span and group.rule == "root"
    return extract_signals(group.spans)


def assert_scoreable(inputs: dict[str, Any]) -> None:
    """The extracted inputs pass the scoring core's validation: strict (no input warning at all) whenever
    there are candidates; without any, "no candidates" is the one warning expected."""
    if inputs["candidates"]:
        scorecard = compute_confidence(inputs, {"validation": "strict"})
    else:
        scorecard = compute_confidence(inputs)
        assert [w.code for w in scorecard.meta.warnings if w.path == "candidates"] == ["missing-candidates"]
    assert 0 <= scorecard.total <= 100
    assert scorecard.meta.raw_total is not None


def assert_feedback_grades_the_answer(call: SpanRecord) -> None:
    """``call`` (a model call that retrieved and answered, alone in its trace) with a ``faithfulness``
    evaluation a judge attached to it (OpenInference ``evaluations.0.*``): read as the answer's faithfulness,
    which also states the support level."""
    judged = SpanRecord(
        call.trace_id,
        call.span_id,
        call.parent_span_id,
        call.name,
        {
            **call.attributes,
            "evaluations.0.evaluation.name": "faithfulness",
            "evaluations.0.evaluation.score": 0.9,
        },
    )
    signals = extract_signals(find_answers([judged])[0].spans)
    assert signals.inputs["faithfulnessScore"] == 0.9
    assert signals.inputs["supportLevel"] == "high"


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


FakeT = TypeVar("FakeT", bound="LoopbackFake")


class LoopbackFake:
    """Base of a provider API faked on loopback (there is no network here; only the provider is faked, its
    client is the real one): the subclass answers requests through ``self.service``, a
    :class:`LoopbackService`. As a context manager it shuts that server down on leaving."""

    service: LoopbackService

    def __enter__(self: FakeT) -> FakeT:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.service.close()
