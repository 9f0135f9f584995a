"""A neutral, read-only view of one span, shared by the in-process processor and the gateway.

The in-process path builds these from SDK ``ReadableSpan`` objects (:func:`records_from_readable_spans`), the
gateway from OTLP protobuf spans, so signal extraction and answer detection are written once against this
shape.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Protocol


class ReadableSpan(Protocol):
    """What :meth:`SpanRecord.from_readable_span` reads of an SDK ``ReadableSpan``.

    A structural type rather than an import, so this package type-checks (and the mypyc build analyses it)
    without the SDK installed.
    """

    @property
    def context(self) -> Any: ...
    @property
    def parent(self) -> Any: ...
    @property
    def name(self) -> str: ...
    @property
    def attributes(self) -> Mapping[str, Any] | None: ...
    @property
    def events(self) -> Any: ...
    @property
    def start_time(self) -> int | None: ...
    @property
    def end_time(self) -> int | None: ...


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
    ``status_code`` the status code's name (``"UNSET"``, ``"OK"``, ``"ERROR"``); both None when unknown.
    Built by hand, records score spans that never went through the SDK (a trace store, a test):

    >>> from rag_confidence.signals import extract_signals, find_answers
    >>> docs = '[{"id": "d1", "score": 0.8}, {"id": "d2", "score": 0.6}]'
    >>> records = [
    ...     SpanRecord(trace_id=1, span_id=1, parent_span_id=None, name="answer"),
    ...     SpanRecord(1, 2, 1, "retrieve", {"gen_ai.operation.name": "retrieval", "gen_ai.retrieval.documents": docs}),
    ... ]
    >>> (group,) = find_answers(records)
    >>> group.answer.name, [c["documentId"] for c in extract_signals(group.spans).inputs["candidates"]]
    ('answer', ['d1', 'd2'])
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
    # The spans this span links to, as (trace_id, span_id): a feedback carrier's links name what it grades.
    links: tuple[tuple[int, int], ...] = ()
    # Events the span lost to its event count limit (the SDK keeps the newest 128 by default): a vector-DB
    # span writes one event per hit, best first, so these are its best hits.
    dropped_events: int = 0

    @classmethod
    def from_readable_span(cls, span: ReadableSpan) -> SpanRecord:
        """View an SDK span (ended or still recording) as a record.

        Attributes are read as plain dicts: a span still recording may change, so its attributes are copied
        (the SDK's mapping is slow to read key by key); an ended SDK span's attributes can no longer change,
        so the dict the SDK keeps them in is shared, not copied (treat it as read-only, like the record). Never
        raises on a span whose context is missing (ids 0).

        >>> from opentelemetry.sdk.trace import TracerProvider
        >>> with TracerProvider().get_tracer("doc").start_as_current_span("answer") as span:
        ...     span.set_attribute("rag.answer", True)
        >>> SpanRecord.from_readable_span(span).attributes["rag.answer"]
        True
        """
        context = span.context
        parent = span.parent
        kind = getattr(span, "kind", None)
        status = getattr(span, "status", None)
        status_code = getattr(status, "status_code", None) if status is not None else None
        events = span.events
        trace_id = context.trace_id if context is not None else 0
        span_id = context.span_id if context is not None else 0
        parent_span_id = parent.span_id if parent is not None else None
        name = span.name
        attributes = _frozen_sdk_attributes(getattr(span, "_attributes", None))
        if attributes is None:
            attributes = _copy(span.attributes)
        event_records = (
            tuple(
                EventRecord(
                    name=event.name, attributes=_event_attributes(event.attributes), timestamp=event.timestamp
                )
                for event in events
            )
            if events
            else ()
        )
        start_time = span.start_time
        end_time = span.end_time
        parent_is_remote = bool(parent is not None and parent.is_remote)
        kind_name = getattr(kind, "name", None)
        status_name = getattr(status_code, "name", None)
        links = _link_ids(span)
        dropped_events = _dropped_events(span)
        if cls is SpanRecord:
            return new_span_record(
                trace_id,
                span_id,
                parent_span_id,
                name,
                attributes,
                event_records,
                start_time,
                end_time,
                parent_is_remote,
                kind_name,
                status_name,
                links,
                dropped_events,
            )
        return cls(
            trace_id=trace_id,
            span_id=span_id,
            parent_span_id=parent_span_id,
            name=name,
            attributes=attributes,
            events=event_records,
            start_time=start_time,
            end_time=end_time,
            parent_is_remote=parent_is_remote,
            kind=kind_name,
            status_code=status_name,
            links=links,
            dropped_events=dropped_events,
        )


# A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``, which costs more than the
# rest of converting a span. Records of exactly this class are built by setting the slots directly: the same
# instance, as ``__init__`` (which does nothing else) would make it. The field list is checked at import.
_RECORD_FIELDS = (
    "trace_id",
    "span_id",
    "parent_span_id",
    "name",
    "attributes",
    "events",
    "start_time",
    "end_time",
    "parent_is_remote",
    "kind",
    "status_code",
    "links",
    "dropped_events",
)
if tuple(item.name for item in fields(SpanRecord)) != _RECORD_FIELDS:  # pragma: no cover - a guard for edits
    raise AssertionError("SpanRecord fields changed: update _RECORD_FIELDS and new_span_record")
(
    _set_trace_id,
    _set_span_id,
    _set_parent_span_id,
    _set_name,
    _set_attributes,
    _set_events,
    _set_start_time,
    _set_end_time,
    _set_parent_is_remote,
    _set_kind,
    _set_status_code,
    _set_links,
    _set_dropped_events,
) = (getattr(SpanRecord, name).__set__ for name in _RECORD_FIELDS)
_new = object.__new__


def new_span_record(
    trace_id: int,
    span_id: int,
    parent_span_id: int | None,
    name: str,
    attributes: Mapping[str, Any],
    events: tuple[EventRecord, ...],
    start_time: int | None,
    end_time: int | None,
    parent_is_remote: bool,
    kind: str | None,
    status_code: str | None,
    links: tuple[tuple[int, int], ...] = (),
    dropped_events: int = 0,
) -> SpanRecord:
    """``SpanRecord(...)`` with every field given positionally, built without ``__init__`` (the same instance,
    several times faster): for code that converts many spans, such as the gateway."""
    record: SpanRecord = _new(SpanRecord)
    _set_trace_id(record, trace_id)
    _set_span_id(record, span_id)
    _set_parent_span_id(record, parent_span_id)
    _set_name(record, name)
    _set_attributes(record, attributes)
    _set_events(record, events)
    _set_start_time(record, start_time)
    _set_end_time(record, end_time)
    _set_parent_is_remote(record, parent_is_remote)
    _set_kind(record, kind)
    _set_status_code(record, status_code)
    _set_links(record, links)
    _set_dropped_events(record, dropped_events)
    return record


def _link_ids(span: ReadableSpan) -> tuple[tuple[int, int], ...]:
    """The (trace_id, span_id) of each link, read from the SDK's own list when it has one (the ``links``
    property copies it for every span, and nearly all spans have none)."""
    links = getattr(span, "_links", None)
    if links is None:
        links = getattr(span, "links", None)
    if not links:
        return ()
    ids = []
    try:
        for link in links:
            context = link.context
            ids.append((int(context.trace_id), int(context.span_id)))
    # A span-like object's odd links, or an SDK list another thread appends to: keep the links read so far, as
    # reading links must never cost the span.
    except Exception:
        pass
    return tuple(ids)


def _dropped_events(span: ReadableSpan) -> int:
    """The SDK's ``ReadableSpan.dropped_events``; 0 for a span-like object without it (or with something else)."""
    dropped = getattr(span, "dropped_events", 0)
    return dropped if type(dropped) is int and dropped > 0 else 0


def _frozen_sdk_attributes(attributes: object) -> dict[str, Any] | None:
    """The plain dict inside the SDK's ``BoundedAttributes`` once it is immutable, else None.

    The SDK makes a span's ``BoundedAttributes`` immutable when the span ends (and an event's when it is made);
    from then on nothing writes to its dict, so it can be shared and read from any thread. Anything else
    (another mapping, a span still recording, an SDK whose internals differ) gets None and is copied.
    """
    kind = type(attributes)
    if kind.__name__ != "BoundedAttributes" or kind.__module__ != "opentelemetry.attributes":
        return None
    if getattr(attributes, "_immutable", False) is not True:
        return None
    inner = getattr(attributes, "_dict", None)
    return inner if type(inner) is dict else None


def ended_span_attributes(span: ReadableSpan) -> Mapping[str, Any]:
    """An ended SDK span's attributes, read-only: the SDK's own frozen dict when it can be shared (see
    :func:`_frozen_sdk_attributes`), else the span's public mapping. Reading a key of the dict costs a
    fraction of reading it through the SDK's proxy, which matters on paths that run for every span."""
    frozen = _frozen_sdk_attributes(getattr(span, "_attributes", None))
    if frozen is not None:
        return frozen
    return span.attributes or {}


def ended_span_has_events(span: ReadableSpan) -> bool:
    """Whether an SDK span has events, without the copy of them that its ``events`` property makes (a locked
    copy of the SDK's list, for every span on the processor's path); the property where that list differs."""
    try:
        return len(getattr(span, "_events")) > 0  # noqa: B009 - a private SDK name, read with a fallback
    except (AttributeError, TypeError):
        return bool(span.events)


def _event_attributes(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    frozen = _frozen_sdk_attributes(attributes)
    return frozen if frozen is not None else _copy(attributes)


def _copy(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    if attributes is None:
        return {}
    # The SDK hands out a read-only proxy over its BoundedAttributes (events: the BoundedAttributes itself).
    # A proxy's copy() is its target's, and BoundedAttributes.copy() copies its inner dict in C, where
    # ``dict(mapping)`` would call the Python-level __getitem__ once per key. Any other mapping, or a copy()
    # that is not a plain dict, goes through ``dict()``.
    copy = getattr(attributes, "copy", None)
    if copy is not None:
        try:
            copied = copy()
        except Exception:  # someone's mapping with an odd copy(): the generic way still works
            copied = None
        if type(copied) is dict:
            return copied
    return dict(attributes)


def records_from_readable_spans(spans: Iterable[ReadableSpan]) -> list[SpanRecord]:
    """Convert SDK spans (for example from an ``InMemorySpanExporter``) to records, in the same order.

    >>> from opentelemetry.sdk.trace import TracerProvider
    >>> from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    >>> from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    >>> exporter = InMemorySpanExporter()
    >>> provider = TracerProvider()
    >>> provider.add_span_processor(SimpleSpanProcessor(exporter))
    >>> with provider.get_tracer("app").start_as_current_span("answer", attributes={"rag.answer": True}):
    ...     pass
    >>> records = records_from_readable_spans(exporter.get_finished_spans())
    >>> [(record.name, dict(record.attributes)) for record in records]
    [('answer', {'rag.answer': True})]
    """
    return [SpanRecord.from_readable_span(span) for span in spans]
