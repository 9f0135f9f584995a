"""The copy of an ended span that the processor forwards in its place, with the scorecard's attributes.

Ended SDK spans are read-only (their attributes are frozen before any processor sees them), so the scorecard
goes downstream on a new ``ReadableSpan`` built from the original's public fields, never by writing the SDK's
private ones.
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.util.types import AttributeValue

__all__ = ["EnrichedSpan", "copy_with"]


class EnrichedSpan(ReadableSpan):
    """A copy of an ended span with more attributes; keeps the original's dropped attribute, event and link
    counts (the SDK reads them off its bounded containers, which a copy built from plain values lacks)."""

    def __init__(self, original: ReadableSpan, attributes: Mapping[str, AttributeValue]) -> None:
        super().__init__(
            name=original.name,
            context=original.context,
            parent=original.parent,
            resource=original.resource,
            attributes=attributes,
            events=original.events,
            links=original.links,
            kind=original.kind,
            status=original.status,
            start_time=original.start_time,
            end_time=original.end_time,
            instrumentation_scope=original.instrumentation_scope,
        )
        self._original_dropped = (
            original.dropped_attributes,
            original.dropped_events,
            original.dropped_links,
        )

    @property
    def dropped_attributes(self) -> int:
        return self._original_dropped[0]

    @property
    def dropped_events(self) -> int:
        return self._original_dropped[1]

    @property
    def dropped_links(self) -> int:
        return self._original_dropped[2]


def copy_with(span: ReadableSpan, extra: Mapping[str, AttributeValue]) -> ReadableSpan:
    attributes: dict[str, AttributeValue] = dict(span.attributes or {})
    attributes.update(extra)
    return EnrichedSpan(span, attributes)
