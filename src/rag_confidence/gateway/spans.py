"""OTLP protobuf spans as :class:`SpanRecord` views, and attribute writes back into protobuf spans.

Values read follow the SDK's shapes (arrays as tuples, ``kvlist`` as dicts) so signal extraction sees the same
Python values in-process and in the gateway.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.proto.trace.v1.trace_pb2 import SpanFlags, Status

from ..signals.records import EventRecord, SpanRecord, new_span_record

_HAS_IS_REMOTE = SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
_IS_REMOTE = SpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
# OTLP enum numbers -> the SDK enum names SpanRecord uses (SPAN_KIND_UNSPECIFIED has no SDK counterpart).
_KIND_NAMES = {
    ProtoSpan.SPAN_KIND_INTERNAL: "INTERNAL",
    ProtoSpan.SPAN_KIND_SERVER: "SERVER",
    ProtoSpan.SPAN_KIND_CLIENT: "CLIENT",
    ProtoSpan.SPAN_KIND_PRODUCER: "PRODUCER",
    ProtoSpan.SPAN_KIND_CONSUMER: "CONSUMER",
}
_STATUS_NAMES = {
    Status.STATUS_CODE_UNSET: "UNSET",
    Status.STATUS_CODE_OK: "OK",
    Status.STATUS_CODE_ERROR: "ERROR",
}
_MAX_DEPTH = 16  # nested arrays/kvlists deeper than this are not signal data; stop rather than recurse


def iter_spans(request: ExportTraceServiceRequest) -> Iterator[ProtoSpan]:
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            yield from scope_spans.spans


def span_count(request: ExportTraceServiceRequest) -> int:
    return sum(len(scope.spans) for resource in request.resource_spans for scope in resource.scope_spans)


def parent_is_local(span: ProtoSpan) -> bool:
    """The span's flags say its parent is in the same process (senders that do not set the flags leave it
    unknown: then an absent parent reads as remote, as before the flags existed)."""
    flags = span.flags
    return bool(flags & _HAS_IS_REMOTE) and not flags & _IS_REMOTE


def to_record(span: ProtoSpan) -> SpanRecord:
    """View a protobuf span (with valid ids, see :mod:`.pipeline`) as a :class:`SpanRecord`.

    Attributes are converted into dicts up front: records are built only for traces that may hold an answer
    (see :mod:`.screen`), and answer detection and signal extraction then read each span's attributes
    a dozen times, which a plain dict answers fastest.
    """
    parent = span.parent_span_id
    flags = span.flags
    events = span.events
    return new_span_record(
        int.from_bytes(span.trace_id, "big"),
        int.from_bytes(span.span_id, "big"),
        (int.from_bytes(parent, "big") or None) if parent else None,
        span.name,
        attributes_to_dict(span.attributes),
        tuple(
            EventRecord(
                name=event.name,
                attributes=attributes_to_dict(event.attributes),
                timestamp=event.time_unix_nano,
            )
            for event in events[:]
        )
        if events
        else (),
        span.start_time_unix_nano or None,
        span.end_time_unix_nano or None,
        bool(flags & _HAS_IS_REMOTE and flags & _IS_REMOTE),
        _KIND_NAMES.get(span.kind),
        _STATUS_NAMES.get(span.status.code),
        tuple(
            (int.from_bytes(link.trace_id, "big"), int.from_bytes(link.span_id, "big")) for link in links[:]
        )
        if (links := span.links)
        else (),
        span.dropped_events_count,
    )


def attributes_to_dict(attributes: Sequence[KeyValue]) -> dict[str, Any]:
    """Attribute list to a dict. A repeated key keeps its last value (OTLP forbids repeats; a producer that
    sends them means the later one); a value that is empty, or of a kind we do not read, leaves its key out."""
    result: dict[str, Any] = {}
    # A slice copies the items out in C; iterating a upb repeated field ends in an exception. Scalars are
    # read inline: this runs for every attribute of every span of an answering trace.
    for item in attributes[:]:
        value = item.value
        which = value.WhichOneof("value")
        if which == "string_value":
            result[item.key] = value.string_value
        elif which == "double_value":
            result[item.key] = value.double_value
        elif which == "int_value":
            result[item.key] = value.int_value
        elif which == "bool_value":
            result[item.key] = value.bool_value
        else:
            converted = any_value_to_python(value)
            if converted is None:
                result.pop(item.key, None)  # the last value is the one that counts, even when unreadable
            else:
                result[item.key] = converted
    return result


def any_value_to_python(value: AnyValue, depth: int = 0) -> Any:
    which = value.WhichOneof("value")
    if which == "string_value":
        return value.string_value
    if which == "int_value":
        return value.int_value
    if which == "double_value":
        return value.double_value
    if which == "bool_value":
        return value.bool_value
    if depth >= _MAX_DEPTH:
        return None
    if which == "array_value":
        return tuple(any_value_to_python(item, depth + 1) for item in value.array_value.values)
    if which == "kvlist_value":
        return {item.key: any_value_to_python(item.value, depth + 1) for item in value.kvlist_value.values}
    if which == "bytes_value":
        return value.bytes_value
    return None


def python_to_any_value(value: Any, target: AnyValue) -> None:
    """Fill ``target`` from an attribute value as the SDK accepts them (bool before int: bool is an int)."""
    if isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, int):
        target.int_value = value
    elif isinstance(value, float):
        target.double_value = value
    elif isinstance(value, str):
        target.string_value = value
    elif isinstance(value, bytes):
        target.bytes_value = value
    elif isinstance(value, Mapping):
        kvlist = target.kvlist_value
        kvlist.SetInParent()
        for key, item in value.items():
            entry = kvlist.values.add(key=str(key))
            python_to_any_value(item, entry.value)
    elif isinstance(value, Sequence):
        array = target.array_value
        array.SetInParent()
        for item in value:
            python_to_any_value(item, array.values.add())
    else:
        target.string_value = str(value)


def set_attributes(span: ProtoSpan, attributes: Mapping[str, Any]) -> None:
    """Write ``attributes`` onto the span in place: existing keys are replaced, new keys appended.

    ``None`` values remove the key, as the SDK ignores ``None`` attributes.
    """
    if not attributes:
        return
    replaced = [item for item in span.attributes[:] if item.key not in attributes]
    if len(replaced) != len(span.attributes):
        kept = [KeyValue(key=item.key, value=item.value) for item in replaced]
        del span.attributes[:]
        span.attributes.extend(kept)
    # Scorecard attributes repeat from answer to answer (labels, actions, dimension names, 0-100 scores, warning
    # codes), so each key-value pair is encoded once by protobuf and the encodings are merged into the span in
    # one parse: concatenated encodings of a message merge, repeated fields append (the protobuf encoding
    # rule). Setting ~30 attributes field by field through upb costs about three times as much.
    span.MergeFromString(b"".join([_encoded_attribute(key, value) for key, value in attributes.items()]))


_ENCODED: dict[tuple[Any, ...], bytes] = {}
_ENCODED_MAX = 4096


def _encoded_attribute(key: str, value: Any) -> bytes:
    """The encoding of a Span holding just the attribute ``key = value`` (empty for None)."""
    if value is None:
        return b""
    kind = type(value)
    if kind is list:
        # Only lists of strings are cached: equal lists of other types may differ in encoding ([1] and [1.0]).
        cache_key: tuple[Any, ...] | None = (
            (key, tuple(value), kind) if all(type(entry) is str for entry in value) else None
        )
    elif kind is float:
        # 0.0 and -0.0 are equal but encode differently; NaN is equal to nothing.
        cache_key = (key, value, kind) if value and math.isfinite(value) else None
    elif kind is str or kind is int or kind is bool:
        cache_key = (key, value, kind)
    else:
        cache_key = None
    if cache_key is not None:
        cached = _ENCODED.get(cache_key)
        if cached is not None:
            return cached
    holder = ProtoSpan()
    item = holder.attributes.add()
    item.key = key
    python_to_any_value(value, item.value)
    encoded: bytes = holder.SerializeToString()
    if cache_key is not None:
        if (
            len(_ENCODED) >= _ENCODED_MAX
        ):  # free-text values (action reasons) keep the cache small by clearing
            _ENCODED.clear()
        _ENCODED[cache_key] = encoded
    return encoded
