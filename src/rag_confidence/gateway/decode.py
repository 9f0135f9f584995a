"""Request bodies to ``ExportTraceServiceRequest``: protobuf, OTLP/JSON (hex ids), gzip within a size limit.

Every failure is a :class:`~rag_confidence.errors.GatewayRequestError` carrying the status it maps to, so both
listeners answer alike.
"""

from __future__ import annotations

import base64
import json
import re
import zlib
from typing import Any

from google.protobuf import json_format  # type: ignore[import-untyped,unused-ignore]
from google.protobuf.message import DecodeError, Message  # type: ignore[import-untyped,unused-ignore]
from google.rpc import code_pb2  # type: ignore[import-untyped,unused-ignore]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1 import trace_pb2

from ..errors import GatewayRequestError
from .lenient import migrate_deprecated_scope_spans, valid_utf8_request

CONTENT_TYPE_PROTOBUF = "application/x-protobuf"
CONTENT_TYPE_JSON = "application/json"
_ENCODINGS_IDENTITY = frozenset({"", "identity"})
#: Gzip members accepted in one body: writers send one, or a few when they concatenate compressed batches.
MAX_GZIP_MEMBERS = 1024
_FIRST_SLICE = 1024
_LAST_SLICE = 1024 * 1024
# Both spellings: json_format (like the Collector's reader) accepts the proto field names too, and would read
# such ids as base64.
_ID_FIELDS = ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")


def bad_request(message: str) -> GatewayRequestError:
    return GatewayRequestError(message, http_status=400, grpc_code=code_pb2.INVALID_ARGUMENT)


def too_large(message: str) -> GatewayRequestError:
    return GatewayRequestError(message, http_status=413, grpc_code=code_pb2.RESOURCE_EXHAUSTED)


def unsupported_media_type(content_type: str) -> GatewayRequestError:
    return GatewayRequestError(
        f"unsupported content type {content_type!r}; use {CONTENT_TYPE_PROTOBUF} or {CONTENT_TYPE_JSON}",
        http_status=415,
        grpc_code=code_pb2.INVALID_ARGUMENT,
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
    elif encoding in (
        "deflate",
        "zlib",
    ):  # both the zlib format (RFC 1950); the Collector names it either way
        wbits = zlib.MAX_WBITS
    else:
        raise GatewayRequestError(
            f"unsupported content encoding {encoding!r}; use gzip (or deflate)",
            http_status=415,
            grpc_code=code_pb2.INVALID_ARGUMENT,
        )
    parts: list[bytes] = []
    size = 0
    view = memoryview(body)
    position = 0
    members = 0
    while True:
        members += 1
        if members > MAX_GZIP_MEMBERS:
            raise bad_request(f"more than {MAX_GZIP_MEMBERS} {encoding} members in one body")
        inflater = zlib.decompressobj(wbits)
        # Input goes in slices that start small and double: at the end of a member zlib copies the input left
        # over, so feeding the whole rest would make a body of many tiny members cost quadratic time.
        step = _FIRST_SLICE
        try:
            while not inflater.eof:
                if position >= len(view):
                    raise bad_request(f"truncated {encoding} body")
                piece = view[position : position + step]
                position += len(piece)
                step = min(step * 2, _LAST_SLICE)
                # One byte past the limit tells "exactly at the limit" from "over it" without inflating more.
                out = inflater.decompress(piece, limit + 1 - size)
                size += len(out)
                if size > limit or inflater.unconsumed_tail:
                    raise too_large(f"decompressed body exceeds the limit of {limit} bytes")
                parts.append(out)
        except zlib.error as error:
            raise bad_request(f"invalid {encoding} body: {error}") from None
        position -= len(inflater.unused_data)
        if position >= len(view):
            return b"".join(parts)
        # A gzip body may hold several members, each a gzip stream of its own, to be read one after the
        # other (RFC 1952; Go's reader, the Collector's, does). Anything else after the end is refused:
        # ignoring it would drop spans while answering success.
        if encoding != "gzip":
            raise bad_request(f"data after the end of the {encoding} stream")


def parse_protobuf(payload: bytes) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(payload)
    except (DecodeError, RuntimeError, ValueError) as error:
        # Senders that do not check UTF-8 (a Go string of arbitrary bytes, an attribute cut inside a
        # character) are delivered by the Collector, which does not check it either: refusing would lose the
        # whole batch (400 is not retried). Such strings are read leniently, invalid bytes replaced by U+FFFD.
        # Any strict failure gets that second reading: only protobuf 7.35 and later say "UTF-8" in the error,
        # and a body the lenient reading refuses too is malformed.
        try:
            request = valid_utf8_request(payload)
        except (DecodeError, RuntimeError, ValueError):
            raise bad_request(f"malformed protobuf ExportTraceServiceRequest: {error}") from None
    try:
        migrate_deprecated_scope_spans(request)
    except (DecodeError, RuntimeError, ValueError) as error:
        raise bad_request(
            f"malformed protobuf ExportTraceServiceRequest (deprecated scope spans): {error}"
        ) from None
    return request


def parse_json(payload: bytes) -> ExportTraceServiceRequest:
    """OTLP/JSON: ids are hex (``json_format`` alone would read them as base64 and silently corrupt them)."""
    try:
        # As the Collector's reader: invalid UTF-8 and unpaired surrogates become U+FFFD, and a key given twice
        # keeps both arrays (a plain dict would keep the last one and drop spans without a word).
        text = payload.decode("utf-8", errors="replace")
        document = json.loads(text, object_pairs_hook=_object)
    except (ValueError, RecursionError) as error:
        raise bad_request(f"malformed JSON: {error}") from None
    if not isinstance(document, dict):
        raise bad_request("malformed OTLP/JSON: the body must be a JSON object")
    try:
        _prepare_json(document)
        request = ExportTraceServiceRequest()
        json_format.ParseDict(document, request, ignore_unknown_fields=True)
    except GatewayRequestError:
        raise  # a bad id, said precisely (it is a ValueError too: it must not reach the clause below)
    except (json_format.ParseError, TypeError, ValueError, AttributeError, RecursionError) as error:
        raise bad_request(f"malformed OTLP/JSON ExportTraceServiceRequest: {_where(error)}") from None
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


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object: a key given twice with two arrays keeps both, in order; unpaired surrogates (``\\ud83d``
    escapes) become U+FFFD."""
    found: dict[str, Any] = {}
    for key, value in pairs:
        if isinstance(value, str) and not value.isascii():
            value = _without_surrogates(value)
        if key in found and isinstance(value, list) and isinstance(found[key], list):
            found[key] = [*found[key], *value]
        else:
            found[key] = value
    return found


def _without_surrogates(text: str) -> str:
    # json.loads joins escaped surrogate pairs into one character: a surrogate left in the text is unpaired.
    return _SURROGATE.sub("\ufffd", text)


_SURROGATE = re.compile("[\ud800-\udfff]")


# Enum fields of the trace request read by name: json_format with ignore_unknown_fields (needed for unknown
# fields) also skips an unknown enum *name*, leaving the default, so a status "ERROR" would arrive as UNSET.
_SPAN_KINDS = frozenset(trace_pb2.Span.SpanKind.keys())
_STATUS_CODES = frozenset(trace_pb2.Status.StatusCode.keys())


def _prepare_json(document: dict[str, Any]) -> None:
    """Check enum names, move spans of the deprecated field into ``scopeSpans``, and rewrite span and link ids
    in place from OTLP/JSON hex to the base64 that ``json_format`` expects."""
    for resource_spans in _objects(_field(document, "resourceSpans", "resource_spans")):
        _migrate_json(resource_spans)
        for scope_spans in _objects(_field(resource_spans, "scopeSpans", "scope_spans")):
            for span in _objects(scope_spans.get("spans")):
                _convert_ids(span)
                _check_enum(span.get("kind"), _SPAN_KINDS, "Span.kind")
                status = span.get("status")
                if isinstance(status, dict):
                    _check_enum(status.get("code"), _STATUS_CODES, "Status.code")
                for link in _objects(span.get("links")):
                    _convert_ids(link)


def _check_enum(value: Any, names: frozenset[str], field: str) -> None:
    if isinstance(value, str) and value not in names and not value.lstrip("-").isdigit():
        raise bad_request(f"malformed OTLP/JSON: unknown enum name in {field}")


_DEPRECATED_SCOPE_SPANS_KEYS = ("deprecatedScopeSpans", "deprecated_scope_spans")


def _migrate_json(resource_spans: dict[str, Any]) -> None:
    """Spans of the deprecated ``ResourceSpans`` field 1000 (``instrumentation_library_spans`` of older
    senders) move to ``scopeSpans`` when that is empty, as the Collector moves them."""
    for name in _DEPRECATED_SCOPE_SPANS_KEYS:
        deprecated = resource_spans.pop(name, None)
        if (
            isinstance(deprecated, list)
            and deprecated
            and not _field(resource_spans, "scopeSpans", "scope_spans")
        ):
            resource_spans.pop("scope_spans", None)
            resource_spans["scopeSpans"] = deprecated


def _field(message: dict[str, Any], json_name: str, proto_name: str) -> Any:
    value = message.get(json_name)
    return message.get(proto_name) if value is None else value


def _objects(value: Any) -> list[dict[str, Any]]:
    # Wrong shapes are left for json_format to reject with its own precise message.
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _convert_ids(message: dict[str, Any]) -> None:
    for field in _ID_FIELDS:
        value = message.get(field)
        if value is None:
            continue
        if not isinstance(value, str):
            raise bad_request(f"malformed OTLP/JSON: {field} must be a hex string")
        try:
            raw = bytes.fromhex(value)
        except ValueError:
            # Not the value itself: error messages reach the client's logs, and a bad id may be any text.
            raise bad_request(f"malformed OTLP/JSON: {field} is not a hex string") from None
        message[field] = base64.b64encode(raw).decode("ascii")


def _where(error: Exception) -> str:
    """Where ``json_format`` failed, never what it read: its messages quote the offending value, and error
    messages reach the client's logs. Only a path made of OTLP field names and indices is kept."""
    text = str(error)
    fields: list[str] = []
    rest = text
    while True:  # the chain of "Failed to parse <field> field: " prefixes, before any value appears
        prefix = _FAILED_FIELD.match(rest)
        if prefix is None or prefix.group(1) not in _OTLP_FIELDS:
            break
        fields.append(prefix.group(1))
        rest = rest[prefix.end() :]
    located = _LOCATION.search(text)  # anchored at the end: the real path follows any quoted value
    if located is not None:
        path = located.group(1)
        segments = [segment.split("[", 1)[0] for segment in path.split(".")[1:]]
        if all(segment in _OTLP_FIELDS for segment in segments):
            if fields and fields[-1] not in segments:  # the path stops at the message holding the bad field
                path += "." + fields[-1]
            return f"cannot parse the value at {path}"
    if fields:
        return f"cannot parse the value of {'.'.join(fields)}"
    return f"unreadable structure ({type(error).__name__})"


def _field_names(descriptor: Any, seen: set[str]) -> set[str]:
    """Every field name (JSON and proto spelling) of ``descriptor`` and the messages below it."""
    names: set[str] = set()
    if descriptor.full_name in seen:
        return names
    seen.add(descriptor.full_name)
    for field in descriptor.fields:
        names.update((field.name, field.json_name))
        if field.message_type is not None:
            names |= _field_names(field.message_type, seen)
    return names


_OTLP_FIELDS = frozenset(_field_names(ExportTraceServiceRequest.DESCRIPTOR, set()))
_LOCATION = re.compile(r" at (ExportTraceServiceRequest(?:\.[A-Za-z_][A-Za-z0-9_]*|\[\d+\])*)\.*$")
_FAILED_FIELD = re.compile(r"Failed to parse ([A-Za-z_][A-Za-z0-9_]*) field: ")


__all__ = [
    "CONTENT_TYPE_JSON",
    "CONTENT_TYPE_PROTOBUF",
    "bad_request",
    "decompress",
    "encode_message",
    "media_type",
    "parse",
    "too_large",
]
