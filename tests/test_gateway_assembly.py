"""The gateway's assembly window: bounded by traces, age and bytes, every eviction counted, complete traces
released, safe under concurrent requests; and, through the gateway, the window's metrics.

The window is driven directly (with an injected clock) and through ``Gateway.process`` with real protobuf
requests and an SDK meter provider; the downstream there is a stand-in that only serializes the request (the
real OTLP path is tested end to end in tests/test_gateway_resilience.py).
"""

from __future__ import annotations

import threading
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.proto.trace.v1.trace_pb2 import SpanFlags
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from rag_confidence import semconv
from rag_confidence.gateway import AssemblySettings, GatewayConfig
from rag_confidence.gateway.assembly import (
    AssemblyWindow,
)
from rag_confidence.gateway.forward import ForwardResult
from rag_confidence.gateway.pipeline import TracePipeline
from rag_confidence.gateway.service import Gateway
from rag_confidence.gateway.spans import iter_spans, to_record
from rag_confidence.otel.answer_scoring import AnswerScorer
from rag_confidence.signals import find_answers
from rag_confidence.signals.records import SpanRecord
from tests.test_gateway_screen import proto_traces


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def child(trace_id: int, span_id: int = 2) -> SpanRecord:
    return SpanRecord(trace_id=trace_id, span_id=span_id, parent_span_id=1, name=f"child {span_id}")


def root(trace_id: int) -> SpanRecord:
    return SpanRecord(trace_id=trace_id, span_id=1, parent_span_id=None, name="root")


class Window:
    """The window under test, fed records as the gateway feeds it encoded spans (items are opaque to it)."""

    def __init__(self, **bounds: Any) -> None:
        self.clock = Clock()
        self.reported: list[tuple[str, int]] = []
        settings = {"max_traces": 100, "max_age": 30.0, "max_bytes": 10_000, **bounds}
        self.window: AssemblyWindow[SpanRecord] = AssemblyWindow(
            **settings, on_evict=lambda reason, count: self.reported.append((reason, count)), clock=self.clock
        )

    def assemble(self, trace_id: int, records: list[SpanRecord], size: int, may_answer: bool = False) -> Any:
        complete = any(record.parent_span_id is None for record in records)
        assembled, _ = self.window.assemble(trace_id, records, size, may_answer=may_answer, complete=complete)
        return assembled


def window(**bounds: Any) -> tuple[Window, Clock, list[tuple[str, int]]]:
    built = Window(**bounds)
    return built, built.clock, built.reported


def names(records: list[SpanRecord]) -> list[str]:
    return [record.name for record in records]


def test_a_trace_is_assembled_across_requests_and_its_root_completes_it_without_an_eviction() -> None:
    built, clock, reported = window()
    assert names(built.assemble(1, [child(1, 2)], size=100)) == ["child 2"]
    assert names(built.assemble(1, [child(1, 3)], size=100)) == ["child 2", "child 3"]
    assert (len(built.window), built.window.size_bytes) == (1, 200)
    assert names(built.assemble(1, [root(1)], size=100)) == ["child 2", "child 3", "root"]
    # Complete, but still there for what comes after the root (another service's part, a retried request).
    assert names(built.assemble(1, [child(1, 4)], size=100)) == ["child 2", "child 3", "root", "child 4"]
    clock.now = 31.0
    assert built.window.expire() == 0  # max_age lets it go
    assert (len(built.window), built.window.size_bytes) == (0, 0)
    assert reported == [] and set(built.window.evictions.values()) == {0}  # not an eviction: nothing waited


def test_complete_traces_go_first_when_a_bound_is_reached_and_uncounted() -> None:
    built, _, reported = window(max_traces=2)
    built.assemble(1, [child(1)], size=10)
    built.assemble(2, [root(2)], size=10)  # complete
    built.assemble(3, [child(3)], size=10)  # over max_traces: trace 2 goes, though trace 1 is older
    assert reported == []
    assert names(built.assemble(1, [root(1)], size=10)) == ["child 2", "root"]
    assert names(built.assemble(2, [child(2, 5)], size=10)) == ["child 5"]
    built.assemble(4, [child(4)], size=10)  # now the complete trace 1 goes, then the oldest waiting one
    assert reported == [(semconv.PIPELINE_EVICTION_MAX_TRACES, 1)]


def test_a_request_sent_again_is_not_kept_twice() -> None:
    built = AssemblyWindow[str](max_traces=10, max_age=30.0, max_bytes=1_000)
    built.assemble(1, ["a", "b"], 20, may_answer=False)
    for _ in range(3):  # the upstream retries after downstream failures: the same items, the same order
        assert built.assemble(1, ["a", "b"], 20, may_answer=False)[0] == ["a", "b", "a", "b"]
    assert built.size_bytes == 20
    assert built.assemble(1, ["b", "a"], 20, may_answer=False)[0] == ["a", "b", "b", "a"]
    assert built.size_bytes == 40  # another request: kept


def test_whether_a_trace_may_answer_is_remembered_across_its_requests() -> None:
    built = AssemblyWindow[str](max_traces=10, max_age=30.0, max_bytes=1_000)
    assert built.assemble(1, ["http"], 10, may_answer=False) == (["http"], False)
    assert built.assemble(1, ["retrieve"], 10, may_answer=True) == (
        ["http", "retrieve"],
        True,
    )
    # The root holds no retrieval itself; the trace may answer because an earlier request did.
    assert built.assemble(1, ["root"], 10, may_answer=False, complete=True) == (
        ["http", "retrieve", "root"],
        True,
    )
    assert built.assemble(1, [], 0, may_answer=False) == (["http", "retrieve", "root"], True)


def test_beyond_max_traces_the_least_recently_updated_trace_is_evicted() -> None:
    built, _, reported = window(max_traces=2)
    built.assemble(1, [child(1)], size=10)
    built.assemble(2, [child(2)], size=10)
    built.assemble(1, [child(1, 3)], size=10)  # trace 1 updated: trace 2 is now the oldest
    built.assemble(3, [child(3)], size=10)
    assert reported == [(semconv.PIPELINE_EVICTION_MAX_TRACES, 1)]
    assert built.window.evictions[semconv.PIPELINE_EVICTION_MAX_TRACES] == 1
    assert names(built.assemble(2, [root(2)], size=10)) == ["root"]  # its earlier spans are gone
    assert names(built.assemble(1, [root(1)], size=10)) == ["child 2", "child 3", "root"]


def test_traces_older_than_max_age_since_their_last_span_are_evicted() -> None:
    built, clock, reported = window(max_age=30.0)
    built.assemble(1, [child(1)], size=10)
    clock.now = 20.0
    built.assemble(2, [child(2)], size=10)
    clock.now = 31.0  # trace 1 last updated 31 s ago, trace 2 only 11 s ago
    built.assemble(3, [child(3)], size=10)
    assert reported == [(semconv.PIPELINE_EVICTION_MAX_AGE, 1)]
    assert names(built.assemble(1, [root(1)], size=10)) == ["root"]
    assert names(built.assemble(2, [root(2)], size=10)) == ["child 2", "root"]


def test_the_byte_bound_evicts_oldest_first_and_never_keeps_an_oversized_trace() -> None:
    built, _, reported = window(max_bytes=250)
    built.assemble(1, [child(1)], size=200)
    built.assemble(2, [child(2)], size=200)  # 400 > 250: trace 1 goes
    assert reported == [(semconv.GATEWAY_EVICTION_MEMORY, 1)]
    assert (len(built.window), built.window.size_bytes) == (1, 200)
    # A request larger than the bound is scored with what its trace held, but is not kept itself.
    assert names(built.assemble(2, [child(2, 3)], size=300)) == ["child 2", "child 3"]
    assert (len(built.window), built.window.size_bytes) == (0, 0)
    assert reported == [
        (semconv.GATEWAY_EVICTION_MEMORY, 1),
        (semconv.GATEWAY_EVICTION_MEMORY, 1),
    ]  # an incomplete trace dropped: counted
    assert built.window.evictions[semconv.GATEWAY_EVICTION_MEMORY] == 2


def test_concurrent_requests_keep_the_accounting_exact() -> None:
    built, _, _ = window(max_traces=50, max_bytes=1_000_000)
    errors: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for index in range(300):
                trace_id = offset * 1000 + index % 80
                built.assemble(trace_id, [child(trace_id, index + 2)], size=7)
                if index % 7 == 0:
                    built.assemble(trace_id, [root(trace_id)], size=7)
        except BaseException as error:  # noqa: BLE001 - collected and asserted on
            errors.append(error)

    threads = [threading.Thread(target=work, args=(offset,)) for offset in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(built.window) <= 50
    entries = [*built.window._waiting.values(), *built.window._complete.values()]
    # The invariant under test: bytes held == sum of the entries' sizes.
    assert built.window.size_bytes == sum(entry.size for entry in entries)


# -- through the gateway ---------------------------------------------------------------------------------------


class _Downstream:
    """Accepts every request after serializing it, as an exporter would (a stand-in: no network needed here)."""

    description = "in-memory"

    def forward(self, request: ExportTraceServiceRequest) -> ForwardResult:
        request.SerializeToString()
        return ForwardResult(True)

    def shutdown(self) -> None:
        pass


def _request(trace_id: int, span_id: int, parent: int | None) -> bytes:
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.CopyFrom(
        ProtoSpan(
            trace_id=trace_id.to_bytes(16, "big"),
            span_id=span_id.to_bytes(8, "big"),
            parent_span_id=parent.to_bytes(8, "big") if parent else b"",
            name="span",
        )
    )
    return request.SerializeToString()


def _sum(reader: InMemoryMetricReader, name: str) -> dict[str, float]:
    data = reader.get_metrics_data()
    assert data is not None
    found: dict[str, float] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    for point in metric.data.data_points:
                        key = str(dict(point.attributes or {}).get(semconv.METRIC_ATTR_GATEWAY_REASON, ""))
                        found[key] = point.value  # type: ignore[union-attr]
    return found


def test_the_gateway_reports_the_windows_traces_and_evictions_as_metrics() -> None:
    reader = InMemoryMetricReader()
    config = GatewayConfig(assembly=AssemblySettings(max_age=30.0, max_traces=2))
    gateway = Gateway(config, _Downstream(), meter_provider=MeterProvider(metric_readers=[reader]))
    for trace_id in (1, 2, 3, 4):  # children only: each trace waits in the window for its root
        outcome = gateway.process("grpc", _request(trace_id, 2, 1), "application/x-protobuf", None)
        assert outcome.error is None
    assert gateway.window is not None and len(gateway.window) == 2
    assert _sum(reader, semconv.METRIC_GATEWAY_ASSEMBLY_EVICTIONS) == {
        semconv.PIPELINE_EVICTION_MAX_TRACES: 2
    }
    assert _sum(reader, semconv.METRIC_GATEWAY_ASSEMBLY_TRACES) == {"": 2}
    gateway.process("grpc", _request(4, 1, None), "application/x-protobuf", None)  # trace 4's root
    gateway.process("grpc", _request(5, 2, 1), "application/x-protobuf", None)  # the complete trace 4 goes
    assert len(gateway.window) == 2
    assert _sum(reader, semconv.METRIC_GATEWAY_ASSEMBLY_TRACES) == {"": 2}
    assert _sum(reader, semconv.METRIC_GATEWAY_ASSEMBLY_EVICTIONS) == {  # and is no eviction
        semconv.PIPELINE_EVICTION_MAX_TRACES: 2
    }


# -- the window path scores what the rules find in each trace's spans seen so far ------------------------------


_FLAGS = (  # unknown (older senders), parent in this process, parent remote
    0,
    SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK,
    SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK | SpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    proto_traces(),
    st.lists(st.integers(0, 3), min_size=15, max_size=15),
    st.booleans(),
    st.lists(st.sampled_from(_FLAGS), min_size=15, max_size=15),
)
def test_with_the_window_each_request_scores_the_answers_of_the_spans_seen_so_far(
    spans: list[ProtoSpan], placement: list[int], with_body: bool, flags: list[int]
) -> None:
    # The spans of three traces spread over four requests, in request order.
    requests = [ExportTraceServiceRequest() for _ in range(4)]
    scopes = [request.resource_spans.add().scope_spans.add() for request in requests]
    for span, where, flag in zip(spans, placement, flags, strict=False):
        span.flags = flag
        scopes[where].spans.append(span)
    window = AssemblyWindow[bytes](max_traces=100, max_age=3600.0, max_bytes=1 << 30)
    pipeline = TracePipeline(AnswerScorer(), window)
    scorer = AnswerScorer()
    held: dict[int, list[SpanRecord]] = {}  # the reference: every span of a trace so far
    for request in requests:
        received = list(iter_spans(request))
        by_trace: dict[int, list[SpanRecord]] = {}
        for span in received:
            record = to_record(span)
            by_trace.setdefault(record.trace_id, []).append(record)
        expected: dict[tuple[int, int], int] = {}
        flag_of = {(span.trace_id, span.span_id): span.flags for span in received}
        for trace_id, records in by_trace.items():
            context = [*held.get(trace_id, []), *records]
            here = {record.span_id for record in records}
            known = {record.span_id for record in context}
            for group in find_answers(context):
                answer = group.answer
                if answer.span_id not in here:
                    continue
                parent_elsewhere = (
                    group.rule == "root"
                    and answer.parent_span_id is not None
                    and answer.parent_span_id not in known
                    and flag_of[(trace_id.to_bytes(16, "big"), answer.span_id.to_bytes(8, "big"))]
                    == _FLAGS[1]
                )
                if not parent_elsewhere:
                    expected[(trace_id, answer.span_id)] = scorer.score(group.spans).scorecard.total
            held[trace_id] = context  # complete or not, a trace stays (bounds and max_age are far off here)
        payload = request.SerializeToString() if with_body else None
        prepared = pipeline.prepare(request, payload)
        scored = {(item.trace_id, item.span_id): item.scorecard.total for item in prepared.scored}
        assert scored == expected
        assert prepared.failed_answers == 0 and prepared.forwarded == len(received)


def test_a_retried_request_scores_its_trace_as_if_sent_once() -> None:
    # The upstream resends a request whose delivery failed; the window has seen its spans already.
    from tests.test_gateway_screen import _rag_trace

    retrieve, answer = _rag_trace(5)
    generate = ProtoSpan()
    generate.CopyFrom(retrieve)
    generate.span_id = (3).to_bytes(8, "big")
    del generate.attributes[:]
    generate.attributes.add(key=semconv.OPENINFERENCE_SPAN_KIND).value.string_value = "LLM"
    generate.attributes.add(key=semconv.OI_OUTPUT_VALUE).value.string_value = "Refunds within 30 days [1]."

    def scored(sends_of_children: int) -> list[tuple[int, list[str]]]:
        pipeline = TracePipeline(AnswerScorer(), AssemblyWindow[bytes](100, 3600.0, 1 << 30))
        for _ in range(sends_of_children):
            children = ExportTraceServiceRequest()
            children.resource_spans.add().scope_spans.add().spans.extend([retrieve, generate])
            pipeline.prepare(children, children.SerializeToString())
        last = ExportTraceServiceRequest()
        last.resource_spans.add().scope_spans.add().spans.append(answer)
        prepared = pipeline.prepare(last, last.SerializeToString())
        return [
            (item.scorecard.total, [warning.code for warning in item.scorecard.meta.warnings])
            for item in prepared.scored
        ]

    once = scored(1)
    assert len(once) == 1
    assert scored(3) == once


# -- span flags: whether an absent parent is in this process or another ------------------------------------------


def _service(name: str) -> tuple[Any, Any]:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    return provider.get_tracer("app"), memory


def _retrieve_and_generate(tracer: Any) -> None:
    with tracer.start_as_current_span("retrieve") as span:
        span.set_attribute(semconv.OPENINFERENCE_SPAN_KIND, semconv.OPENINFERENCE_KIND_RETRIEVER)
        span.set_attribute(f"{semconv.OI_RETRIEVAL_DOCUMENTS}.0.{semconv.OI_DOCUMENT_ID}", "doc-1")
        span.set_attribute(f"{semconv.OI_RETRIEVAL_DOCUMENTS}.0.{semconv.OI_DOCUMENT_SCORE}", 0.9)
    with tracer.start_as_current_span("generate") as span:
        span.set_attribute(semconv.OPENINFERENCE_SPAN_KIND, semconv.OPENINFERENCE_KIND_LLM)
        span.set_attribute(semconv.OI_OUTPUT_VALUE, "Refunds are accepted within 30 days [doc-1].")


def _sdk_rag_trace(remote_parent: bool = False, chain: bool = False) -> tuple[list[ProtoSpan], ProtoSpan]:
    """A RAG trace made by the SDK and encoded by its OTLP encoder (which sets the is-remote span flags): the
    children (retriever, LLM; ``chain``: under a ``chain`` span, which ends last of them) and the local root,
    whose parent is another service's span when ``remote_parent``."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    tracer, memory = _service("rag-svc")
    context = None
    if remote_parent:
        caller = trace.SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=trace.TraceFlags(1))
        context = trace.set_span_in_context(trace.NonRecordingSpan(caller))
    with tracer.start_as_current_span("answer", context=context):
        if chain:
            with tracer.start_as_current_span("chain"):
                _retrieve_and_generate(tracer)
        else:
            _retrieve_and_generate(tracer)
    request = encode_spans(memory.get_finished_spans())
    *children, answer = iter_spans(request)
    assert answer.name == "answer"
    return children, answer


def _send(pipeline: TracePipeline, spans: list[ProtoSpan]) -> list[str]:
    """One request through the pipeline; the names of the spans scored."""
    request = ExportTraceServiceRequest()
    request.resource_spans.add().scope_spans.add().spans.extend(spans)
    prepared = pipeline.prepare(request, request.SerializeToString())
    assert prepared.forwarded == len(spans)
    by_id = {(span.trace_id, span.span_id): span.name for span in iter_spans(request)}
    return [
        by_id[(item.trace_id.to_bytes(16, "big"), item.span_id.to_bytes(8, "big"))]
        for item in prepared.scored
    ]


def _window() -> AssemblyWindow[bytes]:
    return AssemblyWindow[bytes](max_traces=100, max_age=3600.0, max_bytes=1 << 30)


def test_with_the_window_children_flagged_with_a_local_parent_wait_for_their_root() -> None:
    # The usual split: the children end (and are exported) one batch before their root. The SDK flags each
    # child's parent as local, so the window waits for the root instead of scoring the retriever as an
    # answer of its own, and then scoring the root too (two scorecards for one answer).
    children, answer = _sdk_rag_trace()
    window = _window()
    windowed = TracePipeline(AnswerScorer(), window)
    assert _send(windowed, children) == []
    assert _send(windowed, [answer]) == ["answer"]  # scored once, with its children from the window
    assert _send(windowed, [answer]) == ["answer"]  # the request retried: the same scorecard, from the window
    assert window.size_bytes == sum(len(span.SerializeToString()) for span in (*children, answer))


def test_without_the_window_an_absent_parent_counts_as_remote_whatever_the_flags() -> None:
    # Without the window a request is all there is of a trace: a span whose parent never reaches the gateway
    # (a parent that was never exported, as under Langfuse's trace_context or a resumed SpanContext) is the
    # local root the recommended set-up (groupbytrace) delivers whole.
    children, answer = _sdk_rag_trace(chain=True)
    assert _send(TracePipeline(AnswerScorer()), children) == ["chain"]
    assert _send(TracePipeline(AnswerScorer()), [*children, answer]) == ["answer"]
    # A retriever left as a root of its own is one step, not an answer (an agent's tool call on its own).
    bare, _ = _sdk_rag_trace()
    assert _send(TracePipeline(AnswerScorer()), bare) == []


def test_with_the_window_a_child_without_flags_is_still_a_local_root() -> None:
    # Senders that do not set the flags (older SDKs): an absent parent may be another service's.
    children, _ = _sdk_rag_trace(chain=True)
    for span in children:
        span.flags = 0
    window = _window()
    assert _send(TracePipeline(AnswerScorer(), window), children) == ["chain"]


def test_with_the_window_each_local_root_of_a_trace_is_scored_and_none_releases_the_others() -> None:
    # One trace enters the RAG service twice (fan-out, or a retry by the caller): two local roots with remote
    # parents. Neither may drop the other's spans from the window.
    first_children, first = _sdk_rag_trace(remote_parent=True)
    second_children, second = _sdk_rag_trace(remote_parent=True)
    trace_id = first.trace_id
    for span in (*second_children, second):
        span.trace_id = trace_id
    window = _window()
    pipeline = TracePipeline(AnswerScorer(), window)
    assert _send(pipeline, [*first_children, *second_children]) == []
    assert _send(pipeline, [first]) == ["answer"]
    assert _send(pipeline, [second]) == ["answer"]  # still with its children
    assert len(window) == 1  # no root without a parent came: kept until max_age


def test_a_retry_after_a_downstream_failure_is_scored_with_the_whole_trace() -> None:
    # The root's request fails downstream (503, retryable); the upstream sends it again. The window kept the
    # trace until a delivery succeeded, so the retry is scored with the children of the earlier request.
    children, answer = _sdk_rag_trace()

    class Flaky(_Downstream):
        fail_next = False

        def forward(self, request: ExportTraceServiceRequest) -> ForwardResult:
            if self.fail_next:
                self.fail_next = False
                return ForwardResult(False, "downstream down")
            return super().forward(request)

    downstream = Flaky()
    config = GatewayConfig(assembly=AssemblySettings(max_age=3600.0))
    gateway = Gateway(config, downstream, meter_provider=MeterProvider())

    def body(spans: list[ProtoSpan]) -> bytes:
        request = ExportTraceServiceRequest()
        request.resource_spans.add().scope_spans.add().spans.extend(spans)
        return request.SerializeToString()

    assert gateway.process("grpc", body(children), "application/x-protobuf", None).error is None
    downstream.fail_next = True
    failed = gateway.process("grpc", body([answer]), "application/x-protobuf", None)
    assert failed.error is not None and failed.error.retryable
    delivered: list[ExportTraceServiceRequest] = []
    downstream.forward = lambda request: (delivered.append(request), ForwardResult(True))[1]  # type: ignore[method-assign]
    assert gateway.process("grpc", body([answer]), "application/x-protobuf", None).error is None
    (span,) = iter_spans(delivered[0])
    scored = {item.key: item.value for item in span.attributes}
    assert semconv.RAG_CONFIDENCE_TOTAL in scored
    assert (
        scored[semconv.RAG_CONFIDENCE_CANDIDATES].int_value == 1
    )  # the retriever's document, from the window
    assert gateway.window is not None and len(gateway.window) == 1  # complete, kept until max_age


def test_an_idle_window_lets_old_traces_go_when_asked() -> None:
    built, clock, reported = window(max_age=30.0)
    built.assemble(1, [child(1)], size=100)
    built.assemble(2, [child(2)], size=100)
    clock.now = 20.0
    built.assemble(2, [child(2, 3)], size=100)  # trace 2 is younger now
    assert built.window.expire() == 2  # nothing is older than 30 s yet
    clock.now = 31.0
    assert built.window.expire() == 1
    assert reported == [(semconv.PIPELINE_EVICTION_MAX_AGE, 1)]
    clock.now = 60.0
    assert built.window.expire() == 0
    assert built.window.size_bytes == 0


def test_the_gateways_metrics_empty_an_idle_window() -> None:
    # No request comes after the load: reading the metrics still lets expired traces go, and counts them.
    import time

    reader = InMemoryMetricReader()
    config = GatewayConfig(assembly=AssemblySettings(max_age=0.2, max_traces=100))
    gateway = Gateway(config, _Downstream(), meter_provider=MeterProvider(metric_readers=[reader]))
    for trace_id in (1, 2, 3):
        gateway.process("grpc", _request(trace_id, 2, 1), "application/x-protobuf", None)
    assert _sum(reader, semconv.METRIC_GATEWAY_ASSEMBLY_TRACES) == {"": 3}
    time.sleep(0.3)
    assert _sum(reader, semconv.METRIC_GATEWAY_ASSEMBLY_TRACES) == {"": 0}
    assert _sum(reader, semconv.METRIC_GATEWAY_ASSEMBLY_EVICTIONS) == {semconv.PIPELINE_EVICTION_MAX_AGE: 3}


def test_a_trace_past_max_spans_keeps_its_first_spans_and_is_counted_once() -> None:
    built, _, reported = window(max_spans=3)
    assert names(built.assemble(1, [child(1, 2), child(1, 3)], size=100)) == ["child 2", "child 3"]
    # Scored with everything kept so far, but not kept (it would make four): the trace keeps its first two.
    assert names(built.assemble(1, [child(1, 4), child(1, 5)], size=100)) == [
        f"child {n}" for n in (2, 3, 4, 5)
    ]
    assert names(built.assemble(1, [child(1, 6)], size=100)) == ["child 2", "child 3", "child 6"]
    assert names(built.assemble(1, [child(1, 7)], size=100)) == ["child 2", "child 3", "child 6", "child 7"]
    assert reported == [(semconv.GATEWAY_EVICTION_MAX_SPANS, 1)]  # the first request it could not take
    assert built.window.size_bytes == 200  # what is kept (two requests of 100), exactly
    assert names(built.assemble(1, [root(1)], size=10)) == ["child 2", "child 3", "child 6", "root"]
    assert built.window.size_bytes == 200  # the root would be a fourth span: scored with them, not kept


def test_the_span_cap_is_a_gateway_setting() -> None:
    import pytest

    from rag_confidence.errors import ConfigValidationError
    from rag_confidence.gateway.command import build_parser
    from rag_confidence.gateway.config import config_from_arguments

    def settings(argv: list[str], env: dict[str, str]) -> AssemblySettings:
        return config_from_arguments(build_parser().parse_args(argv), env).assembly

    assert settings([], {}).max_spans == 1_000
    assert settings(["--assembly-max-spans", "50"], {}).max_spans == 50
    assert settings([], {"RAG_CONFIDENCE_GATEWAY_ASSEMBLY_MAX_SPANS": "7"}).max_spans == 7
    with pytest.raises(ConfigValidationError, match="ASSEMBLY_MAX_SPANS"):
        settings([], {"RAG_CONFIDENCE_GATEWAY_ASSEMBLY_MAX_SPANS": "-1"})
    # Through the service: a gateway's window takes the cap.
    config = GatewayConfig(assembly=AssemblySettings(max_age=30.0, max_spans=2))
    gateway = Gateway(config, _Downstream(), meter_provider=MeterProvider())
    for span_id in (2, 3, 4):
        gateway.process("grpc", _request(9, span_id, 1), "application/x-protobuf", None)
    assert gateway.window is not None and gateway.window.evictions[semconv.GATEWAY_EVICTION_MAX_SPANS] == 1


# -- spans that come after the root ---------------------------------------------------------------------------


class _Recording(_Downstream):
    """Fails the next ``fail`` forwards; records each delivered span's total (None when unscored)."""

    def __init__(self) -> None:
        self.fail = 0
        self.totals: dict[str, object] = {}

    def forward(self, request: ExportTraceServiceRequest) -> ForwardResult:
        if self.fail:
            self.fail -= 1
            return ForwardResult(False, "downstream down")
        for span in iter_spans(request):
            values = {item.key: item.value.int_value for item in span.attributes}
            self.totals[span.name] = values.get(semconv.RAG_CONFIDENCE_TOTAL)
        return ForwardResult(True)


def _body(spans: Any) -> bytes:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return encode_spans(list(spans)).SerializeToString()


def _whole_trace_totals(spans: Any) -> dict[str, object]:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    records = [to_record(span) for span in iter_spans(encode_spans(list(spans)))]
    return {
        group.answer.name: AnswerScorer().score(group.spans).attributes[semconv.RAG_CONFIDENCE_TOTAL]
        for group in find_answers(records)
    }


def _windowed(downstream: _Recording) -> Gateway:
    config = GatewayConfig(assembly=AssemblySettings(max_age=3600.0))
    return Gateway(config, downstream, meter_provider=MeterProvider())


def test_another_services_answer_after_the_origins_root_is_scored_with_its_children() -> None:
    # frontend GET /chat -> rag-svc POST /ask (remote parent) -> retrieve, generate. rag-svc exports its
    # children, then the frontend's batch (with the trace's root) arrives, then rag-svc's server span.
    from opentelemetry import trace

    front, front_memory = _service("frontend")
    rag, rag_memory = _service("rag-svc")
    with (
        front.start_as_current_span("GET /chat", kind=trace.SpanKind.SERVER),
        front.start_as_current_span("POST rag-svc", kind=trace.SpanKind.CLIENT) as client,
    ):
        caller = client.get_span_context()
        remote = trace.set_span_in_context(
            trace.NonRecordingSpan(
                trace.SpanContext(
                    caller.trace_id, caller.span_id, is_remote=True, trace_flags=trace.TraceFlags(1)
                )
            )
        )
        with rag.start_as_current_span("POST /ask", context=remote, kind=trace.SpanKind.SERVER):
            _retrieve_and_generate(rag)
    rag_spans, front_spans = rag_memory.get_finished_spans(), front_memory.get_finished_spans()
    downstream = _Recording()
    gateway = _windowed(downstream)
    for spans in (rag_spans[:2], front_spans, rag_spans[2:]):
        assert gateway.process("grpc", _body(spans), "application/x-protobuf", None).error is None
    assert downstream.totals["POST /ask"] == _whole_trace_totals([*rag_spans, *front_spans])["POST /ask"]


def test_a_request_retried_after_its_roots_request_is_scored_with_the_whole_trace() -> None:
    # The Collector's sending queue keeps exporting while a failed batch waits in backoff: the root's request
    # is delivered before the retry of the marked answer's.
    tracer, memory = _service("rag-svc")
    with tracer.start_as_current_span("POST /ask"), tracer.start_as_current_span("answer_question") as answer:
        answer.set_attribute(semconv.RAG_ANSWER, True)
        _retrieve_and_generate(tracer)
    retrieve, generate, answer_span, root_span = memory.get_finished_spans()
    downstream = _Recording()
    gateway = _windowed(downstream)
    assert gateway.process("grpc", _body([retrieve, generate]), "application/x-protobuf", None).error is None
    downstream.fail = 1
    assert gateway.process("grpc", _body([answer_span]), "application/x-protobuf", None).error is not None
    assert gateway.process("grpc", _body([root_span]), "application/x-protobuf", None).error is None
    assert gateway.process("grpc", _body([answer_span]), "application/x-protobuf", None).error is None
    whole = _whole_trace_totals([retrieve, generate, answer_span, root_span])
    assert downstream.totals["answer_question"] == whole["answer_question"]
    assert gateway.window is not None  # the failed attempt and its retry are kept once
    requests = (_body([retrieve, generate]), _body([answer_span]), _body([root_span]))
    sent = [span for body in requests for span in iter_spans(ExportTraceServiceRequest.FromString(body))]
    assert gateway.window.size_bytes == sum(len(span.SerializeToString()) for span in sent)


# -- one call per request, retries compared, spans kept as they came -------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(
            st.tuples(st.integers(1, 6), st.lists(st.sampled_from("abcd"), max_size=3), st.booleans()),
            max_size=4,
            unique_by=lambda part: part[0],
        ),
        max_size=12,
    ),
    st.integers(1, 4),
    st.integers(1, 5),
    st.integers(2, 12),
)
def test_a_requests_traces_assembled_at_once_are_assembled_as_one_by_one(
    requests: list[list[tuple[int, list[str], bool]]], max_traces: int, max_spans: int, max_bytes: int
) -> None:
    def built() -> tuple[AssemblyWindow[str], list[tuple[str, int]]]:
        reported: list[tuple[str, int]] = []
        window = AssemblyWindow[str](
            max_traces,
            30.0,
            max_bytes,
            max_spans=max_spans,
            on_evict=lambda reason, count: reported.append((reason, count)),
            clock=lambda: 0.0,
        )
        return window, reported

    (one_by_one, reported_one), (at_once, reported_all) = built(), built()
    for request in requests:
        expected = [
            one_by_one.assemble(trace, items, len(items), may_answer=trace % 2 == 0, complete=root)
            for trace, items, root in request
        ]
        parts = [(trace, items, len(items), trace % 2 == 0, root) for trace, items, root in request]
        assert at_once.assemble_all(parts) == expected
        assert (len(at_once), at_once.size_bytes) == (len(one_by_one), one_by_one.size_bytes)
    assert at_once.evictions == one_by_one.evictions
    totals: dict[str, int] = {}
    for reason, count in reported_one:
        totals[reason] = totals.get(reason, 0) + count
    assert {reason: sum(n for r, n in reported_all if r == reason) for reason, _ in reported_all} == totals


def test_a_retry_is_found_by_its_items_whatever_they_are() -> None:
    # Items are compared, not hashed: unhashable ones (a dict per span) are found again too.
    built = AssemblyWindow[dict[str, int]](max_traces=10, max_age=30.0, max_bytes=1_000)
    built.assemble(1, [{"a": 1}, {"b": 2}], 20, may_answer=False)
    assert built.assemble(1, [{"a": 1}, {"b": 2}], 20, may_answer=False)[0] == [{"a": 1}, {"b": 2}] * 2
    assert built.size_bytes == 20
    built.assemble(1, [{"a": 1}], 10, may_answer=False)  # a part of a request kept is another request
    assert built.size_bytes == 30
    for _ in range(3):  # nothing to keep: nothing kept, nothing counted
        assert built.assemble(1, [], 0, may_answer=False)[0] == [{"a": 1}, {"b": 2}, {"a": 1}]
    assert built.size_bytes == 30


def test_the_window_keeps_the_valid_spans_of_a_request_whichever_way_it_came() -> None:
    # Invalid spans (rejected, never forwarded) among the valid ones: the window keeps the valid spans, from a
    # protobuf or a JSON body; either way the answer is scored with its children.
    import json

    from tests.test_gateway_e2e import _otlp_json

    children, answer = _sdk_rag_trace()
    invalid = ProtoSpan(trace_id=bytes(16), span_id=b"\x01" * 8, name="invalid")
    for content_type in ("application/x-protobuf", "application/json"):
        request = ExportTraceServiceRequest()
        scope = request.resource_spans.add().scope_spans.add()
        scope.spans.extend([invalid, children[0], invalid, invalid, children[1], invalid])
        body = (
            request.SerializeToString()
            if content_type.endswith("protobuf")
            else json.dumps(_otlp_json(request)).encode()
        )
        downstream = _Recording()
        gateway = _windowed(downstream)
        outcome = gateway.process("grpc", body, content_type, None)
        assert outcome.error is None and outcome.response.partial_success.rejected_spans == 4
        assert gateway.window is not None
        assert gateway.window.size_bytes == sum(len(span.SerializeToString()) for span in children)
        last = ExportTraceServiceRequest()
        last.resource_spans.add().scope_spans.add().spans.append(answer)
        assert gateway.process("grpc", last.SerializeToString(), "application/x-protobuf", None).error is None
        whole = {
            group.answer.name: AnswerScorer().score(group.spans).attributes[semconv.RAG_CONFIDENCE_TOTAL]
            for group in find_answers([to_record(span) for span in (*children, answer)])
        }
        assert downstream.totals["answer"] == whole["answer"], content_type
