"""OTLP protobuf spans as :class:`SpanRecord` views, and attribute writes back into protobuf spans.

Values read follow the SDK's shapes (arrays as tuples, ``kvlist`` as dicts) so signal extraction sees the same
Python values in-process and in the gateway.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.proto.trace.v1.trace_pb2 import SpanFlags, Status

from ..signals.records import EventRecord, SpanRecord

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


def has_valid_ids(span: ProtoSpan) -> bool:
    """OTLP ids: 16-byte trace id and 8-byte span id, not all zero; parent span id empty or 8 bytes."""
    return (
        len(span.trace_id) == 16
        and len(span.span_id) == 8
        and any(span.trace_id)
        and any(span.span_id)
        and len(span.parent_span_id) in (0, 8)
    )


class ProtoAttributes(Mapping[str, Any]):
    """A read-only mapping over a protobuf attribute list, converting values only when they are read.

    Most spans a gateway sees are never read beyond a few keys (is it an answer? a retrieval?), so converting
    every value of every span up front (document contents included) would dominate the cost of plain traffic.
    """

    __slots__ = ("_items", "_index", "_cache")

    def __init__(self, items: Sequence[KeyValue]) -> None:
        self._items = items
        self._index: dict[str, int] | None = None
        self._cache: dict[str, Any] = {}

    def _keys(self) -> dict[str, int]:
        if self._index is None:
            # A repeated key keeps its last position, like dict assignment; empty values are left out.
            index = {item.key: position for position, item in enumerate(self._items)}
            self._index = {
                key: position for key, position in index.items() if self._items[position].HasField("value")
            }
        return self._index

    def __getitem__(self, key: str) -> Any:
        if key in self._cache:
            return self._cache[key]
        position = self._keys()[key]
        value = any_value_to_python(self._items[position].value)
        if value is None:
            raise KeyError(key)
        self._cache[key] = value
        return value

    def get(self, key: str, default: Any = None) -> Any:
        # Mapping.get goes through __getitem__ and a KeyError per miss; misses are the common case here.
        if key in self._cache:
            return self._cache[key]
        position = self._keys().get(key)
        if position is None:
            return default
        value = any_value_to_python(self._items[position].value)
        if value is None:
            return default
        self._cache[key] = value
        return value

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str) or key not in self._keys():
            return False
        try:
            self[key]
        except KeyError:
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        return (key for key in self._keys() if key in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def to_record(span: ProtoSpan, *, lazy: bool = True) -> SpanRecord:
    """View a protobuf span (with valid ids, see :func:`has_valid_ids`) as a :class:`SpanRecord`.

    ``lazy`` attributes read the protobuf on demand (the span must outlive the record and not change under
    it); otherwise they are copied into dicts, for records kept beyond the request (the assembly window).
    """
    convert = ProtoAttributes if lazy else attributes_to_dict
    parent = int.from_bytes(span.parent_span_id, "big") if span.parent_span_id else 0
    flags = span.flags
    return SpanRecord(
        trace_id=int.from_bytes(span.trace_id, "big"),
        span_id=int.from_bytes(span.span_id, "big"),
        parent_span_id=parent or None,
        name=span.name,
        attributes=convert(span.attributes),
        events=tuple(
            EventRecord(
                name=event.name,
                attributes=convert(event.attributes),
                timestamp=event.time_unix_nano,
            )
            for event in span.events
        ),
        start_time=span.start_time_unix_nano or None,
        end_time=span.end_time_unix_nano or None,
        parent_is_remote=bool(flags & _HAS_IS_REMOTE and flags & _IS_REMOTE),
        kind=_KIND_NAMES.get(span.kind),
        status_code=_STATUS_NAMES.get(span.status.code),
    )


def attributes_to_dict(attributes: Sequence[KeyValue]) -> dict[str, Any]:
    """Attribute list to a dict; empty values are left out, and a repeated key keeps its last value."""
    result: dict[str, Any] = {}
    for item in attributes:
        value = any_value_to_python(item.value)
        if value is not None:
            result[item.key] = value
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
        for key, item in value.items():
            entry = kvlist.values.add(key=str(key))
            python_to_any_value(item, entry.value)
    elif isinstance(value, Sequence):
        array = target.array_value
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
    replaced = [item for item in span.attributes if item.key not in attributes]
    if len(replaced) != len(span.attributes):
        kept = [KeyValue(key=item.key, value=item.value) for item in replaced]
        del span.attributes[:]
        span.attributes.extend(kept)
    for key, value in attributes.items():
        if value is None:
            continue
        python_to_any_value(value, span.attributes.add(key=key).value)
