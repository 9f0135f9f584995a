"""End to end over loopback: SDK exporters and an OTLP/JSON client -> gateway -> a real OTLP gRPC receiver."""

from __future__ import annotations

import gzip
import json
import urllib.error
import urllib.request
from typing import Any

from google.protobuf import json_format
from google.rpc import status_pb2
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence import semconv
from rag_confidence.otel.answer_scoring import AnswerScorer
from rag_confidence.signals import records_from_readable_spans
from tests.test_gateway_support import (
    DownstreamReceiver,
    Recording,
    attributes_of,
    by_name,
    downstream,
    plain_trace,
    rag_trace,
    running_gateway,
    tracer_provider,
)

__all__ = ["downstream"]  # the fixture, imported for pytest


def _in_process_attributes() -> dict[str, Any]:
    """What the in-process path computes for the same trace: the reference the gateway must match."""
    memory = InMemorySpanExporter()
    rag_trace(tracer_provider(memory, batch=False))
    return dict(AnswerScorer().score(records_from_readable_spans(memory.get_finished_spans())).attributes)


def _assert_scored_like_in_process(spans: list[Any]) -> None:
    named = by_name(spans)
    answer = attributes_of(named["answer"])
    expected = _in_process_attributes()
    assert answer[semconv.RAG_CONFIDENCE_TOTAL] == expected[semconv.RAG_CONFIDENCE_TOTAL]
    for key, value in expected.items():
        got = answer[key]
        assert (list(got) if isinstance(got, tuple) else got) == value, key
    # Only the answer span is enriched; the others arrive as sent.
    assert not any(key.startswith(semconv.RAG_CONFIDENCE_PREFIX) for key in attributes_of(named["retrieve"]))
    assert (
        attributes_of(named["retrieve"])[f"{semconv.OI_RETRIEVAL_DOCUMENTS}.0.{semconv.OI_DOCUMENT_ID}"]
        == "doc-0"
    )


def test_grpc_exporter_through_gateway_scores_and_forwards_every_span(downstream: DownstreamReceiver) -> None:
    with running_gateway() as running:
        exporter = Recording(
            GrpcSpanExporter(endpoint=f"http://127.0.0.1:{running.grpc_port}", insecure=True)
        )
        provider = tracer_provider(exporter)
        rag_trace(provider)
        plain_trace(provider, spans=4)
        provider.shutdown()
        assert all(result is SpanExportResult.SUCCESS for result in exporter.results)
        spans = downstream.wait_for_spans(7)
        assert sorted(span.name for span in spans) == sorted(span.name for span in exporter.exported)
        _assert_scored_like_in_process(spans)
        sent = {span.context.span_id: span for span in exporter.exported}
        for span in spans:  # ids, times and resource travel unchanged
            original = sent[int.from_bytes(span.span_id, "big")]
            assert int.from_bytes(span.trace_id, "big") == original.context.trace_id
            assert span.start_time_unix_nano == original.start_time
        # Exemplars are reported once per collection: read the score histogram first.
        scores = running.metric_points(semconv.METRIC_SCORE)
        assert sum(point.count for point in scores) == 1
        exemplar_spans = {exemplar.span_id for point in scores for exemplar in point.exemplars}
        assert int.from_bytes(by_name(spans)["answer"].span_id, "big") in exemplar_spans
        assert running.counter(semconv.METRIC_GATEWAY_SPANS_RECEIVED, transport="grpc") == 7
        assert running.counter(semconv.METRIC_GATEWAY_SPANS_FORWARDED, transport="grpc") == 7


def test_http_protobuf_exporter_with_gzip(downstream: DownstreamReceiver) -> None:
    with running_gateway() as running:
        exporter = Recording(
            HttpSpanExporter(endpoint=f"{running.http_url}/v1/traces", compression=Compression.Gzip)
        )
        provider = tracer_provider(exporter)
        rag_trace(provider)
        provider.shutdown()
        assert all(result is SpanExportResult.SUCCESS for result in exporter.results)
        _assert_scored_like_in_process(downstream.wait_for_spans(3))
        assert running.counter(semconv.METRIC_GATEWAY_SPANS_FORWARDED, transport="http") == 3


def _otlp_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """OTLP/JSON as a JSON client writes it: lowerCamelCase, hex ids, enums as integers."""
    document: dict[str, Any] = json_format.MessageToDict(request, use_integers_for_enums=True)
    for resource in document.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = _b64_to_hex(span[key])
    return document


def _b64_to_hex(value: str) -> str:
    import base64

    return base64.b64decode(value).hex()


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def test_otlp_json_client_hex_ids_unknown_fields_and_gzip(downstream: DownstreamReceiver) -> None:
    memory = InMemorySpanExporter()
    rag_trace(tracer_provider(memory, batch=False))
    finished = memory.get_finished_spans()
    document = _otlp_json(encode_spans(finished))
    document["someFutureField"] = {"nested": [1, 2]}
    document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["futureSpanField"] = "ignored"
    body = gzip.compress(json.dumps(document).encode())
    with running_gateway() as running:
        status, headers, payload = _post(
            f"{running.http_url}/v1/traces",
            body,
            {"Content-Type": "application/json", "Content-Encoding": "gzip"},
        )
        assert status == 200, payload
        assert headers["Content-Type"].startswith("application/json")
        assert json.loads(payload) == {}
        spans = downstream.wait_for_spans(3)
        assert {int.from_bytes(span.span_id, "big") for span in spans} == {
            s.context.span_id for s in finished
        }
        assert {int.from_bytes(span.trace_id, "big") for span in spans} == {finished[0].context.trace_id}
        _assert_scored_like_in_process(spans)


def test_invalid_ids_get_partial_success_and_the_rest_is_forwarded(downstream: DownstreamReceiver) -> None:
    memory = InMemorySpanExporter()
    plain_trace(tracer_provider(memory, batch=False), spans=3)
    request = encode_spans(memory.get_finished_spans())
    bad = request.resource_spans[0].scope_spans[0].spans.add()
    bad.CopyFrom(request.resource_spans[0].scope_spans[0].spans[0])
    bad.span_id = b"\x00" * 8
    bad.name = "zero-span-id"
    with running_gateway() as running:
        for content_type, body, parse in (
            ("application/x-protobuf", request.SerializeToString(), ExportTraceServiceResponse.FromString),
            (
                "application/json",
                json.dumps(_otlp_json(request)).encode(),
                lambda raw: json_format.Parse(raw, ExportTraceServiceResponse()),
            ),
        ):
            status, _, payload = _post(f"{running.http_url}/v1/traces", body, {"Content-Type": content_type})
            assert status == 200
            response = parse(payload)
            assert response.partial_success.rejected_spans == 1
            assert "span_id" in response.partial_success.error_message
        spans = downstream.wait_for_spans(6)
        assert len(spans) == 6 and "zero-span-id" not in {span.name for span in spans}
        assert running.counter(semconv.METRIC_GATEWAY_SPANS_REJECTED, reason="invalid_span") == 2


def test_errors_carry_a_status_in_the_request_content_type(downstream: DownstreamReceiver) -> None:
    with running_gateway() as running:
        status, headers, payload = _post(
            f"{running.http_url}/v1/traces", b"\xff\x00garbage", {"Content-Type": "application/x-protobuf"}
        )
        assert status == 400
        assert headers["Content-Type"] == "application/x-protobuf"
        assert "malformed protobuf" in status_pb2.Status.FromString(payload).message
        status, headers, payload = _post(
            f"{running.http_url}/v1/traces", b"{", {"Content-Type": "application/json"}
        )
        assert status == 400 and "malformed JSON" in json.loads(payload)["message"]
        status, _, _ = _post(f"{running.http_url}/v1/traces", b"x", {"Content-Type": "text/plain"})
        assert status == 415
        health = urllib.request.urlopen(f"{running.http_url}/healthz", timeout=5)
        ready = urllib.request.urlopen(f"{running.http_url}/readyz", timeout=5)
        assert health.status == 200 and ready.status == 200
