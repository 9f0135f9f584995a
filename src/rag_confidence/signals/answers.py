"""Which span is the answer, and which spans belong to it.

Rules, in order:

(a)/(b) a span with ``rag.answer = true`` is an answer. ``@scored_answer`` and ``mark_answer()`` both set it.
(c) otherwise, a *local root* (no parent, a remote parent, or a parent not among the spans given) whose
    subtree holds a retrieval span and no marked answer is an answer, unless the root is itself one step of
    a pipeline (a retriever, reranker, embedding or tool span) with no generation beneath it. Such a trace is
    that step run on its own (an agent loop invoking a retriever tool outside any span of the application),
    and its output is documents, not an answer. Wrap such loops in ``@scored_answer`` or a span of your own.
    A model call that retrieved by itself (OpenAI's hosted ``file_search``, :mod:`.hosted`; Gemini grounding,
    :mod:`.grounding`; a Bedrock Knowledge Base ``retrieve_and_generate``, :mod:`.bedrock`) is a retrieval and
    a generation at once: as a root, it is the answer.

A span with ``rag.answer = false`` declines: it is no answer, and neither is anything that only its subtree
would make one (``@scored_answer`` sets it on a call that raised, so a failed request is not scored by rule
(c) for the retrieval it made before failing).

A span that would be an answer by (b) or (c) but ended with status ERROR is a failed request, not an answer,
and is not scored either: an instrumented handler or chain that raised after its retrieval, a server span
answered 5xx. Only the answer span's own status counts (a failed child the request recovered from does not).

Every span belongs to the innermost answer (or declined span) above it, itself included; spans with no answer
above them belong to none. Two marked answers in one trace give two groups, and spans under a nested answer
belong to the nested one only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .. import semconv
from .bedrock import generates_answer
from .grounding import holds_grounding
from .haystack import haystack_step
from .hosted import holds_file_search
from .openllmetry import llamaindex_step
from .records import SpanRecord
from .vector_db import is_hit_event

AnswerRule = Literal["marked", "root"]

# The status code name SpanRecord carries for a span that failed (both the SDK's and OTLP's ERROR).
_FAILED = "ERROR"
_RETRIEVAL_KINDS = frozenset({semconv.OPENINFERENCE_KIND_RETRIEVER, semconv.OPENINFERENCE_KIND_RERANKER})
_RETRIEVAL_OPERATIONS = frozenset(
    {semconv.GEN_AI_OPERATION_RETRIEVAL, semconv.GEN_AI_OPERATION_VECTOR_DB_RETRIEVE}
)
# A root of one of these kinds (or a retrieval span) is a step of a pipeline run on its own, not an answer
# around one: a retriever or a tool an agent loop invoked outside any span of the application's.
_STEP_KINDS = frozenset({semconv.OPENINFERENCE_KIND_TOOL, semconv.OPENINFERENCE_KIND_EMBEDDING})
_STEP_OPERATIONS = frozenset({semconv.GEN_AI_OPERATION_EXECUTE_TOOL, semconv.GEN_AI_OPERATION_EMBEDDINGS})
# ... unless a generation lies beneath it.
_GENERATION_KINDS = frozenset({semconv.OPENINFERENCE_KIND_LLM})
_GENERATION_OPERATIONS = frozenset(
    {
        semconv.GEN_AI_OPERATION_CHAT,
        semconv.GEN_AI_OPERATION_TEXT_COMPLETION,
        semconv.GEN_AI_OPERATION_GENERATE_CONTENT,
        semconv.LITELLM_OPERATION_ACOMPLETION,
        semconv.LITELLM_OPERATION_ATEXT_COMPLETION,
        semconv.LITELLM_OPERATION_RESPONSES,
        semconv.LITELLM_OPERATION_ARESPONSES,
        semconv.LITELLM_OPERATION_ANTHROPIC_MESSAGES,
    }
)


@dataclass(frozen=True, slots=True)
class AnswerGroup:
    """One answer span and the spans that belong to it (``spans`` includes ``answer``, in input order)."""

    answer: SpanRecord
    spans: tuple[SpanRecord, ...]
    rule: AnswerRule

    @property
    def trace_id(self) -> int:
        return self.answer.trace_id

    @property
    def has_retrieval(self) -> bool:
        """True when a member span is a retrieval (a marked answer may have none, and then no candidates)."""
        return any(is_retrieval_span(span) for span in self.spans)


# Every attribute key the two span rules below read: a span with none of them (and no event) is neither a
# retrieval nor a marked answer, whatever its values. Callers that must decide for many spans cheaply (the
# gateway on plain traffic, the span processor) read just these keys and call :func:`may_hold_answer`.
# ``output.value`` is read of OpenInference LLM spans only: a Responses call that ran ``file_search``
# (:func:`.hosted.holds_file_search`) or a grounded Gemini call (:func:`.grounding.holds_grounding`) retrieved,
# and nothing else on the span says so.
ANSWER_HINT_KEYS: frozenset[str] = frozenset(
    {
        semconv.RAG_ANSWER,
        semconv.RAG_RETRIEVAL_METHOD,
        semconv.OPENINFERENCE_SPAN_KIND,
        semconv.GEN_AI_OPERATION_NAME,
        semconv.TRACELOOP_ENTITY_NAME,
        semconv.VECTOR_DB_QUERY_RESULT_MATCHES_LENGTH,
        semconv.CHROMA_QUERY_EMBEDDINGS_COUNT,
        semconv.CHROMA_QUERY_TEXTS_COUNT,
        semconv.HAYSTACK_COMPONENT_TYPE,
        semconv.OI_OUTPUT_VALUE,
    }
)
# The hint keys without which no span passes the rules: ``output.value`` is read only beside an OpenInference
# kind, so a screen that counts or tests keys to rule spans out needs only these (and reads the others of the
# spans that pass).
ANSWER_TRIGGER_KEYS: frozenset[str] = ANSWER_HINT_KEYS - {semconv.OI_OUTPUT_VALUE}
# Span events that make their span a retrieval (vector-DB instrumentors report one per result).
RESULT_EVENT_NAMES: frozenset[str] = frozenset({semconv.DB_QUERY_RESULT, semconv.DB_SEARCH_RESULT})

# The attribute keys the result event rule reads besides the names (see ``_reports_results``). None of them
# makes a span a retrieval on its own, so a screen that counts hint keys need not count these.
RESULT_EVENT_KEYS: frozenset[str] = frozenset({semconv.DB_SYSTEM})


def _reports_results(attributes: Mapping[str, Any], event_names: Iterable[Any]) -> bool:
    """True when one of the span's events is a retrieved document (:func:`.vector_db.is_hit_event`)."""
    for name in event_names:
        # The system is read only once a result event is found: most spans have no events at all.
        if (
            isinstance(name, str)
            and name in RESULT_EVENT_NAMES
            and is_hit_event(name, attributes.get(semconv.DB_SYSTEM))
        ):
            return True
    return False


def is_marked_answer(span: SpanRecord) -> bool:
    """True when the span carries ``rag.answer = true`` (the decorator and ``mark_answer()`` set it)."""
    return span.attributes.get(semconv.RAG_ANSWER) is True


def is_retrieval_span(span: SpanRecord) -> bool:
    """True for a span that reports retrieved documents under any convention we read.

    OpenInference ``RETRIEVER``/``RERANKER``; GenAI ``gen_ai.operation.name = retrieval``; OpenLLMetry
    ``vector_db_retrieve`` task spans, LlamaIndex retriever and reranker task spans (by class name, see
    :mod:`.openllmetry`), Haystack retriever and ranker component spans (by class name, see :mod:`.haystack`),
    vector-DB spans with ``db.query.result``/``db.search.result`` events or (OpenLLMetry JS)
    ``db.vector.query.result.matches_length``, OpenLLMetry Chroma query spans (``db.chroma.query.
    {embeddings,texts}_count``, with hits or none); any span with our ``rag.retrieval.method``; an OpenInference LLM
    span of an OpenAI Responses call that ran ``file_search`` (:mod:`.hosted`) or of a grounded Gemini call
    (:mod:`.grounding`), which is a generation too.
    """
    return _is_retrieval(span.attributes, [event.name for event in span.events] if span.events else ())


def may_hold_answer(attributes: Mapping[str, Any], event_names: Iterable[Any] = ()) -> bool:
    """True when a span with these attributes and event names is a retrieval or a marked answer, exactly as
    ``is_marked_answer(span) or is_retrieval_span(span)`` decide: such a span makes its trace worth scoring.

    Only the :data:`ANSWER_HINT_KEYS` of ``attributes`` are read, and the :data:`RESULT_EVENT_KEYS` when the
    span has result events, so a caller may pass just those (the gateway reads them out of protobuf spans
    without converting anything else). Without the latter a Milvus row lookup passes: the safe side, its trace
    is worked out and found to hold no answer. A trace none of whose spans passes holds no answer (see
    :func:`find_answers`) and can be forwarded without building records.

    >>> may_hold_answer({"http.route": "/items"})
    False
    >>> may_hold_answer({"openinference.span.kind": "RETRIEVER"}), may_hold_answer({}, ["db.query.result"])
    (True, True)
    """
    return attributes.get(semconv.RAG_ANSWER) is True or _is_retrieval(attributes, event_names)


def _is_retrieval(attributes: Mapping[str, Any], event_names: Iterable[Any]) -> bool:
    # Values can be anything a producer sent (lists included): compare strings only.
    kind = attributes.get(semconv.OPENINFERENCE_SPAN_KIND)
    if isinstance(kind, str) and kind in _RETRIEVAL_KINDS:
        return True
    operation = attributes.get(semconv.GEN_AI_OPERATION_NAME)
    if isinstance(operation, str) and operation in _RETRIEVAL_OPERATIONS:
        return True
    if semconv.RAG_RETRIEVAL_METHOD in attributes:
        return True
    # An OpenLLMetry JS vector-DB query (Pinecone, Qdrant): its hits are span attributes (see :mod:`.vector_db`).
    if semconv.VECTOR_DB_QUERY_RESULT_MATCHES_LENGTH in attributes:
        return True
    # An OpenLLMetry Chroma query: its hits are result events, and one that found nothing has none, so it is told
    # by the query's own attributes (see :func:`.vector_db.chroma_found_nothing`).
    if semconv.CHROMA_QUERY_EMBEDDINGS_COUNT in attributes or semconv.CHROMA_QUERY_TEXTS_COUNT in attributes:
        return True
    if llamaindex_step(attributes.get(semconv.TRACELOOP_ENTITY_NAME)) is not None:
        return True
    if haystack_step(attributes.get(semconv.HAYSTACK_COMPONENT_TYPE)) is not None:
        return True
    if kind == semconv.OPENINFERENCE_KIND_LLM and retrieved_in_call(attributes):
        return True
    return _reports_results(attributes, event_names)


def retrieved_in_call(attributes: Mapping[str, Any]) -> bool:
    """True for a model call that retrieved by itself (:mod:`.hosted`, :mod:`.grounding`): a retrieval and a
    generation at once. Reads ``openinference.span.kind`` and ``output.value`` only."""
    return holds_file_search(attributes) or holds_grounding(attributes)


def is_retrieval_step(span: SpanRecord) -> bool:
    """True for a retrieval span that is only that: its span feedback grades the retrieval. A model call that
    retrieved by itself (:mod:`.hosted`, :mod:`.grounding`), or a Bedrock ``retrieve_and_generate``
    (:mod:`.bedrock`), also made the answer, so feedback on it is about the answer."""
    return is_retrieval_span(span) and not retrieved_and_generated(span)


def retrieved_and_generated(span: SpanRecord) -> bool:
    """A retrieval span that is also the generation of an answer: a model call that retrieved by itself
    (:func:`retrieved_in_call`), a Bedrock ``retrieve_and_generate``."""
    return retrieved_in_call(span.attributes) or generates_answer(span)


def _of_kind(attributes: Mapping[str, Any], kinds: frozenset[str], operations: frozenset[str]) -> bool:
    """The span's OpenInference kind is one of ``kinds`` or its GenAI operation one of ``operations``."""
    # Values can be anything a producer sent (lists included): compare strings only.
    kind = attributes.get(semconv.OPENINFERENCE_SPAN_KIND)
    if isinstance(kind, str) and kind in kinds:
        return True
    operation = attributes.get(semconv.GEN_AI_OPERATION_NAME)
    return isinstance(operation, str) and operation in operations


def _is_generation(span: SpanRecord) -> bool:
    return _of_kind(span.attributes, _GENERATION_KINDS, _GENERATION_OPERATIONS)


def _is_step(span: SpanRecord) -> bool:
    """True for a retrieval, reranker, embedding or tool span: as a trace's root, no answer (see rule (c))."""
    attributes = span.attributes
    if _of_kind(attributes, _STEP_KINDS, _STEP_OPERATIONS):
        return True
    if attributes.get(semconv.TRACELOOP_SPAN_KIND) == semconv.TRACELOOP_KIND_TOOL:
        return True
    return is_retrieval_span(span)


def is_local_root(span: SpanRecord, span_ids: Iterable[int] | None = None) -> bool:
    """True for a span without a local parent: no parent, a remote parent, or (given ``span_ids``) a parent
    that is not among them."""
    if span.parent_span_id is None or span.parent_is_remote:
        return True
    if span_ids is None:
        return False
    return span.parent_span_id not in span_ids


def may_produce_answer(spans: Iterable[SpanRecord]) -> bool:
    """True when these spans (of one trace) hold a retrieval or a marked answer, so the trace needs scoring.

    A trace for which this is False when its local root ends can be released without scoring.
    """
    return any(is_marked_answer(span) or is_retrieval_span(span) for span in spans)


def find_answers(spans: Sequence[SpanRecord]) -> list[AnswerGroup]:
    """Split spans (one or more traces; ended spans in any order) into one group per answer.

    Pass whole local subtrees: a span whose parent is missing from ``spans`` counts as a local root. Groups
    come in the order their answer spans appear in ``spans``; never raises on span data (cycles included).

    >>> root = SpanRecord(trace_id=1, span_id=1, parent_span_id=None, name="rag")
    >>> retriever = SpanRecord(1, 2, 1, "retrieve", {"openinference.span.kind": "RETRIEVER"})
    >>> [(group.answer.name, len(group.spans), group.rule) for group in find_answers([retriever, root])]
    [('rag', 2, 'root')]
    """
    # Parents are looked up within a trace, so each trace is worked out on its own, keyed by span id.
    traces: dict[int, tuple[list[SpanRecord], list[int]]] = {}
    single: tuple[list[SpanRecord], list[int]] | None = None
    for position, span in enumerate(spans):
        if single is not None and span.trace_id == single[0][0].trace_id:
            listed = single
        else:
            found = traces.get(span.trace_id)
            if found is None:
                found = traces[span.trace_id] = ([], [])
            listed = single = found
        listed[0].append(span)
        listed[1].append(position)
    found_groups: list[tuple[int, AnswerGroup]] = []
    for trace_spans, positions in traces.values():
        _trace_answers(trace_spans, positions, found_groups)
    if len(found_groups) > 1:
        found_groups.sort(key=_first)
    return [group for _, group in found_groups]


def _first(item: tuple[int, AnswerGroup]) -> int:
    return item[0]


def _trace_answers(
    spans: list[SpanRecord], positions: list[int], groups: list[tuple[int, AnswerGroup]]
) -> None:
    """The answers among the spans of one trace (``positions``: their places in the input), with the input
    position of each answer span."""
    by_id: dict[int, SpanRecord] = {}
    for span in spans:
        if span.span_id not in by_id:
            by_id[span.span_id] = span

    # Owner of each span: the innermost marked answer or declined span on its ancestor path (itself
    # included), else its root.
    owner: dict[int, tuple[SpanRecord, bool]] = {}
    seen: set[int] = set()  # reused by every _resolve call
    members: dict[int, list[SpanRecord]] = {}
    answers: dict[int, tuple[SpanRecord, AnswerRule]] = {}
    root_has_marked: set[int] = set()
    roots: dict[int, int] = {}  # marked answer's span id -> the root its trace's rule (c) would score
    root_has_retrieval: set[int] = set()
    root_has_generation: set[int] = set()
    for span in by_id.values():
        answer, marked = _resolve(span, by_id, owner, seen)
        answer_id = answer.span_id
        listed = members.get(answer_id)
        if listed is None:
            members[answer_id] = [span]
        else:
            listed.append(span)
        if marked:
            if is_marked_answer(answer):  # else declined: its subtree makes no answer at all
                if answer.status_code != _FAILED:
                    answers[answer_id] = (answer, "marked")
                root_has_marked.add(_root_id(answer, by_id, owner, seen, roots))
        elif is_retrieval_span(span):
            root_has_retrieval.add(answer_id)
            if retrieved_and_generated(span):  # it generated too: as a root or under a tool root, it answers
                root_has_generation.add(answer_id)
        elif _is_generation(span):
            root_has_generation.add(answer_id)

    for root_id in root_has_retrieval - root_has_marked:
        root = by_id[root_id]
        # A step root with a generation beneath it answers all the same (a query-engine tool called from an
        # untraced agent loop): only a bare retrieval or tool call is no answer.
        if (
            root_id not in answers
            and root.status_code != _FAILED
            and (root_id in root_has_generation or not _is_step(root))
        ):
            answers[root_id] = (root, "root")
    if not answers:
        return

    # Input position of each span (of its last copy, for a span listed twice).
    order: dict[int, int] = {}
    for index, span in enumerate(spans):
        order[span.span_id] = positions[index]
    # Members were gathered in first-appearance order, which is input order unless a span is listed twice.
    distinct = len(by_id) == len(spans)
    for span_id, (answer, rule) in answers.items():
        belonging = members.get(span_id)
        if belonging is None:
            belonging = [answer]
        elif not distinct:
            belonging = _in_input_order(belonging, order)
        groups.append((order[span_id], AnswerGroup(answer=answer, spans=tuple(belonging), rule=rule)))


def _in_input_order(spans: list[SpanRecord], order: dict[int, int]) -> list[SpanRecord]:
    ranked = [(order[span.span_id], position) for position, span in enumerate(spans)]
    ranked.sort()
    return [spans[position] for _, position in ranked]


def _parent_of(span: SpanRecord, by_id: dict[int, SpanRecord]) -> SpanRecord | None:
    parent_span_id = span.parent_span_id
    if parent_span_id is None or span.parent_is_remote:
        return None
    parent = by_id.get(parent_span_id)
    return None if parent is None or parent is span else parent


def _resolve(
    span: SpanRecord,
    by_id: dict[int, SpanRecord],
    owner: dict[int, tuple[SpanRecord, bool]],
    seen: set[int],
) -> tuple[SpanRecord, bool]:
    path: list[int] = []
    last: SpanRecord | None = None
    seen.clear()
    current: SpanRecord | None = span
    found: tuple[SpanRecord, bool] | None = None
    while current is not None:
        span_id = current.span_id
        known = owner.get(span_id)
        if known is not None:
            found = known
            break
        if span_id in seen:  # a cycle in broken data: treat the repeated span as a root
            break
        seen.add(span_id)
        path.append(span_id)
        last = current
        claim = current.attributes.get(semconv.RAG_ANSWER)
        if claim is True or claim is False:  # a marked answer, or a declined one (claims its subtree too)
            found = (current, True)
            break
        current = _parent_of(current, by_id)
    if found is None:
        found = (last, False) if last is not None else (span, False)
    # The path runs from the span up to (and including) its owner, so every span on it shares that owner.
    for span_id in path:
        owner[span_id] = found
    return found


def _root_id(
    answer: SpanRecord,
    by_id: dict[int, SpanRecord],
    owner: dict[int, tuple[SpanRecord, bool]],
    seen: set[int],
    roots: dict[int, int],
) -> int:
    """The root above a marked answer, as rule (c) sees it: the owner :func:`_resolve` gives the first span above
    it that no marked or declined span owns. That is the root the retrievals of its trace are counted for, also
    in broken data (cycles). Each answer on the way up is remembered in ``roots``, so a chain of many marked
    answers (an agent's steps, or a request built to be slow) is walked once, not once per answer."""
    path: list[int] = []
    climbed: set[int] = set()
    current = answer
    while True:
        known = roots.get(current.span_id)
        if known is not None:
            root = known
            break
        path.append(current.span_id)
        climbed.add(current.span_id)
        parent = _parent_of(current, by_id)
        if parent is None:
            root = current.span_id
            break
        above, claimed = _resolve(parent, by_id, owner, seen)
        if not claimed or above.span_id in climbed:  # the root; or a cycle of marked spans, which has none
            root = above.span_id
            break
        current = above  # another marked (or declined) span: its root is this answer's too
    for span_id in path:
        roots[span_id] = root
    return root
