"""What one request may cost the gateway, whatever its shape: answers per request, nested and sibling retrievers.

Span data comes from senders: a request shaped to make scoring expensive must cost work in proportion to its
size and a bounded number of scorecards. Not speed targets: the time bounds are generous ceilings that the
earlier, superlinear code exceeded by far (minutes), on a machine shared with other work.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from rag_confidence import semconv
from rag_confidence.errors import ConfigValidationError
from rag_confidence.gateway import GatewayConfig
from rag_confidence.gateway.command import build_parser
from rag_confidence.gateway.config import config_from_arguments
from rag_confidence.gateway.forward import ForwardResult
from rag_confidence.gateway.pipeline import TracePipeline
from rag_confidence.gateway.service import Gateway
from rag_confidence.gateway.spans import iter_spans
from rag_confidence.otel.answer_scoring import AnswerScorer


class Downstream:
    """Keeps what it is given (a stand-in for the OTLP exporter: no network needed here)."""

    description = "in-memory"

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []

    def forward(self, request: ExportTraceServiceRequest) -> ForwardResult:
        self.requests.append(ExportTraceServiceRequest.FromString(request.SerializeToString()))
        return ForwardResult(True)

    def shutdown(self) -> None:
        pass


def kv(key: str, value: Any) -> KeyValue:
    item = KeyValue(key=key)
    if isinstance(value, bool):
        item.value.CopyFrom(AnyValue(bool_value=value))
    elif isinstance(value, float):
        item.value.CopyFrom(AnyValue(double_value=value))
    else:
        item.value.CopyFrom(AnyValue(string_value=str(value)))
    return item


def span(trace: int, span_id: int, parent: int | None, *attributes: KeyValue) -> ProtoSpan:
    return ProtoSpan(
        trace_id=trace.to_bytes(16, "big"),
        span_id=span_id.to_bytes(8, "big"),
        parent_span_id=parent.to_bytes(8, "big") if parent else b"",
        name=f"span {span_id}",
        attributes=list(attributes),
    )


def request_of(spans: list[ProtoSpan]) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    request.resource_spans.add().scope_spans.add().spans.extend(spans)
    return request


def retriever(trace: int, span_id: int, parent: int, document: int) -> ProtoSpan:
    prefix = f"{semconv.OI_RETRIEVAL_DOCUMENTS}.0."
    return span(
        trace,
        span_id,
        parent,
        kv(semconv.OPENINFERENCE_SPAN_KIND, semconv.OPENINFERENCE_KIND_RETRIEVER),
        kv(prefix + semconv.OI_DOCUMENT_ID, f"doc-{document}"),
        kv(prefix + semconv.OI_DOCUMENT_SCORE, 0.5),
    )


def test_answers_past_the_per_request_limit_are_forwarded_unscored_and_counted() -> None:
    marked = [
        span(trace, 1, None, kv(semconv.RAG_ANSWER, True), kv(semconv.RAG_SIGNAL_SUPPORT_LEVEL, "medium"))
        for trace in range(1, 8)
    ]
    reader = InMemoryMetricReader()
    downstream = Downstream()
    gateway = Gateway(
        GatewayConfig(max_answers_per_request=3),
        downstream,
        meter_provider=MeterProvider(metric_readers=[reader]),
    )
    outcome = gateway.process("grpc", request_of(marked).SerializeToString(), "application/x-protobuf", None)
    assert outcome.error is None
    (forwarded,) = downstream.requests
    spans = list(iter_spans(forwarded))
    assert len(spans) == 7  # every span, scored or not
    scored = [s for s in spans if any(a.key == semconv.RAG_CONFIDENCE_TOTAL for a in s.attributes)]
    assert len(scored) == 3
    counts = {
        tuple(point.attributes.items()): point.value
        for metric in reader.get_metrics_data().resource_metrics[0].scope_metrics[0].metrics
        if metric.name == semconv.METRIC_GATEWAY_ANSWERS
        for point in metric.data.data_points
    }
    outcome_key = semconv.METRIC_ATTR_GATEWAY_OUTCOME
    assert counts == {
        ((outcome_key, semconv.PIPELINE_OUTCOME_SCORED),): 3,
        ((outcome_key, semconv.PIPELINE_OUTCOME_OVER_LIMIT),): 4,
    }


def test_the_answer_limit_is_a_gateway_setting() -> None:
    def limit(argv: list[str], env: dict[str, str]) -> int:
        return config_from_arguments(build_parser().parse_args(argv), env).max_answers_per_request

    assert limit([], {}) == 1000
    assert limit(["--max-answers-per-request", "50"], {}) == 50
    assert limit([], {"RAG_CONFIDENCE_GATEWAY_MAX_ANSWERS_PER_REQUEST": "7"}) == 7
    with pytest.raises(ConfigValidationError, match="MAX_ANSWERS_PER_REQUEST"):
        limit([], {"RAG_CONFIDENCE_GATEWAY_MAX_ANSWERS_PER_REQUEST": "0"})


def test_retrievers_under_a_long_chain_of_other_spans_cost_work_in_proportion() -> None:
    # Whether any retrieval sits under another is worked out with one walk per chain link, not one per pair.
    spans = [span(1, 1, None, kv(semconv.OPENINFERENCE_SPAN_KIND, "CHAIN"))]
    spans += [span(1, index, index - 1) for index in range(2, 20_002)]
    spans += [retriever(1, 30_000 + index, 20_001, index) for index in range(2_000)]
    request = request_of(spans)
    started = time.process_time()
    prepared = TracePipeline(AnswerScorer()).prepare(request, request.SerializeToString())
    assert time.process_time() - started < 20.0
    assert len(prepared.scored) == 1


@pytest.mark.parametrize("shape", ["chain", "siblings"])
def test_thousands_of_retrievers_in_one_answer_cost_work_in_proportion(shape: str) -> None:
    # A chain of 2,000 nested retrievers took 297 s (every ancestor test walked the chain, for every pair);
    # 10,000 sibling retrievers 36 s. Both are about 1 MB on the wire.
    count = 2_000 if shape == "chain" else 10_000
    spans = [span(1, 1, None, kv(semconv.OPENINFERENCE_SPAN_KIND, "CHAIN"))]
    for index in range(count):
        span_id = index + 2
        parent = span_id - 1 if shape == "chain" else 1
        spans.append(retriever(1, span_id, parent, index))
    spans.reverse()  # children end first
    request = request_of(spans)
    started = time.process_time()
    prepared = TracePipeline(AnswerScorer()).prepare(request, request.SerializeToString())
    assert time.process_time() - started < 20.0
    assert len(prepared.scored) == 1
    (root,) = [s for s in iter_spans(request) if s.span_id == (1).to_bytes(8, "big")]
    candidates = next(
        a.value.int_value for a in root.attributes if a.key == semconv.RAG_CONFIDENCE_CANDIDATES
    )
    # Nested: the outermost retriever wraps all the others and presents its own document; siblings: every
    # retriever is a method of its own, each with its document.
    assert candidates == (1 if shape == "chain" else count)


def test_a_chain_of_retrievers_reporting_text_only_costs_work_in_proportion() -> None:
    # What the OpenInference LangChain tracer records (no id, no score outside metadata): every one of them
    # may pair with what it wraps by position, which looked at everything beneath it (1,000 nested: 142 s).
    spans = [span(1, 1, None, kv(semconv.OPENINFERENCE_SPAN_KIND, "CHAIN"))]
    for index in range(1_000):
        prefix = f"{semconv.OI_RETRIEVAL_DOCUMENTS}.0."
        spans.append(
            span(
                1,
                index + 2,
                index + 1,
                kv(semconv.OPENINFERENCE_SPAN_KIND, semconv.OPENINFERENCE_KIND_RETRIEVER),
                kv(prefix + semconv.OI_DOCUMENT_CONTENT, f"text {index}"),
            )
        )
    spans.reverse()
    request = request_of(spans)
    started = time.process_time()
    prepared = TracePipeline(AnswerScorer()).prepare(request, request.SerializeToString())
    assert time.process_time() - started < 20.0
    assert len(prepared.scored) == 1


def test_thousands_of_rerankers_beside_waiting_retrievals_cost_work_in_proportion() -> None:
    # Each reranker relates the retrievals still waiting to its own query span; 250 wait here, beside 5,000
    # rerankers in branches of their own.
    root = span(1, 1, None, kv(semconv.OPENINFERENCE_SPAN_KIND, "CHAIN"))
    waiting = [retriever(1, 10 + index, 1, index) for index in range(250)]
    branches: list[ProtoSpan] = []
    for index in range(5_000):
        query = 100_000 + 2 * index
        prefix = f"{semconv.OI_RERANKER_OUTPUT_DOCUMENTS}.0."
        branches.append(span(1, query, 1))
        branches.append(
            span(
                1,
                query + 1,
                query,
                kv(semconv.OPENINFERENCE_SPAN_KIND, semconv.OPENINFERENCE_KIND_RERANKER),
                kv(prefix + semconv.OI_DOCUMENT_ID, f"ranked-{index}"),
                kv(prefix + semconv.OI_DOCUMENT_SCORE, 0.5),
            )
        )
    request = request_of([*waiting, *branches, root])
    started = time.process_time()
    prepared = TracePipeline(AnswerScorer()).prepare(request, request.SerializeToString())
    assert time.process_time() - started < 20.0
    assert len(prepared.scored) == 1
