"""The bounded assembly window: earlier spans of a trace, kept for later requests of the same trace.

Spans are never held back: every request is forwarded as soon as it is scored, so the upstream's
acknowledgement always means "handed downstream". What the window keeps is a copy of spans already forwarded
(their protobuf encodings), so that when an answer span arrives in a later request than its retrievals (the
usual order: children end, and are exported, before their parent) it is scored with the whole trace. An answer
span that arrived *before* its children cannot be enriched afterwards; it was forwarded already.

The window also remembers whether any span of a trace so far may make it an answer (a retrieval or a marked
answer, see :mod:`.screen`): a trace without one cannot be scored yet, so its spans are only kept, never
turned into records, until one arrives.

Bounds: ``max_traces`` (least recently updated evicted first), ``max_age`` seconds since a trace's last span,
``max_bytes`` of the spans' encoded size, and ``max_spans`` per trace (a request that would take a trace past
it is scored with the kept spans but not kept itself: every request of a trace is scored with all its kept
spans, so the cap bounds that work). Every eviction is counted by reason, including an incomplete trace dropped
because one request of it alone exceeds ``max_bytes``, and a trace's first request beyond ``max_spans``. A trace
whose root arrived is complete and released (not an eviction); if that request is not delivered, the gateway
puts the trace back (:meth:`AssemblyWindow.restore`), so the upstream's retry still finds it.

Off by default: the recommended set-up groups whole traces upstream (the Collector's ``groupbytrace``
processor, with ``loadbalancing`` by trace id in front of several gateways), which keeps the gateway
stateless.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from .. import semconv

Item = TypeVar("Item")


@dataclass(slots=True)
class _Entry(Generic[Item]):
    items: list[Item] = field(default_factory=list)
    size: int = 0
    updated: float = 0.0
    may_answer: bool = False
    capped: bool = False  # a request of it was not kept for max_spans (counted the first time)


class AssemblyWindow(Generic[Item]):
    """Thread-safe, bounded map of trace id -> the spans already seen (items of any kind; the gateway keeps
    encoded spans), with whether any of them may make the trace an answer.

    >>> window: AssemblyWindow[str] = AssemblyWindow(max_traces=100, max_age=30.0, max_bytes=1 << 20)
    >>> window.assemble(1, ["retrieve"], size=100, may_answer=True)
    (['retrieve'], True)
    >>> window.assemble(1, ["answer"], size=100, may_answer=False, complete=True)
    (['retrieve', 'answer'], True)
    >>> len(window)  # the root arrived: the trace is complete and released
    0
    """

    def __init__(
        self,
        max_traces: int,
        max_age: float,
        max_bytes: int,
        *,
        max_spans: int = 1_000,
        on_evict: Callable[[str, int], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._max_traces = max_traces
        self._max_spans = max_spans
        self._max_age = max_age
        self._max_bytes = max_bytes
        self._on_evict = on_evict
        self._clock = clock
        self._entries: OrderedDict[int, _Entry[Item]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.evictions: dict[str, int] = {
            semconv.PIPELINE_EVICTION_MAX_TRACES: 0,
            semconv.PIPELINE_EVICTION_MAX_AGE: 0,
            semconv.GATEWAY_EVICTION_MEMORY: 0,
            semconv.GATEWAY_EVICTION_MAX_SPANS: 0,
        }

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def expire(self) -> int:
        """Let the traces older than ``max_age`` go (counted as evictions) and return how many are left.

        Requests expire traces as they come; this is for when none come: the gateway calls it when its
        metrics are read, so an idle window empties and its gauge says so.
        """
        evicted: dict[str, int] = {}
        with self._lock:
            self._expire(self._clock(), evicted)
            left = len(self._entries)
        self._report(evicted)
        return left

    def assemble(
        self, trace_id: int, items: Sequence[Item], size: int, *, may_answer: bool, complete: bool = False
    ) -> tuple[list[Item], bool]:
        """The earlier items of ``trace_id`` followed by ``items``, and whether any request of the trace so far
        ``may_answer``. Remembers ``items`` (``size`` bytes) unless the trace is ``complete`` (its root came):
        then it is forgotten, and :meth:`restore` puts it back if its request is not delivered."""
        now = self._clock()
        evicted: dict[str, int] = {}
        with self._lock:
            self._expire(now, evicted)
            entry = self._entries.pop(trace_id, None)
            earlier = entry.items if entry is not None else []
            may_answer = may_answer or (entry is not None and entry.may_answer)
            if entry is not None:
                self._bytes -= entry.size
            assembled = [*earlier, *items]
            if complete:
                pass
            elif size <= self._max_bytes:
                entry = entry or _Entry()
                if len(assembled) <= self._max_spans:
                    entry.items = assembled
                    entry.size += size
                elif not entry.capped:  # counted once per trace; its kept spans stay as they are
                    entry.capped = True
                    self._count(semconv.GATEWAY_EVICTION_MAX_SPANS, evicted)
                self._keep(trace_id, entry, now, may_answer, evicted)
            else:  # one request beyond the byte bound: the incomplete trace cannot be kept
                self._count(semconv.GATEWAY_EVICTION_MEMORY, evicted)
        self._report(evicted)
        return assembled, may_answer

    def restore(self, trace_id: int, items: list[Item], size: int, *, may_answer: bool) -> None:
        """Keep a complete trace again (``items``, all its spans so far, of ``size`` bytes): its request was not
        delivered, and the upstream's retry must find the trace as it was."""
        evicted: dict[str, int] = {}
        with self._lock:
            current = self._entries.pop(trace_id, None)
            entry = _Entry(items=items, size=size)
            if current is not None:  # a request of the trace came meanwhile
                self._bytes -= current.size
                entry.items = [*items, *current.items]
                entry.size += current.size
                may_answer = may_answer or current.may_answer
            if entry.size > self._max_bytes or len(entry.items) > self._max_spans:
                reason = (
                    semconv.GATEWAY_EVICTION_MEMORY
                    if entry.size > self._max_bytes
                    else semconv.GATEWAY_EVICTION_MAX_SPANS
                )
                self._count(reason, evicted)
            else:
                self._keep(trace_id, entry, self._clock(), may_answer, evicted)
        self._report(evicted)

    def _keep(
        self, trace_id: int, entry: _Entry[Item], now: float, may_answer: bool, evicted: dict[str, int]
    ) -> None:
        entry.updated = now
        entry.may_answer = may_answer
        self._entries[trace_id] = entry
        self._bytes += entry.size
        self._enforce_bounds(evicted)

    def _expire(self, now: float, evicted: dict[str, int]) -> None:
        while self._entries:
            trace_id, entry = next(iter(self._entries.items()))
            if now - entry.updated < self._max_age:
                break
            self._drop(trace_id, semconv.PIPELINE_EVICTION_MAX_AGE, evicted)

    def _enforce_bounds(self, evicted: dict[str, int]) -> None:
        while len(self._entries) > self._max_traces:
            self._drop(next(iter(self._entries)), semconv.PIPELINE_EVICTION_MAX_TRACES, evicted)
        while self._bytes > self._max_bytes and self._entries:
            self._drop(next(iter(self._entries)), semconv.GATEWAY_EVICTION_MEMORY, evicted)

    def _drop(self, trace_id: int, reason: str, evicted: dict[str, int]) -> None:
        entry = self._entries.pop(trace_id)
        self._bytes -= entry.size
        self._count(reason, evicted)

    def _count(self, reason: str, evicted: dict[str, int]) -> None:
        self.evictions[reason] += 1
        evicted[reason] = evicted.get(reason, 0) + 1

    def _report(self, evicted: dict[str, int]) -> None:
        if self._on_evict is not None:
            for reason, count in evicted.items():
                self._on_evict(reason, count)
