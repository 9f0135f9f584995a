"""One decoded request in, the same request enriched out: spans grouped by trace, answers scored in place.

The rules are the in-process ones: :func:`rag_confidence.signals.find_answers` picks the answer spans and
:class:`rag_confidence.otel.answer_scoring.AnswerScorer` extracts signals, scores and maps the scorecard to
attributes. Only the view differs (protobuf spans through :func:`~rag_confidence.gateway.spans.to_record`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ScopeSpans
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

from .. import semconv
from ..otel.answer_scoring import AnswerScorer
from ..scoring.models import ConfidenceScorecard
from ..signals.answers import find_answers
from ..signals.records import SpanRecord
from .assembly import AssemblyWindow, Part
from .config import DEFAULT_MAX_ANSWERS_PER_REQUEST
from .screen import Screen
from .spans import parent_is_local, set_attributes, to_record

_logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ScoredSpan:
    """A scorecard written onto a span; its metrics are recorded once the request is delivered."""

    trace_id: int
    span_id: int
    scorecard: ConfidenceScorecard
    duration_s: float


@dataclass(slots=True)
class Prepared:
    """A request ready to forward: spans with invalid ids removed, answer spans enriched."""

    request: ExportTraceServiceRequest
    received: int = 0
    rejected: int = 0
    scored: list[ScoredSpan] = field(default_factory=list)
    failed_answers: int = 0
    already_scored: int = 0
    over_limit: int = 0  # answers past the per-request limit, forwarded unscored
    payload_size: int = 0  # of the decoded body, for the size check after scoring

    @property
    def forwarded(self) -> int:
        return self.received - self.rejected

    @property
    def rejection_message(self) -> str:
        if not self.rejected:
            return ""
        return (
            f"{self.rejected} span(s) rejected: trace_id must be 16 bytes and span_id 8 bytes, neither all "
            "zero; parent_span_id empty or 8 bytes"
        )


class TracePipeline:
    """Validates, groups and scores the spans of decoded requests; thread-safe.

    ``scorer`` None forwards without scoring (the benchmark's pass-through and the ``--no-scoring`` switch).
    At most ``max_answers`` answers of a request are scored; the others are forwarded unscored and counted.
    """

    def __init__(
        self,
        scorer: AnswerScorer | None,
        window: AssemblyWindow[bytes] | None = None,
        max_answers: int = DEFAULT_MAX_ANSWERS_PER_REQUEST,
    ) -> None:
        self._scorer = scorer
        self._window = window
        self._max_answers = max_answers

    def prepare(self, request: ExportTraceServiceRequest, payload: bytes | None = None) -> Prepared:
        """Validate, group and score ``request`` in place; ``payload`` is its body when it came as protobuf
        (it lets the screen skip fields no span can pass on, see :mod:`.screen`)."""
        prepared = Prepared(request)
        scorer = self._scorer
        window = self._window if scorer is not None else None
        # A trace with no retrieval and no marked answer holds no answer and needs no records at all. Without the
        # window a request is all the gateway sees of a trace; with it, such a trace is remembered (encoded) in
        # case a later request brings its retrieval.
        screen = Screen(payload) if scorer is not None else None
        # Every valid span with its trace id (read once: each read of a bytes field copies it out), and where
        # each scope's spans lie among them.
        kept: list[ProtoSpan] = []
        trace_ids: list[bytes] = []
        scopes: list[tuple[ScopeSpans, int, int]] = []
        roots: set[bytes] | None = set() if window is not None else None
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                spans = scope_spans.spans
                if not spans:
                    continue
                first = len(kept)
                invalid = _keep_valid(spans[:], kept, trace_ids, roots)  # a slice copies the items out in C
                prepared.received += len(spans)
                if invalid:
                    _drop(spans, invalid, kept, first)
                    prepared.rejected += len(invalid)
                if len(kept) > first:
                    scopes.append((scope_spans, first, len(kept)))
        if scorer is None or screen is None or not kept:
            return prepared
        answering = screen.answering_traces(
            scopes, kept, trace_ids, by_scope=payload is None or len(scopes) > 1
        )
        if window is not None and roots is not None:
            self._score_with_window(scorer, window, kept, trace_ids, roots, answering, prepared)
        elif answering:
            # One pass over all answering traces: find_answers keys spans by (trace, span) id.
            spans = [span for span, trace_id in zip(kept, trace_ids, strict=True) if trace_id in answering]
            self._score_spans(scorer, spans, prepared)
        return prepared

    def _score_with_window(
        self,
        scorer: AnswerScorer,
        window: AssemblyWindow[bytes],
        kept: list[ProtoSpan],
        trace_ids: list[bytes],
        roots: set[bytes],
        answering: set[bytes],
        prepared: Prepared,
    ) -> None:
        """Score each trace of the request with its spans from earlier requests, once any of them may answer.

        ``roots``: the traces with a span without any parent here."""
        traces: dict[bytes, _Trace] = {}
        trace: _Trace | None = None
        for index in range(len(kept)):
            trace_id = trace_ids[index]
            # A trace's spans often lie together (a scope's spans in the order they ended): a comparison of 16
            # bytes spares hashing them.
            if trace is None or trace_id != trace.trace_id:
                trace = traces.get(trace_id)
                if trace is None:
                    trace = traces[trace_id] = _Trace(trace_id)
            span = kept[index]
            trace.spans.append(span)
            # Kept encoded: the copy is its size, and a trace that never holds a retrieval (most traffic)
            # never costs records.
            item = span.SerializeToString()
            trace.items.append(item)
            trace.size += len(item)
        grouped = list(traces.values())
        # Only a root without any parent completes a trace: a local root with a remote parent may be one of
        # several in it (another service's, a second call's).
        parts: list[Part[bytes]] = [
            (trace.trace_id, trace.items, trace.size, trace.trace_id in answering, trace.trace_id in roots)
            for trace in grouped
        ]
        assembled_traces = window.assemble_all(parts)
        for index in range(len(grouped)):
            assembled, may_answer = assembled_traces[index]
            if not may_answer:
                continue
            trace = grouped[index]
            items = trace.items
            earlier = assembled[: len(assembled) - len(items)]
            if earlier:  # a retried request finds its own spans kept: read them once
                current = set(items)
                earlier = [item for item in earlier if item not in current]
            self._score_spans(
                scorer,
                trace.spans,
                prepared,
                earlier=[to_record(ProtoSpan.FromString(item)) for item in earlier],
                wait_for_parents=True,
            )

    def _score_spans(
        self,
        scorer: AnswerScorer,
        spans: Sequence[ProtoSpan],
        prepared: Prepared,
        earlier: Sequence[SpanRecord] = (),
        *,
        wait_for_parents: bool = False,
    ) -> None:
        """Find and score the answers among ``spans`` (with ``earlier`` spans of their trace as context) and
        enrich their protobuf spans in place. ``wait_for_parents`` (the window): a span that is a local root
        only because its parent is missing, while its flags say that parent is in the same process, is left
        for a later request, which brings the parent and scores the whole answer once."""
        records = [to_record(span) for span in spans]
        groups = find_answers([*earlier, *records] if earlier else records)
        if not groups:
            return
        known = (
            {(record.trace_id, record.span_id) for record in (*earlier, *records)}
            if wait_for_parents
            else None
        )
        here: dict[tuple[int, int], tuple[ProtoSpan, SpanRecord]] = {}
        for span, record in zip(spans, records, strict=True):
            here.setdefault((record.trace_id, record.span_id), (span, record))
        for group in groups:
            found = here.get((group.answer.trace_id, group.answer.span_id))
            if found is None:  # the answer span was forwarded with an earlier request
                continue
            proto_span, record = found
            if (
                known is not None
                and group.rule == "root"
                and record.parent_span_id is not None
                and (record.trace_id, record.parent_span_id) not in known
                and parent_is_local(proto_span)
            ):
                # Scoring it now would give its trace a second, partial answer when the root arrives (a
                # retriever exported one batch before its root).
                continue
            if semconv.RAG_CONFIDENCE_TOTAL in record.attributes:  # scored in-process or by another gateway
                prepared.already_scored += 1
                continue
            if len(prepared.scored) + prepared.failed_answers >= self._max_answers:
                prepared.over_limit += 1
                continue
            try:
                result = scorer.score(group.spans)
                set_attributes(proto_span, result.attributes)
            except Exception as error:  # bad span data must never cost the spans: forward them unscored
                # The type name only: messages may quote span content.
                _logger.debug("scoring an answer failed: %s", type(error).__name__)
                set_attributes(proto_span, {semconv.RAG_CONFIDENCE_ERROR: type(error).__name__})
                prepared.failed_answers += 1
                continue
            prepared.scored.append(
                ScoredSpan(record.trace_id, record.span_id, result.scorecard, result.duration_s)
            )


class _Trace:
    """The valid spans of one trace in a request, with their encodings and the bytes those take."""

    __slots__ = ("items", "size", "spans", "trace_id")

    def __init__(self, trace_id: bytes) -> None:
        self.trace_id = trace_id
        self.spans: list[ProtoSpan] = []
        self.items: list[bytes] = []
        self.size = 0


_ZERO_TRACE_ID = bytes(16)
_ZERO_SPAN_ID = bytes(8)


# Deleting a run of invalid spans shifts every span behind it once; copying the valid spans back costs far more
# per span (each is a message copy). So runs are deleted, unless their shifts would outweigh the copies: a
# million invalid spans scattered among 65,000 valid ones cost 12 s of CPU deleted one by one.
_SHIFTS_PER_COPY = 1000


def _drop(spans: Any, invalid: list[int], kept: list[ProtoSpan], first: int) -> None:
    """Remove the spans at ``invalid`` (ascending) from the repeated field ``spans``; ``kept[first:]`` are its
    valid spans, in order, and keep pointing at the spans the request holds (they are scored and enriched in
    place)."""
    runs: list[tuple[int, int]] = []
    for index in invalid:
        if runs and runs[-1][1] == index:
            runs[-1] = (runs[-1][0], index + 1)
        else:
            runs.append((index, index + 1))
    total = len(spans)
    shifts = sum(total - end for _, end in runs)
    valid = len(kept) - first
    if shifts <= _SHIFTS_PER_COPY * max(valid, 1):
        for start, end in reversed(runs):
            del spans[start:end]
        return
    survivors = kept[first:]
    del spans[:]
    spans.extend(survivors)  # copies them into the field: point kept at the copies
    kept[first:] = spans[:]


def _keep_valid(
    spans: list[ProtoSpan], kept: list[ProtoSpan], trace_ids: list[bytes], roots: set[bytes] | None = None
) -> list[int]:
    """Append the spans with valid OTLP ids and their trace ids to ``kept`` and ``trace_ids``; return the
    positions of the others, in order. Valid: a 16-byte trace id and an 8-byte span id, neither all zero, and
    a parent span id empty or 8 bytes long. ``roots`` (unless None) gets the trace ids of the valid spans
    without any parent (an all-zero parent id reads as none, as in :func:`.spans.to_record`)."""
    # Runs for every span the gateway receives: each field is read once.
    invalid: list[int] = []
    for index, span in enumerate(spans):
        # Typed, so the compiled build compares and measures them as bytes (untyped protobuf fields are Any).
        trace_id: bytes = span.trace_id
        span_id: bytes = span.span_id
        if (
            len(trace_id) == 16
            and len(span_id) == 8
            and trace_id != _ZERO_TRACE_ID
            and span_id != _ZERO_SPAN_ID
        ):
            parent: bytes = span.parent_span_id
            size = len(parent)
            if size == 8 or not size:
                kept.append(span)
                trace_ids.append(trace_id)
                # A random parent id starting with a zero byte is rare: the first byte spares the comparison.
                if roots is not None and (not size or (parent[0] == 0 and parent == _ZERO_SPAN_ID)):
                    roots.add(trace_id)
                continue
        invalid.append(index)
    return invalid
