"""Which spans of a request may make their trace an answer, decided before any record is built.

The rule is the signals one (:func:`rag_confidence.signals.may_hold_answer`: a retrieval span or a marked
answer), applied to protobuf spans reading only the attribute keys it needs
(:data:`~rag_confidence.signals.ANSWER_HINT_KEYS`, and for a span with result events the keys their rule reads,
``RESULT_EVENT_KEYS``: a Milvus row lookup is no retrieval) and the event names. A trace none of whose spans
passes holds no answer, so a gateway without the assembly window forwards it untouched: most of a service's
traffic costs a few field reads per span.

Three shortcuts spare reading spans, all resting on one fact: a protobuf encoding holds every attribute key and
event name as its UTF-8 bytes, and every string of a decoded message is a copy of bytes of its body.

- A body in which none of the hint keys (or none of the result event names) occurs cannot pass on them, which
  spares reading those fields span by span; a body with neither needs no screening at all.
- The same holds per ScopeSpans: an application's plain spans come from other instrumentation libraries (other
  scopes) than its retrievals, and serializing a scope costs a fraction of reading its spans' keys, so a large
  scope of a request of several (or of one that came as JSON, which may escape characters) is checked by its
  own encoding first.
- The body check counts the occurrences of those names. Each span read accounts for the ones it holds as exact
  attribute keys or event names; once all are accounted for, the spans not yet read hold none, and screening
  stops. Small scopes are read first, so the retrieval scopes of a batch usually end it before the large scopes
  of plain traffic. An occurrence anywhere else (a value, an event attribute, a resource) is never accounted
  for, so it only ever costs the shortcut, never an answer. The result event keys are not counted: they only
  ever keep a span with result events from passing, so a span none of whose names occurs cannot pass on them.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ScopeSpans
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

from .. import semconv
from ..signals.answers import ANSWER_HINT_KEYS, ANSWER_TRIGGER_KEYS, RESULT_EVENT_KEYS, RESULT_EVENT_NAMES
from ..signals.answers import may_hold_answer as signals_may_hold_answer
from .spans import attributes_to_dict

# Only the keys a span can pass on are counted and tested (``ANSWER_TRIGGER_KEYS``); the full rule reads all.
_KEY_BYTES = tuple(key.encode() for key in sorted(ANSWER_TRIGGER_KEYS))
_EVENT_BYTES = tuple(name.encode() for name in sorted(RESULT_EVENT_NAMES))
# The keys read of a span with result events (``output.value`` apart, see ``may_hold_answer``).
_RESULT_SPAN_KEYS = ANSWER_TRIGGER_KEYS | RESULT_EVENT_KEYS
_KIND = semconv.OPENINFERENCE_SPAN_KIND
_LLM = semconv.OPENINFERENCE_KIND_LLM
_OUTPUT_VALUE = semconv.OI_OUTPUT_VALUE
assert ANSWER_TRIGGER_KEYS | {_OUTPUT_VALUE} == ANSWER_HINT_KEYS, "a hint key the screen does not read"
# Counting is exact only if an exact key or name holds one occurrence of its own pattern and none of another.
assert not any(
    a != b and a in b for a in (*_KEY_BYTES, *_EVENT_BYTES) for b in (*_KEY_BYTES, *_EVENT_BYTES)
), "a screened name contains another"

#: Scopes of at most this many spans are screened span by span rather than by their encoding first.
SCREEN_DIRECTLY_UP_TO = 16


class Screen:
    """Screens the spans of one request; ``payload`` is its protobuf body, when it came as protobuf.

    >>> Screen(b"...http.route...").needed
    False
    >>> Screen(b"...openinference.span.kind...").needed, Screen(None).needed
    (True, True)
    """

    __slots__ = ("_events", "_keys", "_unseen")

    def __init__(self, payload: bytes | None = None) -> None:
        if payload is None:
            self._keys = self._events = True
            self._unseen: int | None = None  # unknown: screening never stops early
            return
        keys = sum(payload.count(key) for key in _KEY_BYTES)
        events = sum(payload.count(name) for name in _EVENT_BYTES)
        self._keys = keys > 0
        self._events = events > 0
        self._unseen = keys + events

    def within(self, encoded: bytes) -> Screen:
        """This screen for a part of the request whose protobuf encoding is ``encoded`` (one ScopeSpans)."""
        narrowed = Screen.__new__(Screen)
        narrowed._keys = self._keys and any(key in encoded for key in _KEY_BYTES)
        narrowed._events = self._events and any(name in encoded for name in _EVENT_BYTES)
        narrowed._unseen = None
        return narrowed

    @property
    def needed(self) -> bool:
        """False when no span of the request can pass: nothing to screen, nothing to score."""
        return self._keys or self._events

    def answering_traces(
        self,
        scopes: Sequence[tuple[ScopeSpans, int, int]],
        spans: Sequence[ProtoSpan],
        trace_ids: Sequence[bytes],
        *,
        by_scope: bool,
    ) -> set[bytes]:
        """The trace ids of the request that may hold an answer.

        ``spans[i]`` has trace id ``trace_ids[i]``; each of ``scopes`` is a ScopeSpans with the positions
        ``[first, end)`` of its spans there. ``by_scope`` lets a large scope be checked by its encoding first
        (worth it when the body check could not tell the scopes apart: several scopes, or no protobuf body).
        """
        answering: set[bytes] = set()
        if not self.needed:
            return answering
        unseen = self._unseen
        # Small scopes first (in request order otherwise): the spans read there may account for every occurrence.
        ordered = sorted(scopes, key=lambda scope: scope[2] - scope[1] > SCREEN_DIRECTLY_UP_TO)
        for scope_spans, first, end in ordered:
            if unseen == 0:
                break
            if by_scope and end - first > SCREEN_DIRECTLY_UP_TO:
                narrowed = self.within(scope_spans.SerializeToString())
                if not narrowed.needed:  # no span of this scope can pass, and it holds no occurrence
                    continue
                unseen = narrowed._mark(spans, trace_ids, first, end, answering, unseen)
            else:
                unseen = self._mark(spans, trace_ids, first, end, answering, unseen)
        return answering

    def _mark(
        self,
        spans: Sequence[ProtoSpan],
        trace_ids: Sequence[bytes],
        first: int,
        end: int,
        answering: set[bytes],
        unseen: int | None,
    ) -> int | None:
        """Add to ``answering`` the trace ids of the spans in ``[first, end)`` that may hold an answer; take off
        ``unseen`` (None: not counted) the exact hint keys and result event names read, stop at 0, return it."""
        # The loop of plain traffic: one cheap test per span (no attribute key of interest, no event), and
        # the full rule only for the few spans that pass it. A span of a trace already answering is only read
        # when counting.
        keys, events = self._keys, self._events
        hint_keys = ANSWER_TRIGGER_KEYS
        result_events = RESULT_EVENT_NAMES
        for index in range(first, end):
            if unseen == 0:
                break
            trace_id = trace_ids[index]
            known = trace_id in answering
            if known and unseen is None:
                continue
            span = spans[index]
            hits = 0
            if keys:
                attributes = span.attributes
                if attributes:
                    for item in attributes[:]:
                        if item.key in hint_keys:
                            hits += 1
            passed = hits > 0
            if events:
                span_events = span.events
                if span_events:
                    passed = True
                    if unseen is not None:
                        for event in span_events[:]:
                            if event.name in result_events:
                                hits += 1
            if unseen is not None:
                unseen -= hits
            if passed and not known and self.may_hold_answer(span):
                answering.add(trace_id)
        return unseen

    def may_hold_answer(self, span: ProtoSpan) -> bool:
        """Whether ``span`` is a retrieval or a marked answer (exactly as the signals rules decide)."""
        # Runs for every span of plain traffic, so every field read counts. Iterating a upb repeated field
        # ends in an exception (it has no native iterator): fields are tested for emptiness first and copied
        # out by a slice.
        names: list[str] = []
        if self._events:
            events = span.events
            if events:
                names = [event.name for event in events[:]]
        # A result event's rule reads the span's system too (whatever the body check said of the hint keys).
        results = bool(names) and not RESULT_EVENT_NAMES.isdisjoint(names)
        hints: list[KeyValue] = []
        if self._keys or results:
            attributes = span.attributes
            if attributes:
                items = attributes[:]
                wanted = _RESULT_SPAN_KEYS if results else ANSWER_TRIGGER_KEYS
                hints = [item for item in items if item.key in wanted]
                # ``output.value``, often a span's largest value, decides only an OpenInference LLM span (a
                # Responses call that ran file_search): copied out of the others, it cost every CHAIN, RETRIEVER
                # and TOOL span of OpenInference traffic a copy of its output.
                if any(item.key == _KIND and item.value.string_value == _LLM for item in hints):
                    hints.extend(item for item in items if item.key == _OUTPUT_VALUE)
        if not hints and not names:
            return False
        # The conversion records get, so the screen and the rules see the same values.
        return signals_may_hold_answer(attributes_to_dict(hints), names)


def may_hold_answer(span: ProtoSpan) -> bool:
    """:func:`rag_confidence.signals.may_hold_answer` on one protobuf span."""
    return _UNSCREENED.may_hold_answer(span)


_UNSCREENED = Screen()
