"""Request bodies to ``ExportTraceServiceRequest``: protobuf, OTLP/JSON (hex ids), gzip within a size limit.

Every failure is a :class:`RequestError` carrying the status it maps to, so both listeners answer alike.
"""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any

from google.protobuf import json_format  # type: ignore[import-untyped,unused-ignore]
from google.protobuf.message import DecodeError, Message  # type: ignore[import-untyped,unused-ignore]
from google.rpc import code_pb2  # type: ignore[import-untyped,unused-ignore]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

CONTENT_TYPE_PROTOBUF = "application/x-protobuf"
CONTENT_TYPE_JSON = "application/json"
_ENCODINGS_IDENTITY = frozenset({"", "identity"})
_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


class RequestError(Exception):
    """A request the gateway refuses, with the HTTP status and gRPC code to answer with.

    ``message`` goes back to the client: it names what is wrong, never the payload's content.
    """

    def __init__(self, http_status: int, grpc_code: int, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.http_status = http_status
        self.grpc_code = grpc_code
        self.message = message
        self.retryable = retryable


def bad_request(message: str) -> RequestError:
    return RequestError(400, code_pb2.INVALID_ARGUMENT, message)


def too_large(message: str) -> RequestError:
    return RequestError(413, code_pb2.RESOURCE_EXHAUSTED, message)


def unsupported_media_type(content_type: str) -> RequestError:
    return RequestError(
        415,
        code_pb2.INVALID_ARGUMENT,
        f"unsupported content type {content_type!r}; use {CONTENT_TYPE_PROTOBUF} or {CONTENT_TYPE_JSON}",
    )


def media_type(content_type: str | None) -> str:
    """``application/json; charset=utf-8`` -> ``application/json``."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def decompress(body: bytes, content_encoding: str | None, limit: int) -> bytes:
    """Undo ``Content-Encoding`` (gzip, deflate), refusing output past ``limit`` bytes (bombs)."""
    encoding = (content_encoding or "").strip().lower()
    if encoding in _ENCODINGS_IDENTITY:
        return body
    if encoding == "gzip":
        wbits = 16 + zlib.MAX_WBITS
    elif encoding == "deflate":
        wbits = zlib.MAX_WBITS
    else:
        raise RequestError(
            415, code_pb2.INVALID_ARGUMENT, f"unsupported content encoding {encoding!r}; use gzip"
        )
    inflater = zlib.decompressobj(wbits)
    try:
        # One byte past the limit tells "exactly at the limit" from "over it" without inflating the rest.
        out = inflater.decompress(body, limit + 1)
        if len(out) > limit:
            raise too_large(f"decompressed body exceeds the limit of {limit} bytes")
        out += inflater.flush()
    except zlib.error as error:
        raise bad_request(f"invalid {encoding} body: {error}") from None
    if len(out) > limit:
        raise too_large(f"decompressed body exceeds the limit of {limit} bytes")
    if not inflater.eof:
        raise bad_request(f"truncated {encoding} body")
    return out


def parse_protobuf(payload: bytes) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(payload)
    except (DecodeError, RuntimeError, ValueError) as error:
        raise bad_request(f"malformed protobuf ExportTraceServiceRequest: {error}") from None
    return request


def parse_json(payload: bytes) -> ExportTraceServiceRequest:
    """OTLP/JSON: ids are hex (``json_format`` alone would read them as base64 and silently corrupt them)."""
    try:
        document = json.loads(payload)
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise bad_request(f"malformed JSON: {error}") from None
    if not isinstance(document, dict):
        raise bad_request("malformed OTLP/JSON: the body must be a JSON object")
    try:
        _hex_ids_to_base64(document)
        request = ExportTraceServiceRequest()
        json_format.ParseDict(document, request, ignore_unknown_fields=True)
    except _BadId as error:
        raise bad_request(f"malformed OTLP/JSON: {error}") from None
    except (json_format.ParseError, TypeError, ValueError, AttributeError, RecursionError) as error:
        raise bad_request(f"malformed OTLP/JSON ExportTraceServiceRequest: {_short(error)}") from None
    return request


def parse(payload: bytes, content_type: str) -> ExportTraceServiceRequest:
    if content_type == CONTENT_TYPE_PROTOBUF:
        return parse_protobuf(payload)
    if content_type == CONTENT_TYPE_JSON:
        return parse_json(payload)
    raise unsupported_media_type(content_type)


def encode_message(message: Message, content_type: str) -> bytes:
    """A response (``ExportTraceServiceResponse`` or ``google.rpc.Status``) in the request's content type."""
    if content_type == CONTENT_TYPE_JSON:
        text: str = json_format.MessageToJson(message, indent=None)
        return text.encode()
    serialized: bytes = message.SerializeToString()
    return serialized


class _BadId(ValueError):
    pass


def _hex_ids_to_base64(document: dict[str, Any]) -> None:
    """Rewrite span and link ids in place from OTLP/JSON hex to the base64 that ``json_format`` expects."""
    for resource_spans in _objects(document.get("resourceSpans")):
        for scope_spans in _objects(resource_spans.get("scopeSpans")):
            for span in _objects(scope_spans.get("spans")):
                _convert_ids(span)
                for link in _objects(span.get("links")):
                    _convert_ids(link)


def _objects(value: Any) -> list[dict[str, Any]]:
    # Wrong shapes are left for json_format to reject with its own precise message.
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _convert_ids(message: dict[str, Any]) -> None:
    for field in _ID_FIELDS:
        value = message.get(field)
        if value is None:
            continue
        if not isinstance(value, str):
            raise _BadId(f"{field} must be a hex string")
        try:
            raw = bytes.fromhex(value)
        except ValueError:
            raise _BadId(f"{field} is not hex: {value[:40]!r}") from None
        message[field] = base64.b64encode(raw).decode("ascii")


def _short(error: Exception) -> str:
    text = str(error)
    return text if len(text) <= 300 else text[:300] + "..."


__all__ = [
    "CONTENT_TYPE_JSON",
    "CONTENT_TYPE_PROTOBUF",
    "RequestError",
    "bad_request",
    "decompress",
    "encode_message",
    "media_type",
    "parse",
    "too_large",
]
