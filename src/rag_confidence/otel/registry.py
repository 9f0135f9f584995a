"""The span processors alive in this process, for ``@scored_answer`` to read what they buffered.

The decorator scores its answer before the answer span ends, from the spans already ended beneath it, which
only the installed ``ConfidenceSpanProcessor`` holds. The registry is weak (it keeps no processor alive) and
reinitialises the processors in a forked child (pre-fork servers), with one at-fork hook for all of them.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Protocol

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext

from .held_evaluations import Evaluations

__all__ = ["forget", "pending_evaluations", "pending_spans_under", "register"]


class _Holder(Protocol):
    """What the registry asks of a span processor (``ConfidenceSpanProcessor``)."""

    def pending_spans_under(self, span_context: SpanContext) -> list[ReadableSpan] | None: ...

    def pending_evaluations(self, trace_id: int) -> Evaluations: ...

    def _after_fork_in_child(self) -> None: ...


# Processors alive in this process, so that ``@scored_answer`` can read the spans buffered beneath its answer
# span before that span ends (see ``pending_spans_under``). Weak: the registry keeps no processor alive.
_LIVE_PROCESSORS: weakref.WeakSet[_Holder] = weakref.WeakSet()
_LIVE_LOCK = threading.Lock()


def register(processor: _Holder) -> None:
    """Count ``processor`` as live (until :func:`forget` or its collection)."""
    with _LIVE_LOCK:
        _LIVE_PROCESSORS.add(processor)


def forget(processor: _Holder) -> None:
    """``processor`` was shut down: the decorator no longer reads it."""
    with _LIVE_LOCK:
        _LIVE_PROCESSORS.discard(processor)


def _after_fork_in_child() -> None:
    global _LIVE_LOCK
    _LIVE_LOCK = threading.Lock()
    for processor in list(_LIVE_PROCESSORS):
        processor._after_fork_in_child()


# One hook for all processors (one per processor could never be removed). A processor shut down is no longer
# live: its child has nothing to reinitialise.
os.register_at_fork(after_in_child=_after_fork_in_child)


def pending_spans_under(span_context: SpanContext) -> list[ReadableSpan] | None:
    """The spans buffered beneath ``span_context`` by any live ``ConfidenceSpanProcessor``; None when no live
    processor holds its trace (no processor installed, or no child ended yet)."""
    with _LIVE_LOCK:
        processors = list(_LIVE_PROCESSORS)
    found: list[ReadableSpan] | None = None
    for processor in processors:
        spans = processor.pending_spans_under(span_context)
        if spans is not None:
            found = (found or []) + spans
    return found


def pending_evaluations(trace_id: int) -> Evaluations:
    """The evaluation results any live ``ConfidenceSpanProcessor`` holds for spans of ``trace_id``."""
    with _LIVE_LOCK:
        processors = list(_LIVE_PROCESSORS)
    found: Evaluations = {}
    for processor in processors:
        for span_id, events in processor.pending_evaluations(trace_id).items():
            found.setdefault(span_id, []).extend(events)
    return found
