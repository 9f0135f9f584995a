"""The span processor's own metrics: spans in and out, answers by outcome, failures, its trace buffer.

Counterparts of the gateway's metrics (``rag.confidence.gateway.*``), with the same suffixes, units and
attribute values (``scored``/``failed``/``already_scored``, ``max_age``/``max_traces``), so one panel or rule
reads both. They are *observable* instruments: the processor keeps plain integers under the lock it takes
anyway, and the SDK reads them when it collects. The span path pays nothing for its metrics.

Every value of every closed attribute set is observed from the start, zero included: a series exists before
its first event, so ``increase()`` and ``rate()`` see that event (a synchronous counter's series would be born
at its first increment, with value 1, and ``increase()`` over its first two samples would miss it).

Observable instruments are registered once per meter provider (the SDK keeps the first registration of a
name and ignores the callbacks of a second one), so the processors sharing a meter provider share one set of
instruments whose callbacks sum over them. A processor that is garbage collected keeps its counts in that sum:
cumulative counters must not go down.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation

from .. import semconv
from .metrics import METER_NAME, package_version

__all__ = ["ProcessorCounts", "observe_processor"]


@dataclass(slots=True)
class _Totals:
    """A lock-free copy of one processor's counts, and the sum over the processors of one meter provider."""

    spans_received: int = 0
    spans_forwarded: int = 0
    spans_unbuffered: int = 0
    answers_scored: int = 0
    answers_failed: int = 0
    answers_already_scored: int = 0
    evicted_max_age: int = 0
    evicted_max_traces: int = 0
    failures_scoring: int = 0
    failures_recording: int = 0
    failures_processing: int = 0
    failures_downstream: int = 0

    def failures(self) -> int:
        """All failures caught, whatever the reason."""
        return (
            self.failures_scoring
            + self.failures_recording
            + self.failures_processing
            + self.failures_downstream
        )

    def add(self, other: _Totals) -> None:
        for name in _TOTAL_FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass(slots=True)
class ProcessorCounts(_Totals):
    """What one processor counted since it was created. The processor changes these with its own lock held
    (:attr:`lock`); readers take the same lock."""

    lock: threading.Lock = field(default_factory=threading.Lock)

    def snapshot(self) -> _Totals:
        with self.lock:
            return _Totals(*(getattr(self, name) for name in _TOTAL_FIELDS))

    def reset_after_fork(self, lock: threading.Lock) -> None:
        """In a forked child: start from zero under ``lock`` (the parent's may have been held at the fork)."""
        self.lock = lock
        for name in _TOTAL_FIELDS:
            setattr(self, name, 0)


_TOTAL_FIELDS = tuple(f.name for f in fields(_Totals))

#: ``(pending traces, answers queued for background scoring)`` of a live processor; reading it first lets
#: the buffers past their TTL go.
GaugeReader = Callable[[], tuple[int, int]]


class _Watched:
    __slots__ = ("counts", "gauges")

    def __init__(self, counts: ProcessorCounts, gauges: weakref.WeakMethod[GaugeReader]) -> None:
        self.counts = counts
        self.gauges = gauges


_FIRST_SWEEP = 64


class _ProcessorGroup:
    """The observable instruments of one meter provider and the processors they read."""

    def __init__(self, meter_provider: MeterProvider | None) -> None:
        self._lock = threading.Lock()
        self._watched: list[_Watched] = []
        self._retired = _Totals()  # counts of processors that were garbage collected
        self._sweep_at = _FIRST_SWEEP
        self._snapshot: tuple[int, _Totals] | None = None  # numbered, the latest collection's totals
        meter = metrics.get_meter(METER_NAME, package_version(), meter_provider=meter_provider)
        span, answer, trace = semconv.UNIT_SPAN, semconv.UNIT_ANSWER, semconv.UNIT_TRACE
        outcome, reason = semconv.METRIC_ATTR_PROCESSOR_OUTCOME, semconv.METRIC_ATTR_PROCESSOR_REASON
        counters: tuple[tuple[str, str, str, Callable[[_Totals], list[tuple[int, dict[str, str]]]]], ...] = (
            (
                semconv.METRIC_PROCESSOR_SPANS_RECEIVED,
                span,
                "Spans ended and handed to the confidence span processor.",
                lambda t: [(t.spans_received, {})],
            ),
            (
                semconv.METRIC_PROCESSOR_SPANS_FORWARDED,
                span,
                "Spans handed to the downstream (exporting) processor; answers as their scored copy.",
                lambda t: [(t.spans_forwarded, {})],
            ),
            (
                semconv.METRIC_PROCESSOR_SPANS_UNBUFFERED,
                span,
                "Spans forwarded without being buffered for scoring: their trace held max_spans_per_trace.",
                lambda t: [(t.spans_unbuffered, {})],
            ),
            (
                semconv.METRIC_PROCESSOR_ANSWERS,
                answer,
                "Answer spans found, by outcome (scored, failed, already_scored by @scored_answer).",
                lambda t: [
                    (t.answers_scored, {outcome: semconv.PIPELINE_OUTCOME_SCORED}),
                    (t.answers_failed, {outcome: semconv.PIPELINE_OUTCOME_FAILED}),
                    (t.answers_already_scored, {outcome: semconv.PIPELINE_OUTCOME_ALREADY_SCORED}),
                ],
            ),
            (
                semconv.METRIC_PROCESSOR_FAILURES,
                semconv.UNIT_FAILURE,
                "Failures caught on the span path, by reason (scoring, recording metrics or the event, "
                "processing, the downstream processor raising); the span was forwarded regardless.",
                lambda t: [
                    (t.failures_scoring, {reason: semconv.PROCESSOR_FAILURE_SCORING}),
                    (t.failures_recording, {reason: semconv.PROCESSOR_FAILURE_RECORDING}),
                    (t.failures_processing, {reason: semconv.PROCESSOR_FAILURE_PROCESSING}),
                    (t.failures_downstream, {reason: semconv.PROCESSOR_FAILURE_DOWNSTREAM}),
                ],
            ),
            (
                semconv.METRIC_PROCESSOR_BUFFER_EVICTIONS,
                trace,
                "Traces whose buffered spans were dropped before their answer ended, by reason: older than "
                "pending_ttl_s (max_age) or beyond max_pending_traces (max_traces).",
                lambda t: [
                    (t.evicted_max_age, {reason: semconv.PIPELINE_EVICTION_MAX_AGE}),
                    (t.evicted_max_traces, {reason: semconv.PIPELINE_EVICTION_MAX_TRACES}),
                ],
            ),
        )
        for index, (name, unit, description, pick) in enumerate(counters):
            meter.create_observable_counter(
                name, callbacks=[self._callback(pick, first=index == 0)], unit=unit, description=description
            )
        meter.create_observable_up_down_counter(
            semconv.METRIC_PROCESSOR_BUFFER_TRACES,
            callbacks=[lambda options: [Observation(self._gauges()[0])]],
            unit=trace,
            description="Traces with ended spans buffered, waiting for their answer or local root to end.",
        )
        meter.create_observable_up_down_counter(
            semconv.METRIC_PROCESSOR_QUEUE_SIZE,
            callbacks=[lambda options: [Observation(self._gauges()[1])]],
            unit=answer,
            description="Answer and local-root spans waiting for the background worker (0 when scoring inline).",
        )

    def watch(self, counts: ProcessorCounts, gauges: GaugeReader) -> None:
        with self._lock:
            # Readings sweep too, but a process whose metrics are never read (no SDK reader) would keep an
            # entry per processor ever created: sweep when the list has doubled since the last sweep.
            if len(self._watched) >= self._sweep_at:
                self._sweep()
                self._sweep_at = max(_FIRST_SWEEP, 2 * len(self._watched))
            self._watched.append(_Watched(counts, weakref.WeakMethod(gauges)))

    def totals(self) -> _Totals:
        with self._lock:
            # One locked step decides, for this reading, whether a processor counts as retired or as
            # watched: never both.
            self._sweep()
            watched = list(self._watched)
            totals = _Totals()
            totals.add(self._retired)
        for entry in watched:
            reader = entry.gauges()
            if reader is not None:
                reader()  # lets expired buffers go first, so this reading counts their evictions
            totals.add(entry.counts.snapshot())
        return totals

    def _sweep(self) -> None:
        """Fold the counts of collected processors into the retired totals (keeps the list bounded). Called
        with the lock held; a collected processor writes no more, so its counts are final."""
        alive = []
        for entry in self._watched:
            if entry.gauges() is None:  # asked once per entry: a processor may die between two asks
                self._retired.add(entry.counts.snapshot())
            else:
                alive.append(entry)
        self._watched = alive

    def _gauges(self) -> tuple[int, int]:
        with self._lock:
            readers = [entry.gauges() for entry in self._watched]
        pending = queued = 0
        for reader in readers:
            if reader is not None:
                traces, answers = reader()
                pending += traces
                queued += answers
        return pending, queued

    def _callback(
        self, pick: Callable[[_Totals], list[tuple[int, dict[str, str]]]], first: bool
    ) -> Callable[[CallbackOptions], Iterable[Observation]]:
        used = [-1]  # the snapshot this instrument reported last

        def observe(options: CallbackOptions) -> Iterable[Observation]:
            return [
                Observation(value, attributes) for value, attributes in pick(self._totals_for(first, used))
            ]

        return observe

    def _totals_for(self, first: bool, used: list[int]) -> _Totals:
        """One snapshot per collection, so every instrument reports the same moment: spans received and
        forwarded read apart would differ by the spans that ended in between. The SDK calls the callbacks in
        the order they were registered: the first instrument takes a snapshot, the others report it, and one
        that sees a snapshot it reported already (the first was not called) takes a new one."""
        snapshot = self._snapshot
        if first or snapshot is None or used[0] == snapshot[0]:
            number = snapshot[0] + 1 if snapshot is not None else 0
            snapshot = self._snapshot = (number, self.totals())
        used[0] = snapshot[0]
        return snapshot[1]


_GROUPS: weakref.WeakKeyDictionary[MeterProvider, _ProcessorGroup] = weakref.WeakKeyDictionary()
_GLOBAL: list[_ProcessorGroup] = []  # the group of processors given no meter provider (at most one)
_GROUPS_LOCK = threading.Lock()


def _new_locks_after_fork() -> None:
    # A metric reader's thread in the parent may have held them at the fork; the child's reader would wait on
    # them for ever.
    global _GROUPS_LOCK
    _GROUPS_LOCK = threading.Lock()
    for group in (*_GLOBAL, *_GROUPS.values()):
        group._lock = threading.Lock()
        # The counts of the parent's collected processors, and its last reading, are the parent's to report.
        group._retired = _Totals()
        group._snapshot = None


os.register_at_fork(after_in_child=_new_locks_after_fork)


def observe_processor(
    meter_provider: MeterProvider | None, counts: ProcessorCounts, gauges: GaugeReader
) -> None:
    """Have ``meter_provider`` (None: the global one) report ``counts`` and ``gauges`` (a bound method of
    the processor, held weakly) in the processor metrics, summed with the other processors it reports."""
    with _GROUPS_LOCK:
        group = _group_for(meter_provider)
    group.watch(counts, gauges)


def _group_for(meter_provider: MeterProvider | None) -> _ProcessorGroup:
    # The global provider is one group whether it is named or not, and whether instruments were created on
    # the API's proxy before the SDK provider was set (the proxy replays them onto it) or after.
    if meter_provider is None or meter_provider is metrics.get_meter_provider():
        if not _GLOBAL:
            _GLOBAL.append(_ProcessorGroup(None))
        return _GLOBAL[0]
    try:
        group = _GROUPS.get(meter_provider)
        if group is None:
            group = _GROUPS[meter_provider] = _ProcessorGroup(meter_provider)
        return group
    except TypeError:  # a provider that cannot be weakly referenced: its processors are observed apart
        return _ProcessorGroup(meter_provider)
