"""Which span is the answer: marked spans, local roots holding a retrieval, nesting, several per trace."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, Tracer

from rag_confidence import semconv
from rag_confidence.signals import (
    SpanRecord,
    find_answers,
    is_local_root,
    is_marked_answer,
    is_retrieval_span,
    may_produce_answer,
    records_from_readable_spans,
)

RETRIEVER = {semconv.OPENINFERENCE_SPAN_KIND: semconv.OPENINFERENCE_KIND_RETRIEVER}
MARKED = {semconv.RAG_ANSWER: True}


def records(exporter: InMemorySpanExporter) -> list[SpanRecord]:
    return records_from_readable_spans(exporter.get_finished_spans())


def names(spans: tuple[SpanRecord, ...]) -> set[str]:
    return {span.name for span in spans}


def test_root_with_retrieval_is_the_answer(traced: tuple[Tracer, InMemorySpanExporter]) -> None:
    tracer, exporter = traced
    with tracer.start_as_current_span("pipeline"):
        with tracer.start_as_current_span("retrieve", attributes=RETRIEVER):
            pass
        with tracer.start_as_current_span("llm"):
            pass
    (group,) = find_answers(records(exporter))
    assert (group.answer.name, group.rule) == ("pipeline", "root")
    assert names(group.spans) == {"pipeline", "retrieve", "llm"}
    assert group.has_retrieval


def test_trace_without_retrieval_or_mark_has_no_answer(traced: tuple[Tracer, InMemorySpanExporter]) -> None:
    tracer, exporter = traced
    with tracer.start_as_current_span("http"), tracer.start_as_current_span("llm"):
        pass
    spans = records(exporter)
    assert find_answers(spans) == []
    assert not may_produce_answer(spans)


def test_two_marked_answers_in_one_trace(traced: tuple[Tracer, InMemorySpanExporter]) -> None:
    """An agent answering twice: one group each, and the agent root is no third answer."""
    tracer, exporter = traced
    with tracer.start_as_current_span("agent"):
        for turn in ("first", "second"):
            with (
                tracer.start_as_current_span(f"answer {turn}", attributes=MARKED),
                tracer.start_as_current_span(f"retrieve {turn}", attributes=RETRIEVER),
            ):
                pass
        with tracer.start_as_current_span("retrieve stray", attributes=RETRIEVER):
            pass
    groups = find_answers(records(exporter))
    assert [(group.answer.name, group.rule) for group in groups] == [
        ("answer first", "marked"),
        ("answer second", "marked"),
    ]
    assert names(groups[0].spans) == {"answer first", "retrieve first"}
    assert names(groups[1].spans) == {"answer second", "retrieve second"}


def test_nested_answer_owns_its_subtree(traced: tuple[Tracer, InMemorySpanExporter]) -> None:
    tracer, exporter = traced
    with tracer.start_as_current_span("outer", attributes=MARKED):
        with tracer.start_as_current_span("outer retrieve", attributes=RETRIEVER):
            pass
        with (
            tracer.start_as_current_span("tool"),
            tracer.start_as_current_span("inner", attributes=MARKED),
            tracer.start_as_current_span("inner retrieve", attributes=RETRIEVER),
        ):
            pass
    groups = {group.answer.name: group for group in find_answers(records(exporter))}
    assert names(groups["outer"].spans) == {"outer", "outer retrieve", "tool"}
    assert names(groups["inner"].spans) == {"inner", "inner retrieve"}


def test_marked_answer_without_retrieval_is_still_an_answer(
    traced: tuple[Tracer, InMemorySpanExporter],
) -> None:
    tracer, exporter = traced
    with tracer.start_as_current_span("answer", attributes=MARKED):
        pass
    (group,) = find_answers(records(exporter))
    assert group.rule == "marked" and not group.has_retrieval


def test_remote_parent_makes_a_local_root(traced: tuple[Tracer, InMemorySpanExporter]) -> None:
    tracer, exporter = traced
    remote = SpanContext(
        trace_id=0x1234, span_id=0x99, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED)
    )
    with (
        tracer.start_as_current_span(
            "service b", context=trace.set_span_in_context(NonRecordingSpan(remote))
        ),
        tracer.start_as_current_span("retrieve", attributes=RETRIEVER),
    ):
        pass
    spans = records(exporter)
    root = next(span for span in spans if span.name == "service b")
    assert root.parent_span_id == 0x99 and root.parent_is_remote and is_local_root(root)
    (group,) = find_answers(spans)
    assert group.answer.name == "service b"


def test_orphans_count_as_local_roots_and_cycles_do_not_hang() -> None:
    orphan = SpanRecord(1, 10, 999, "orphan")
    retrieve = SpanRecord(1, 11, 10, "retrieve", RETRIEVER)
    assert not is_local_root(orphan)
    assert is_local_root(orphan, {10, 11})
    (group,) = find_answers([orphan, retrieve])
    assert group.answer is orphan
    # Broken data: two spans naming each other as parent (and one naming itself).
    a = SpanRecord(2, 1, 2, "a", RETRIEVER)
    b = SpanRecord(2, 2, 1, "b")
    selfish = SpanRecord(3, 5, 5, "selfish", MARKED)
    groups = find_answers([a, b, selfish])
    assert {group.answer.name for group in groups} >= {"selfish"}
    assert sum(len(group.spans) for group in groups) <= 3


def test_several_traces_at_once_and_duplicate_records() -> None:
    spans = [
        SpanRecord(1, 1, None, "root one"),
        SpanRecord(1, 2, 1, "retrieve one", RETRIEVER),
        SpanRecord(2, 1, None, "root two"),  # same span id, other trace
        SpanRecord(2, 2, 1, "retrieve two", RETRIEVER),
        SpanRecord(2, 2, 1, "retrieve two", RETRIEVER),  # delivered twice
    ]
    groups = find_answers(spans)
    assert [(group.answer.name, len(group.spans)) for group in groups] == [("root one", 2), ("root two", 2)]


@pytest.mark.parametrize(
    ("attributes", "expected"),
    [
        (RETRIEVER, True),
        ({semconv.OPENINFERENCE_SPAN_KIND: "RERANKER"}, True),
        ({semconv.OPENINFERENCE_SPAN_KIND: "LLM"}, False),
        ({semconv.GEN_AI_OPERATION_NAME: "retrieval"}, True),
        ({semconv.GEN_AI_OPERATION_NAME: "vector_db_retrieve"}, True),
        ({semconv.GEN_AI_OPERATION_NAME: "chat"}, False),
        ({semconv.RAG_RETRIEVAL_METHOD: "bm25"}, True),
        ({}, False),
    ],
)
def test_is_retrieval_span(attributes: dict[str, object], expected: bool) -> None:
    assert is_retrieval_span(SpanRecord(1, 1, None, "s", attributes)) is expected


def test_vector_db_result_events_make_a_retrieval() -> None:
    from rag_confidence.signals import EventRecord

    span = SpanRecord(1, 1, None, "chroma.query", events=(EventRecord(semconv.DB_QUERY_RESULT, {}),))
    assert is_retrieval_span(span)


def test_only_the_boolean_true_marks_an_answer() -> None:
    assert is_marked_answer(SpanRecord(1, 1, None, "a", {semconv.RAG_ANSWER: True}))
    for value in ("true", 1, False, None):
        assert not is_marked_answer(SpanRecord(1, 1, None, "a", {semconv.RAG_ANSWER: value}))


def test_a_failed_request_is_no_answer(traced: tuple[Tracer, InMemorySpanExporter]) -> None:
    # The SDK sets status ERROR on a span left by an exception: the request retrieved, then failed, and
    # delivered no answer to score.
    tracer, exporter = traced
    with pytest.raises(RuntimeError), tracer.start_as_current_span("pipeline"):
        with tracer.start_as_current_span("retrieve", attributes=RETRIEVER):
            pass
        raise RuntimeError("the model call failed")
    with pytest.raises(RuntimeError), tracer.start_as_current_span("marked", attributes=MARKED):
        with tracer.start_as_current_span("retrieve", attributes=RETRIEVER):
            pass
        raise RuntimeError("the model call failed")
    assert find_answers(records(exporter)) == []


def test_only_the_answer_spans_own_status_counts(traced: tuple[Tracer, InMemorySpanExporter]) -> None:
    tracer, exporter = traced
    with tracer.start_as_current_span("pipeline"):
        with tracer.start_as_current_span("retrieve", attributes=RETRIEVER):
            pass
        try:
            with tracer.start_as_current_span("first model call"):
                raise TimeoutError
        except TimeoutError:
            pass  # retried: the request recovered and answered
        with tracer.start_as_current_span("llm"):
            pass
    (group,) = find_answers(records(exporter))
    assert group.answer.name == "pipeline"
    assert "first model call" in names(group.spans)


def test_a_failed_marked_answer_leaves_its_root_unscored(traced: tuple[Tracer, InMemorySpanExporter]) -> None:
    # The marked answer failed; its request is not then scored by rule (c) in its place.
    tracer, exporter = traced
    with tracer.start_as_current_span("request"):
        with tracer.start_as_current_span("retrieve", attributes=RETRIEVER):
            pass
        with pytest.raises(ValueError), tracer.start_as_current_span("answer", attributes=MARKED):
            raise ValueError
    assert find_answers(records(exporter)) == []


def test_a_long_chain_of_marked_answers_is_resolved_in_linear_time() -> None:
    # Each marked answer's local root was walked for afresh: 20,000 nested answers (a request built to be slow,
    # or a long agent run) took minutes. Not a speed target: a generous bound the quadratic walk exceeds by far.
    import time

    depth = 20_000
    spans = [
        SpanRecord(1, index, index - 1 if index > 1 else None, f"step {index}", MARKED)
        for index in range(1, depth + 1)
    ]
    started = time.process_time()
    groups = find_answers(spans)
    assert time.process_time() - started < 5.0
    assert len(groups) == depth and all(len(group.spans) == 1 for group in groups)


def test_a_marked_answer_below_a_cycle_keeps_the_cycles_root_from_being_an_answer() -> None:
    # Broken data (the gateway takes parent ids as sent): spans 4 and 5 are each other's parent. The retrieval's
    # root, as the owner rule sees it, is 5; the marked answer beneath it must count for that same root.
    spans = [
        SpanRecord(1, 2, 4, "answer", MARKED),
        SpanRecord(1, 4, 5, "retrieve", RETRIEVER),
        SpanRecord(1, 5, 4, "loop"),
    ]
    assert [(group.answer.span_id, group.rule) for group in find_answers(spans)] == [(2, "marked")]


@pytest.mark.parametrize(
    "attributes",
    [
        RETRIEVER,
        {semconv.OPENINFERENCE_SPAN_KIND: semconv.OPENINFERENCE_KIND_RERANKER},
        {semconv.OPENINFERENCE_SPAN_KIND: semconv.OPENINFERENCE_KIND_TOOL},
        {semconv.OPENINFERENCE_SPAN_KIND: semconv.OPENINFERENCE_KIND_EMBEDDING},
        {semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OPERATION_EXECUTE_TOOL},
        {semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OPERATION_RETRIEVAL},
        {semconv.TRACELOOP_SPAN_KIND: semconv.TRACELOOP_KIND_TOOL},
    ],
)
def test_a_root_that_is_one_step_is_no_answer_unless_marked(attributes: dict[str, Any]) -> None:
    """An agent loop calling a retriever tool outside any span of its own makes a trace of that step alone:
    its output is documents, not an answer (it would cite itself). Marked, it is an answer all the same."""
    step = SpanRecord(1, 1, None, "search_kb", attributes)
    retrieve = SpanRecord(1, 2, 1, "retrieve", RETRIEVER)
    assert find_answers([step, retrieve]) == []
    assert find_answers([step]) == []
    marked = SpanRecord(2, 1, None, "search_kb", {**attributes, semconv.RAG_ANSWER: True})
    (group,) = find_answers([marked, SpanRecord(2, 2, 1, "retrieve", RETRIEVER)])
    assert group.answer is marked and group.rule == "marked"
    # With a generation beneath it, the step answers (a query-engine tool called from an untraced agent loop).
    llm = SpanRecord(4, 3, 1, "llm", {semconv.OPENINFERENCE_SPAN_KIND: semconv.OPENINFERENCE_KIND_LLM})
    tool = SpanRecord(4, 1, None, "query_engine_tool", attributes)
    (group,) = find_answers([tool, SpanRecord(4, 2, 1, "retrieve", RETRIEVER), llm])
    assert group.answer is tool and group.rule == "root"
    # The step under a span of the application's: that span is the answer.
    chain = SpanRecord(3, 1, None, "agent")
    (group,) = find_answers(
        [chain, SpanRecord(3, 2, 1, "search_kb", attributes), SpanRecord(3, 3, 2, "r", RETRIEVER)]
    )
    assert group.answer is chain


def test_keys_outside_the_trigger_set_never_make_a_span_pass_alone() -> None:
    """Screens count and test only ANSWER_TRIGGER_KEYS before reading a span: that is safe only if every other
    hint key needs a trigger key beside it (``output.value`` is read of OpenInference LLM spans only)."""
    from rag_confidence.signals.answers import ANSWER_HINT_KEYS, ANSWER_TRIGGER_KEYS, may_hold_answer

    file_search = '{"output": [{"type": "file_search_call", "results": null}]}'
    companions = ANSWER_HINT_KEYS - ANSWER_TRIGGER_KEYS
    assert companions == {semconv.OI_OUTPUT_VALUE}
    for key in companions:
        assert not may_hold_answer({key: file_search})
    assert may_hold_answer(
        {
            semconv.OPENINFERENCE_SPAN_KIND: semconv.OPENINFERENCE_KIND_LLM,
            semconv.OI_OUTPUT_VALUE: file_search,
        }
    )
