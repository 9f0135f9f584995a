"""The spans of a protobuf OTLP trace request, as the encodings they came in, without decoding them again.

The assembly window keeps the spans it has forwarded as their protobuf encodings. A request that came as
protobuf already holds each span's encoding as a run of its body: reading the body's framing finds them for a
few byte reads a span, where serializing every decoded span again costs an encoder run each (most of the
window's cost on plain traffic).

Protobuf decodes the occurrences of a repeated message field into its elements in the order they occur, one
element each, so the ``n``-th span run of the ``m``-th ScopeSpans run is the encoding of ``spans[n]`` of the
``m``-th ScopeSpans the decoder built (ScopeSpans counted across ResourceSpans, in order). Decoding that run gives
that span back. Fields of another number, or of the right number with another wire type, are what protobuf
keeps as unknown fields; they are skipped here as there. Anything this reader does not walk (a group, a
length past its message) makes it answer None: the caller serializes the decoded spans instead.
"""

from __future__ import annotations

from typing import Final

__all__ = ["span_encodings"]

# Keys (field number << 3 | wire type) of the length-delimited fields on the way to a span:
# ExportTraceServiceRequest.resource_spans = 1, ResourceSpans.scope_spans = 2, ScopeSpans.spans = 2.
_RESOURCE_SPANS: Final = 1 << 3 | 2
_SCOPE_SPANS: Final = 2 << 3 | 2
_SPANS: Final = 2 << 3 | 2
_VARINT: Final = 0
_FIXED64: Final = 1
_LENGTH_DELIMITED: Final = 2
_FIXED32: Final = 5


def span_encodings(body: bytes) -> list[list[bytes]] | None:
    """The encoding of every span in the ExportTraceServiceRequest ``body``: one list per ScopeSpans, in the
    order the decoded request holds them; None if the body holds a field this reader does not walk.

    >>> from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    >>> request = ExportTraceServiceRequest()
    >>> scope = request.resource_spans.add().scope_spans.add()
    >>> _ = scope.spans.add(name="a"), scope.spans.add(name="b")
    >>> _ = request.resource_spans.add().scope_spans.add()
    >>> span_encodings(request.SerializeToString()) == [[span.SerializeToString() for span in scope.spans], []]
    True
    """
    scopes: list[list[bytes]] = []
    position = 0
    end = len(body)
    while position < end:
        key, position = _varint(body, position, end)
        if key == _RESOURCE_SPANS:
            length, position = _varint(body, position, end)
            stop = position + length
            if position < 0 or stop > end or not _resource_spans(body, position, stop, scopes):
                return None
            position = stop
        else:
            position = _skip(body, key, position, end)
        if position < 0:
            return None
    return scopes


def _resource_spans(body: bytes, position: int, end: int, scopes: list[list[bytes]]) -> bool:
    while position < end:
        key, position = _varint(body, position, end)
        if key == _SCOPE_SPANS:
            length, position = _varint(body, position, end)
            stop = position + length
            if position < 0 or stop > end:
                return False
            spans = _scope_spans(body, position, stop)
            if spans is None:
                return False
            scopes.append(spans)
            position = stop
        else:
            position = _skip(body, key, position, end)
        if position < 0:
            return False
    return True


def _scope_spans(body: bytes, position: int, end: int) -> list[bytes] | None:
    spans: list[bytes] = []
    while position < end:
        # The loop of every span: its key is one byte (the varint call is for other fields).
        key = body[position]
        if key < 0x80:
            position += 1
        else:
            key, position = _varint(body, position, end)
        if key == _SPANS:
            length, position = _varint(body, position, end)
            stop = position + length
            if position < 0 or stop > end:
                return None
            spans.append(body[position:stop])
            position = stop
        else:
            position = _skip(body, key, position, end)
        if position < 0:
            return None
    return spans


def _skip(body: bytes, key: int, position: int, end: int) -> int:
    """The position after the value of the field ``key`` starting at ``position``; -1 for what is not walked."""
    if position < 0:
        return -1
    kind = key & 7
    if kind == _VARINT:
        _, position = _varint(body, position, end)
    elif kind == _LENGTH_DELIMITED:
        length, position = _varint(body, position, end)
        if position >= 0:
            position += length
    elif kind == _FIXED64:
        position += 8
    elif kind == _FIXED32:
        position += 4
    else:  # a group (start or end): protobuf walks its fields to find its end; this reader does not
        return -1
    return position if position <= end else -1


def _varint(body: bytes, position: int, end: int) -> tuple[int, int]:
    """The varint at ``position`` and the position after it; position -1 when it runs past ``end`` (or
    ``position`` is -1 already) or is longer than 10 bytes."""
    value = 0
    shift = 0
    while 0 <= position < end and shift < 70:
        byte = body[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7
    return 0, -1
