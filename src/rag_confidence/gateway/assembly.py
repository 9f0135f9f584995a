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
spans, so the cap bounds that work). Every eviction of an incomplete trace is counted by reason, including one
dropped because one request of it alone exceeds ``max_bytes``, and a trace's first request beyond ``max_spans``.

A trace whose root (a span without a parent) arrived is complete, but stays until ``max_age`` like the others,
because spans that come after it must still find it (another service's part of the trace, whose local root has a remote
parent and may come later; a request the upstream retries after the root's was delivered; a span that ends
after its root). Complete traces go first when a bound is reached, and their going is no eviction: nothing is
waiting for them. A request sent again (a retry, byte for byte) is not kept twice.

Off by default: the recommended set-up groups whole traces upstream (the Collector's ``groupbytrace``
processor, with ``loadbalancing`` by trace id in front of several gateways), which keeps the gateway
stateless.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Generic, TypeAlias, TypeVar

from .. import semconv

Item = TypeVar("Item")


#: The spans of one trace in a request, for :meth:`AssemblyWindow.assemble_all`: the trace id (the gateway's are
#: the 16 bytes as received: hashed once, and no int to make), the items, the bytes they take, whether any of them
#: may make the trace an answer, whether they hold its root. A plain tuple: the gateway builds one per trace of
#: every request.
Part: TypeAlias = tuple[Hashable, list[Item], int, bool, bool]


class _Entry(Generic[Item]):
    """What the window holds of one trace."""

    # A plain class, not a dataclass: mypyc compiles it to a native one (it cannot a generic slotted dataclass).
    __slots__ = ("capped", "items", "may_answer", "size", "starts", "updated")

    def __init__(self) -> None:
        self.items: list[Item] = []
        self.size = 0
        self.updated = 0.0
        self.may_answer = False
        self.capped = False  # a request of it was not kept for max_spans (counted the first time)
        # Where each request kept begins among the items: a retry (the same items again) is not kept twice.
        self.starts: list[int] = []


class AssemblyWindow(Generic[Item]):
    """Thread-safe, bounded map of trace id -> the spans already seen (items of any kind; the gateway keeps
    encoded spans), with whether any of them may make the trace an answer.

    >>> window: AssemblyWindow[str] = AssemblyWindow(max_traces=100, max_age=30.0, max_bytes=1 << 20)
    >>> window.assemble(1, ["retrieve"], size=100, may_answer=True)
    (['retrieve'], True)
    >>> window.assemble(1, ["answer"], size=100, may_answer=False, complete=True)
    (['retrieve', 'answer'], True)
    >>> window.assemble(1, ["late"], size=100, may_answer=False)  # the root came, the trace is still there
    (['retrieve', 'answer', 'late'], True)
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
        # Least recently updated first; complete traces apart, so bounds let them go before any incomplete one.
        self._waiting: OrderedDict[Hashable, _Entry[Item]] = OrderedDict()
        self._complete: OrderedDict[Hashable, _Entry[Item]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.evictions: dict[str, int] = {
            semconv.PIPELINE_EVICTION_MAX_TRACES: 0,
            semconv.PIPELINE_EVICTION_MAX_AGE: 0,
            semconv.GATEWAY_EVICTION_MEMORY: 0,
            semconv.GATEWAY_EVICTION_MAX_SPANS: 0,
        }

    def __len__(self) -> int:
        return len(self._waiting) + len(self._complete)

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def expire(self) -> int:
        """Let the traces older than ``max_age`` go and return how many are left.

        Requests expire traces as they come; this is for when none come: the gateway calls it when its
        metrics are read, so an idle window empties and its gauge says so.
        """
        evicted: dict[str, int] = {}
        with self._lock:
            self._expire(self._clock(), evicted)
            left = len(self)
        self._report(evicted)
        return left

    def assemble(
        self,
        trace_id: Hashable,
        items: Sequence[Item],
        size: int,
        *,
        may_answer: bool,
        complete: bool = False,
    ) -> tuple[list[Item], bool]:
        """The earlier items of ``trace_id`` followed by ``items``, and whether any request of the trace so far
        ``may_answer``. Remembers ``items`` (``size`` bytes) too, within the bounds; ``complete``: they hold
        the trace's root."""
        return self.assemble_all([(trace_id, list(items), size, may_answer, complete)])[0]

    def assemble_all(self, parts: Sequence[Part[Item]]) -> list[tuple[list[Item], bool]]:
        """:meth:`assemble` for the parts of one request (of distinct traces), in their order: what each
        would answer called one after the other, for one look at the clock and one turn of the lock."""
        now = self._clock()
        evicted: dict[str, int] = {}
        results: list[tuple[list[Item], bool]] = []
        with self._lock:
            self._expire(now, evicted)
            for part in parts:
                results.append(self._assemble(part, now, evicted))
        self._report(evicted)
        return results

    def _assemble(self, part: Part[Item], now: float, evicted: dict[str, int]) -> tuple[list[Item], bool]:
        trace_id, items, size, may_answer, complete = part
        # Looked up, not popped: a trace that stays where it is (most do) only moves to the end.
        held: OrderedDict[Hashable, _Entry[Item]] | None = self._waiting
        entry = self._waiting.get(trace_id)
        if entry is None:
            held = self._complete
            entry = self._complete.get(trace_id)
            complete = complete or entry is not None  # where it was kept says whether its root came
        if entry is None:
            held = None
            entry = _Entry()
        else:
            self._bytes -= entry.size
        may_answer = may_answer or entry.may_answer
        assembled = [*entry.items, *items]
        if not items or _kept_already(entry, items):
            pass  # nothing to keep, or sent again: kept already
        elif size > self._max_bytes:  # one request beyond the byte bound: the trace cannot be kept
            if held is not None:
                del held[trace_id]
            self._count(semconv.GATEWAY_EVICTION_MEMORY, evicted)
            return assembled, may_answer
        elif len(assembled) <= self._max_spans:
            entry.starts.append(len(entry.items))
            entry.items = assembled
            entry.size += size
        elif not entry.capped:  # counted once per trace; its kept spans stay as they are
            entry.capped = True
            self._count(semconv.GATEWAY_EVICTION_MAX_SPANS, evicted)
        entry.updated = now
        entry.may_answer = may_answer
        target = self._complete if complete else self._waiting
        if held is target:
            target.move_to_end(trace_id)
        else:
            if held is not None:
                del held[trace_id]
            target[trace_id] = entry
        self._bytes += entry.size
        self._enforce_bounds(evicted)
        return assembled, may_answer

    def _expire(self, now: float, evicted: dict[str, int]) -> None:
        for entries, reason in ((self._complete, None), (self._waiting, semconv.PIPELINE_EVICTION_MAX_AGE)):
            while entries:
                trace_id, entry = next(iter(entries.items()))
                if now - entry.updated < self._max_age:
                    break
                self._drop(entries, trace_id, reason, evicted)

    def _enforce_bounds(self, evicted: dict[str, int]) -> None:
        # Runs for every trace of every request: the counts are read directly, not through __len__.
        while len(self._waiting) + len(self._complete) > self._max_traces:
            self._drop_oldest(semconv.PIPELINE_EVICTION_MAX_TRACES, evicted)
        while self._bytes > self._max_bytes and (self._waiting or self._complete):
            self._drop_oldest(semconv.GATEWAY_EVICTION_MEMORY, evicted)

    def _drop_oldest(self, reason: str, evicted: dict[str, int]) -> None:
        if self._complete:  # nothing waits for a complete trace: it goes first, and uncounted
            self._drop(self._complete, next(iter(self._complete)), None, evicted)
        else:
            self._drop(self._waiting, next(iter(self._waiting)), reason, evicted)

    def _drop(
        self,
        entries: OrderedDict[Hashable, _Entry[Item]],
        trace_id: Hashable,
        reason: str | None,
        evicted: dict[str, int],
    ) -> None:
        entry = entries.pop(trace_id)
        self._bytes -= entry.size
        if reason is not None:  # an incomplete trace: something may still have needed it
            self._count(reason, evicted)

    def _count(self, reason: str, evicted: dict[str, int]) -> None:
        self.evictions[reason] += 1
        evicted[reason] = evicted.get(reason, 0) + 1

    def _report(self, evicted: dict[str, int]) -> None:
        if self._on_evict is not None:
            for reason, count in evicted.items():
                self._on_evict(reason, count)


def _kept_already(entry: _Entry[Item], items: list[Item]) -> bool:
    """Whether ``entry`` kept a request of exactly these ``items``, in this order (a retry).

    Compared, not hashed: most requests of a trace have no earlier one of their length, and then no item is read.
    """
    count = len(items)
    kept = entry.items
    starts = entry.starts
    last = len(starts) - 1
    for index in range(len(starts)):
        start = starts[index]
        end = starts[index + 1] if index < last else len(kept)
        if end - start == count and kept[start:end] == items:
            return True
    return False
