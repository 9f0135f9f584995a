"""Reading span encodings out of a protobuf OTLP body: the runs decode to the spans protobuf decodes, in its
order, whatever else the body holds; anything the reader does not walk makes it step aside (None)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

from rag_confidence.gateway.wire import span_encodings
from tests.test_gateway_screen import proto_traces


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


# Unknown fields of every walked wire type (varint, fixed64, length-delimited, fixed32), and a known field number
# with another wire type than its own: protobuf keeps all of them as unknown fields.
_STRAYS = (
    _varint(15 << 3 | 0) + _varint(300),
    _varint(16 << 3 | 1) + bytes(8),
    _field(17, b"stray"),
    _varint(18 << 3 | 5) + bytes(4),
    _varint(2 << 3 | 0) + _varint(7),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    proto_traces(),
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), min_size=15, max_size=15),
    st.lists(st.sampled_from(_STRAYS), max_size=4),
)
def test_each_run_decodes_to_the_span_protobuf_decodes_in_its_place(
    spans: list[ProtoSpan], placement: list[tuple[int, int]], strays: list[bytes]
) -> None:
    # Spans spread over three resources of three scopes each (some left empty), each level with a stray field.
    request = ExportTraceServiceRequest()
    for resource in range(3):
        resource_spans = request.resource_spans.add(schema_url=f"r{resource}")
        for scope in range(3):
            resource_spans.scope_spans.add(schema_url=f"s{scope}").scope.name = f"lib {scope}"
    for span, (resource, scope) in zip(spans, placement, strict=False):
        request.resource_spans[resource].scope_spans[scope].spans.append(span)
    stray = b"".join(strays)
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            scope_spans.MergeFromString(stray)
        resource_spans.MergeFromString(stray)
    body = stray + request.SerializeToString() + stray
    decoded = ExportTraceServiceRequest.FromString(body)
    runs = span_encodings(body)
    assert runs is not None
    scopes = [scope for resource in decoded.resource_spans for scope in resource.scope_spans]
    assert [len(run) for run in runs] == [len(scope.spans) for scope in scopes]
    for run, scope in zip(runs, scopes, strict=True):
        assert [ProtoSpan.FromString(encoding) for encoding in run] == list(scope.spans)
        assert all(encoding in body for encoding in run)  # the bytes as received


def test_a_body_it_does_not_walk_is_left_to_the_caller() -> None:
    request = ExportTraceServiceRequest()
    request.resource_spans.add().scope_spans.add().spans.add(name="a", trace_id=bytes(16), span_id=bytes(8))
    body = request.SerializeToString()
    assert span_encodings(body) == [[request.resource_spans[0].scope_spans[0].spans[0].SerializeToString()]]
    group = _varint(19 << 3 | 3) + _varint(19 << 3 | 4)  # an (empty) unknown group: protobuf keeps it
    ExportTraceServiceRequest.FromString(body + group)
    assert span_encodings(body + group) is None
    assert span_encodings(body[:-1]) is None  # cut short
    assert span_encodings(b"") == []
