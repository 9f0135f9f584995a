"""What ``@scored_answer`` needs to know of the function it decorates and of what a call returns."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from ..errors import UsageError
from .limits import check_callable_arity, check_flags, check_providers, check_signal_options

__all__ = [
    "ASYNC_GENERATOR",
    "COROUTINE",
    "GENERATOR",
    "PLAIN",
    "call_kind",
    "check_options",
    "is_stream",
    "name_of",
]

COROUTINE, GENERATOR, ASYNC_GENERATOR, PLAIN = "coroutine", "generator", "async generator", "plain"


def call_kind(function: Callable[..., Any]) -> str:
    """How calls of ``function`` produce their result. ``inspect`` sees through ``functools.partial`` and
    bound methods; an instance with an ``async def __call__`` is read through its ``__call__``."""
    candidates: list[object] = [function]
    if not (
        inspect.isfunction(function) or inspect.ismethod(function) or isinstance(function, functools.partial)
    ):
        candidates.append(type(function).__call__)  # an instance with an async def __call__, say
    for candidate in candidates:
        if inspect.isasyncgenfunction(candidate):
            return ASYNC_GENERATOR
        if inspect.isgeneratorfunction(candidate):
            return GENERATOR
        if inspect.iscoroutinefunction(candidate):
            return COROUTINE
    return PLAIN


def name_of(function: Callable[..., Any]) -> str:
    """``Class.method`` reads well in a trace view; ``outer.<locals>.inner`` does not. A partial is named after
    its function, a callable object after its class."""
    target: Any = function
    while isinstance(target, functools.partial):
        target = target.func
    qualname = getattr(target, "__qualname__", None)
    if not isinstance(qualname, str):
        qualname = type(target).__qualname__
    return qualname.rpartition("<locals>.")[2]


def check_options(
    *,
    name: object,
    signals: object,
    on_score: object,
    signal_options: object,
    flags: dict[str, object],
    providers: dict[str, object],
) -> None:
    """The decorator's options, checked where it is applied rather than at every call."""
    if name is not None and not isinstance(name, str):
        raise UsageError(f"scored_answer(name=...) must be a string, not {type(name).__name__}")
    for option, value, arguments in (
        ("signals", signals, "result"),
        ("on_score", on_score, "scorecard, result"),
    ):
        if value is None:
            continue
        if not callable(value):
            raise UsageError(
                f"scored_answer({option}=...) must be a callable, called as {option}({arguments}), "
                f"not {type(value).__name__}"
            )
        # Found at decoration, not as an error logged at every call.
        check_callable_arity("scored_answer", option, value, arguments, arguments.count(",") + 1)
    check_signal_options("scored_answer", signal_options)
    check_flags("scored_answer", **flags)
    check_providers("scored_answer", **providers)


# Where the frameworks' stream objects hold their stream (duck-typed, so none of them is imported): LlamaIndex's
# StreamingResponse and AsyncStreamingResponse, Starlette's and FastAPI's StreamingResponse. Only an instance
# value counts: LlamaIndex's non-streamed AgentChatResponse has a ``response_gen`` *property*.
_STREAM_HOLDERS = ("response_gen", "body_iterator")
# LlamaIndex's StreamingAgentChatResponse (``stream_chat``): a thread it starts reads ``chat_stream`` on its own,
# so whether that generator is still open when the call returns is a race; ``is_done`` says the answer is whole.
_CHAT_STREAMS = ("chat_stream", "achat_stream")


def is_stream(result: Any) -> bool:
    """Whether a call returned its answer as a stream not read yet: a generator or async generator still open
    (LangChain's ``chain.stream()``/``astream()``), or a framework's stream object holding one (or, for
    LlamaIndex's chat streams, not done). An exhausted stream, any other iterator (a file, a mock) and complete
    answers are no stream."""
    if _open_generator(result):
        return True
    try:
        fields = vars(result)
    except TypeError:  # no instance dict: a str, a number, a slotted object
        return False
    if any(_open_generator(fields.get(name)) for name in _STREAM_HOLDERS):
        return True
    return (
        any(fields.get(name) is not None for name in _CHAT_STREAMS)
        and getattr(result, "is_done", None) is False
    )


def _open_generator(value: Any) -> bool:
    # A closed generator (exhausted inside the call) has no frame: its answer was produced within the span.
    if inspect.isgenerator(value):
        return value.gi_frame is not None
    if inspect.isasyncgen(value):
        return value.ag_frame is not None
    return False
