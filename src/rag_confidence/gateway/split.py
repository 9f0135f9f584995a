"""Splitting a request that scoring grew past the size limit, so the downstream never gets one it refuses.

The gateway accepts requests up to ``--max-request-bytes`` (by default the Collector's receive limit, 4 MiB).
Scoring adds some ``rag.confidence.*`` attributes to each answer span, so a request accepted just under the limit
can leave above it; the downstream would refuse it, and the upstream retry it, refused again, until its retry
budget drops the whole batch. Such a request goes out as several, each within the limit.
"""

from __future__ import annotations

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans

__all__ = ["GROWTH_PER_ANSWER", "split_request"]

#: A bound on the bytes scoring adds to one answer span (~35 attributes with their keys; the action reason and
#: lists of warning codes are the longest values). Below ``limit - GROWTH_PER_ANSWER x answers`` a request
#: needs no measuring.
GROWTH_PER_ANSWER = 8 * 1024
# A nested message's tag and length prefix: 1 byte of tag, at most 5 of length.
_FRAME = 6


def split_request(request: ExportTraceServiceRequest, limit: int) -> list[ExportTraceServiceRequest]:
    """``request`` as requests of at most ``limit`` encoded bytes each, spans in their order, each under a copy
    of its resource and scope. A single span larger than ``limit`` goes alone (nothing smaller can carry it).

    >>> from opentelemetry.proto.trace.v1.trace_pb2 import Span
    >>> request = ExportTraceServiceRequest()
    >>> scope = request.resource_spans.add().scope_spans.add()
    >>> for index in range(10):
    ...     _ = scope.spans.add(name=f"span {index}", trace_id=bytes(16), span_id=bytes(8))
    >>> parts = split_request(request, 150)
    >>> [len(part.resource_spans[0].scope_spans[0].spans) for part in parts], all(
    ...     part.ByteSize() <= 150 for part in parts)
    ([3, 3, 3, 1], True)
    """
    parts: list[ExportTraceServiceRequest] = []
    current = ExportTraceServiceRequest()
    size = 0
    for resource_spans in request.resource_spans:
        resource_head = ResourceSpans(resource=resource_spans.resource, schema_url=resource_spans.schema_url)
        resource_size = resource_head.ByteSize() + _FRAME
        for scope_spans in resource_spans.scope_spans:
            scope_head = ScopeSpans(scope=scope_spans.scope, schema_url=scope_spans.schema_url)
            head_size = resource_size + scope_head.ByteSize() + _FRAME
            target: ScopeSpans | None = None
            for span in scope_spans.spans:
                span_size = span.ByteSize() + _FRAME
                if target is not None and size + span_size > limit:
                    parts.append(current)
                    current, size, target = ExportTraceServiceRequest(), 0, None
                if target is None:
                    if size and size + head_size + span_size > limit:
                        parts.append(current)
                        current, size = ExportTraceServiceRequest(), 0
                    placed = current.resource_spans.add()
                    placed.CopyFrom(resource_head)
                    target = placed.scope_spans.add()
                    target.CopyFrom(scope_head)
                    size += head_size
                target.spans.add().CopyFrom(span)
                size += span_size
    if size or not parts:
        parts.append(current)
    return parts
