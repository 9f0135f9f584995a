"""A neutral, read-only view of one span, shared by the in-process processor and the gateway.

The in-process path builds these from SDK ``ReadableSpan`` objects, the gateway from OTLP protobuf spans, so
signal extraction and answer detection are written once against this shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class EventRecord:
    """One span event (or a log record parented to the span, such as ``gen_ai.evaluation.result``)."""

    name: str
    attributes: Mapping[str, Any] = field(default_factory=dict)
    timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class SpanRecord:
    """What signal extraction needs of a span; ids are ints as in the SDK (``parent_span_id`` None for roots)."""

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
