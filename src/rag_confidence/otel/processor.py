"""``ConfidenceSpanProcessor``: scores RAG answers as their spans end and forwards an enriched copy.

Ended SDK spans are read-only (attributes are frozen before any processor sees them), and every processor on a
provider receives the same object. So this processor *wraps* the exporting processor: each span goes to the
downstream processor exactly once, and an answer span goes as a new ``ReadableSpan`` carrying the scorecard.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry._logs import LoggerProvider
from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import SpanContext

from .. import semconv
from ..scoring.models import ScoringConfig
from ..signals import SignalOptions, find_answers
from ..signals.answers import ANSWER_HINT_KEYS, may_hold_answer
from ..signals.records import EventRecord, SpanRecord, ended_span_attributes, ended_span_has_events
from . import registry
from .answer_scoring import AnswerScorer, ScoredAnswer
from .enriched_span import copy_with
from .events import EvaluationEmitter
from .held_evaluations import Evaluations, by_span, split_evaluations, with_evaluations
from .limits import check_processor_limits
from .metrics import ConfidenceInstruments, span_context_as_parent
from .pipeline import ProcessorCounts, observe_processor
from .worker import BackgroundWorker

__all__ = ["ConfidenceSpanProcessor", "ProcessorStats"]

_logger = logging.getLogger(__name__)

# Ended local roots and marked answers remembered per trace (for work that outlives them): a bound for traces
# with very many answers.
_MAX_ANCHORS_PER_TRACE = 256


# Traces with evaluations held before any of their spans was buffered (see ConfidenceSpanProcessor._early).
_MAX_EARLY_TRACES = 1024

# Failures on the span path are logged with their traceback this many times per processor, then only counted.
_LOGGED_FAILURES = 5
_DOWNSTREAM = semconv.PROCESSOR_FAILURE_DOWNSTREAM


@dataclass(frozen=True, slots=True)
class ProcessorStats:
    """Counters of one processor since it was created (a consistent snapshot)."""

    #: Spans handed to the downstream processor (one per span ended).
    spans_forwarded: int
    #: Answers scored here (answers the decorator already scored are forwarded as they are and not counted).
    answers_scored: int
    #: Failures, summed: answers whose scoring failed (their span was forwarded with ``rag.confidence.error``
    #: instead), scorecards whose metrics or event could not be recorded (the span carries its scorecard),
    #: spans whose processing failed unexpectedly (forwarded as they were), and calls into the downstream
    #: processor that raised. The ``rag.confidence.processor.failures`` metric tells them apart by reason.
    scoring_failures: int
    #: Traces whose buffered spans were dropped before their answer ended (TTL or ``max_pending_traces``).
    traces_evicted: int
    #: Spans not buffered because their trace already held ``max_spans_per_trace`` (still forwarded).
    spans_not_buffered: int
    #: Traces with spans buffered right now.
    pending_traces: int
    #: Spans ended and handed to this processor (equal to ``spans_forwarded`` but for answers being scored).
    spans_received: int = 0
    #: Answer spans that ``@scored_answer`` had scored already (forwarded untouched).
    answers_already_scored: int = 0


class _PendingTrace:
    """The ended spans of one trace whose local root has not ended yet."""

    __slots__ = ("answered", "created", "evaluations", "may_answer", "spans")

    def __init__(self, created: float) -> None:
        # When a span of the trace was last buffered: the TTL runs from there, so a long trace still producing
        # spans (an agent at work) is not evicted while active.
        self.created = created
        self.spans: list[ReadableSpan] = []
        # Evaluation results logged for spans of this trace (span id, event), read as events of those spans.
        self.evaluations: list[tuple[int, EventRecord]] = []
        # The parents of the marked answers taken from this buffer: a local root with one of them in its subtree
        # (itself included) answered already, and is no answer by rule (c); another local root of the trace is
        # not concerned. A mark moves up to the parent of an answer that takes it with its subtree.
        self.answered: set[int] = set()
        # True once a buffered span is a retrieval or a marked answer; None while some spans were buffered
        # without that screen (background scoring leaves it to the worker) and none passed it. Traces with
        # False (most traffic of a service that also answers questions) are released at their root without
        # any signal work.
        self.may_answer: bool | None = False


class ConfidenceSpanProcessor(SpanProcessor):
    """Scores each RAG answer when its span ends and forwards every span to ``downstream_processor`` exactly
    once.

    Register it *instead of* the exporting processor, wrapping it::

        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        from rag_confidence.otel import ConfidenceSpanProcessor

        provider = TracerProvider()
        provider.add_span_processor(ConfidenceSpanProcessor(BatchSpanProcessor(OTLPSpanExporter())))

    Answers (see ``rag_confidence.signals.answers``): a span with ``rag.answer = true`` (set by
    ``@scored_answer`` and ``mark_answer()``), else the local root of a trace that holds a retrieval span.
    Spans are buffered per trace until the answer or the local root ends; then the answer's spans are turned
    into scoring inputs, scored, and the answer span is forwarded as a copy with the ``rag.confidence.*``
    attributes. The metrics and the ``gen_ai.evaluation.result`` log record are recorded in the answer span's
    context. Answers already scored by ``@scored_answer`` pass through untouched. A judge's
    ``gen_ai.evaluation.result`` log records count for the answer they evaluate when
    :class:`~rag_confidence.otel.EvaluationLogProcessor` sits on the logger provider it logs through.

    Beware:

    - Only spans that end *before* their answer span are read (the normal nesting). A child that outlives its
      answer (fire-and-forget work) is forwarded but not scored; one that outlives its local root is not
      buffered either.
    - Another processor registered on the same provider sees the original span, without the scorecard: put
      every exporting processor inside this one (or use several ``ConfidenceSpanProcessor``).
    - The enriched copy carries our attributes in addition to the span's own, beyond the span attribute count
      limit if the span was full: our attributes are bounded (about 40) and are the point of the exercise.
    - State is bounded: a trace's buffer is released when its local root ends, dropped after ``pending_ttl_s``
      without a new span or when more than ``max_pending_traces`` are pending (counted in :meth:`stats` and in the
      ``rag.confidence.processor.*`` metrics on ``meter_provider``, see ``rag_confidence.otel.pipeline``).
    - It never raises into the application: a failure to score is logged, counted and marked on the span with
      ``rag.confidence.error``; the span is forwarded regardless.
    - Scoring runs on the thread that ends the answer span (about a millisecond for an answer with a few dozen
      documents). ``background_scoring=True`` leaves the application thread only the buffering: the screen for
      retrievals, answer detection, scoring and the forwarding of each local root and answer span move to one
      worker thread (``max_scoring_queue`` spans waiting at most; beyond that the caller does the work inline,
      nothing is dropped); ``force_flush`` and ``shutdown`` drain it first. The process's CPU is the same
      either way, and the worker competes for the GIL with the application's threads.
    """

    def __init__(
        self,
        downstream_processor: SpanProcessor,
        *,
        config: ScoringConfig | Mapping[str, Any] | None = None,
        signal_options: SignalOptions | None = None,
        meter_provider: MeterProvider | None = None,
        logger_provider: LoggerProvider | None = None,
        emit_events: bool = True,
        max_pending_traces: int = 10_000,
        max_spans_per_trace: int = 1_000,
        pending_ttl_s: float = 300.0,
        background_scoring: bool = False,
        max_scoring_queue: int = 2048,
    ) -> None:
        check_processor_limits(
            max_pending_traces=max_pending_traces,
            max_spans_per_trace=max_spans_per_trace,
            pending_ttl_s=pending_ttl_s,
            max_scoring_queue=max_scoring_queue,
        )
        self._worker = (
            BackgroundWorker("rag-confidence-scoring", max_scoring_queue) if background_scoring else None
        )
        self._downstream = downstream_processor
        self._scorer = AnswerScorer(config, signal_options)
        self._instruments = ConfidenceInstruments(meter_provider)
        self._events = EvaluationEmitter(logger_provider) if emit_events else None
        self._max_pending_traces = max_pending_traces
        self._max_spans_per_trace = max_spans_per_trace
        self._ttl_s = pending_ttl_s
        self._lock = threading.Lock()
        # Insertion order is creation order, so the oldest trace is always first: eviction is O(1).
        self._pending: OrderedDict[int, _PendingTrace] = OrderedDict()
        # Evaluations logged in traces none of whose spans is buffered here (yet): kept apart from the span
        # buffers, so a judge logging for spans this processor never sees costs no buffer and no eviction.
        # A trace's entry moves into its buffer when one opens. Oldest first; bounded and aged like buffers.
        self._early: OrderedDict[int, tuple[float, list[tuple[int, EventRecord]]]] = OrderedDict()
        # Work that outlives what it belongs to. Per trace (most recent last, at most max_pending_traces each):
        # the local roots and marked answers that ended (a child of one that ends after it is never read, and
        # opens no buffer): one span id, or a set of them for a trace with several (an int spares a set per
        # trace).
        self._ended: OrderedDict[int, int | set[int]] = OrderedDict()
        # The local roots of each trace: [running, started, ended] here. A request is over when one ended and
        # none runs; a trace not listed proves nothing (its root may have started before this processor saw it).
        # Changed under _roots_lock, not self._lock, which the scoring worker holds for long: a span starting on
        # the application thread never waits for scoring. Read under self._lock without it (one dict read).
        # Tuples of ints, which the garbage collector stops tracking: ten thousand lists would slow every
        # collection.
        self._roots: OrderedDict[int, tuple[int, int, int]] = OrderedDict()
        self._roots_lock = threading.Lock()
        # Changed under self._lock only; read by stats() and, at metric collection, by the pipeline metrics.
        self._counts = ProcessorCounts(lock=self._lock)
        observe_processor(meter_provider, self._counts, self._observed_gauges)
        registry.register(self)

    def _after_fork_in_child(self) -> None:
        # A thread of the parent (the scoring worker, one ending spans) may have held the lock at the fork; the
        # traces buffered then are the parent's, whose spans end there.
        self._lock = threading.Lock()
        self._roots_lock = threading.Lock()
        self._counts.lock = self._lock
        self._pending.clear()
        self._early.clear()
        self._ended.clear()
        self._roots.clear()

    # -- SpanProcessor ---------------------------------------------------------------------------------------

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Count a starting local root (so a child ending after it is known as late work), then pass the span
        to the downstream processor."""
        parent = span.parent
        context = span.context if parent is None or parent.is_remote else None  # only local roots are counted
        if context is not None:
            trace_id = context.trace_id
            roots = self._roots
            with self._roots_lock:
                entry = roots.get(trace_id)
                if entry is None:
                    roots[trace_id] = (1, 1, 0)
                    if len(roots) > self._max_pending_traces:  # roots that never end: forget the oldest
                        roots.popitem(last=False)
                else:
                    roots[trace_id] = (entry[0] + 1, entry[1] + 1, entry[2])
                    roots.move_to_end(trace_id)
        try:
            self._downstream.on_start(span, parent_context=parent_context)
        except Exception:
            self._count_failure("the downstream span processor failed in on_start", _DOWNSTREAM)

    def _on_ending(self, span: Span) -> None:
        # Part of the SDK's processor protocol (private there): pass it on so a downstream that uses it works.
        try:
            self._downstream._on_ending(span)
        except Exception:
            self._count_failure("the downstream span processor failed in _on_ending", _DOWNSTREAM)

    def on_end(self, span: ReadableSpan) -> None:
        """Buffer the span for its answer, or score it if it is one; forward it (an answer as its enriched
        copy) to the downstream processor, now or, with background scoring, from the worker."""
        forwarded: ReadableSpan | None
        try:
            forwarded = self._process(span)
        except Exception:  # a bug of ours must never cost the application its span
            forwarded = span
            self._count_failure("processing an ended span failed", semconv.PROCESSOR_FAILURE_PROCESSING)
        if forwarded is not None:
            self._forward(forwarded, received=1)

    def shutdown(self) -> None:
        """Score and forward what the worker holds (30 s at most), drop the buffers, shut the downstream down."""
        registry.forget(self)
        try:
            if self._worker is not None:
                self._worker.stop(timeout_s=30.0)
        finally:
            with self._lock:
                self._pending.clear()
                self._early.clear()
            try:
                self._downstream.shutdown()
            except Exception:
                self._count_failure("the downstream span processor failed to shut down", _DOWNSTREAM)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Score what is queued for the worker (if any), then flush the downstream; False when either ran out
        of time or the downstream failed (counted, never raised)."""
        drained = True
        left_ms = timeout_millis
        if self._worker is not None:
            started = time.monotonic()
            drained = self._worker.flush(timeout_millis / 1000)
            # The downstream always gets its flush, even when the worker used up the time: the spans forwarded so
            # far are exported (with 0 ms left the SDK's SynchronousMultiSpanProcessor would skip its processors).
            left_ms = max(1, int(timeout_millis - (time.monotonic() - started) * 1000))
        try:
            flushed = self._downstream.force_flush(left_ms)
        except Exception:
            self._count_failure("the downstream span processor failed to flush", _DOWNSTREAM)
            return False
        return flushed and drained

    # -- public helpers --------------------------------------------------------------------------------------

    def stats(self) -> ProcessorStats:
        """Counters since creation; ``traces_evicted`` above zero means answers went unscored (see the class
        docstring for the bounds)."""
        counts = self._counts
        with self._lock:
            self._evict(time.monotonic(), making_room=False)
            return ProcessorStats(
                spans_forwarded=counts.spans_forwarded,
                answers_scored=counts.answers_scored,
                scoring_failures=counts.failures_scoring
                + counts.failures_recording
                + counts.failures_processing
                + counts.failures_downstream,
                traces_evicted=counts.evicted_max_age + counts.evicted_max_traces,
                spans_not_buffered=counts.spans_unbuffered,
                pending_traces=len(self._pending),
                spans_received=counts.spans_received,
                answers_already_scored=counts.answers_already_scored,
            )

    def _observed_gauges(self) -> tuple[int, int]:
        """Pending traces and answers queued for the worker, for the pipeline metrics."""
        with self._lock:
            self._evict(time.monotonic(), making_room=False)
            pending = len(self._pending)
        return pending, self._worker.queued() if self._worker is not None else 0

    def pending_spans_under(self, span_context: SpanContext) -> list[ReadableSpan] | None:
        """The buffered (ended) spans beneath ``span_context``; None when its trace is not pending here.

        ``@scored_answer`` reads these to score its answer before the answer span ends.
        """
        with self._lock:
            pending = self._pending.get(span_context.trace_id)
            spans = list(pending.spans) if pending is not None else None
        if spans is None:
            return None
        return _subtree(spans, span_context.span_id)

    def add_evaluation(self, trace_id: int, span_id: int, event: EventRecord, *, trace_open: bool) -> bool:
        """Hold an evaluation result for span ``span_id`` of trace ``trace_id``: when that span's answer is
        scored, it is read as an event of the span (a ``gen_ai.evaluation.result`` log record emitted in the
        span's context, see :class:`~rag_confidence.otel.EvaluationLogProcessor`, which calls this).

        Held while the trace is pending here, or, when ``trace_open`` (a span of the trace is still recording),
        until a span of it ends here (at most 1,024 such traces, and ``pending_ttl_s``); at most
        ``max_spans_per_trace`` per trace. Returns whether it was held: an evaluation of an answer already
        scored comes too late.
        """
        with self._lock:
            pending = self._pending.get(trace_id)
            if pending is not None:
                held = pending.evaluations
            else:
                early = self._early.get(trace_id)
                if early is None:
                    if not trace_open:
                        return False
                    now = time.monotonic()
                    self._evict_early(now)
                    early = self._early[trace_id] = (now, [])
                held = early[1]
            if len(held) >= self._max_spans_per_trace:
                return False
            held.append((span_id, event))
            return True

    def pending_evaluations(self, trace_id: int) -> Evaluations:
        """The evaluation results held for spans of ``trace_id``, by span id (a copy)."""
        with self._lock:
            pending = self._pending.get(trace_id)
            early = self._early.get(trace_id)
            held = [*(pending.evaluations if pending is not None else ()), *(early[1] if early else ())]
        return by_span(held)

    # -- the span path ---------------------------------------------------------------------------------------

    def _process(self, span: ReadableSpan) -> ReadableSpan | None:
        """The span to forward now, or None when its scoring (and forwarding) went to the background worker."""
        context = span.context
        if context is None:
            return span
        parent = span.parent
        local_root = parent is None or parent.is_remote
        claim = ended_span_attributes(span).get(semconv.RAG_ANSWER)
        marked = claim is True
        # A declined answer (a call that failed, or a stream closed early) is an anchor too: what ends beneath it
        # afterwards (a stream's spans finalised later by the garbage collector) is late work, not a buffer to
        # keep until the TTL and count as an eviction.
        if not (local_root or marked or claim is False):
            # With a worker, even the screen for retrievals waits for it: the application thread only buffers.
            self._buffer(context.trace_id, span, None if self._worker is not None else _may_hold_answer(span))
            return span
        trace_id = context.trace_id
        if local_root:
            self._root_ended(trace_id)
        with self._lock:
            # Here, on the thread that ends it, not on the worker: a child ending after it must see it ended, and
            # whether its request is over is decided now, not when the worker gets to it.
            self._anchor_ended(trace_id, context.span_id)
            orphan = not local_root and self._request_over(trace_id)
            if self._worker is not None:
                # Counted as received before the worker can forward it, so received never trails forwarded.
                self._counts.spans_received += 1
        if self._worker is not None:
            try:
                submitted = self._worker.submit(
                    functools.partial(self._finish, span, context, local_root, marked, orphan)
                )
            except Exception:  # e.g. no thread could be started; on_end must not count this span again
                submitted = False
                self._count_failure(
                    "starting background scoring failed", semconv.PROCESSOR_FAILURE_PROCESSING
                )
            if not submitted:
                # The queue is full: here, nothing is lost.
                self._finish(span, context, local_root, marked, orphan)
            return None
        return self._answer(span, context, local_root, marked, orphan)

    def _answer(
        self, span: ReadableSpan, context: SpanContext, local_root: bool, marked: bool, orphan: bool
    ) -> ReadableSpan:
        """Release the buffered spans beneath a local root or marked answer; score it if it is an answer.
        ``orphan``: a marked answer whose request was over when it ended (it leaves no mark)."""
        parent = span.parent
        declined = not marked and ended_span_attributes(span).get(semconv.RAG_ANSWER) is False
        members, answered_before, may_answer, evaluations = self._take(
            context.trace_id,
            context.span_id,
            local_root=local_root,
            orphan=orphan,
            parent_span_id=parent.span_id if parent is not None else None,
            answers_itself=not declined,
        )
        if declined and not local_root:
            return span  # its subtree makes no answer (see signals.answers); the marks beneath it moved up
        if _already_scored(ended_span_attributes(span)):
            # Scored by @scored_answer before it ended (metrics and event are recorded already), also when a
            # full attribute table evicted its rag.answer mark.
            with self._lock:
                self._counts.answers_already_scored += 1
            return span
        if (
            may_answer is None
        ):  # buffered unscreened (background scoring): screen them now, off the app thread
            may_answer = any(_may_hold_answer(member) for member in members)
        if not marked and (answered_before or not (may_answer or _may_hold_answer(span))):
            return span  # rule (c) holds only for traces with a retrieval and without a marked answer
        return self._score_answer(span, members, evaluations)

    def _finish(
        self, span: ReadableSpan, context: SpanContext, local_root: bool, marked: bool, orphan: bool
    ) -> None:
        """Decide on, score and forward one local root or marked answer (on the background worker)."""
        try:
            forwarded = self._answer(span, context, local_root, marked, orphan)
        except Exception:
            forwarded = span
            self._count_failure("processing an ended span failed", semconv.PROCESSOR_FAILURE_PROCESSING)
        self._forward(forwarded)

    def _forward(self, span: ReadableSpan, received: int = 0) -> None:
        """Hand ``span`` downstream; ``received`` 1 counts it as received too (one lock round for both)."""
        try:
            self._downstream.on_end(span)
        except Exception:
            # Handed over all the same: what the downstream did with it is its own to report.
            self._count_failure("the downstream span processor failed in on_end", _DOWNSTREAM)
        with self._lock:
            self._counts.spans_received += received
            self._counts.spans_forwarded += 1

    def _score_answer(
        self, span: ReadableSpan, members: list[ReadableSpan], evaluations: Evaluations
    ) -> ReadableSpan:
        context = span.context
        if context is None:  # _process let only spans with a context through
            return span
        records = [SpanRecord.from_readable_span(member) for member in members]
        records.append(SpanRecord.from_readable_span(span))
        if evaluations:
            records = with_evaluations(records, evaluations)
        group = next((g for g in find_answers(records) if g.answer.span_id == context.span_id), None)
        if group is None:
            return span
        try:
            scored = self._scorer.score(group.spans)
        except Exception as error:
            with self._lock:
                self._counts.answers_failed += 1
            self._count_failure("scoring an answer failed", semconv.PROCESSOR_FAILURE_SCORING)
            return copy_with(span, {semconv.RAG_CONFIDENCE_ERROR: type(error).__name__})
        self._publish(scored, context)
        with self._lock:
            self._counts.answers_scored += 1
        return copy_with(span, scored.attributes)

    def _publish(self, scored: ScoredAnswer, span_context: SpanContext) -> None:
        context = span_context_as_parent(span_context)
        try:
            self._instruments.record(scored.scorecard, scored.duration_s, context)
            if self._events is not None:
                self._events.emit(scored.scorecard, context)
        except Exception:
            self._count_failure(
                "recording confidence metrics or the evaluation event failed",
                semconv.PROCESSOR_FAILURE_RECORDING,
            )

    def _buffer(self, trace_id: int, span: ReadableSpan, may_answer: bool | None) -> None:
        """Hold ``span`` until its answer or local root ends; ``may_answer`` None: not screened yet."""
        with self._lock:
            pending = self._pending.get(trace_id)
            ended = self._ended.get(trace_id)
            if ended is not None and self._late_child_released(trace_id, span, pending, ended):
                return
            now = time.monotonic()
            if pending is None:
                pending = self._open(trace_id, now)
            else:
                pending.created = now
                self._pending.move_to_end(trace_id)
            if len(pending.spans) < self._max_spans_per_trace:
                pending.spans.append(span)
                if may_answer or pending.may_answer is False:
                    pending.may_answer = may_answer
            else:
                self._counts.spans_unbuffered += 1

    def _late_child_released(
        self, trace_id: int, span: ReadableSpan, pending: _PendingTrace | None, ended: int | set[int]
    ) -> bool:
        """True when ``span`` is a child of a local root or marked answer that ended before it (fire-and-forget
        work): nothing reads it (only spans that end before their answer count), so it is not buffered, and
        what its subtree buffered is released; the buffer goes too once it is empty and no local root of the
        trace is running. Deeper spans of such work are buffered as usual (a marked answer in it is still
        scored with them) until the top span of the work ends. Lock held."""
        parent = span.parent
        context = span.context
        if parent is None or context is None:
            return False
        if parent.span_id != ended if isinstance(ended, int) else parent.span_id not in ended:
            return False
        if pending is not None:
            members = _subtree(pending.spans, context.span_id) if pending.spans else []
            _remove(pending, members)
            if pending.answered:  # marks of answers in this work: no root will come for them
                pending.answered.difference_update(_span_ids(members))
                pending.answered.discard(context.span_id)
            if not pending.spans and not pending.answered and self._request_over(trace_id):
                self._release(trace_id, pending)
        return True

    def _release(self, trace_id: int, pending: _PendingTrace) -> None:
        """Drop the buffer of ``trace_id``, keeping the evaluations held for spans still to end; lock held."""
        del self._pending[trace_id]
        self._keep_early(trace_id, pending.evaluations)

    def _request_over(self, trace_id: int) -> bool:
        """Whether a local root of ``trace_id`` ended here and none is running."""
        entry = self._roots.get(trace_id)
        return entry is not None and entry[2] > 0 and entry[0] <= 0

    def _anchor_ended(self, trace_id: int, span_id: int) -> None:
        """Note that a local root or marked answer ended; lock held."""
        anchors = self._ended
        ended = anchors.get(trace_id)
        if ended is None:
            anchors[trace_id] = span_id
            if len(anchors) > self._max_pending_traces:
                anchors.popitem(last=False)
            return
        anchors.move_to_end(trace_id)
        if isinstance(ended, int):
            anchors[trace_id] = {ended, span_id}
        elif len(ended) < _MAX_ANCHORS_PER_TRACE:
            ended.add(span_id)

    def _root_ended(self, trace_id: int) -> None:
        roots = self._roots
        with self._roots_lock:
            entry = roots.get(trace_id)
            if entry is None:  # its start was not seen here
                roots[trace_id] = (0, 0, 1)
                if len(roots) > self._max_pending_traces:
                    roots.popitem(last=False)
            else:
                roots[trace_id] = (max(0, entry[0] - 1), entry[1], entry[2] + 1)

    def _roots_started(self, trace_id: int) -> int:
        entry = self._roots.get(trace_id)
        return entry[1] if entry is not None else 0

    def _open(self, trace_id: int, now: float) -> _PendingTrace:
        """A new buffer for ``trace_id``, holding the evaluations logged before it opened; lock held."""
        self._evict(now)
        pending = self._pending[trace_id] = _PendingTrace(now)
        early = self._early.pop(trace_id, None)
        if early is not None:
            pending.evaluations = early[1]
        return pending

    def _keep_early(self, trace_id: int, items: list[tuple[int, EventRecord]]) -> None:
        """Hold evaluations of a trace whose buffer is released (they belong to spans not scored yet, such as
        another local root of the trace still running); lock held."""
        if items:
            now = time.monotonic()
            self._evict_early(now)
            self._early[trace_id] = (now, items)

    def _evict_early(self, now: float, making_room: bool = True) -> None:
        early = self._early
        deadline = now - self._ttl_s
        while early:
            created, _ = next(iter(early.values()))
            if created > deadline and (not making_room or len(early) < _MAX_EARLY_TRACES):
                break
            early.popitem(last=False)

    def _evict(self, now: float, making_room: bool = True) -> None:
        # Lock held. Called once per new trace (amortised O(1)), and, expired buffers only, when the stats or
        # the pipeline gauges are read: an idle process then lets go of its last buffers without new traffic.
        pending = self._pending
        deadline = now - self._ttl_s
        while pending:
            oldest = next(iter(pending.values()))
            if oldest.created <= deadline:
                self._counts.evicted_max_age += 1
            elif making_room and len(pending) >= self._max_pending_traces:
                self._counts.evicted_max_traces += 1
            else:
                break
            pending.popitem(last=False)
        if not making_room:
            self._evict_early(now, making_room=False)

    def _take(
        self,
        trace_id: int,
        span_id: int,
        *,
        local_root: bool,
        orphan: bool = False,
        parent_span_id: int | None = None,
        answers_itself: bool = True,
    ) -> tuple[list[ReadableSpan], bool, bool | None, Evaluations]:
        """Remove and return the buffered spans beneath ``span_id``, whether an answer of this trace was scored
        before, whether the trace buffered a retrieval or marked answer (None: spans were buffered without
        that screen), and the evaluations held for those spans and the answer. A local root releases its
        trace; a nested answer leaves a mark that it was answered. A nested declined answer
        (``answers_itself`` False) passes on only the marks of answers beneath it."""
        with self._lock:
            pending = self._pending.get(trace_id)
            # An orphan (a marked answer in work that outlived its request) needs no buffer: no root will read
            # its mark, and nothing would release it.
            if pending is None:
                if local_root or orphan:
                    # Nothing of this trace ended beneath it.
                    early = self._early.pop(trace_id, None)
                    if early is None:
                        return [], False, False, {}
                    mine, others = split_evaluations(early[1], {span_id})
                    self._keep_early(trace_id, others)
                    return [], False, False, by_span(mine)
                pending = self._open(trace_id, time.monotonic())
            marks = pending.answered
            if local_root and pending.may_answer is False and not marks:
                # Nothing in this trace can be scored but a marked root: release all of it without walking the
                # tree. (Another local root of the same trace, if any, loses buffered spans that held no
                # retrieval; evaluations of its spans are kept.)
                del self._pending[trace_id]
                ids = _span_ids(pending.spans)
                ids.add(span_id)
                mine, others = split_evaluations(pending.evaluations, ids)
                self._keep_early(trace_id, others)
                return pending.spans, False, False, by_span(mine)
            members = _subtree(pending.spans, span_id) if pending.spans else []
            beneath = _span_ids(members)
            beneath.add(span_id)
            answered = False
            if marks:
                # The marks of answers beneath this span: for a local root, it answered already; for a marked
                # answer, they move up to its own parent below.
                answered = not marks.isdisjoint(beneath)
                marks.difference_update(beneath)
                if local_root and marks and self._roots_started(trace_id) <= 1:
                    # The trace's only local root here: the other marks are its own too, out of its reach in the
                    # buffer (beneath a span another provider made, say). It answered already. (With several
                    # roots they stay for the others to claim.)
                    answered = True
                    marks.clear()
            _remove(pending, members)
            evaluations: Evaluations = {}
            if pending.evaluations:
                mine, pending.evaluations = split_evaluations(pending.evaluations, beneath)
                evaluations = by_span(mine)
            if not local_root and not orphan and parent_span_id is not None and (answers_itself or answered):
                marks.add(parent_span_id)
            # What is left (spans or marks) belongs to another local root of the same trace (two requests of one
            # remote trace served here at once): it keeps the buffer until that root ends or the TTL passes.
            if (local_root or orphan) and not pending.spans and not marks:
                self._release(trace_id, pending)
            return members, answered, pending.may_answer, evaluations

    def _count_failure(self, message: str, reason: str) -> None:
        counts = self._counts
        with self._lock:
            if reason == semconv.PROCESSOR_FAILURE_SCORING:
                counts.failures_scoring += 1
            elif reason == semconv.PROCESSOR_FAILURE_RECORDING:
                counts.failures_recording += 1
            elif reason == _DOWNSTREAM:
                counts.failures_downstream += 1
            else:
                counts.failures_processing += 1
            failures = (
                counts.failures_scoring
                + counts.failures_recording
                + counts.failures_processing
                + counts.failures_downstream
            )
        if failures <= _LOGGED_FAILURES:
            _logger.warning(
                "rag-confidence: %s (logged %d of at most %d times)",
                message,
                failures,
                _LOGGED_FAILURES,
                exc_info=True,
            )


def _may_hold_answer(span: ReadableSpan) -> bool:
    """Whether this span makes its trace worth scoring (a retrieval or a marked answer); cheap, per span.

    Only spans with one of the hint keys or with events can be either (the rule lives in ``signals``); the
    key check is one C-level pass, so ordinary traffic costs next to nothing here.
    """
    attributes = ended_span_attributes(span)
    if ANSWER_HINT_KEYS.isdisjoint(attributes) and not ended_span_has_events(span):
        return False
    return may_hold_answer(attributes, [event.name for event in span.events])


def _already_scored(attributes: Mapping[str, Any]) -> bool:
    return semconv.RAG_CONFIDENCE_ACTION in attributes or semconv.RAG_CONFIDENCE_ERROR in attributes


def _span_ids(spans: list[ReadableSpan]) -> set[int]:
    return {span.context.span_id for span in spans if span.context is not None}


def _remove(pending: _PendingTrace, members: list[ReadableSpan]) -> None:
    """Take ``members`` (spans of ``pending``, in buffer order) out of its buffer."""
    if len(members) == len(pending.spans):
        pending.spans = []
    elif members:
        taken = {id(member) for member in members}
        pending.spans = [kept for kept in pending.spans if id(kept) not in taken]


def _subtree(spans: list[ReadableSpan], root_span_id: int) -> list[ReadableSpan]:
    """The spans beneath ``root_span_id`` (transitively), in buffer order."""
    children: dict[int, list[int]] = {}
    for index, span in enumerate(spans):
        parent = span.parent
        if parent is not None and not parent.is_remote:
            children.setdefault(parent.span_id, []).append(index)
    selected: list[int] = []
    stack = [root_span_id]
    seen = {root_span_id}
    while stack:
        for index in children.get(stack.pop(), ()):
            selected.append(index)
            context = spans[index].context
            child_id = context.span_id if context is not None else None
            if child_id is not None and child_id not in seen:
                seen.add(child_id)
                stack.append(child_id)
    selected.sort()
    return [spans[index] for index in selected]
