"""``@scored_answer``: open (or adopt) the answer span, score the answer before the span ends, hand the
scorecard back to the caller."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, Token
from typing import Any, TypeVar, cast, overload

from opentelemetry import trace
from opentelemetry._logs import LoggerProvider
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import Span, TracerProvider

from .. import semconv
from ..errors import UsageError
from ..scoring.models import ConfidenceScorecard, ScoringConfig
from ..signals import SignalOptions, find_answers
from ..signals.records import SpanRecord
from .answer_scoring import AnswerScorer
from .answer_state import OWN_SPANS, decline, last_scorecard, set_last, starting
from .callables import ASYNC_GENERATOR, COROUTINE, GENERATOR, call_kind, check_options, is_stream, name_of
from .events import EvaluationEmitter
from .failures import describe_failure
from .held_evaluations import with_evaluations
from .metrics import ConfidenceInstruments, package_version, shared_instruments
from .processor import ConfidenceSpanProcessor
from .recording import SIGNAL_SINK, SignalSink
from .registry import pending_evaluations, pending_spans_under
from .result_signals import overrides_from_result
from .streaming import Stream

__all__ = ["last_scorecard", "scored_answer"]

_logger = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])
SignalsFromResult = Callable[[Any], "Mapping[str, Any] | None"]
ScoreCallback = Callable[[ConfidenceScorecard, Any], None]


# Span ids for records that stand in for spans: 0 (the invalid id) for the ``record_signals`` values when no
# processor buffered the answer's spans, 1 for the answer when its span is not recording (no SDK installed).
_SINK_SPAN_ID = 0
_UNRECORDED_ANSWER_SPAN_ID = 1


@overload
def scored_answer(config: F) -> F: ...


@overload
def scored_answer(
    config: ScoringConfig | Mapping[str, Any] | None = None,
    *,
    name: str | None = None,
    signals: SignalsFromResult | None = None,
    on_score: ScoreCallback | None = None,
    adopt_current_span: bool = False,
    signal_options: SignalOptions | None = None,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    logger_provider: LoggerProvider | None = None,
    emit_events: bool = True,
) -> Callable[[F], F]: ...


def scored_answer(
    config: ScoringConfig | Mapping[str, Any] | Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    signals: SignalsFromResult | None = None,
    on_score: ScoreCallback | None = None,
    adopt_current_span: bool = False,
    signal_options: SignalOptions | None = None,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    logger_provider: LoggerProvider | None = None,
    emit_events: bool = True,
) -> Any:
    """Score every call of the decorated function (sync or async) as one RAG answer.

    The call runs in an answer span (``rag.answer = true``; named ``name`` or the function's qualified name),
    or, with ``adopt_current_span=True``, in the current recording span (a web framework's server span, say).
    When the function returns, and *before* the span ends, the answer is scored from:

    - the spans that ended beneath the answer span, as buffered by ``ConfidenceSpanProcessor`` (install it:
      without it only the answer span's own attributes and ``record_signals`` values are read);
    - ``signals(result)``: a mapping of inputs read from the return value (camelCase ScoringInputs keys, or
      the ``record_signals`` keywords), which wins over everything extracted from spans.

    The ``rag.confidence.*`` attributes are set on the answer span with the public API, the metrics and the
    ``gen_ai.evaluation.result`` log record are recorded in its context, and the scorecard reaches the
    caller through :func:`last_scorecard` and the optional ``on_score(scorecard, result)`` callback. A call
    that raises is not scored (its span gets ``rag.answer = false``). Scoring never raises: a failure is
    logged and marked ``rag.confidence.error`` on the span.

    >>> @scored_answer(signals=lambda result: {"supportLevel": result["support"]})
    ... def answer(question: str) -> dict[str, str]:
    ...     return {"text": "...", "support": "high"}
    >>> answer("q")["support"], last_scorecard().recommended_action in ("answer", "review", "abstain")
    ('high', True)
    """
    if isinstance(config, (staticmethod, classmethod)) or (
        callable(config) and not isinstance(config, Mapping)
    ):
        if getattr(config, "__name__", None) == "<lambda>":
            raise UsageError(
                "scored_answer(<lambda>): a lambda given positionally is taken as the answer function; pass it "
                "by keyword (signals=... or on_score=...)"
            )
        return scored_answer()(config)
    check_options(
        name=name,
        signals=signals,
        on_score=on_score,
        signal_options=signal_options,
        flags={"adopt_current_span": adopt_current_span, "emit_events": emit_events},
        providers={
            "tracer_provider": tracer_provider,
            "meter_provider": meter_provider,
            "logger_provider": logger_provider,
        },
    )
    scorer = AnswerScorer(config, signal_options)
    instruments = shared_instruments(meter_provider)
    events = EvaluationEmitter(logger_provider) if emit_events else None
    tracer = trace.get_tracer(
        semconv.INSTRUMENTATION_SCOPE, package_version(), tracer_provider=tracer_provider
    )

    def decorate(function: F) -> F:
        if isinstance(function, (staticmethod, classmethod)):
            # Above @staticmethod/@classmethod: decorate the function inside, keep the descriptor around it.
            return cast(F, type(function)(decorate(cast(F, function.__func__))))
        if inspect.isclass(function) or not callable(function):
            raise UsageError(
                f"@scored_answer decorates functions (def, async def, generators, methods), not "
                f"{'the class ' + function.__name__ if inspect.isclass(function) else type(function).__name__}"
            )
        span_name = name or name_of(function)
        kind = call_kind(function)

        def open_answer() -> tuple[Span, bool]:
            """The answer span, and whether this call opened it (and so ends it)."""
            current = trace.get_current_span()
            if adopt_current_span and current.is_recording() and current not in OWN_SPANS.get():
                current.set_attribute(semconv.RAG_ANSWER, True)
                return current, False
            return tracer.start_span(span_name, attributes={semconv.RAG_ANSWER: True}), True

        @contextmanager
        def answer_scope() -> Iterator[tuple[Span, SignalSink]]:
            starting()
            sink = SignalSink()
            token = SIGNAL_SINK.set(sink)
            try:
                span, opened = open_answer()
                own_token = OWN_SPANS.set((*OWN_SPANS.get(), span))
                try:
                    if opened:
                        with trace.use_span(span, end_on_exit=True):
                            yield span, sink
                    else:
                        yield span, sink
                finally:
                    _reset(OWN_SPANS, own_token)
            finally:
                _reset(SIGNAL_SINK, token)

        def finish(span: Span, sink: SignalSink, result: Any) -> None:
            scorecard = _score(span, sink, result, scorer, signals, instruments, events)
            set_last(scorecard)
            if scorecard is not None and on_score is not None:
                try:
                    on_score(scorecard, result)
                except Exception as error:
                    _logger.error("rag-confidence: the on_score callback raised\n%s", describe_failure(error))

        if kind in (GENERATOR, ASYNC_GENERATOR):
            stream = Stream(open_answer, finish)
            wrapped = stream.wrap_async(function) if kind == ASYNC_GENERATOR else stream.wrap(function)
            return cast(F, wrapped)

        warned: list[bool] = []

        def declined(span: Span, result: Any) -> bool:
            """Whether ``result`` is produced only as the caller consumes it, after the span ended: such a
            call is declined (scoring now would score an empty answer), with one warning per function."""
            if inspect.isawaitable(result):
                what, advice = "an awaitable without being an async function", "the async function itself"
            elif is_stream(result):
                what, advice = f"a stream ({type(result).__name__})", "a generator that yields its items"
            else:
                return False
            if not warned:
                warned.append(True)
                _logger.warning(
                    "rag-confidence: %s returned %s; its answer is produced after the call returned, so its "
                    "calls are not scored: decorate %s instead",
                    span_name,
                    what,
                    advice,
                )
            decline(span)
            return True

        if kind == COROUTINE:

            @functools.wraps(function)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                with answer_scope() as (span, sink):
                    try:
                        result = await function(*args, **kwargs)
                    except BaseException as error:
                        # Closed (GeneratorExit): an abandoned task's coroutine, closed by the garbage collector
                        # wherever it runs; the card of the context it happens in is another call's.
                        decline(span, clear_last=not isinstance(error, GeneratorExit))
                        raise
                    if not declined(span, result):
                        finish(span, sink, result)
                    return result

            return cast(F, async_wrapper)

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with answer_scope() as (span, sink):
                try:
                    result = function(*args, **kwargs)
                except BaseException:
                    decline(span)
                    raise
                if not declined(span, result):
                    finish(span, sink, result)
                return result

        return cast(F, wrapper)

    return decorate


def _score(
    span: Span,
    sink: SignalSink,
    result: Any,
    scorer: AnswerScorer,
    signals: SignalsFromResult | None,
    instruments: ConfidenceInstruments,
    events: EvaluationEmitter | None,
) -> ConfidenceScorecard | None:
    try:
        span_context = span.get_span_context()
        answer = _answer_record(span)
        records: list[SpanRecord] = []
        buffered = pending_spans_under(span_context) or []
        records.extend(SpanRecord.from_readable_span(child) for child in buffered)
        # The record_signals values of this call that reached no span a confidence processor reads (a
        # non-recording span, another provider's, no processor installed), after the spans beneath so that
        # they win over them.
        unseen = sink.unread(_read_by_a_processor)
        if unseen:
            records.append(
                SpanRecord(
                    trace_id=span_context.trace_id,
                    span_id=_SINK_SPAN_ID,
                    parent_span_id=answer.span_id,
                    name="record_signals",
                    attributes=unseen,
                )
            )
        records.append(answer)
        if span_context.is_valid:
            evaluations = pending_evaluations(span_context.trace_id)
            if evaluations:  # logged by an evaluator beneath the answer (see EvaluationLogProcessor)
                records = with_evaluations(records, evaluations)
        group = next((g for g in find_answers(records) if g.answer.span_id == answer.span_id), None)
        if group is None:  # the answer record is marked and carries no status: never a bare StopIteration
            raise RuntimeError("find_answers did not take the decorated call's span as its answer")
        overrides = overrides_from_result(signals(result)) if signals is not None else None
        scored = scorer.score(group.spans, overrides)
    except Exception as error:
        _logger.warning("rag-confidence: scoring the answer failed\n%s", describe_failure(error))
        if span.is_recording():
            span.set_attribute(semconv.RAG_CONFIDENCE_ERROR, type(error).__name__)
        return None
    # Headline last: a span at its attribute limit evicts the oldest attribute for each new one. The answer
    # mark is set again after them all, so it is never the one evicted (the processor would then score the
    # span a second time, without this call's signals(result)).
    attributes = dict(reversed(list(scored.attributes.items())))
    attributes[semconv.RAG_ANSWER] = True
    span.set_attributes(attributes)
    context = trace.set_span_in_context(span)
    try:
        instruments.record(scored.scorecard, scored.duration_s, context)
        if events is not None:
            events.emit(scored.scorecard, context, scored.extracted.response_id)
    except Exception as error:
        _logger.warning(
            "rag-confidence: recording confidence metrics or the event failed\n%s", describe_failure(error)
        )
    return scored.scorecard


def _reset(variable: ContextVar[Any], token: Token[Any]) -> None:
    # A coroutine closed from another context (an abandoned task's, by the garbage collector) cannot reset the
    # values it set in its own, which went with its task; raising here would fail the close.
    with contextlib.suppress(ValueError):
        variable.reset(token)


def _read_by_a_processor(span: Span) -> bool:
    """True when ``span``'s tracer provider has a ``ConfidenceSpanProcessor``, which reads the span itself.

    A guarded read of the SDK span's private processor list: anything unexpected counts as read, so values
    are never counted twice.
    """
    processors = getattr(getattr(span, "_span_processor", None), "_span_processors", None)
    if not isinstance(processors, tuple):
        return True
    return any(isinstance(processor, ConfidenceSpanProcessor) for processor in processors)


def _answer_record(span: Span) -> SpanRecord:
    if isinstance(span, ReadableSpan):
        record = SpanRecord.from_readable_span(span)
        # This call returned, so its span is its answer, whatever a nested call that adopted the same span and
        # failed (rag.answer = false), a full attribute table, or a status ERROR its code set while handling a
        # failure (a fallback answer is still an answer) left on it.
        if record.attributes.get(semconv.RAG_ANSWER) is not True:
            record = dataclasses.replace(record, attributes={**record.attributes, semconv.RAG_ANSWER: True})
        if record.status_code is not None:
            record = dataclasses.replace(record, status_code=None)
        return record
    # A span from another SDK: ids only, marked so that it is its own answer.
    context = span.get_span_context()
    span_id = context.span_id if context.is_valid else _UNRECORDED_ANSWER_SPAN_ID
    return SpanRecord(context.trace_id, span_id, None, "answer", {semconv.RAG_ANSWER: True})
