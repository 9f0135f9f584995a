"""``ConfidenceSpanProcessor``: scores RAG answers as their spans end and forwards an enriched copy.

Ended SDK spans are read-only (attributes are frozen before any processor sees them), and every processor on a
provider receives the same object. So this processor *wraps* the exporting processor: each span goes to the
downstream processor exactly once, and an answer span goes as a new ``ReadableSpan`` carrying the scorecard.
"""

from __future__ import annotations

import functools
import logging
import sys
import time
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
from ..signals.answers import ANSWER_TRIGGER_KEYS, may_hold_answer
from ..signals.records import EventRecord, SpanRecord, ended_span_attributes, ended_span_has_events
from . import registry
from .answer_scoring import AnswerScorer, ScoredAnswer
from .enriched_span import copy_with
from .events import EvaluationEmitter
from .failures import describe_failure
from .held_evaluations import Evaluations, with_evaluations
from .limits import (
    check_flags,
    check_processor_limits,
    check_providers,
    check_signal_options,
    check_span_processor,
)
from .metrics import shared_instruments, span_context_as_parent
from .pipeline import observe_processor
from .trace_buffers import TraceBuffers
from .worker import BackgroundWorker

__all__ = ["ConfidenceSpanProcessor", "ProcessorStats"]

_logger = logging.getLogger(__name__)


# Failures on the span path are logged with their traceback this many times per processor, then only counted.
_LOGGED_FAILURES = 5
_DOWNSTREAM = semconv.PROCESSOR_FAILURE_DOWNSTREAM


@dataclass(frozen=True, slots=True)
class ProcessorStats:
    """Counters of one processor since it was created (a consistent snapshot).

    >>> from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    >>> processor = ConfidenceSpanProcessor(SpanProcessor())  # forwards to a processor that does nothing
    >>> provider = TracerProvider()
    >>> provider.add_span_processor(processor)
    >>> tracer = provider.get_tracer("app")
    >>> with tracer.start_as_current_span("answer", attributes={"rag.answer": True}):
    ...     with tracer.start_as_current_span("retrieve", attributes={"gen_ai.operation.name": "retrieval"}):
    ...         pass
    >>> stats = processor.stats()
    >>> stats.spans_forwarded, stats.answers_scored, stats.pending_traces, stats.traces_evicted
    (2, 1, 0, 0)
    """

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
        check_span_processor(downstream_processor)
        check_flags("ConfidenceSpanProcessor", emit_events=emit_events, background_scoring=background_scoring)
        check_providers(
            "ConfidenceSpanProcessor", meter_provider=meter_provider, logger_provider=logger_provider
        )
        check_signal_options("ConfidenceSpanProcessor", signal_options)
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
        self._instruments = shared_instruments(meter_provider)
        self._events = EvaluationEmitter(logger_provider) if emit_events else None
        self._buffers = TraceBuffers(
            max_traces=max_pending_traces, max_spans_per_trace=max_spans_per_trace, ttl_s=pending_ttl_s
        )
        # The processor's counters share the buffers' lock: one lock round per span for both.
        self._counts = self._buffers.counts
        observe_processor(meter_provider, self._counts, self._observed_gauges)
        registry.register(self)

    def _after_fork_in_child(self) -> None:
        self._buffers.reset_after_fork()

    # -- SpanProcessor ---------------------------------------------------------------------------------------

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Count a starting local root (so a child ending after it is known as late work), then pass the span
        to the downstream processor."""
        parent = span.parent
        if parent is None or parent.is_remote:  # only local roots are counted
            context = span.context
            if context is not None:
                self._buffers.root_started(context.trace_id)
        try:
            self._downstream.on_start(span, parent_context=parent_context)
        except Exception:
            self._count_failure("the downstream span processor failed in on_start", _DOWNSTREAM)

    def _on_ending(self, span: Span) -> None:
        # Part of the SDK's processor protocol (private there): pass it on so a downstream that uses it works.
        # A duck-typed downstream (accepted, see check_span_processor) may not have it: nothing to pass on.
        on_ending = getattr(self._downstream, "_on_ending", None)
        if on_ending is None:
            return
        try:
            on_ending(span)
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
            self._buffers.clear()
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
        with self._buffers.lock:
            pending_traces = self._buffers.pending_traces()
            return ProcessorStats(
                spans_forwarded=counts.spans_forwarded,
                answers_scored=counts.answers_scored,
                scoring_failures=counts.failures(),
                traces_evicted=counts.evicted_max_age + counts.evicted_max_traces,
                spans_not_buffered=counts.spans_unbuffered,
                pending_traces=pending_traces,
                spans_received=counts.spans_received,
                answers_already_scored=counts.answers_already_scored,
            )

    def _observed_gauges(self) -> tuple[int, int]:
        """Pending traces and answers queued for the worker, for the pipeline metrics."""
        with self._buffers.lock:
            pending = self._buffers.pending_traces()
        return pending, self._worker.queued() if self._worker is not None else 0

    def pending_spans_under(self, span_context: SpanContext) -> list[ReadableSpan] | None:
        """The buffered (ended) spans beneath ``span_context``; None when its trace is not pending here.

        ``@scored_answer`` reads these to score its answer before the answer span ends.
        """
        return self._buffers.pending_spans_under(span_context)

    def add_evaluation(self, trace_id: int, span_id: int, event: EventRecord, *, trace_open: bool) -> bool:
        """Hold an evaluation result for span ``span_id`` of trace ``trace_id``: when that span's answer is
        scored, it is read as an event of the span (a ``gen_ai.evaluation.result`` log record emitted in the
        span's context, see :class:`~rag_confidence.otel.EvaluationLogProcessor`, which calls this).

        Held while the trace is pending here, or, when ``trace_open`` (a span of the trace is still recording),
        until a span of it ends here (at most 1,024 such traces, and ``pending_ttl_s``); at most
        ``max_spans_per_trace`` per trace. Returns whether it was held: an evaluation of an answer already
        scored comes too late.
        """
        return self._buffers.add_evaluation(trace_id, span_id, event, trace_open=trace_open)

    def pending_evaluations(self, trace_id: int) -> Evaluations:
        """The evaluation results held for spans of ``trace_id``, by span id (a copy)."""
        return self._buffers.pending_evaluations(trace_id)

    # -- the span path ---------------------------------------------------------------------------------------

    def _process(self, span: ReadableSpan) -> ReadableSpan | None:
        """The span to forward now, or None when its scoring (and forwarding) went to the background worker."""
        context = span.context
        if context is None:
            return span
        parent = span.parent
        local_root = parent is None or parent.is_remote
        claim = ended_span_attributes(span).get(semconv.RAG_ANSWER)
        # A declined answer (a call that failed, or a stream closed early) is an anchor like a marked one: what
        # ends beneath it afterwards (a stream's spans finalised later by the garbage collector) is late work,
        # not a buffer to keep until the TTL and count as an eviction.
        if not (local_root or claim is True or claim is False):
            # With a worker, even the screen for retrievals waits for it: the application thread only buffers.
            self._buffers.buffer(
                context.trace_id, span, None if self._worker is not None else _may_hold_answer(span)
            )
            return span
        trace_id = context.trace_id
        if local_root:
            self._buffers.root_ended(trace_id)
        with self._buffers.lock:
            # Here, on the thread that ends it, not on the worker: a child ending after it must see it ended, and
            # whether its request is over is decided now, not when the worker gets to it.
            self._buffers.anchor_ended(trace_id, context.span_id)
            orphan = not local_root and self._buffers.request_over(trace_id)
            if self._worker is not None:
                # Counted as received before the worker can forward it, so received never trails forwarded.
                self._counts.spans_received += 1
        if self._worker is not None:
            try:
                submitted = self._worker.submit(
                    functools.partial(self._finish, span, context, local_root, claim, orphan)
                )
            except Exception:  # e.g. no thread could be started; on_end must not count this span again
                submitted = False
                self._count_failure(
                    "starting background scoring failed", semconv.PROCESSOR_FAILURE_PROCESSING
                )
            if not submitted:
                # The queue is full: here, nothing is lost.
                self._finish(span, context, local_root, claim, orphan)
            return None
        return self._answer(span, context, local_root, claim, orphan)

    def _answer(
        self, span: ReadableSpan, context: SpanContext, local_root: bool, claim: Any, orphan: bool
    ) -> ReadableSpan:
        """Release the buffered spans beneath a local root or a marked or declined answer; score it if it is an
        answer. ``claim``: its ``rag.answer`` value; ``orphan``: a marked answer whose request was over when it
        ended (it leaves no mark)."""
        marked = claim is True
        declined = claim is False
        parent = span.parent
        members, answered_before, may_answer, evaluations, lost = self._buffers.take(
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
            with self._buffers.lock:
                self._counts.answers_already_scored += 1
                self._counts.spans_unbuffered += lost
            return span
        if (
            may_answer is None
        ):  # buffered unscreened (background scoring): screen them now, off the app thread
            may_answer = any(_may_hold_answer(member) for member in members)
        if not marked and (answered_before or not (may_answer or _may_hold_answer(span))):
            return span  # rule (c) holds only for traces with a retrieval and without a marked answer
        if lost:  # settled spans this answer would have read, dropped past their bound
            with self._buffers.lock:
                self._counts.spans_unbuffered += lost
        return self._score_answer(span, members, evaluations)

    def _finish(
        self, span: ReadableSpan, context: SpanContext, local_root: bool, claim: Any, orphan: bool
    ) -> None:
        """Decide on, score and forward one local root or marked answer (on the background worker)."""
        try:
            forwarded = self._answer(span, context, local_root, claim, orphan)
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
        with self._buffers.lock:
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
            with self._buffers.lock:
                self._counts.answers_failed += 1
            self._count_failure("scoring an answer failed", semconv.PROCESSOR_FAILURE_SCORING)
            return copy_with(span, {semconv.RAG_CONFIDENCE_ERROR: type(error).__name__})
        self._publish(scored, context)
        with self._buffers.lock:
            self._counts.answers_scored += 1
        return copy_with(span, scored.attributes)

    def _publish(self, scored: ScoredAnswer, span_context: SpanContext) -> None:
        context = span_context_as_parent(span_context)
        try:
            self._instruments.record(scored.scorecard, scored.duration_s, context)
            if self._events is not None:
                self._events.emit(scored.scorecard, context, scored.extracted.response_id)
        except Exception:
            self._count_failure(
                "recording confidence metrics or the evaluation event failed",
                semconv.PROCESSOR_FAILURE_RECORDING,
            )

    def _count_failure(self, message: str, reason: str) -> None:
        counts = self._counts
        with self._buffers.lock:
            if reason == semconv.PROCESSOR_FAILURE_SCORING:
                counts.failures_scoring += 1
            elif reason == semconv.PROCESSOR_FAILURE_RECORDING:
                counts.failures_recording += 1
            elif reason == _DOWNSTREAM:
                counts.failures_downstream += 1
            else:
                counts.failures_processing += 1
            failures = counts.failures()
        if failures <= _LOGGED_FAILURES:
            error = sys.exc_info()[1]
            _logger.warning(
                "rag-confidence: %s (logged %d of at most %d times)%s",
                message,
                failures,
                _LOGGED_FAILURES,
                "" if error is None else "\n" + describe_failure(error),
            )


def _may_hold_answer(span: ReadableSpan) -> bool:
    """Whether this span makes its trace worth scoring (a retrieval or a marked answer); cheap, per span.

    Only spans with one of the hint keys or with events can be either (the rule lives in ``signals``); the
    key check is one C-level pass, so ordinary traffic costs next to nothing here.
    """
    attributes = ended_span_attributes(span)
    if ANSWER_TRIGGER_KEYS.isdisjoint(attributes) and not ended_span_has_events(span):
        return False
    return may_hold_answer(attributes, [event.name for event in span.events])


def _already_scored(attributes: Mapping[str, Any]) -> bool:
    return semconv.RAG_CONFIDENCE_ACTION in attributes or semconv.RAG_CONFIDENCE_ERROR in attributes
