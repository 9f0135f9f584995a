"""Requests the strict protobuf reader refuses or misreads but the Collector delivers.

* Strings that are not UTF-8. Go and C++ senders do not check it, and neither does the Collector's reader; the
  protobuf runtime here refuses the whole request. Such a request is read again with every ``string`` field
  of the OTLP trace messages declared ``bytes`` (same wire format, no check), the invalid bytes are replaced
  by U+FFFD, and the result is read strictly.
* Spans in ``ResourceSpans`` field 1000, the deprecated ``instrumentation_library_spans`` of senders from
  before OTLP 0.19: the current schema no longer declares it, so they would be an unknown field, forwarded
  but never counted nor scored. As the Collector does, they move to ``scope_spans`` when that is empty.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from google.protobuf import (  # type: ignore[import-untyped,unused-ignore]
    descriptor_pb2,
    descriptor_pool,
    message_factory,
    unknown_fields,
)
from google.protobuf.message import DecodeError, Message  # type: ignore[import-untyped,unused-ignore]
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ScopeSpans

__all__ = ["migrate_deprecated_scope_spans", "valid_utf8_request"]

_DEPRECATED_SCOPE_SPANS = 1000
_LENGTH_DELIMITED = 2
_STRING = descriptor_pb2.FieldDescriptorProto.TYPE_STRING
_BYTES = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES


@cache
def _lenient() -> tuple[Any, frozenset[tuple[str, int]]]:
    """A pool of the OTLP trace messages with ``bytes`` for ``string``, and which fields were strings."""
    pool = descriptor_pool.DescriptorPool()
    were_strings: set[tuple[str, int]] = set()
    added: set[str] = set()

    def add(file: Any) -> None:
        if file.name in added:
            return
        for dependency in file.dependencies:
            add(dependency)
        proto = descriptor_pb2.FileDescriptorProto()
        file.CopyToProto(proto)
        for message in proto.message_type:
            _strings_to_bytes(message, f"{proto.package}.", were_strings)
        pool.Add(proto)
        added.add(file.name)

    add(trace_service_pb2.DESCRIPTOR)
    return pool, frozenset(were_strings)


def _strings_to_bytes(message: Any, prefix: str, were_strings: set[tuple[str, int]]) -> None:
    name = prefix + message.name
    for field in message.field:
        if field.type == _STRING:
            field.type = _BYTES
            were_strings.add((name, field.number))
    for nested in message.nested_type:
        _strings_to_bytes(nested, f"{name}.", were_strings)


def valid_utf8_request(payload: bytes) -> ExportTraceServiceRequest:
    """``payload`` read without the UTF-8 check, invalid bytes in its strings replaced by U+FFFD.

    Raises :class:`DecodeError` when the payload is malformed in any other way.
    """
    request: ExportTraceServiceRequest = _read_leniently(ExportTraceServiceRequest, payload)
    return request


def _read_leniently(strict_class: Any, payload: bytes) -> Any:
    pool, were_strings = _lenient()
    lenient = message_factory.GetMessageClass(pool.FindMessageTypeByName(strict_class.DESCRIPTOR.full_name))()
    lenient.ParseFromString(payload)
    _repair(lenient, were_strings)
    return strict_class.FromString(lenient.SerializeToString())


def _repair(message: Message, were_strings: frozenset[tuple[str, int]]) -> None:
    name = message.DESCRIPTOR.full_name
    for field, value in message.ListFields():
        if field.message_type is not None:
            for item in (value,) if isinstance(value, Message) else value:
                _repair(item, were_strings)
        elif (name, field.number) in were_strings:
            if isinstance(value, bytes):
                setattr(message, field.name, _valid(value))
            else:  # a repeated string field
                repaired = [_valid(item) for item in value]
                del value[:]
                value.extend(repaired)


def _valid(value: bytes) -> bytes:
    return value.decode("utf-8", "replace").encode("utf-8")


def migrate_deprecated_scope_spans(request: ExportTraceServiceRequest) -> None:
    """Move spans of the deprecated field 1000 of each ``ResourceSpans`` into its empty ``scope_spans``."""
    for resource_spans in request.resource_spans:
        deprecated = [
            field.data
            for field in unknown_fields.UnknownFieldSet(resource_spans)
            if field.field_number == _DEPRECATED_SCOPE_SPANS and field.wire_type == _LENGTH_DELIMITED
        ]
        if not deprecated:
            continue
        if not resource_spans.scope_spans:
            for data in deprecated:
                try:
                    scope_spans = ScopeSpans.FromString(data)
                except DecodeError:  # the same leniency as for the request
                    scope_spans = _read_leniently(ScopeSpans, data)
                resource_spans.scope_spans.append(scope_spans)
        # Forwarding the old field as well would deliver its spans twice to a receiver that migrates them.
        resource_spans.DiscardUnknownFields()
