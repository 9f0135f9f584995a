"""Streamed answers: ``@scored_answer`` on a generator function, whose whole iteration is the answer."""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, Callable, Generator, Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode

from .answer_state import OWN_SPANS, decline, starting
from .recording import SIGNAL_SINK, SignalSink

__all__ = ["Finish", "Stream"]

#: Scores a finished answer: its span, its ``record_signals`` sink, and what the call produced.
Finish = Callable[[Span, SignalSink, Any], None]


class Stream:
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
        starting()
        span, opened = self._open_answer()
        return span, opened, _Place(trace.set_span_in_context(span), SignalSink(), span)

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
                _decline_stream(span, error)
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
                _decline_stream(span, error)
                raise
            finally:
                if opened:
                    span.end()

        return wrapper


class _Place:
    """Where a streamed answer's own code runs: the context its last step left (the answer span, or a span its
    code opened and is still inside, across a ``yield``), and the ``record_signals`` sink of the answer."""

    __slots__ = ("context", "sink", "span")

    def __init__(self, context: otel_context.Context, sink: SignalSink, span: Span) -> None:
        self.context = context
        self.sink = sink
        self.span = span

    @contextmanager
    def entered(self) -> Iterator[None]:
        token = otel_context.attach(self.context)
        sink_token = SIGNAL_SINK.set(self.sink)
        own_token = OWN_SPANS.set((*OWN_SPANS.get(), self.span))
        try:
            yield
        finally:
            self.context = otel_context.get_current()
            OWN_SPANS.reset(own_token)
            SIGNAL_SINK.reset(sink_token)
            otel_context.detach(token)


def _decline_stream(span: Span, error: BaseException) -> None:
    # Closed early (GeneratorExit) may happen anywhere, garbage collection included: only a failure the
    # consumer saw clears the scorecard it reads in its own context.
    decline(span, clear_last=not isinstance(error, GeneratorExit))
    if isinstance(error, Exception) and span.is_recording():  # as use_span records a plain call's error
        span.record_exception(error)
        span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
