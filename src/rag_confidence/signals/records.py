"""A neutral, read-only view of one span, shared by the in-process processor and the gateway.

The in-process path builds these from SDK ``ReadableSpan`` objects (:func:`records_from_readable_spans`), the
gateway from OTLP protobuf spans, so signal extraction and answer detection are written once against this
shape.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan


@dataclass(frozen=True, slots=True)
class EventRecord:
    """One span event (or a log record parented to the span, such as ``gen_ai.evaluation.result``)."""

    name: str
    attributes: Mapping[str, Any] = field(default_factory=dict)
    timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class SpanRecord:
    """What signal extraction needs of a span; ids are ints as in the SDK (``parent_span_id`` None for roots).

    ``kind`` is the span kind's name as in the SDK enum (``"INTERNAL"``, ``"CLIENT"``, ...) and
    ``status_code``
    the status code's name (``"UNSET"``, ``"OK"``, ``"ERROR"``); both None when unknown.
    """

    trace_id: int
    span_id: int
    parent_span_id: int | None
    name: str
    attributes: Mapping[str, Any] = field(default_factory=dict)
    events: tuple[EventRecord, ...] = ()
    start_time: int | None = None
    end_time: int | None = None
    # True when the parent lives in another process (remote parent): such a span is a *local* root.
    parent_is_remote: bool = False
    kind: str | None = None
    status_code: str | None = None

    @classmethod
    def from_readable_span(cls, span: ReadableSpan) -> SpanRecord:
        """View an SDK span (ended or still recording) as a record.

        Attributes are copied into plain dicts (one pass; the SDK's bounded mapping is slow to scan repeatedly,
        and a span still recording may change). Never raises on a span whose context is missing (ids 0).

        >>> from opentelemetry.sdk.trace import TracerProvider
        >>> with TracerProvider().get_tracer("doc").start_as_current_span("answer") as span:
        ...     span.set_attribute("rag.answer", True)
        >>> # record = SpanRecord.from_readable_span(span)  # record.attributes["rag.answer"] is True
        """
        context = span.context
        parent = span.parent
        kind = getattr(span, "kind", None)
        status = getattr(span, "status", None)
        status_code = getattr(status, "status_code", None) if status is not None else None
        return cls(
            trace_id=context.trace_id if context is not None else 0,
            span_id=context.span_id if context is not None else 0,
            parent_span_id=parent.span_id if parent is not None else None,
            name=span.name,
            attributes=dict(span.attributes) if span.attributes is not None else {},
            events=tuple(
                EventRecord(
                    name=event.name,
                    attributes=dict(event.attributes) if event.attributes is not None else {},
                    timestamp=event.timestamp,
                )
                for event in span.events
            ),
            start_time=span.start_time,
            end_time=span.end_time,
            parent_is_remote=bool(parent is not None and parent.is_remote),
            kind=getattr(kind, "name", None),
            status_code=getattr(status_code, "name", None),
        )


def records_from_readable_spans(spans: Iterable[ReadableSpan]) -> list[SpanRecord]:
    """Convert SDK spans (for example from an ``InMemorySpanExporter``) to records, in the same order."""
    return [SpanRecord.from_readable_span(span) for span in spans]
