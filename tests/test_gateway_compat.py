"""Requests the Collector's OTLP receiver delivers are delivered by the gateway too, over real sockets to a real
downstream receiver: strings that are not UTF-8, spans in the deprecated ``ResourceSpans`` field 1000, OTLP/JSON
with a key given twice or unpaired surrogate escapes, the ``zlib`` content encoding. And OTLP/JSON enum names
the schema does not know are refused, as the Collector refuses them, instead of being read as the default
(a status ``"ERROR"`` arrived as UNSET).
"""

from __future__ import annotations

import json
import zlib

import grpc
import pytest
from google.protobuf import unknown_fields
from google.protobuf.message import DecodeError
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ScopeSpans
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence import semconv

from .test_gateway_e2e import _otlp_json, _post
from .test_gateway_support import DownstreamReceiver, downstream, rag_trace, running_gateway, tracer_provider

__all__ = ["downstream"]
PROTOBUF = {"Content-Type": "application/x-protobuf"}
JSON = {"Content-Type": "application/json"}


def _rag_request() -> ExportTraceServiceRequest:
    memory = InMemorySpanExporter()
    rag_trace(tracer_provider(memory, batch=False))
    return encode_spans(memory.get_finished_spans())


def _scored(spans: list[object]) -> list[str]:
    return [
        span.name  # type: ignore[attr-defined]
        for span in spans
        if any(item.key == semconv.RAG_CONFIDENCE_TOTAL for item in span.attributes)  # type: ignore[attr-defined]
    ]


def _with_invalid_utf8(request: ExportTraceServiceRequest) -> bytes:
    """The request with the retriever's name cut inside a character (what a sender that truncates bytes writes)."""
    retrieve = next(
        span for span in request.resource_spans[0].scope_spans[0].spans if span.name == "retrieve"
    )
    retrieve.name = "retrieve-\u20ac"  # the euro sign: three bytes in UTF-8
    body = request.SerializeToString()
    cut = b"retrieve-" + "\u20ac".encode()
    return body.replace(cut, cut[:-1] + b"-", 1)  # same length, the last byte of the character replaced


def test_strings_that_are_not_utf8_are_delivered_with_the_character_replaced(
    downstream: DownstreamReceiver,
) -> None:
    request = _rag_request()
    body = _with_invalid_utf8(request)
    # Only protobuf 7.35+ names UTF-8 in the message: the one byte changed is all that differs.
    with pytest.raises(DecodeError):
        ExportTraceServiceRequest.FromString(body)
    with running_gateway() as running:
        status, _, payload = _post(f"{running.http_url}/v1/traces", body, PROTOBUF)
        assert status == 200, payload
        with grpc.insecure_channel(f"127.0.0.1:{running.grpc_port}") as channel:
            export = channel.unary_unary(
                "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                request_serializer=lambda raw: raw,
                response_deserializer=lambda raw: raw,
            )
            export(body, timeout=10)  # raises on any status but OK
        spans = downstream.wait_for_spans(6)
    names = sorted(span.name for span in spans)
    assert names.count("retrieve-\u20ac"[:-1] + "\ufffd-") == 2  # both transports, the bad bytes replaced
    assert sorted(_scored(spans)) == ["answer", "answer"]  # and the answer still scored with its retrieval
    originals = {span.span_id for span in request.resource_spans[0].scope_spans[0].spans}
    assert {span.span_id for span in spans} == originals  # ids untouched


def _deprecated_field(request: ExportTraceServiceRequest) -> bytes:
    """The request as a sender from before OTLP 0.19 writes it: the ScopeSpans in ResourceSpans field 1000."""
    resource_spans = request.resource_spans[0]
    scope_spans: ScopeSpans = resource_spans.scope_spans[0]
    moved = scope_spans.SerializeToString()
    del resource_spans.scope_spans[:]
    tag = (1000 << 3) | 2  # field 1000, length-delimited
    field = _varint(tag) + _varint(len(moved)) + moved
    # Unknown to the current schema, but kept by protobuf: appended bytes of a field are part of the message.
    resource_bytes = resource_spans.SerializeToString() + field
    return _varint((1 << 3) | 2) + _varint(len(resource_bytes)) + resource_bytes


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def test_spans_in_the_deprecated_scope_spans_field_are_delivered_once_and_scored(
    downstream: DownstreamReceiver,
) -> None:
    request = _rag_request()
    span_ids = {span.span_id for span in request.resource_spans[0].scope_spans[0].spans}
    document = _otlp_json(request)
    document["resourceSpans"][0]["deprecatedScopeSpans"] = document["resourceSpans"][0].pop("scopeSpans")
    body = _deprecated_field(request)
    assert not ExportTraceServiceRequest.FromString(body).resource_spans[0].scope_spans
    with running_gateway() as running:
        for raw, headers in ((body, PROTOBUF), (json.dumps(document).encode(), JSON)):
            status, _, payload = _post(f"{running.http_url}/v1/traces", raw, headers)
            assert status == 200, payload
        spans = downstream.wait_for_spans(6)
    assert len(spans) == 6 and {span.span_id for span in spans} == span_ids
    assert _scored(spans) == ["answer", "answer"]
    for delivered in downstream.requests:  # the old field is not forwarded as well (it would count twice)
        for resource_spans in delivered.resource_spans:
            assert [field.field_number for field in unknown_fields.UnknownFieldSet(resource_spans)] == []


def test_json_with_a_key_twice_keeps_both_arrays_and_unpaired_surrogates_become_replacement_characters(
    downstream: DownstreamReceiver,
) -> None:
    first, second = _rag_request(), _rag_request()
    one = json.dumps(_otlp_json(first))[1:-1]
    other = json.dumps(_otlp_json(second))[1:-1]
    body = ("{" + one + ", " + other + "}").encode()  # "resourceSpans" twice
    surrogate = _otlp_json(_rag_request())
    surrogate["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["name"] = "cut-\ud83d"
    with running_gateway() as running:
        status, _, payload = _post(f"{running.http_url}/v1/traces", body, JSON)
        assert status == 200, payload
        escaped = json.dumps(surrogate).encode()  # json.dumps escapes the surrogate as \ud83d
        assert b"\\ud83d" in escaped
        status, _, payload = _post(f"{running.http_url}/v1/traces", escaped, JSON)
        assert status == 200, payload
        spans = downstream.wait_for_spans(9)
    assert len(spans) == 9 and len(_scored(spans)) == 3
    assert "cut-\ufffd" in {span.name for span in spans}


def test_unknown_json_enum_names_are_refused_not_read_as_the_default(downstream: DownstreamReceiver) -> None:
    document = _otlp_json(_rag_request())
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    with running_gateway() as running:
        for field, value in (("kind", "SERVER"), ("status", {"code": "ERROR"})):
            changed = json.loads(json.dumps(document))
            changed["resourceSpans"][0]["scopeSpans"][0]["spans"][0][field] = value
            status, _, payload = _post(f"{running.http_url}/v1/traces", json.dumps(changed).encode(), JSON)
            assert status == 400, payload
            assert b"unknown enum name" in payload
        spans[0]["kind"] = "SPAN_KIND_SERVER"
        spans[0]["status"] = {"code": "STATUS_CODE_ERROR"}
        spans[1]["kind"] = 3
        status, _, payload = _post(f"{running.http_url}/v1/traces", json.dumps(document).encode(), JSON)
        assert status == 200, payload
        delivered = {span.name: span for span in downstream.wait_for_spans(3)}
    first = delivered[spans[0]["name"]]
    assert first.kind == 2 and first.status.code == 2
    assert delivered[spans[1]["name"]].kind == 3


def test_the_zlib_content_encoding_is_read_like_deflate(downstream: DownstreamReceiver) -> None:
    body = zlib.compress(_rag_request().SerializeToString())
    with running_gateway() as running:
        status, _, payload = _post(
            f"{running.http_url}/v1/traces", body, {**PROTOBUF, "Content-Encoding": "zlib"}
        )
        assert status == 200, payload
        assert len(downstream.wait_for_spans(3)) == 3
