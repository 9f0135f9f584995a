"""What ``@scored_answer`` needs to know of the function it decorates and of what a call returns."""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from ..errors import UsageError
from ..signals import SignalOptions

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


# Stream objects of the frameworks a RAG answer function returns, recognised by the attribute that holds the
# stream (duck-typed, so none of them is imported): LlamaIndex's StreamingResponse (``response_gen``) and
# AsyncStreamingResponse (``async_response_gen``), Starlette's and FastAPI's StreamingResponse
# (``body_iterator``).
_STREAM_HOLDERS = ("response_gen", "async_response_gen", "body_iterator")


def is_stream(result: Any) -> bool:
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
