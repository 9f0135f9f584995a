"""``@scored_answer``: open (or adopt) the answer span, score the answer before the span ends, hand the
scorecard back to the caller."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar, cast, overload

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry._logs import LoggerProvider
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import Span, Status, StatusCode, TracerProvider

from .. import semconv
from ..errors import UsageError
from ..scoring.models import ConfidenceScorecard, ScoringConfig
from ..signals import SignalOptions, find_answers
from ..signals.native import ATTRIBUTE_BY_KEYWORD, FIELDS
from ..signals.records import SpanRecord
from .answer_scoring import AnswerScorer
from .events import EvaluationEmitter
from .held_evaluations import with_evaluations
from .metrics import ConfidenceInstruments, package_version
from .processor import ConfidenceSpanProcessor
from .recording import _SINK, _SignalSink
from .registry import pending_evaluations, pending_spans_under

__all__ = ["last_scorecard", "scored_answer"]

_logger = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])
SignalsFromResult = Callable[[Any], "Mapping[str, Any] | None"]
ScoreCallback = Callable[[ConfidenceScorecard, Any], None]
Finish = Callable[[Span, _SignalSink, Any], None]


class _Latest:
    """What :func:`last_scorecard` reads in one context.

    Mutable on purpose: a task or thread started from a context (``gather``, ``create_task``,
    ``asyncio.to_thread``, ``copy_context().run``, ``wait_for`` on Python < 3.12) shares the context's object,
    and a scored call starting there empties it, so the caller then reads None, never the card of an earlier
    answer. Each finished call puts a new object in its own context, so a card never leaks into a sibling task.
    """

    __slots__ = ("scorecard",)

    def __init__(self, scorecard: ConfidenceScorecard | None) -> None:
        self.scorecard = scorecard


_LAST: ContextVar[_Latest | None] = ContextVar("rag_confidence_last_scorecard", default=None)
# The answer spans of the decorated calls running in this context: adopt_current_span never adopts one of them
# (two calls would score one span).
_OWN_SPANS: ContextVar[tuple[Span, ...]] = ContextVar("rag_confidence_answer_spans", default=())
# Span ids for records that stand in for spans: 0 (the invalid id) for the ``record_signals`` values when no
# processor buffered the answer's spans, 1 for the answer when its span is not recording (no SDK installed).
_SINK_SPAN_ID = 0
_UNRECORDED_ANSWER_SPAN_ID = 1


def last_scorecard() -> ConfidenceScorecard | None:
    """The scorecard of the latest ``@scored_answer`` call that returned in this thread or task.

    Read it right after a call made directly (``answer(q)``, ``await answer(q)``) to gate on the recommended
    action::

        text = answer("What is the notice period?")
        card = last_scorecard()
        if card is None or card.recommended_action == "abstain":
            text = "I can't answer that reliably."

    It is None before any scored call, after a call that raised or whose scoring failed, after a stream closed
    before its end (once iterated: a generator's code, ours included, runs from the first ``next``), and after
    a call that ran in another task or thread started from here (``gather``, ``create_task``,
    ``asyncio.to_thread``, ``wait_for`` on Python < 3.12): that call sets it in its own task only. Use
    ``on_score`` for those, and for threads that do not carry the context (``loop.run_in_executor``,
    ``ThreadPoolExecutor.submit``), where the caller keeps reading its own earlier card.
    """
    latest = _LAST.get()
    return None if latest is None else latest.scorecard


def _starting() -> None:
    """A scored call starts: whatever card this context (or the one it was copied from) holds is superseded."""
    latest = _LAST.get()
    if latest is not None:
        latest.scorecard = None


def _set_last(scorecard: ConfidenceScorecard | None) -> None:
    _LAST.set(_Latest(scorecard))


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
    _check_options(name=name, signals=signals, on_score=on_score, signal_options=signal_options)
    scorer = AnswerScorer(config, signal_options)
    instruments = ConfidenceInstruments(meter_provider)
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
        span_name = name or _span_name(function)
        kind = _kind(function)

        def open_answer() -> tuple[Span, bool]:
            """The answer span, and whether this call opened it (and so ends it)."""
            current = trace.get_current_span()
            if adopt_current_span and current.is_recording() and current not in _OWN_SPANS.get():
                current.set_attribute(semconv.RAG_ANSWER, True)
                return current, False
            return tracer.start_span(span_name, attributes={semconv.RAG_ANSWER: True}), True

        @contextmanager
        def answer_scope() -> Iterator[tuple[Span, _SignalSink]]:
            _starting()
            sink = _SignalSink()
            token = _SINK.set(sink)
            try:
                span, opened = open_answer()
                own_token = _OWN_SPANS.set((*_OWN_SPANS.get(), span))
                try:
                    if opened:
                        with trace.use_span(span, end_on_exit=True):
                            yield span, sink
                    else:
                        yield span, sink
                finally:
                    _OWN_SPANS.reset(own_token)
            finally:
                _SINK.reset(token)

        def finish(span: Span, sink: _SignalSink, result: Any) -> None:
            scorecard = _score(span, sink, result, scorer, signals, instruments, events)
            _set_last(scorecard)
            if scorecard is not None and on_score is not None:
                try:
                    on_score(scorecard, result)
                except Exception:
                    _logger.exception("rag-confidence: the on_score callback raised")

        if kind in (_GENERATOR, _ASYNC_GENERATOR):
            stream = _Stream(open_answer, finish)
            wrapped = stream.wrap_async(function) if kind == _ASYNC_GENERATOR else stream.wrap(function)
            return cast(F, wrapped)

        warned: list[bool] = []

        def declined(span: Span, result: Any) -> bool:
            """Whether ``result`` is produced only as the caller consumes it, after the span ended: such a
            call is declined (scoring now would score an empty answer), with one warning per function."""
            if inspect.isawaitable(result):
                what, advice = "an awaitable without being an async function", "the async function itself"
            elif _is_stream(result):
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
            _failed(span)
            return True

        if kind == _COROUTINE:

            @functools.wraps(function)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                with answer_scope() as (span, sink):
                    try:
                        result = await function(*args, **kwargs)
                    except BaseException:
                        _failed(span)
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
                    _failed(span)
                    raise
                if not declined(span, result):
                    finish(span, sink, result)
                return result

        return cast(F, wrapper)

    return decorate


def _score(
    span: Span,
    sink: _SignalSink,
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
        if group is None:  # cannot happen with the answer record marked; never a bare StopIteration
            raise RuntimeError("the answer span was not found among its own records")
        overrides = _overrides(signals(result)) if signals is not None else None
        scored = scorer.score(group.spans, overrides)
    except Exception as error:
        _logger.warning("rag-confidence: scoring the answer failed", exc_info=True)
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
            events.emit(scored.scorecard, context)
    except Exception:
        _logger.warning("rag-confidence: recording confidence metrics or the event failed", exc_info=True)
    return scored.scorecard


def _read_by_a_processor(span: Span) -> bool:
    """True when ``span``'s tracer provider has a ``ConfidenceSpanProcessor``, which reads the span itself.

    A guarded read of the SDK span's private processor list: anything unexpected counts as read, so values
    are never counted twice.
    """
    processors = getattr(getattr(span, "_span_processor", None), "_span_processors", None)
    if not isinstance(processors, tuple):
        return True
    return any(isinstance(processor, ConfidenceSpanProcessor) for processor in processors)


# Stream objects of the frameworks a RAG answer function returns, recognised by the attribute that holds the
# stream (duck-typed, so none of them is imported): LlamaIndex's StreamingResponse (``response_gen``) and
# AsyncStreamingResponse (``async_response_gen``), Starlette's and FastAPI's StreamingResponse
# (``body_iterator``).
_STREAM_HOLDERS = ("response_gen", "async_response_gen", "body_iterator")


def _is_stream(result: Any) -> bool:
    """A generator, an iterator or async iterator (LangChain's ``chain.stream()``), or a framework's stream
    object: what a function returns when its answer is produced as the caller reads it."""
    if isinstance(result, (Iterator, AsyncIterator)):
        return True
    return any(
        getattr(type(result), name, None) is not None or _has_field(result, name) for name in _STREAM_HOLDERS
    )


def _has_field(result: Any, name: str) -> bool:
    # Instance fields (a dataclass's response_gen) live in the instance dict or slots, not on the type.
    try:
        return name in vars(result)
    except TypeError:
        return False


def _failed(span: Span, *, clear_last: bool = True) -> None:
    # A call that raised produced no answer: declined (rag.answer = false), the processor does not score it, nor
    # its trace's root for the retrieval the call made. Nor is an earlier call's scorecard left to gate on.
    if span.is_recording():
        span.set_attribute(semconv.RAG_ANSWER, False)
    if clear_last:
        _set_last(None)


_COROUTINE, _GENERATOR, _ASYNC_GENERATOR, _PLAIN = "coroutine", "generator", "async generator", "plain"


def _kind(function: Callable[..., Any]) -> str:
    """How calls of ``function`` produce their result. ``inspect`` sees through ``functools.partial`` and
    bound methods; an instance with an ``async def __call__`` is read through its ``__call__``."""
    candidates: list[object] = [function]
    if not (
        inspect.isfunction(function) or inspect.ismethod(function) or isinstance(function, functools.partial)
    ):
        candidates.append(type(function).__call__)  # an instance with an async def __call__, say
    for candidate in candidates:
        if inspect.isasyncgenfunction(candidate):
            return _ASYNC_GENERATOR
        if inspect.isgeneratorfunction(candidate):
            return _GENERATOR
        if inspect.iscoroutinefunction(candidate):
            return _COROUTINE
    return _PLAIN


def _span_name(function: Callable[..., Any]) -> str:
    """``Class.method`` reads well in a trace view; ``outer.<locals>.inner`` does not. A partial is named after
    its function, a callable object after its class."""
    target: Any = function
    while isinstance(target, functools.partial):
        target = target.func
    qualname = getattr(target, "__qualname__", None)
    if not isinstance(qualname, str):
        qualname = type(target).__qualname__
    return qualname.rpartition("<locals>.")[2]


def _check_options(
    *,
    name: object,
    signals: object,
    on_score: object,
    signal_options: object,
) -> None:
    """The decorator's options, checked where it is applied rather than at every call."""
    if name is not None and not isinstance(name, str):
        raise UsageError(f"scored_answer(name=...) must be a string, not {type(name).__name__}")
    for option, value in (("signals", signals), ("on_score", on_score)):
        if value is not None and not callable(value):
            raise UsageError(
                f"scored_answer({option}=...) must be a callable taking the result, not {type(value).__name__}"
            )
    if signal_options is not None and not isinstance(signal_options, SignalOptions):
        raise UsageError(
            f"scored_answer(signal_options=...) must be a SignalOptions, not {type(signal_options).__name__}"
        )


class _Stream:
    """Generator functions (a streamed answer): the whole iteration is the answer, scored once exhausted.

    The answer span and the ``record_signals`` sink are current only while the generator's own code runs,
    step by step, never in the consumer's code between items: the consumer's spans do not land under the
    answer, and a stream closed from another context (garbage collection, say) has nothing to detach. A
    stream that raises, or is closed before its end, is not scored (as a call that raises).
    """

    def __init__(self, open_answer: Callable[[], tuple[Span, bool]], finish: Finish) -> None:
        self._open_answer = open_answer
        self._finish = finish

    def _start(self) -> tuple[Span, bool, _Place]:
        _starting()
        span, opened = self._open_answer()
        return span, opened, _Place(trace.set_span_in_context(span), _SignalSink(), span)

    def wrap(
        self, function: Callable[..., Generator[Any, Any, Any]]
    ) -> Callable[..., Generator[Any, Any, Any]]:
        stream = self

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
            span, opened, place = stream._start()
            try:
                with place.entered():
                    inner = function(*args, **kwargs)
                sent: Any = None
                thrown: BaseException | None = None
                while True:
                    with place.entered():
                        try:
                            item = inner.send(sent) if thrown is None else inner.throw(thrown)
                        except StopIteration as stop:
                            result = stop.value
                            break
                    thrown = None
                    try:
                        sent = yield item
                    except GeneratorExit:
                        with place.entered():
                            inner.close()
                        raise
                    except BaseException as error:  # thrown in by the consumer: the generator's to handle
                        thrown = error
                with place.entered():
                    stream._finish(span, place.sink, result)
            except BaseException as error:
                _stream_failed(span, error)
                raise
            finally:
                if opened:
                    span.end()
            return result

        return wrapper

    def wrap_async(
        self, function: Callable[..., AsyncGenerator[Any, Any]]
    ) -> Callable[..., AsyncGenerator[Any, Any]]:
        stream = self

        @functools.wraps(function)
        async def wrapper(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
            span, opened, place = stream._start()
            try:
                with place.entered():
                    inner = function(*args, **kwargs)
                sent: Any = None
                thrown: BaseException | None = None
                while True:
                    with place.entered():
                        try:
                            item = await (inner.asend(sent) if thrown is None else inner.athrow(thrown))
                        except StopAsyncIteration:
                            break
                    thrown = None
                    try:
                        sent = yield item
                    except GeneratorExit:
                        with place.entered():
                            await inner.aclose()
                        raise
                    except BaseException as error:
                        thrown = error
                with place.entered():
                    stream._finish(span, place.sink, None)  # an async generator returns no value
            except BaseException as error:
                _stream_failed(span, error)
                raise
            finally:
                if opened:
                    span.end()

        return wrapper


class _Place:
    """Where a streamed answer's own code runs: the context its last step left (the answer span, or a span its
    code opened and is still inside, across a ``yield``), and the ``record_signals`` sink of the answer."""

    __slots__ = ("context", "sink", "span")

    def __init__(self, context: otel_context.Context, sink: _SignalSink, span: Span) -> None:
        self.context = context
        self.sink = sink
        self.span = span

    @contextmanager
    def entered(self) -> Iterator[None]:
        token = otel_context.attach(self.context)
        sink_token = _SINK.set(self.sink)
        own_token = _OWN_SPANS.set((*_OWN_SPANS.get(), self.span))
        try:
            yield
        finally:
            self.context = otel_context.get_current()
            _OWN_SPANS.reset(own_token)
            _SINK.reset(sink_token)
            otel_context.detach(token)


def _stream_failed(span: Span, error: BaseException) -> None:
    # Closed early (GeneratorExit) may happen anywhere, garbage collection included: only a failure the
    # consumer saw clears the scorecard it reads in its own context.
    _failed(span, clear_last=not isinstance(error, GeneratorExit))
    if isinstance(error, Exception) and span.is_recording():  # as use_span records a plain call's error
        span.record_exception(error)
        span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))


def _answer_record(span: Span) -> SpanRecord:
    if isinstance(span, ReadableSpan):
        record = SpanRecord.from_readable_span(span)
        if record.attributes.get(semconv.RAG_ANSWER) is not True:
            # This call returned, so its span is its answer, whatever a nested call that adopted the same
            # span and failed (rag.answer = false) or a full attribute table left on it.
            return dataclasses.replace(record, attributes={**record.attributes, semconv.RAG_ANSWER: True})
        return record
    # A span from another SDK: ids only, marked so that it is its own answer.
    context = span.get_span_context()
    span_id = context.span_id if context.is_valid else _UNRECORDED_ANSWER_SPAN_ID
    return SpanRecord(context.trace_id, span_id, None, "answer", {semconv.RAG_ANSWER: True})


def _overrides(values: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``signals(result)`` as camelCase inputs: ``record_signals`` keywords become their input paths."""
    if values is None:
        return None
    if not isinstance(values, Mapping):
        dump = getattr(values, "model_dump", None)
        if dump is None:
            raise UsageError(f"signals(result) must return a mapping, not {type(values).__name__}")
        values = cast("Mapping[str, Any]", dump(by_alias=True, exclude_none=True))
    overrides: dict[str, Any] = {}
    for key, value in values.items():
        if value is None:
            continue
        attribute = ATTRIBUTE_BY_KEYWORD.get(key)
        path = FIELDS[attribute][0] if attribute is not None else _camel(key)
        head, _, tail = path.partition(".")
        if tail:
            nested = overrides.setdefault(head, {})
            nested[tail] = value
        else:
            overrides[head] = _camel_keys(head, value)
    return overrides


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _camel_keys(key: str, value: Any) -> Any:
    # Only the keys of ScoringInputs' own objects are field names; ``retrievalScores`` keys are method names.
    if key in ("claimSupport", "indexIntegrity") and isinstance(value, Mapping):
        return {_camel(str(field)): item for field, item in value.items()}
    if key == "candidates" and isinstance(value, list):
        return [
            {_camel(str(field)): item for field, item in candidate.items()}
            if isinstance(candidate, Mapping)
            else candidate
            for candidate in value
        ]
    return value
