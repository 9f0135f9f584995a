"""What a ``@scored_answer`` call leaves in its context: the scorecard :func:`last_scorecard` reads, the answer
spans of the calls running there, and how a call that produced no answer is declined."""

from __future__ import annotations

from contextvars import ContextVar

from opentelemetry.trace import Span

from .. import semconv
from ..scoring.models import ConfidenceScorecard

__all__ = ["OWN_SPANS", "decline", "last_scorecard", "set_last", "starting"]


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
OWN_SPANS: ContextVar[tuple[Span, ...]] = ContextVar("rag_confidence_answer_spans", default=())


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


def starting() -> None:
    """A scored call starts: whatever card this context (or the one it was copied from) holds is superseded."""
    latest = _LAST.get()
    if latest is not None:
        latest.scorecard = None


def set_last(scorecard: ConfidenceScorecard | None) -> None:
    _LAST.set(_Latest(scorecard))


def decline(span: Span, *, clear_last: bool = True) -> None:
    # A call that raised produced no answer: declined (rag.answer = false), the processor does not score it, nor
    # its trace's root for the retrieval the call made. Nor is an earlier call's scorecard left to gate on.
    if span.is_recording():
        span.set_attribute(semconv.RAG_ANSWER, False)
    if clear_last:
        set_last(None)
