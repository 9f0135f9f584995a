"""10,000 fuzzed requests over real sockets: every one gets the right status, and the gateway keeps serving.

Cases: random bytes, truncated and bit-flipped protobuf, JSON with wrong types, bodies over the limit (by
Content-Length and chunked), gzip bombs and broken gzip, wrong content types, valid requests in between.
The expected status comes from an independent oracle (protobuf's parser, ``json``, sizes), not the gateway.
"""

from __future__ import annotations

import gzip
import http.client
import json
import random
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, unknown_fields
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.test_gateway_support import (
    DownstreamReceiver,
    downstream,
    plain_trace,
    rag_trace,
    running_gateway,
    test_config,
    tracer_provider,
)

__all__ = ["downstream"]
LIMIT = 32 * 1024
HTTP_CASES = 8_500
GRPC_CASES = 1_500
PROTOBUF = "application/x-protobuf"
JSON = "application/json"


@dataclass(frozen=True, slots=True)
class Case:
    kind: str
    body: bytes
    content_type: str = PROTOBUF
    encoding: str | None = None
    chunked: bool = False


def _valid_bodies() -> list[bytes]:
    memory = InMemorySpanExporter()
    provider = tracer_provider(memory, batch=False)
    rag_trace(provider)
    plain_trace(provider, spans=4)
    return [encode_spans(memory.get_finished_spans()).SerializeToString()]


def _unchecked_strings_pool() -> descriptor_pool.DescriptorPool:
    """The request schema with ``bytes`` for every ``string``: what a reader that does not check UTF-8 accepts
    (the Collector's; the gateway reads such requests too, see gateway/lenient.py)."""
    pool = descriptor_pool.DescriptorPool()
    pending = [trace_service_pb2.DESCRIPTOR]
    files: list[descriptor_pb2.FileDescriptorProto] = []
    while pending:  # dependencies first
        file = pending.pop()
        proto = descriptor_pb2.FileDescriptorProto()
        file.CopyToProto(proto)
        files.insert(0, proto)
        pending.extend(file.dependencies)
    stack: list[descriptor_pb2.DescriptorProto] = [m for proto in files for m in proto.message_type]
    while stack:
        message = stack.pop()
        stack.extend(message.nested_type)
        for field in message.field:
            if field.type == descriptor_pb2.FieldDescriptorProto.TYPE_STRING:
                field.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
    added: set[str] = set()
    for proto in files:
        if proto.name not in added:
            pool.Add(proto)
            added.add(proto.name)
    return pool


_POOL = _unchecked_strings_pool()
_UNCHECKED = message_factory.GetMessageClass(
    _POOL.FindMessageTypeByName(ExportTraceServiceRequest.DESCRIPTOR.full_name)
)
_UNCHECKED_SCOPE_SPANS = message_factory.GetMessageClass(
    _POOL.FindMessageTypeByName("opentelemetry.proto.trace.v1.ScopeSpans")
)


def _parses(body: bytes) -> bool:
    """Protobuf accepts the body, UTF-8 of strings unchecked (and a deprecated field 1000 of a ResourceSpans,
    if any, holds a ScopeSpans)."""
    try:
        request = _UNCHECKED.FromString(body)
        for resource_spans in request.resource_spans:  # type: ignore[attr-defined]
            for field in unknown_fields.UnknownFieldSet(resource_spans):
                if field.field_number == 1000 and field.wire_type == 2:
                    _UNCHECKED_SCOPE_SPANS.FromString(field.data)
    except Exception:
        return False
    return True


_WRONG_JSON = (
    b'{"resourceSpans": 5}',
    b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": 12}]}]}]}',
    b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"spanId": "not-hex"}]}]}]}',
    b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"startTimeUnixNano": "soon"}]}]}]}',
    b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": ["a"]}]}]}]}',
    b'{"resourceSpans": [{"scopeSpans": "spans"}]}',
    b'{"resourceSpans": [{"resource": {"attributes": [{"key": "k", "value": {"intValue": "x"}}]}}]}',
    b"[1, 2, 3]",
    b'"resourceSpans"',
    b"null",
    b'{"resourceSpans": [',
    b"\xff\xfe{}",
)


def _cases(rng: random.Random, valid: bytes, count: int, *, http_only: bool) -> Iterator[tuple[Case, int]]:
    """(case, expected HTTP status) pairs; the expected status is decided here, not by the gateway."""
    bomb = gzip.compress(b"\0" * (LIMIT * 64))
    for _ in range(count):
        roll = rng.random()
        if roll < 0.25:
            body = rng.randbytes(rng.randrange(0, 300))
            yield Case("random", body), 200 if _parses(body) else 400
        elif roll < 0.45:
            body = valid[: rng.randrange(0, len(valid))]
            yield Case("truncated", body), 200 if _parses(body) else 400
        elif roll < 0.55:
            mutable = bytearray(valid)
            for _ in range(rng.randrange(1, 6)):
                mutable[rng.randrange(len(mutable))] ^= 1 << rng.randrange(8)
            body = bytes(mutable)
            yield Case("bitflip", body), 200 if _parses(body) else 400
        elif roll < 0.65:
            yield Case("valid", valid), 200
        elif http_only and roll < 0.72:
            yield Case("json-wrong-types", rng.choice(_WRONG_JSON), JSON), 400
        elif http_only and roll < 0.76:
            yield Case("oversize", rng.randbytes(LIMIT + rng.randrange(1, 4096))), 413
        elif http_only and roll < 0.79:
            yield Case("oversize-chunked", rng.randbytes(LIMIT + rng.randrange(1, 4096)), chunked=True), 413
        elif http_only and roll < 0.84:
            yield Case("gzip-bomb", bomb, encoding="gzip"), 413
        elif http_only and roll < 0.88:
            body = rng.randbytes(rng.randrange(1, 200))
            yield Case("broken-gzip", body, encoding="gzip"), 400
        elif http_only and roll < 0.93:
            yield (
                Case(
                    "wrong-type", valid, rng.choice(("text/plain", "application/xml", "", "application/grpc"))
                ),
                415,
            )
        elif not http_only and roll < 0.67:  # few: grpcio takes ~0.2 s to reset each refused stream
            yield Case("oversize", rng.randbytes(LIMIT + rng.randrange(1, 4096))), 413
        else:
            body = gzip.compress(valid)
            yield Case("gzip-valid", body, encoding="gzip"), 200


def _send_http(connection: http.client.HTTPConnection, case: Case) -> int:
    headers = {}
    if case.content_type:
        headers["Content-Type"] = case.content_type
    if case.encoding:
        headers["Content-Encoding"] = case.encoding
    if case.chunked:
        headers["Transfer-Encoding"] = "chunked"
        body: object = iter([case.body[i : i + 8192] for i in range(0, len(case.body), 8192)])
    else:
        body = case.body
    connection.request("POST", "/v1/traces", body=body, headers=headers, encode_chunked=case.chunked)  # type: ignore[arg-type]
    response = connection.getresponse()
    response.read()
    if response.getheader("Connection", "").lower() == "close":
        connection.close()
    return response.status


def test_ten_thousand_fuzzed_requests_get_correct_statuses_and_never_crash_the_gateway(
    downstream: DownstreamReceiver,
) -> None:
    rng = random.Random(20240611)
    valid = _valid_bodies()[0]
    mismatches: list[tuple[str, int, int]] = []
    kinds: Counter[str] = Counter()
    started = time.monotonic()
    with running_gateway(test_config(max_request_bytes=LIMIT)) as running:
        connection = http.client.HTTPConnection("127.0.0.1", running.http_port, timeout=10)
        for case, expected in _cases(rng, valid, HTTP_CASES, http_only=True):
            kinds[case.kind] += 1
            try:
                status = _send_http(connection, case)
            except (ConnectionError, http.client.HTTPException):
                # The server may close a connection whose oversized body it refused to read; that is allowed,
                # but the status must then have been sent: retry once on a fresh connection to see it.
                connection.close()
                status = _send_http(connection, case)
            if status != expected:
                mismatches.append((case.kind, expected, status))
        connection.close()

        grpc_codes = {
            200: grpc.StatusCode.OK,
            400: grpc.StatusCode.INVALID_ARGUMENT,
            413: grpc.StatusCode.RESOURCE_EXHAUSTED,
        }
        with grpc.insecure_channel(f"127.0.0.1:{running.grpc_port}") as channel:
            export = channel.unary_unary(
                "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                response_deserializer=ExportTraceServiceResponse.FromString,
            )
            for case, expected in _cases(rng, valid, GRPC_CASES, http_only=False):
                kinds["grpc-" + case.kind] += 1
                compression = grpc.Compression.Gzip if case.encoding else None
                payload = valid if case.kind == "gzip-valid" else case.body  # gRPC compresses by itself
                try:
                    export(payload, timeout=10, compression=compression)
                    code = grpc.StatusCode.OK
                except grpc.RpcError as error:
                    code = error.code()
                if code != grpc_codes[expected]:
                    mismatches.append(("grpc-" + case.kind, expected, code.value[0]))

        assert mismatches == [], mismatches[:20]
        # Still serving after all of it.
        connection = http.client.HTTPConnection("127.0.0.1", running.http_port, timeout=10)
        assert _send_http(connection, Case("valid", valid)) == 200
        connection.close()
    assert sum(kinds.values()) == HTTP_CASES + GRPC_CASES >= 10_000
    assert (
        min(kinds[kind] for kind in ("random", "truncated", "gzip-bomb", "oversize", "json-wrong-types"))
        > 100
    )
    elapsed = time.monotonic() - started
    print(f"{sum(kinds.values())} fuzzed requests in {elapsed:.1f}s: {dict(kinds)}")


def test_grpc_compressed_bomb_is_resource_exhausted(downstream: DownstreamReceiver) -> None:
    """gRPC inflates by itself; its max_receive_message_length applies to the inflated message."""
    zeros = b"\0" * (LIMIT * 16)
    with (
        running_gateway(test_config(max_request_bytes=LIMIT)) as running,
        grpc.insecure_channel(f"127.0.0.1:{running.grpc_port}") as channel,
    ):
        export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
        try:
            export(zeros, timeout=10, compression=grpc.Compression.Gzip)
            code = grpc.StatusCode.OK
        except grpc.RpcError as error:
            code = error.code()
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert json.dumps({"code": code.name})  # the status names the limit, never the payload
