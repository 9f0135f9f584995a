"""Which spans of a request may make their trace an answer, decided before any record is built.

The rule is the signals one (:func:`rag_confidence.signals.may_hold_answer`: a retrieval span or a marked
answer), applied to protobuf spans reading only the attribute keys it needs
(:data:`~rag_confidence.signals.ANSWER_HINT_KEYS`) and the event names. A trace none of whose spans passes holds
no answer, so a gateway without the assembly window forwards it untouched: most of a service's traffic costs
a few field reads per span.

A protobuf encoding holds every attribute key and event name as its UTF-8 bytes. A body in which none of the
hint keys (or none of the result event names) occurs cannot pass on them, which spares reading those fields
span by span; a body with neither needs no screening at all. The same holds per ScopeSpans: an application's
plain spans come from other instrumentation libraries (other scopes) than its retrievals, and serializing a
scope costs a fraction of reading its spans' keys, so a request of several scopes (or one that came as JSON,
which may escape characters) is checked scope by scope.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

from ..signals.answers import ANSWER_HINT_KEYS, RESULT_EVENT_NAMES
from ..signals.answers import may_hold_answer as signals_may_hold_answer
from .spans import attributes_to_dict

_KEY_BYTES = tuple(key.encode() for key in sorted(ANSWER_HINT_KEYS))
_EVENT_BYTES = tuple(name.encode() for name in sorted(RESULT_EVENT_NAMES))


class Screen:
    """Screens the spans of one request; ``payload`` is its protobuf body, when it came as protobuf.

    >>> Screen(b"...http.route...").needed
    False
    >>> Screen(b"...openinference.span.kind...").needed, Screen(None).needed
    (True, True)
    """

    __slots__ = ("_events", "_keys")

    def __init__(self, payload: bytes | None = None) -> None:
        self._keys = payload is None or any(key in payload for key in _KEY_BYTES)
        self._events = payload is None or any(name in payload for name in _EVENT_BYTES)

    def within(self, encoded: bytes) -> Screen:
        """This screen for a part of the request whose protobuf encoding is ``encoded`` (one ScopeSpans)."""
        narrowed = Screen.__new__(Screen)
        narrowed._keys = self._keys and any(key in encoded for key in _KEY_BYTES)
        narrowed._events = self._events and any(name in encoded for name in _EVENT_BYTES)
        return narrowed

    @property
    def needed(self) -> bool:
        """False when no span of the request can pass: nothing to screen, nothing to score."""
        return self._keys or self._events

    def mark_answering(
        self, spans: Sequence[ProtoSpan], trace_ids: Sequence[bytes], start: int, answering: set[bytes]
    ) -> None:
        """Add to ``answering`` the trace id of each span from position ``start`` on that may hold an answer
        (``trace_ids[i]`` is the trace id of ``spans[i]``); traces already in ``answering`` are not read."""
        # The loop of plain traffic: one cheap test per span (no attribute key of interest, no event), and
        # the full rule only for the few spans that pass it.
        keys, events = self._keys, self._events
        hint_keys = ANSWER_HINT_KEYS
        for index in range(start, len(spans)):
            trace_id = trace_ids[index]
            if trace_id in answering:
                continue
            span = spans[index]
            passed = False
            if keys:
                attributes = span.attributes
                if attributes:
                    for item in attributes[:]:
                        if item.key in hint_keys:
                            passed = True
                            break
            if not passed and events and span.events:
                passed = True
            if passed and self.may_hold_answer(span):
                answering.add(trace_id)

    def may_hold_answer(self, span: ProtoSpan) -> bool:
        """Whether ``span`` is a retrieval or a marked answer (exactly as the signals rules decide)."""
        # Runs for every span of plain traffic, so every field read counts. Iterating a upb repeated field
        # ends in an exception (it has no native iterator): fields are tested for emptiness first and copied
        # out by a slice.
        hints: list[KeyValue] = []
        if self._keys:
            attributes = span.attributes
            if attributes:
                hints = [item for item in attributes[:] if item.key in ANSWER_HINT_KEYS]
        names: list[str] = []
        if self._events:
            events = span.events
            if events:
                names = [event.name for event in events[:]]
        if not hints and not names:
            return False
        # The conversion records get, so the screen and the rules see the same values.
        return signals_may_hold_answer(attributes_to_dict(hints), names)


def may_hold_answer(span: ProtoSpan) -> bool:
    """:func:`rag_confidence.signals.may_hold_answer` on one protobuf span."""
    return _UNSCREENED.may_hold_answer(span)


_UNSCREENED = Screen()
