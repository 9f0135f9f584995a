"""``ConfidenceSpanProcessor``'s per-trace buffers over long traces, foreign tracer providers and forks.

A batch job or an agent runs many answers under one local root; each item span that ends after its answer
used to stay buffered under the root until the trace's ``max_spans_per_trace`` was full, and later answers then
scored without their retrieval. Expected scorecards come from ``compute_confidence`` on inputs written out by
hand, never from the processor.
"""

from __future__ import annotations

import gc
import json
import os
import re
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util.types import AttributeValue

import rag_confidence
from rag_confidence import semconv
from rag_confidence.otel import ConfidenceSpanProcessor, ProcessorStats, scored_answer
from rag_confidence.scoring import compute_confidence
from rag_confidence.scoring.models import ConfidenceScorecard

CAP = 8
ITEMS = 3 * CAP


@dataclass
class Pipeline:
    provider: TracerProvider
    exporter: InMemorySpanExporter
    processor: ConfidenceSpanProcessor

    @property
    def tracer(self) -> trace.Tracer:
        return self.provider.get_tracer("test")

    def exported(self) -> list[ReadableSpan]:
        assert self.provider.force_flush(10_000)
        return list(self.exporter.get_finished_spans())


MODES = ["simple", "batch", "batch-background"]


@pytest.fixture(params=MODES)
def pipeline(request: pytest.FixtureRequest) -> Iterator[Pipeline]:
    exporter = InMemorySpanExporter()
    kind: str = request.param
    downstream = SimpleSpanProcessor(exporter) if kind == "simple" else BatchSpanProcessor(exporter)
    processor = ConfidenceSpanProcessor(
        downstream, max_spans_per_trace=CAP, background_scoring=kind.endswith("background")
    )
    provider = TracerProvider()
    provider.add_span_processor(processor)
    yield Pipeline(provider, exporter, processor)
    provider.shutdown()


def _docs(index: int) -> list[dict[str, Any]]:
    return [{"id": f"item-{index}-a", "score": 0.9}, {"id": f"item-{index}-b", "score": 0.5}]


def _retrieval(docs: list[dict[str, Any]]) -> dict[str, AttributeValue]:
    return {
        semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OPERATION_RETRIEVAL,
        semconv.GEN_AI_RETRIEVAL_DOCUMENTS: json.dumps(docs),
        semconv.RAG_RETRIEVAL_METHOD: "vector",
    }


def _candidates(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "retrievalScores": {"vector": doc["score"]},
            "combinedScore": doc["score"],
            "documentId": doc["id"],
            "rank": rank,
        }
        for rank, doc in enumerate(docs, start=1)
    ]


def _run_item(
    pipeline: Pipeline, index: int, item_attributes: dict[str, AttributeValue] | None = None
) -> trace.Span:
    """item > answer (marked) > retrieve + generate; the item ends after its answer. Returns the item span.

    Then waits for background scoring to catch up, as an answer's model call would let it: queued answers
    hold their spans in the buffer until the worker takes them, and a loop without model calls outruns it.
    """
    tracer = pipeline.tracer
    with tracer.start_as_current_span(f"item {index}", attributes=item_attributes) as item:
        with tracer.start_as_current_span(
            f"answer {index}",
            attributes={semconv.RAG_ANSWER: True, semconv.RAG_SIGNAL_SUPPORT_LEVEL: "high"},
        ):
            with tracer.start_as_current_span(f"retrieve {index}", attributes=_retrieval(_docs(index))):
                pass
            with tracer.start_as_current_span(f"generate {index}"):
                pass
        with tracer.start_as_current_span(f"store {index}"):  # the item's own work after its answer
            pass
    assert pipeline.processor.force_flush(10_000)
    return item


def _assert_scored_as(span: ReadableSpan, expected: ConfidenceScorecard, candidates: int) -> None:
    attributes = span.attributes or {}
    assert attributes.get(semconv.RAG_CONFIDENCE_CANDIDATES) == candidates, span.name
    assert attributes.get(semconv.RAG_CONFIDENCE_TOTAL) == expected.total, span.name
    assert attributes.get(semconv.RAG_CONFIDENCE_ACTION) == expected.recommended_action, span.name


def test_every_answer_of_a_long_batch_is_scored_with_its_own_retrieval(pipeline: Pipeline) -> None:
    tracer = pipeline.tracer
    with tracer.start_as_current_span("batch job") as root:
        for index in range(ITEMS):
            _run_item(pipeline, index)
        # What the finished items leave buffered for the still running root: nothing anyone can read.
        held = pipeline.processor.pending_spans_under(root.get_span_context()) or []
        assert len(held) <= 1, [span.name for span in held]
    by_name = {span.name: span for span in pipeline.exported()}
    for index in range(ITEMS):
        expected = compute_confidence({"supportLevel": "high", "candidates": _candidates(_docs(index))})
        _assert_scored_as(by_name[f"answer {index}"], expected, candidates=2)
    assert semconv.RAG_CONFIDENCE_TOTAL not in (by_name["batch job"].attributes or {})
    stats = pipeline.processor.stats()
    assert (stats.answers_scored, stats.spans_not_buffered, stats.traces_evicted) == (ITEMS, 0, 0)
    assert stats.pending_traces == 0
    assert len(by_name) == 1 + 5 * ITEMS  # every span forwarded once


def test_an_enclosing_answer_reads_what_its_finished_items_carry(pipeline: Pipeline) -> None:
    """The outer answer's scorecard is what its own spans give, however many items ran beneath it: the items'
    ``rag.signal.*`` attributes and evaluation events count for it, the items' answers' retrievals do not."""
    tracer = pipeline.tracer
    outer_docs = [{"id": "agent-plan", "score": 0.8}]
    with tracer.start_as_current_span(
        "agent", attributes={semconv.RAG_ANSWER: True, semconv.RAG_SIGNAL_SUPPORT_LEVEL: "high"}
    ):
        with tracer.start_as_current_span("plan", attributes=_retrieval(outer_docs)):
            pass
        for index in range(ITEMS):
            attributes: dict[str, AttributeValue] = {"item.index": index}
            if index == 2:
                attributes[semconv.RAG_SIGNAL_FAITHFULNESS_SCORE] = 0.7
            _run_item(pipeline, index, attributes if index != ITEMS - 2 else None)
        # A judge's verdict on the last items, as an event of a span of the agent's own.
        with tracer.start_as_current_span("judge") as judge:
            judge.add_event(
                semconv.GEN_AI_EVALUATION_RESULT,
                {
                    semconv.GEN_AI_EVALUATION_NAME: "answer_relevance",
                    semconv.GEN_AI_EVALUATION_SCORE_VALUE: 0.6,
                },
            )
    by_name = {span.name: span for span in pipeline.exported()}
    expected_outer = compute_confidence(
        {
            "supportLevel": "high",
            "faithfulnessScore": 0.7,
            "answerRelevanceScore": 0.6,
            "candidates": _candidates(outer_docs),
        }
    )
    _assert_scored_as(by_name["agent"], expected_outer, candidates=1)
    for index in range(ITEMS):
        expected = compute_confidence({"supportLevel": "high", "candidates": _candidates(_docs(index))})
        _assert_scored_as(by_name[f"answer {index}"], expected, candidates=2)
    stats = pipeline.processor.stats()
    assert (stats.answers_scored, stats.spans_not_buffered, stats.traces_evicted) == (ITEMS + 1, 0, 0)


@pytest.mark.parametrize("outer_answer", [True, False], ids=["marked root", "plain root"])
def test_items_an_enclosing_answer_may_read_are_bounded_apart_from_the_answers_beneath(
    pipeline: Pipeline, outer_answer: bool
) -> None:
    """Items whose own attributes an enclosing answer may read are kept for it, up to ``max_spans_per_trace``
    of them (the first, as for any answer too large), apart from the buffer the answers beneath still need.
    Those dropped past that count as not buffered only when an answer that would have read them is scored:
    a plain root (an agent's) lost nothing."""
    tracer = pipeline.tracer
    root: dict[str, AttributeValue] = {semconv.RAG_SIGNAL_SUPPORT_LEVEL: "high"}
    if outer_answer:
        root[semconv.RAG_ANSWER] = True
    with tracer.start_as_current_span("agent", attributes=root):
        for index in range(ITEMS):
            # Every item carries a signal; the last one's wins (later-ending spans over earlier ones).
            _run_item(
                pipeline, index, {semconv.RAG_SIGNAL_ANSWER_RELEVANCE_SCORE: round(0.5 + index / 100, 2)}
            )
    by_name = {span.name: span for span in pipeline.exported()}
    for index in range(ITEMS):
        expected = compute_confidence({"supportLevel": "high", "candidates": _candidates(_docs(index))})
        _assert_scored_as(by_name[f"answer {index}"], expected, candidates=2)
    stats = pipeline.processor.stats()
    if outer_answer:
        expected_outer = compute_confidence(
            {
                "supportLevel": "high",
                "answerRelevanceScore": round(0.5 + (CAP - 1) / 100, 2),
                "candidates": [],
            }
        )
        _assert_scored_as(by_name["agent"], expected_outer, candidates=0)
        assert (stats.answers_scored, stats.spans_not_buffered) == (ITEMS + 1, ITEMS - CAP)
    else:
        assert semconv.RAG_CONFIDENCE_TOTAL not in (by_name["agent"].attributes or {})
        assert (stats.answers_scored, stats.spans_not_buffered) == (ITEMS, 0)
    assert (stats.traces_evicted, stats.pending_traces) == (0, 0)


def test_one_answer_larger_than_the_cap_keeps_its_first_spans(pipeline: Pipeline) -> None:
    """The documented rule for a single oversized answer is unchanged: its first spans are read, the rest
    counted as not buffered."""
    tracer = pipeline.tracer
    first = [{"id": "first", "score": 0.9}]
    with tracer.start_as_current_span("answer", attributes={semconv.RAG_ANSWER: True}):
        with tracer.start_as_current_span("retrieve first", attributes=_retrieval(first)):
            pass
        for index in range(2 * CAP):
            with tracer.start_as_current_span(f"step {index}"):
                pass
        with tracer.start_as_current_span("retrieve late", attributes=_retrieval(_docs(0))):
            pass
    by_name = {span.name: span for span in pipeline.exported()}
    assert (by_name["answer"].attributes or {}).get(semconv.RAG_CONFIDENCE_CANDIDATES) == 1
    assert pipeline.processor.stats().spans_not_buffered == 2 * CAP + 2 - CAP


# -- a request span from a tracer provider without the processor ---------------------------------------------


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background scoring"])
def test_answers_beneath_a_foreign_request_span_leave_no_eviction_behind(background: bool) -> None:
    """The web framework's server span comes from a provider without the processor, the decorated answer from
    one with it: every answer is scored, and the marks they leave for a root that never ends here are dropped
    without counting as evictions (``max_pending_traces`` 4 for 3 times as many requests)."""
    plain = TracerProvider()
    plain.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    exporter = InMemorySpanExporter()
    processor = ConfidenceSpanProcessor(
        SimpleSpanProcessor(exporter), max_pending_traces=4, background_scoring=background
    )
    scored = TracerProvider()
    scored.add_span_processor(processor)
    tracer = scored.get_tracer("app")
    received: list[ConfidenceScorecard] = []

    @scored_answer(name="answer", tracer_provider=scored, on_score=lambda card, result: received.append(card))
    def answer(index: int) -> str:
        with tracer.start_as_current_span("retrieve", attributes=_retrieval(_docs(index))):
            pass
        return "an answer"

    requests = 3 * 4
    for index in range(requests):
        with plain.get_tracer("server").start_as_current_span("GET /ask"):
            answer(index)
        # Lets background scoring take each answer before the next request opens a buffer: a loop without
        # model calls would outrun it, and evict buffers it has yet to take.
        assert processor.force_flush(10_000)
    assert [card.total for card in received] == [
        compute_confidence({"supportLevel": "medium", "candidates": _candidates(_docs(index))}).total
        for index in range(requests)
    ]
    stats = processor.stats()
    assert (stats.answers_already_scored, stats.traces_evicted, stats.scoring_failures) == (requests, 0, 0)
    assert stats.pending_traces <= 4  # bounded all the same
    scored.shutdown()
    plain.shutdown()


# -- pre-fork servers --------------------------------------------------------------------------------------------


def _counts(stats: ProcessorStats) -> list[int]:
    return [
        stats.answers_scored,
        stats.spans_received,
        stats.spans_forwarded,
        stats.pending_traces,
        stats.traces_evicted,
        stats.spans_not_buffered,
    ]


def _child_report(pipe: int, processor: ConfidenceSpanProcessor, tracer: trace.Tracer) -> None:
    """In the forked child: the stats it starts with, then those after one request of its own."""
    before = _counts(processor.stats())
    with (
        tracer.start_as_current_span("child request"),
        tracer.start_as_current_span("retrieve", attributes=_retrieval(_docs(0))),
    ):
        pass
    flushed = processor.force_flush(5_000)
    report = {"before": before, "after": _counts(processor.stats()), "flushed": flushed}
    os.write(pipe, json.dumps(report).encode())


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork (POSIX)")
@pytest.mark.parametrize("background", [False, True], ids=["inline", "background scoring"])
def test_a_forked_child_starts_with_empty_buffers_and_zero_counts(background: bool) -> None:
    exporter = InMemorySpanExporter()
    processor = ConfidenceSpanProcessor(
        SimpleSpanProcessor(exporter), max_spans_per_trace=2, background_scoring=background
    )
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("test")
    for _ in range(3):  # the parent's work: answers scored, spans not buffered
        with tracer.start_as_current_span("request"):
            for name in ("retrieve", "rerank", "generate"):
                with tracer.start_as_current_span(name, attributes=_retrieval(_docs(1))):
                    pass
    open_request = tracer.start_span("open request")  # a trace still buffered at the fork
    with tracer.start_as_current_span(
        "retrieve", context=trace.set_span_in_context(open_request), attributes=_retrieval(_docs(2))
    ):
        pass
    assert processor.force_flush(10_000)
    parent = processor.stats()
    assert parent.answers_scored == 3 and parent.pending_traces == 1 and parent.spans_not_buffered == 3
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            os.close(read_end)
            _child_report(write_end, processor, tracer)
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reading:
        report = json.loads(reading.read() or b"{}")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert report["before"] == [0, 0, 0, 0, 0, 0]
    # The child's own request: scored by its own (new) worker, nothing of the parent's forwarded again.
    assert report["flushed"] is True
    assert report["after"] == [1, 2, 2, 0, 0, 0]
    # The parent is untouched.
    assert processor.stats() == parent
    open_request.end()
    provider.shutdown()


# -- what a settled span may give an enclosing answer ----------------------------------------------------------

_KEY = re.compile(r"[a-z_][a-z0-9_]*(?:\.[a-z0-9_]+)+\.?")


def test_every_attribute_name_signals_read_lies_in_a_signal_namespace() -> None:
    """A span settled around an answer is let go when none of its attributes is in ``SIGNAL_NAMESPACES``: a
    name ``signals/`` reads outside them would be lost to an enclosing answer."""
    signals = Path(rag_confidence.__file__).parent / "signals"
    read: set[str] = {semconv.OI_METADATA, semconv.OI_EVALUATIONS, semconv.OI_ANNOTATIONS}
    for module in signals.glob("*.py"):
        for name in re.findall(r"semconv\.([A-Z][A-Z0-9_]*)", module.read_text()):
            value = getattr(semconv, name)
            if isinstance(value, str) and _KEY.fullmatch(value):
                read.add(value)
    assert len(read) > 50  # the scan found the names
    # Read only to qualify a span that carries signal attributes already (``error.type`` on a Chroma query
    # span, whose ``db.chroma.query.*`` attributes keep it): alone they give an enclosing answer nothing.
    qualifiers = {semconv.ERROR_TYPE}
    outside = sorted(
        key for key in read - qualifiers if key.partition(".")[0] not in semconv.SIGNAL_NAMESPACES
    )
    assert outside == []


def _forwarded(reader: InMemoryMetricReader) -> int | float:
    data = reader.get_metrics_data()
    assert data is not None
    return sum(
        point.value
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == semconv.METRIC_PROCESSOR_SPANS_FORWARDED
        for point in metric.data.data_points
        if isinstance(point, NumberDataPoint)
    )


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork (POSIX)")
def test_a_forked_child_reports_only_its_own_work_in_the_processor_metrics() -> None:
    """Counts of the parent's processors, live or collected, stay the parent's: the child's cumulative
    counters start at zero."""
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    gone = ConfidenceSpanProcessor(SimpleSpanProcessor(InMemorySpanExporter()), meter_provider=meter_provider)
    provider = TracerProvider(shutdown_on_exit=False)  # no exit hook keeping it alive
    provider.add_span_processor(gone)
    with provider.get_tracer("test").start_as_current_span("request before"):
        pass
    collected = weakref.ref(gone)
    del provider, gone
    gc.collect()
    assert collected() is None
    processor = ConfidenceSpanProcessor(
        SimpleSpanProcessor(InMemorySpanExporter()), meter_provider=meter_provider
    )
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("request"), tracer.start_as_current_span("child"):
        pass
    assert _forwarded(reader) == 3
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            os.close(read_end)
            before = _forwarded(reader)
            with tracer.start_as_current_span("child request"):
                pass
            os.write(write_end, json.dumps([before, _forwarded(reader)]).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reading:
        report = json.loads(reading.read() or b"null")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert report == [0, 1]
    assert _forwarded(reader) == 3  # the parent's, unchanged
    provider.shutdown()
    meter_provider.shutdown()
