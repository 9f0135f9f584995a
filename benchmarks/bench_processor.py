"""ConfidenceSpanProcessor overhead: CPU per trace against BatchSpanProcessor alone; memory of pending traces.

Run: ``python benchmarks/bench_processor.py`` (``--traces N``, ``--rounds R``, ``--pending P``).

The traced pipeline is the issue's: a root span, two retrievers with 10 documents each (OpenInference
attributes: id, score, content, metadata JSON), a reranker and an LLM span. Both setups export through a real
OTLP encoder (``encode_spans`` + protobuf serialisation, what the OTLP exporters do before the network) into
a sink, on the BatchSpanProcessor's worker thread. CPU is process CPU time (all threads: the application
thread, the batch worker, our scoring), so the ratio includes scoring. Setups alternate round by round in one
process and the median ratio is reported, with a breakdown of where the extra CPU goes.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
import tracemalloc
from collections.abc import Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from rag_confidence import semconv
from rag_confidence.otel import ConfidenceSpanProcessor
from rag_confidence.otel.answer_scoring import AnswerScorer
from rag_confidence.otel.attributes import scorecard_attributes
from rag_confidence.otel.events import EvaluationEmitter
from rag_confidence.otel.metrics import ConfidenceInstruments, span_context_as_parent
from rag_confidence.scoring import create_scorer
from rag_confidence.signals import extract_signals, find_answers
from rag_confidence.signals.records import SpanRecord

CONTENT = (
    "Section 4.2: the supplier shall deliver within thirty days of the order; late delivery incurs a penalty "
    "of one percent per week, capped at ten percent of the order value, unless force majeure applies."
)


class EncodingSink(SpanExporter):
    """Encodes each batch exactly as the OTLP exporters do, then drops the bytes (no network)."""

    def __init__(self) -> None:
        self.spans = 0
        self.bytes = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.bytes += len(encode_spans(spans).SerializeToString())
        self.spans += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def _documents(prefix: str, count: int, offset: int) -> dict[str, Any]:
    attributes: dict[str, Any] = {}
    for index in range(count):
        key = f"{prefix}.{index}."
        attributes[key + semconv.OI_DOCUMENT_ID] = f"doc-{offset + index}"
        attributes[key + semconv.OI_DOCUMENT_SCORE] = round(0.95 - index * 0.05, 3)
        attributes[key + semconv.OI_DOCUMENT_CONTENT] = CONTENT
        attributes[key + semconv.OI_DOCUMENT_METADATA] = json.dumps(
            {
                "document_type": "contract",
                "last_updated": "2024-05-01",
                "source": f"s3://bucket/doc-{offset + index}",
            }
        )
    return attributes


RETRIEVER_A = {
    semconv.OPENINFERENCE_SPAN_KIND: semconv.OPENINFERENCE_KIND_RETRIEVER,
    "input.value": "late delivery penalty cap",
    **_documents(semconv.OI_RETRIEVAL_DOCUMENTS, 10, 0),
}
RETRIEVER_B = {
    semconv.OPENINFERENCE_SPAN_KIND: semconv.OPENINFERENCE_KIND_RETRIEVER,
    "input.value": "late delivery penalty cap",
    **_documents(semconv.OI_RETRIEVAL_DOCUMENTS, 10, 5),
}
RERANKER = {
    semconv.OPENINFERENCE_SPAN_KIND: semconv.OPENINFERENCE_KIND_RERANKER,
    "reranker.query": "late delivery penalty cap",
    **_documents(semconv.OI_RERANKER_OUTPUT_DOCUMENTS, 5, 0),
}
LLM = {
    semconv.OPENINFERENCE_SPAN_KIND: semconv.OPENINFERENCE_KIND_LLM,
    "llm.model_name": "gpt-4o-mini",
    semconv.OI_OUTPUT_VALUE: "Late delivery costs 1% a week, capped at 10% of the order [doc-0] [doc-2].",
}


def _plain(attributes: dict[str, Any]) -> dict[str, Any]:
    # The same payload on spans that are no retrieval: traffic the processor buffers but never scores.
    return {f"app.{key}": value for key, value in attributes.items()}


PIPELINES = {
    True: (RETRIEVER_A, RETRIEVER_B, RERANKER, LLM),
    False: (_plain(RETRIEVER_A), _plain(RETRIEVER_B), _plain(RERANKER), _plain(LLM)),
}


def run_pipeline(tracer: trace.Tracer, rag: bool = True) -> None:
    first, second, rerank, llm = PIPELINES[rag]
    with tracer.start_as_current_span("rag.query", attributes={"input.value": "late delivery penalty cap"}):
        with tracer.start_as_current_span("retrieve.vector", attributes=first):
            pass
        with tracer.start_as_current_span("retrieve.keyword", attributes=second):
            pass
        with tracer.start_as_current_span("rerank", attributes=rerank):
            pass
        with tracer.start_as_current_span("llm", attributes=llm):
            pass


class NullLogExporter(LogRecordExporter):
    def export(self, batch: Sequence[Any]) -> LogRecordExportResult:
        return LogRecordExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def confidence_providers() -> tuple[MeterProvider, LoggerProvider]:
    """SDK meter and logger providers, so recording the metrics and the event costs what it costs in use."""
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(NullLogExporter()))
    return MeterProvider(metric_readers=[InMemoryMetricReader()]), logger_provider


def build(wrapped: bool, background: bool = False) -> tuple[TracerProvider, EncodingSink, SpanProcessor]:
    sink = EncodingSink()
    batch = BatchSpanProcessor(sink, max_queue_size=1_000_000, max_export_batch_size=512)
    processor: SpanProcessor = batch
    if wrapped:
        meter_provider, logger_provider = confidence_providers()
        processor = ConfidenceSpanProcessor(
            batch,
            meter_provider=meter_provider,
            logger_provider=logger_provider,
            background_scoring=background,
            max_scoring_queue=1_000_000,
        )
    provider = TracerProvider()
    provider.add_span_processor(processor)
    return provider, sink, processor


def app_thread_cpu_per_trace(mode: str, traces: int) -> float:
    """CPU of the application thread only (what delays the request): ``alone``, ``inline`` or ``background``."""
    provider, sink, _ = build(mode != "alone", mode == "background")
    tracer = provider.get_tracer("bench")
    for _ in range(50):
        run_pipeline(tracer)
    provider.force_flush()
    gc.collect()
    started = time.thread_time()
    for _ in range(traces):
        run_pipeline(tracer)
    elapsed = time.thread_time() - started
    provider.force_flush()
    assert sink.spans == (traces + 50) * 5, "every span must reach the exporter"
    provider.shutdown()
    return elapsed / traces


def cpu_per_trace(wrapped: bool, traces: int, rag: bool = True) -> float:
    provider, sink, _ = build(wrapped)
    tracer = provider.get_tracer("bench")
    for _ in range(50):  # warm caches and lazily built objects outside the measurement
        run_pipeline(tracer, rag)
    provider.force_flush()
    gc.collect()
    started = time.process_time()
    for _ in range(traces):
        run_pipeline(tracer, rag)
    provider.force_flush()
    elapsed = time.process_time() - started
    assert sink.spans == (traces + 50) * 5, "every span must reach the exporter"
    provider.shutdown()
    return elapsed / traces


def scoring_breakdown(traces: int) -> dict[str, float]:
    """Per answer: turning buffered spans into records, finding the answer, extracting + scoring (µs)."""
    provider, sink, _ = build(False)
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    capture = TracerProvider()
    capture.add_span_processor(SimpleSpanProcessor(memory))
    run_pipeline(capture.get_tracer("bench"))
    spans = list(memory.get_finished_spans())
    scorer = AnswerScorer()
    scorer_core = create_scorer()
    meter_provider, logger_provider = confidence_providers()
    instruments = ConfidenceInstruments(meter_provider)
    events = EvaluationEmitter(logger_provider)
    timings: dict[str, list[float]] = {
        "span records": [],
        "find_answers": [],
        "extract_signals": [],
        "compute_confidence": [],
        "attributes": [],
        "metrics+event": [],
    }
    root = spans[-1]
    assert root.context is not None
    for _ in range(traces):
        t0 = time.perf_counter()
        records = [SpanRecord.from_readable_span(span) for span in spans]
        t1 = time.perf_counter()
        (group,) = find_answers(records)
        t2 = time.perf_counter()
        extracted = extract_signals(group.spans)
        t3 = time.perf_counter()
        card = scorer_core.compute(extracted.inputs)
        t4 = time.perf_counter()
        scorecard_attributes(card, extracted)
        t5 = time.perf_counter()
        context = span_context_as_parent(root.context)
        instruments.record(card, t4 - t2, context)
        events.emit(card, context)
        t6 = time.perf_counter()
        for name, start, end in zip(timings, (t0, t1, t2, t3, t4, t5), (t1, t2, t3, t4, t5, t6), strict=True):
            timings[name].append(end - start)
    del scorer
    provider.shutdown()
    return {name: statistics.median(values) * 1e6 for name, values in timings.items()}


def design_outputs(traces: int) -> tuple[float, float]:
    """What the design's outputs cost per answer, whatever computes them (µs): exporting the answer span's
    ``rag.confidence.*`` attributes through the OTLP encoder (enriched copy minus original), and recording the
    design's metrics and event for a scorecard computed beforehand."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    captured: dict[bool, ReadableSpan] = {}
    for wrapped in (False, True):
        memory = InMemorySpanExporter()
        capture = TracerProvider()
        downstream = SimpleSpanProcessor(memory)
        capture.add_span_processor(ConfidenceSpanProcessor(downstream) if wrapped else downstream)
        run_pipeline(capture.get_tracer("bench"))
        captured[wrapped] = memory.get_finished_spans()[-1]
        capture.shutdown()
    original, enriched = captured[False], captured[True]
    assert semconv.RAG_CONFIDENCE_TOTAL in (enriched.attributes or {})
    spans = (original, enriched)
    encode: dict[ReadableSpan, list[float]] = {span: [] for span in spans}
    for _ in range(traces):
        for span in spans:
            started = time.perf_counter()
            encode_spans([span]).SerializeToString()
            encode[span].append(time.perf_counter() - started)
    exported = (statistics.median(encode[enriched]) - statistics.median(encode[original])) * 1e6

    meter_provider, logger_provider = confidence_providers()
    instruments, events = ConfidenceInstruments(meter_provider), EvaluationEmitter(logger_provider)
    records = [SpanRecord.from_readable_span(enriched)]
    card = create_scorer().compute(extract_signals(records).inputs)
    assert enriched.context is not None
    recorded: list[float] = []
    for _ in range(traces):
        started = time.perf_counter()
        context = span_context_as_parent(enriched.context)
        instruments.record(card, 0.0001, context)
        events.emit(card, context)
        recorded.append(time.perf_counter() - started)
    logger_provider.shutdown()
    return exported, statistics.median(recorded) * 1e6


def pending_memory(wrapped: bool, pending: int) -> tuple[float, int]:
    """Memory held with ``pending`` traces open at once (children ended, roots open): (MiB, bytes/trace)."""
    provider, sink, processor = build(wrapped)
    if isinstance(processor, ConfidenceSpanProcessor):
        processor = ConfidenceSpanProcessor(
            BatchSpanProcessor(sink, max_queue_size=1_000_000), max_pending_traces=pending + 1
        )
        provider = TracerProvider()
        provider.add_span_processor(processor)
    tracer = provider.get_tracer("bench")
    gc.collect()
    tracemalloc.start()
    baseline = tracemalloc.get_traced_memory()[0]
    roots = []
    for _ in range(pending):
        root = tracer.start_span("rag.query")
        context = trace.set_span_in_context(root)
        for name, attributes in (
            ("retrieve.vector", RETRIEVER_A),
            ("retrieve.keyword", RETRIEVER_B),
            ("rerank", RERANKER),
            ("llm", LLM),
        ):
            tracer.start_span(name, context=context, attributes=attributes).end()
        roots.append(root)
    provider.force_flush()  # the baseline exporter has sent (and released) every ended child
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - baseline
    tracemalloc.stop()
    if isinstance(processor, ConfidenceSpanProcessor):
        assert processor.stats().pending_traces == pending
    for root in roots:
        root.end()
    provider.shutdown()
    return held / 2**20, held // pending


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--traces", type=int, default=2_000, help="traces per round and setup")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pending", type=int, default=10_000)
    args = parser.parse_args(argv)

    print(
        f"pipeline: root, 2 retrievers x 10 docs, reranker (5 docs), LLM = 5 spans; python {sys.version[:6]}"
    )
    ratios, base_runs, wrapped_runs, plain_ratios = [], [], [], []
    for round_number in range(1, args.rounds + 1):
        base = cpu_per_trace(False, args.traces)
        wrapped = cpu_per_trace(True, args.traces)
        base_runs.append(base)
        wrapped_runs.append(wrapped)
        ratios.append(wrapped / base)
        plain_ratios.append(
            cpu_per_trace(True, args.traces, rag=False) / cpu_per_trace(False, args.traces, rag=False)
        )
        print(
            f"round {round_number}: batch alone {base * 1e6:8.1f} µs/trace   "
            f"wrapped {wrapped * 1e6:8.1f} µs/trace   ratio {wrapped / base:.3f}x"
        )
    base_median, wrapped_median = statistics.median(base_runs), statistics.median(wrapped_runs)
    ratio = statistics.median(ratios)
    print(
        f"\nCPU per trace (median of {args.rounds} rounds x {args.traces} traces): BatchSpanProcessor alone "
        f"{base_median * 1e6:.1f} µs, wrapped in ConfidenceSpanProcessor {wrapped_median * 1e6:.1f} µs "
        f"-> ratio {ratio:.3f}x (target <= 1.10x: {'met' if ratio <= 1.10 else 'NOT met'})"
    )

    plain = statistics.median(plain_ratios)
    print(f"same traces without retrieval spans (buffered, never scored): ratio {plain:.3f}x")
    app = {
        mode: statistics.median(app_thread_cpu_per_trace(mode, args.traces) for _ in range(3))
        for mode in ("alone", "inline", "background")
    }
    print(
        f"application-thread CPU per RAG trace: BatchSpanProcessor alone {app['alone'] * 1e6:.1f} µs, "
        f"wrapped scoring inline {app['inline'] * 1e6:.1f} µs, "
        f"background_scoring=True {app['background'] * 1e6:.1f} µs"
    )
    breakdown = scoring_breakdown(500)
    total = sum(breakdown.values())
    print(
        "scoring one answer, median µs: "
        + ", ".join(f"{k} {v:.1f}" for k, v in breakdown.items())
        + f" (sum {total:.1f}); extra CPU per trace above: {(wrapped_median - base_median) * 1e6:.1f} µs"
    )

    exported, recorded = design_outputs(500)
    floor = exported + recorded
    print(
        f"the design's outputs alone, per answer: exporting the rag.confidence.* attributes {exported:.1f} µs "
        f"(OTLP encoder), the metrics and the event {recorded:.1f} µs; {floor:.1f} µs = "
        f"{floor / (base_median * 1e6):.1%} of a trace's CPU, a ratio of {1 + floor / (base_median * 1e6):.2f}x "
        "before any signal is read or scored"
    )

    base_mib, base_per = pending_memory(False, args.pending)
    wrapped_mib, wrapped_per = pending_memory(True, args.pending)
    print(
        f"\nmemory with {args.pending} traces pending at once (children ended, roots open): "
        f"BatchSpanProcessor alone {base_mib:.1f} MiB, wrapped {wrapped_mib:.1f} MiB; the buffer holds "
        f"{wrapped_mib - base_mib:.1f} MiB = {wrapped_per - base_per} bytes per pending trace"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
