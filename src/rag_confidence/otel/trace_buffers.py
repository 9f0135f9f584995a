"""The span processor's state: ended spans buffered per trace until their answer or local root ends.

Besides the buffers, it remembers what makes a span *late* (a child ending after the local root or answer it
belongs to: fire-and-forget work, which is never read and opens no buffer), the local roots running per trace
(so a request is known to be over), and evaluation results logged for spans not buffered yet. Everything is
bounded: ``max_traces`` buffers (the least recently active evicted first), ``ttl_s`` seconds without a new span,
``max_spans_per_trace`` spans each of answers still to come, and as many settled ones (ended around an answer
taken already, kept for an enclosing answer only when they carry something it reads); evictions that lose
something and unbuffered spans are counted in :attr:`TraceBuffers.counts`.

One lock guards it all (:attr:`TraceBuffers.lock`, shared with the counts); methods documented "lock held" expect
the caller to hold it. Local-root counts have a lock of their own, so a span starting on the application thread
never waits for a scoring worker holding the main one.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext

from .. import semconv
from ..signals.records import EventRecord, ended_span_attributes, ended_span_has_events
from .held_evaluations import Evaluations, by_span, split_evaluations
from .pipeline import ProcessorCounts

__all__ = ["TraceBuffers"]

# Ended local roots and marked answers remembered per trace (for work that outlives them): a bound for traces
# with very many answers.
_MAX_ANCHORS_PER_TRACE = 256
# Late work remembered (for work starting beneath it after it ended), per buffered trace allowed.
_MAX_LATE_FACTOR = 4
# Traces with evaluations held before any of their spans was buffered (see TraceBuffers._early).
_MAX_EARLY_TRACES = 1024


class _PendingTrace:
    """The ended spans of one trace whose local root has not ended yet."""

    __slots__ = ("answered", "closed", "created", "evaluations", "lost", "may_answer", "settled", "spans")

    def __init__(self, created: float) -> None:
        # When a span of the trace was last buffered: the TTL runs from there, so a long trace still producing
        # spans (an agent at work) is not evicted while active.
        self.created = created
        self.spans: list[ReadableSpan] = []
        # Evaluation results logged for spans of this trace (span id, event), read as events of those spans.
        self.evaluations: list[tuple[int, EventRecord]] = []
        # The parents of the marked answers taken from this buffer: a local root with one of them in its subtree
        # (itself included) answered already, and is no answer by rule (c); another local root of the trace is
        # not concerned. A mark moves up to the parent of an answer that takes it with its subtree, and of a span
        # that ends with it (so marks stay on running spans: bounded in a long trace of many answers).
        self.answered: set[int] = set()
        # True once a buffered span is a retrieval or a marked answer; None while some spans were buffered
        # without that screen (background scoring leaves it to the worker) and none passed it. Traces with
        # False (most traffic of a service that also answers questions) are released at their root without
        # any signal work.
        self.may_answer: bool | None = False
        # The running spans with a marked or declined answer taken from beneath them (moved up like the marks).
        # When one ends, its subtree is settled: no answer beneath it is still to come, so an enclosing answer
        # is all that can read it (see TraceBuffers._settle).
        self.closed: set[int] = set()
        # The ids of the settled spans among ``spans``: they have their own bound, so a long run of answers
        # under one root does not fill the buffer its later answers need for their retrievals.
        self.settled: set[int] = set()
        # Settled spans dropped past their bound, by the running span above them: counted as not buffered once
        # the answer that would have read them is scored (an agent's root that scores nothing lost nothing).
        self.lost: dict[int, int] = {}


class TraceBuffers:
    """The buffered spans, late-work anchors, running local roots and held evaluations of one processor."""

    def __init__(self, *, max_traces: int, max_spans_per_trace: int, ttl_s: float) -> None:
        self._max_pending_traces = max_traces
        self._max_spans_per_trace = max_spans_per_trace
        self._ttl_s = ttl_s
        self.lock = threading.Lock()
        # Insertion order is activity order, so the least recently active trace is always first: eviction is
        # O(1).
        self._pending: OrderedDict[int, _PendingTrace] = OrderedDict()
        # Evaluations logged in traces none of whose spans is buffered here (yet): kept apart from the span
        # buffers, so a judge logging for spans this processor never sees costs no buffer and no eviction.
        # A trace's entry moves into its buffer when one opens. Oldest first; bounded and aged like buffers.
        self._early: OrderedDict[int, tuple[float, list[tuple[int, EventRecord]]]] = OrderedDict()
        # Work that outlives what it belongs to. Per trace (most recent last, at most max_traces of them):
        # the local roots and (marked or declined) answers that ended (a child of one that ends after it is never
        # read, and opens no buffer): one span id, or a set of them for a trace with several (an int spares a set
        # per trace).
        self._ended: OrderedDict[int, int | set[int]] = OrderedDict()
        # The late work released beneath them, (trace id, span id), oldest first: what starts beneath it after it
        # ended is late too. Apart from the anchors, whose per-trace bound they would fill (a request logging
        # hundreds of calls after it ended), and needed only until their own late children come.
        self._late: OrderedDict[tuple[int, int], None] = OrderedDict()
        # The local roots of each trace: (running, started, ended) here. A request is over when one ended and
        # none runs; a trace not listed proves nothing (its root may have started before this processor saw it).
        # Changed under _roots_lock, not self.lock, which the scoring worker holds for long: a span starting on
        # the application thread never waits for scoring. Read under self.lock without it (one dict read).
        # Tuples of ints, which the garbage collector stops tracking: ten thousand lists would slow every
        # collection.
        self._roots: OrderedDict[int, tuple[int, int, int]] = OrderedDict()
        self._roots_lock = threading.Lock()
        #: The processor's counters, changed under :attr:`lock` only (here: evictions and unbuffered spans).
        self.counts = ProcessorCounts(lock=self.lock)

    def reset_after_fork(self) -> None:
        """In a forked child: new locks, nothing held, nothing counted. A thread of the parent (the scoring
        worker, one ending spans) may have held a lock at the fork; the traces buffered then are the parent's,
        whose spans end there, and so are the counts: the child reports its own work."""
        self.lock = threading.Lock()
        self._roots_lock = threading.Lock()
        self.counts.reset_after_fork(self.lock)
        self._pending.clear()
        self._early.clear()
        self._ended.clear()
        self._late.clear()
        self._roots.clear()

    def clear(self) -> None:
        """Drop every buffer and held evaluation (the processor shuts down)."""
        with self.lock:
            self._pending.clear()
            self._early.clear()

    def root_started(self, trace_id: int) -> None:
        """Count a local root of ``trace_id`` that started here."""
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

    def pending_traces(self) -> int:
        """Traces with spans buffered now, after letting those past their TTL go; lock held."""
        self._evict(time.monotonic(), making_room=False)
        return len(self._pending)

    def add_evaluation(self, trace_id: int, span_id: int, event: EventRecord, *, trace_open: bool) -> bool:
        """See :meth:`ConfidenceSpanProcessor.add_evaluation <rag_confidence.otel.ConfidenceSpanProcessor.
        add_evaluation>`: held in the trace's buffer, else (``trace_open``) apart until one opens."""
        with self.lock:
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
        with self.lock:
            pending = self._pending.get(trace_id)
            early = self._early.get(trace_id)
            held = [*(pending.evaluations if pending is not None else ()), *(early[1] if early else ())]
        return by_span(held)

    def pending_spans_under(self, span_context: SpanContext) -> list[ReadableSpan] | None:
        """The buffered (ended) spans beneath ``span_context``; None when its trace is not pending here.

        ``@scored_answer`` reads these to score its answer before the answer span ends.
        """
        with self.lock:
            pending = self._pending.get(span_context.trace_id)
            spans = list(pending.spans) if pending is not None else None
        if spans is None:
            return None
        return _subtree(spans, span_context.span_id)

    def buffer(self, trace_id: int, span: ReadableSpan, may_answer: bool | None) -> None:
        """Hold ``span`` until its answer or local root ends; ``may_answer`` None: not screened yet."""
        with self.lock:
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
            if pending.answered:
                _move_mark_up(pending.answered, span)
            if pending.closed and self._settle_ended(pending, span, may_answer):
                return
            if len(pending.spans) - len(pending.settled) < self._max_spans_per_trace:
                pending.spans.append(span)
                if may_answer or pending.may_answer is False:
                    pending.may_answer = may_answer
            else:
                self.counts.spans_unbuffered += 1

    def _settle_ended(self, pending: _PendingTrace, span: ReadableSpan, may_answer: bool | None) -> bool:
        """Settle the subtree of ``span``, which ended around an answer taken already; False when it did not.
        Lock held."""
        context, parent = span.context, span.parent
        if context is None or context.span_id not in pending.closed:
            return False
        pending.closed.discard(context.span_id)
        if parent is not None:
            pending.closed.add(parent.span_id)
        if self._settle(pending, span, buffered=False) and (may_answer or pending.may_answer is False):
            pending.may_answer = may_answer
        return True

    def _settle(self, pending: _PendingTrace, top: ReadableSpan, *, buffered: bool) -> bool:
        """``top`` ended with every answer beneath it taken: what is left of its subtree is read by an enclosing
        answer only, if there is one. Keep, as settled spans, those that may give such an answer something
        (an attribute in :data:`~rag_confidence.semconv.SIGNAL_NAMESPACES`, an event, a link, a held
        evaluation) and the spans between them and ``top``; let the others go: they would give it nothing,
        and nothing else reads them. ``buffered``: ``top`` is in the buffer already (with background scoring,
        its answer was taken after it ended). When the settled spans would pass their bound, the whole subtree
        goes (its own spans were kept; an enclosing answer that large reads its first spans only, as any answer
        does), counted as not buffered if that answer is scored (see :attr:`_PendingTrace.lost`). Returns
        whether ``top`` is kept. Lock held."""
        context = top.context
        if context is None:
            return False
        top_id = context.span_id
        if buffered:
            _remove(pending, [top])
        settled = pending.settled
        beneath = _subtree(pending.spans, top_id) if pending.spans else []
        evaluated = {span_id for span_id, _ in pending.evaluations} if pending.evaluations else set()
        parents: dict[int, int] = {}
        for span in beneath:
            if span.context is not None and span.parent is not None:
                parents[span.context.span_id] = span.parent.span_id
        kept: set[int] = set()
        for span in (*beneath, top):
            span_context = span.context
            if span_context is None:
                continue
            span_id: int | None = span_context.span_id
            if span_id in settled or not _inert(span, evaluated):
                while span_id is not None and span_id not in kept:
                    kept.add(span_id)
                    span_id = None if span_id == top_id else parents.get(span_id)
        parent = top.parent
        above = parent.span_id if parent is not None else None
        added = len(kept) - len(kept & settled)
        lost = 0
        if added and len(settled) + added > self._max_spans_per_trace:
            lost = len(kept)
            kept.clear()
        if pending.lost:  # what was lost beneath the spans that ended now is lost beneath their parent
            for span_id in pending.lost.keys() & {top_id, *parents}:
                lost += pending.lost.pop(span_id)
        if lost and above is not None:
            pending.lost[above] = pending.lost.get(above, 0) + lost
        _remove(pending, [span for span in beneath if _span_id(span) not in kept])
        if top_id in kept:
            settled.update(kept)
            pending.spans.append(top)
            return True
        return False

    def _late_child_released(
        self, trace_id: int, span: ReadableSpan, pending: _PendingTrace | None, ended: int | set[int]
    ) -> bool:
        """True when ``span`` is a child of a local root or marked answer that ended before it (fire-and-forget
        work): nothing reads it (only spans that end before their answer count), so it is not buffered, and
        what its subtree buffered is released; the buffer goes too once it is empty and no local root of the
        trace is running. Deeper spans of such work are buffered as usual (a marked answer in it is still
        scored with them) until the top span of the work ends; a span starting beneath it after it ended is late
        work too (LiteLLM's callback ends its ``litellm_request`` span, then opens a child of it), and is released
        the same way. Lock held."""
        parent = span.parent
        context = span.context
        if parent is None or context is None:
            return False
        if (parent.span_id != ended if isinstance(ended, int) else parent.span_id not in ended) and (
            trace_id,
            parent.span_id,
        ) not in self._late:
            return False
        late = self._late
        late[(trace_id, context.span_id)] = None
        if len(late) > _MAX_LATE_FACTOR * self._max_pending_traces:
            late.popitem(last=False)
        if pending is not None:
            members = _subtree(pending.spans, context.span_id) if pending.spans else []
            _remove(pending, members)
            if pending.closed:
                pending.closed.difference_update(_span_ids(members))
                pending.closed.discard(context.span_id)
            if pending.answered:  # marks of answers in this work: no root will come for them
                pending.answered.difference_update(_span_ids(members))
                pending.answered.discard(context.span_id)
            if not pending.spans and not pending.answered and self.request_over(trace_id):
                self._release(trace_id, pending)
        return True

    def _release(self, trace_id: int, pending: _PendingTrace) -> None:
        """Drop the buffer of ``trace_id``, keeping the evaluations held for spans still to end; lock held."""
        del self._pending[trace_id]
        self._keep_early(trace_id, pending.evaluations)

    def request_over(self, trace_id: int) -> bool:
        """Whether a local root of ``trace_id`` ended here and none is running; lock held."""
        entry = self._roots.get(trace_id)
        return entry is not None and entry[2] > 0 and entry[0] <= 0

    def anchor_ended(self, trace_id: int, span_id: int) -> None:
        """Note that a local root or a marked or declined answer ended; lock held."""
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

    def root_ended(self, trace_id: int) -> None:
        """Count a local root of ``trace_id`` that ended here (under the roots' own lock)."""
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
        counts = self.counts
        while pending:
            oldest = next(iter(pending.values()))
            # A buffer holding no span and no evaluation loses nothing scorable: only the marks of answers
            # scored already, left by an answer whose parent never ends here (a request span of a tracer
            # provider without this processor). Dropped all the same, but no eviction to alarm anyone.
            lost = bool(oldest.spans or oldest.evaluations)
            if oldest.created <= deadline:
                counts.evicted_max_age += lost
            elif making_room and len(pending) >= self._max_pending_traces:
                counts.evicted_max_traces += lost
            else:
                break
            pending.popitem(last=False)
        if not making_room:
            self._evict_early(now, making_room=False)

    def take(
        self,
        trace_id: int,
        span_id: int,
        *,
        local_root: bool,
        orphan: bool = False,
        parent_span_id: int | None = None,
        answers_itself: bool = True,
    ) -> tuple[list[ReadableSpan], bool, bool | None, Evaluations, int]:
        """Remove and return the buffered spans beneath ``span_id``, whether an answer of this trace was scored
        before, whether the trace buffered a retrieval or marked answer (None: spans were buffered without
        that screen), the evaluations held for those spans and the answer, and how many settled spans beneath
        it were dropped past their bound (to count if it is scored). A local root releases its
        trace; a nested answer leaves a mark that it was answered. A nested declined answer
        (``answers_itself`` False) passes on only the marks of answers beneath it."""
        with self.lock:
            pending = self._pending.get(trace_id)
            # An orphan (a marked answer in work that outlived its request) needs no buffer: no root will read
            # its mark, and nothing would release it.
            if pending is None:
                if local_root or orphan:
                    # Nothing of this trace ended beneath it.
                    early = self._early.pop(trace_id, None)
                    if early is None:
                        return [], False, False, {}, 0
                    mine, others = split_evaluations(early[1], {span_id})
                    self._keep_early(trace_id, others)
                    return [], False, False, by_span(mine), 0
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
                return pending.spans, False, False, by_span(mine), sum(pending.lost.values())
            members = _subtree(pending.spans, span_id) if pending.spans else []
            beneath = _span_ids(members)
            beneath.add(span_id)
            answered = False
            if pending.closed:
                pending.closed.difference_update(beneath)
            lost = 0
            if pending.lost:
                for lost_under in pending.lost.keys() & beneath:
                    lost += pending.lost.pop(lost_under)
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
            if not local_root and not orphan and parent_span_id is not None:
                running, ended = _still_running_above(pending.spans, parent_span_id)
                if answers_itself or answered:
                    marks.add(running)
                pending.closed.add(running)
                if ended is not None:  # taken after the spans around it ended: settle them now
                    self._settle(pending, ended, buffered=True)
            # What is left (spans or marks) belongs to another local root of the same trace (two requests of one
            # remote trace served here at once): it keeps the buffer until that root ends or the TTL passes.
            if (local_root or orphan) and not pending.spans and not marks:
                self._release(trace_id, pending)
            return members, answered, pending.may_answer, evaluations, lost


def _move_mark_up(marks: set[int], span: ReadableSpan) -> None:
    """``span`` ended with an answer beneath it: its parent now has one beneath it. Every root or answer above
    the span is above its parent too (a local root ends through :meth:`TraceBuffers.take`, never here), so
    marks stay on spans still running: one per item of a long run, not one per item ever run."""
    context, parent = span.context, span.parent
    if context is not None and parent is not None and context.span_id in marks:
        marks.discard(context.span_id)
        marks.add(parent.span_id)


def _still_running_above(spans: list[ReadableSpan], span_id: int) -> tuple[int, ReadableSpan | None]:
    """``span_id``, or, when that span ended already (buffered in ``spans``; with background scoring an answer
    is taken after its parent may have ended), its nearest ancestor that is not buffered: where the mark would
    have moved up to (see :func:`_move_mark_up`); and the highest ended span passed on the way, if any."""
    if not spans:
        return span_id, None
    by_id = {
        span.context.span_id: span for span in spans if span.context is not None and span.parent is not None
    }
    seen: set[int] = set()
    ended: ReadableSpan | None = None
    while span_id in by_id and span_id not in seen:
        seen.add(span_id)
        ended = by_id[span_id]
        parent = ended.parent
        assert parent is not None  # only spans with a parent are listed
        span_id = parent.span_id
    return span_id, ended


def _span_ids(spans: list[ReadableSpan]) -> set[int]:
    return {span.context.span_id for span in spans if span.context is not None}


def _span_id(span: ReadableSpan) -> int | None:
    context = span.context
    return context.span_id if context is not None else None


def _inert(span: ReadableSpan, evaluated: set[int]) -> bool:
    """Whether ``span`` gives an answer it belongs to nothing but its place in the tree: no event, no link, no
    evaluation held for it, no attribute in a namespace signal extraction reads."""
    if ended_span_has_events(span) or span.links:
        return False
    context = span.context
    if context is not None and context.span_id in evaluated:
        return False
    namespaces = semconv.SIGNAL_NAMESPACES
    return not any(key.partition(".")[0] in namespaces for key in ended_span_attributes(span))


def _remove(pending: _PendingTrace, members: list[ReadableSpan]) -> None:
    """Take ``members`` (spans of ``pending``, in buffer order) out of its buffer."""
    if len(members) == len(pending.spans):
        pending.spans = []
        pending.settled.clear()
    elif members:
        taken = {id(member) for member in members}
        pending.spans = [kept for kept in pending.spans if id(kept) not in taken]
        if pending.settled:
            pending.settled.difference_update(_span_ids(members))


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
