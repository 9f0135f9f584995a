"""``@scored_answer`` at its edges: calls that fail or are cancelled, streamed answers (generator functions),
a full attribute table, ``record_signals`` on spans no processor sees, and the enriched copy's counts."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence import semconv
from rag_confidence.otel import (
    ConfidenceSpanProcessor,
    last_scorecard,
    mark_answer,
    record_signals,
    recording,
)
from rag_confidence.scoring import compute_confidence
from rag_confidence.signals import SpanRecord, find_answers

from .test_otel_decorator import CANDIDATES, RETRIEVAL, Setup


@pytest.fixture
def setup() -> Iterator[Setup]:
    built = Setup(with_processor=True)
    yield built
    built.provider.shutdown()


def _scored(setup: Setup) -> list[str]:
    return [
        span.name
        for span in setup.exporter.get_finished_spans()
        if semconv.RAG_CONFIDENCE_TOTAL in (span.attributes or {})
    ]


# -- calls that fail -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("inside_request", [False, True], ids=["answer is the root", "inside a request span"])
def test_a_call_that_raises_after_retrieving_is_scored_by_nobody(setup: Setup, inside_request: bool) -> None:
    @setup.decorate(name="answer")
    def answer() -> str:
        with setup.tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
            pass
        raise RuntimeError("the LLM timed out")

    with pytest.raises(RuntimeError):
        if inside_request:
            with setup.tracer.start_as_current_span("request"):
                answer()
        else:
            answer()
    spans = setup.spans()
    assert (spans["answer"].attributes or {})[semconv.RAG_ANSWER] is False
    assert _scored(setup) == []  # neither the failed answer nor, by rule (c), its request root
    assert setup.score_count() == 0
    assert setup.processor is not None and setup.processor.stats().answers_scored == 0
    assert len(spans) == 3 if inside_request else 2  # every span still forwarded


def test_a_cancelled_async_call_is_not_scored(setup: Setup) -> None:
    @setup.decorate(name="answer")
    async def answer() -> str:
        with setup.tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
            pass
        await asyncio.sleep(10)
        return "never"

    async def main() -> None:
        task = asyncio.create_task(answer())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert _scored(setup) == [] and setup.score_count() == 0


def test_an_abandoned_async_call_closed_elsewhere_is_not_scored_and_clears_nothing(setup: Setup) -> None:
    # A task left pending when its loop went away: the garbage collector closes its coroutine later, in
    # whatever context is current then. Before, that cleared the card of the call made there and raised
    # (ContextVar tokens reset outside the task's context) out of coroutine.close().
    @setup.decorate(name="answer")
    async def answer() -> str:
        with setup.tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
            pass
        await asyncio.Future()
        return "never"

    @setup.decorate(name="complete")
    def complete() -> str:
        record_signals(support_level="high", has_conflict=False)
        return "done"

    loop = asyncio.new_event_loop()
    try:
        task = loop.create_task(answer())
        loop.run_until_complete(asyncio.sleep(0.01))
    finally:
        loop.close()
    complete()
    card = last_scorecard()
    assert card is not None
    task.get_coro().close()  # as garbage collection would, later and anywhere
    assert last_scorecard() is card
    assert _scored(setup) == ["complete"]
    answer_span = setup.spans()["answer"]
    assert (answer_span.attributes or {})[semconv.RAG_ANSWER] is False


def test_last_scorecard_is_cleared_by_a_call_that_raises(setup: Setup) -> None:
    @setup.decorate(name="answer")
    def answer(fail: bool) -> str:
        record_signals(support_level="high", has_conflict=False)
        if fail:
            raise ValueError("no")
        return "ok"

    answer(False)
    assert last_scorecard() is not None
    with pytest.raises(ValueError):
        answer(True)
    assert last_scorecard() is None  # not the previous call's card to gate on


def test_a_declined_span_keeps_its_subtree_from_making_the_root_an_answer() -> None:
    # The rule itself, as the gateway applies it too: retrievals under rag.answer = false make no answer,
    # retrievals elsewhere under the same root still do.
    root = SpanRecord(1, 1, None, "request")
    declined = SpanRecord(1, 2, 1, "failed answer", {semconv.RAG_ANSWER: False})
    inside = SpanRecord(1, 3, 2, "retrieve", dict(RETRIEVAL))
    assert find_answers([inside, declined, root]) == []
    outside = SpanRecord(1, 4, 1, "retrieve again", dict(RETRIEVAL))
    (group,) = find_answers([inside, declined, outside, root])
    assert group.answer is root and group.rule == "root"
    assert declined not in group.spans and inside not in group.spans
    # A marked answer inside a declined span is still an answer of its own.
    nested = SpanRecord(1, 5, 2, "retry", {semconv.RAG_ANSWER: True})
    retried = SpanRecord(1, 6, 5, "retrieve", dict(RETRIEVAL))
    (group,) = find_answers([inside, retried, nested, declined, root])
    assert group.answer is nested and group.spans == (retried, nested)


# -- a full attribute table ----------------------------------------------------------------------------------


@pytest.mark.parametrize("inside_request", [False, True], ids=["answer is the root", "inside a request span"])
def test_an_answer_span_at_its_attribute_limit_is_scored_once_as_the_caller_saw(inside_request: bool) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=128))
    processor = ConfidenceSpanProcessor(SimpleSpanProcessor(exporter))
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("test")

    @scored_answer_on(provider, signals=lambda result: {"supportLevel": "high", "faithfulnessScore": 0.95})
    def answer() -> str:
        span = trace.get_current_span()
        for index in range(110):  # the application's own attributes, most of the table
            span.set_attribute(f"app.field.{index}", index)
        with tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
            pass
        record_signals(has_conflict=False)
        return "text"

    if inside_request:
        with tracer.start_as_current_span("request"):
            answer()
    else:
        answer()
    card = last_scorecard()
    expected = compute_confidence(
        {"supportLevel": "high", "faithfulnessScore": 0.95, "hasConflict": False, "candidates": CANDIDATES}
    )
    assert card is not None and card.total == expected.total
    spans = {span.name: span for span in exporter.get_finished_spans()}
    attributes = spans["answer"].attributes or {}
    assert attributes[semconv.RAG_ANSWER] is True  # the mark survived the evictions
    assert attributes[semconv.RAG_CONFIDENCE_TOTAL] == expected.total
    assert semconv.RAG_CONFIDENCE_TOTAL not in (spans.get("request", spans["answer"]).attributes or {}) or (
        not inside_request
    )
    assert processor.stats().answers_scored == 0  # the decorator's scorecard, not a second one
    provider.shutdown()


def test_an_already_scored_root_without_its_mark_is_not_scored_again() -> None:
    # Another tool (or a full table) left a scored root without rag.answer: the processor leaves it be.
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    processor = ConfidenceSpanProcessor(SimpleSpanProcessor(exporter))
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("answer") as span:
        with tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
            pass
        span.set_attributes({semconv.RAG_CONFIDENCE_TOTAL: 77, semconv.RAG_CONFIDENCE_ACTION: "answer"})
    (root,) = [s for s in exporter.get_finished_spans() if s.name == "answer"]
    assert (root.attributes or {})[semconv.RAG_CONFIDENCE_TOTAL] == 77
    stats = processor.stats()
    assert stats.answers_scored == 0 and stats.answers_already_scored == 1
    provider.shutdown()


# -- record_signals on spans no processor sees ---------------------------------------------------------------


def test_record_signals_count_when_made_on_another_providers_span_beside_buffered_children(
    setup: Setup,
) -> None:
    foreign = TracerProvider().get_tracer("library with its own provider")

    @setup.decorate(name="answer")
    def answer() -> str:
        with setup.tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
            pass  # buffered by the processor
        with foreign.start_as_current_span("judge"):  # a span the processor never sees
            record_signals(support_level="high", has_conflict=False, faithfulness_score=0.9)
        return "text"

    answer()
    expected = compute_confidence(
        {"supportLevel": "high", "hasConflict": False, "faithfulnessScore": 0.9, "candidates": CANDIDATES}
    )
    card = last_scorecard()
    assert card is not None and card.total == expected.total
    assert "faithfulnessScore" not in (card.meta.missing_signals or [])


def test_record_signals_latest_value_wins_over_a_buffered_childs_earlier_one(setup: Setup) -> None:
    @setup.decorate(name="answer")
    def answer() -> str:
        with setup.tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
            record_signals(support_level="low", has_conflict=False)
        record_signals(support_level="high")
        return "text"

    answer()
    card = last_scorecard()
    expected = compute_confidence({"supportLevel": "high", "hasConflict": False, "candidates": CANDIDATES})
    assert card is not None and card.total == expected.total


@pytest.mark.parametrize(
    ("notes", "expected_notes"),
    [
        (["two tenants named", "clause 4 unclear"], "two tenants named; clause 4 unclear"),
        ("one note", "one note"),
        ([], ""),  # no notes: no ambiguity, as an empty string is
    ],
)
def test_record_signals_ambiguity_notes_as_a_list_are_scored_as_one_text(
    setup: Setup, notes: Any, expected_notes: str
) -> None:
    # Its keyword type takes a list; written as a string array it was skipped and scored as unambiguous.
    @setup.decorate(name="answer")
    def answer() -> str:
        with setup.tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
            pass
        record_signals(support_level="high", has_conflict=False, ambiguity_notes=notes)
        return "text"

    answer()
    expected = compute_confidence(
        {
            "supportLevel": "high",
            "hasConflict": False,
            "ambiguityNotes": expected_notes,
            "candidates": CANDIDATES,
        }
    )
    card = last_scorecard()
    assert card is not None
    assert card.dimensions.grounding.raw == expected.dimensions.grounding.raw
    assert card.total == expected.total
    attributes = setup.spans()["answer"].attributes or {}
    assert semconv.RAG_CONFIDENCE_SIGNALS_SKIPPED not in attributes


def test_record_signals_takes_numpy_scalars_as_their_python_values(setup: Setup) -> None:
    import numpy as np  # what evaluators (Ragas, DeepEval) hand out

    @setup.decorate(name="answer")
    def answer() -> str:
        with setup.tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
            pass
        record_signals(
            support_level=np.str_("high"),
            has_conflict=np.bool_(False),
            faithfulness_score=np.float32(0.875),
            citation_count=np.int64(2),
        )
        return "text"

    answer()
    expected = compute_confidence(
        {
            "supportLevel": "high",
            "hasConflict": False,
            "faithfulnessScore": 0.875,
            "citationCount": 2,
            "candidates": CANDIDATES,
        }
    )
    card = last_scorecard()
    assert card is not None and card.total == expected.total
    attributes = setup.spans()["answer"].attributes or {}
    assert type(attributes[semconv.RAG_SIGNAL_FAITHFULNESS_SCORE]) is float
    assert type(attributes[semconv.RAG_SIGNAL_HAS_CONFLICT]) is bool
    with pytest.raises(TypeError, match="no attribute value"):
        record_signals(faithfulness_score=np.array([0.1, 0.2]))


def test_the_first_unrecorded_call_warns_and_later_ones_log_at_debug(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(recording, "_warned_once", False)
    caplog.set_level(logging.DEBUG, logger=recording.__name__)
    assert record_signals(support_level="high") is False
    assert mark_answer() is False
    assert record_signals(support_level="low") is False
    levels = [record.levelno for record in caplog.records if record.name == recording.__name__]
    assert levels == [logging.WARNING, logging.DEBUG, logging.DEBUG]
    assert "support_level" not in caplog.text and "high" not in caplog.text  # values are never logged


def test_a_value_extraction_would_skip_is_named_at_the_call_site(
    setup: Setup, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Recorded but skipped when scored, it was visible only as rag.confidence.signals.skipped on the span.
    monkeypatch.setattr(recording, "_warned_refused", set())
    caplog.set_level(logging.DEBUG, logger=recording.__name__)

    @setup.decorate(name="answer")
    def answer() -> str:
        with setup.tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
            pass
        record_signals(support_level="high", has_conflict=False, faithfulness_score=1.5, citation_count=2.5)
        record_signals(query_complexity="very hard", faithfulness_score=1.5)
        return "text"

    answer()
    logged = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == recording.__name__]
    assert logged == [
        (
            logging.WARNING,
            "record_signals: faithfulness_score (a float) is not a number within 0..1; it is "
            "recorded on the span but not scored",
        ),
        (
            logging.WARNING,
            "record_signals: citation_count (a float) is not a whole number, 0 or more; it is "
            "recorded on the span but not scored",
        ),
        (
            logging.WARNING,
            "record_signals: query_complexity (a str) is not direct, inferential, multi-hop or "
            "comparative; it is recorded on the span but not scored",
        ),
        (
            logging.DEBUG,
            "record_signals: faithfulness_score (a float) is not a number within 0..1; it is "
            "recorded on the span but not scored",
        ),
    ]
    assert "very hard" not in caplog.text  # values are never logged
    card = last_scorecard()
    assert card is not None and "missing-faithfulness" in [w.code for w in card.meta.warnings]


def test_a_scoring_failure_is_logged_without_the_content_its_message_quotes(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    # The validation error quotes the value: logged with its traceback, it put the answer text in the log.
    @setup.decorate(name="answer", signals=lambda result: {"candidates": [result]})
    def answer() -> str:
        with setup.tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
            pass
        return "SECRET-CONTENT-123: the patient record says"

    caplog.set_level(logging.DEBUG, logger="rag_confidence")
    answer()
    assert last_scorecard() is None
    assert (setup.spans()["answer"].attributes or {})[semconv.RAG_CONFIDENCE_ERROR] == "InputValidationError"
    assert "scoring the answer failed" in caplog.text
    assert "InputValidationError at candidates[0] (message withheld" in caplog.text
    assert "SECRET" not in caplog.text


def test_a_raising_on_score_is_logged_without_its_message(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    def gate(card: Any, result: Any) -> None:
        raise ValueError(f"cannot gate {result!r}")  # quotes the answer

    @setup.decorate(name="answer", on_score=gate)
    def answer() -> str:
        with setup.tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
            pass
        record_signals(support_level="high", has_conflict=False)
        return "SECRET-" + "ANSWER: SSN 123-45-6789"

    caplog.set_level(logging.DEBUG, logger="rag_confidence")
    assert answer().startswith("SECRET")  # the call itself is untouched
    assert "the on_score callback raised" in caplog.text and "ValueError (message withheld" in caplog.text
    assert "SECRET" not in caplog.text and "6789" not in caplog.text


# -- streamed answers ------------------------------------------------------------------------------------------


def test_a_generator_answer_is_scored_when_exhausted_with_the_spans_of_its_body(setup: Setup) -> None:
    seen: list[Any] = []

    @setup.decorate(name="answer", on_score=lambda card, result: seen.append(result))
    def stream(question: str) -> Iterator[str]:
        with setup.tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
            pass
        yield "Refunds "
        record_signals(support_level="high", has_conflict=False)
        yield "take 30 days."
        return "done"

    consumer_parents: list[int | None] = []
    chunks = []
    for chunk in stream("q"):
        # The consumer's code between chunks is not inside the answer span.
        with setup.tracer.start_as_current_span("write chunk") as written:
            parent = getattr(written, "parent", None)
            consumer_parents.append(None if parent is None else parent.span_id)
        chunks.append(chunk)
        if len(chunks) == 1:
            assert last_scorecard() is None  # not scored before the stream ends, and no earlier card left
    assert chunks == ["Refunds ", "take 30 days."]
    assert consumer_parents == [None, None]
    expected = compute_confidence({"supportLevel": "high", "hasConflict": False, "candidates": CANDIDATES})
    card = last_scorecard()
    assert card is not None and card.total == expected.total
    assert seen == ["done"]  # on_score and signals get the generator's return value
    spans = setup.spans()
    answer = spans["answer"]
    assert (answer.attributes or {})[semconv.RAG_CONFIDENCE_TOTAL] == expected.total
    assert answer.context is not None and spans["retrieve"].parent is not None
    assert spans["retrieve"].parent.span_id == answer.context.span_id
    assert setup.score_count() == 1
    assert setup.processor is not None and setup.processor.stats().answers_scored == 0


def test_a_generator_answer_passes_sent_and_thrown_values_through(setup: Setup) -> None:
    @setup.decorate(name="answer")
    def echo() -> Iterator[str]:
        received = yield "ready"
        try:
            yield f"got {received}"
        except KeyError:
            yield "handled"

    generator: Any = echo()
    assert next(generator) == "ready"
    assert generator.send("x") == "got x"
    assert generator.throw(KeyError("k")) == "handled"
    with pytest.raises(StopIteration):
        next(generator)
    assert last_scorecard() is not None


@pytest.mark.parametrize("how", ["raises", "closed early"])
def test_a_generator_answer_that_fails_or_is_abandoned_is_not_scored(setup: Setup, how: str) -> None:
    @setup.decorate(name="answer")
    def stream() -> Iterator[str]:
        with setup.tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
            pass
        yield "partial"
        if how == "raises":
            raise RuntimeError("stream broke")
        yield "rest"

    generator = stream()
    assert next(generator) == "partial"
    if how == "raises":
        with pytest.raises(RuntimeError):
            next(generator)
    else:
        generator.close()
    spans = setup.spans()
    assert (spans["answer"].attributes or {})[semconv.RAG_ANSWER] is False
    assert spans["answer"].end_time is not None
    assert _scored(setup) == [] and setup.score_count() == 0
    if how == "raises":
        assert spans["answer"].status.status_code is trace.StatusCode.ERROR


def test_an_async_generator_answer_is_scored_when_exhausted(setup: Setup) -> None:
    @setup.decorate(name="answer")
    async def stream(delay: float) -> AsyncIterator[str]:
        with setup.tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
            await asyncio.sleep(delay)
        for word in ("Refunds", "take", "30", "days."):
            await asyncio.sleep(delay)
            yield word
        record_signals(support_level="high", has_conflict=False)

    async def consume(delay: float) -> tuple[list[str], int | None]:
        words = [word async for word in stream(delay)]
        card = last_scorecard()
        return words, None if card is None else int(card.total)

    async def main() -> list[tuple[list[str], int | None]]:
        return await asyncio.gather(*(consume(delay) for delay in (0.0, 0.01, 0.005)))

    expected = compute_confidence({"supportLevel": "high", "hasConflict": False, "candidates": CANDIDATES})
    for words, total in asyncio.run(main()):
        assert words == ["Refunds", "take", "30", "days."] and total == expected.total
    answers = [span for span in setup.exporter.get_finished_spans() if span.name == "answer"]
    assert len(answers) == 3
    assert all((span.attributes or {})[semconv.RAG_CONFIDENCE_CANDIDATES] == 2 for span in answers)
    assert setup.score_count() == 3


def test_an_async_generator_answer_closed_early_is_not_scored(setup: Setup) -> None:
    @setup.decorate(name="answer")
    async def stream() -> AsyncIterator[str]:
        with setup.tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
            pass
        yield "partial"
        yield "rest"

    async def main() -> None:
        generator = stream()
        assert await generator.__anext__() == "partial"
        await generator.aclose()

    asyncio.run(main())
    assert (setup.spans()["answer"].attributes or {})[semconv.RAG_ANSWER] is False
    assert _scored(setup) == [] and setup.score_count() == 0


# -- the enriched copy ---------------------------------------------------------------------------------------


def test_the_enriched_copy_keeps_dropped_event_and_link_counts() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=SpanLimits(max_events=3, max_links=1))
    provider.add_span_processor(ConfidenceSpanProcessor(SimpleSpanProcessor(exporter)))
    tracer = provider.get_tracer("test")
    links = [trace.Link(trace.SpanContext(7, index + 1, False, trace.TraceFlags(1))) for index in range(3)]
    with tracer.start_as_current_span("answer", links=links) as span:
        for index in range(6):
            span.add_event(f"step {index}")
        with tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
            pass
    (answer,) = [s for s in exporter.get_finished_spans() if s.name == "answer"]
    assert semconv.RAG_CONFIDENCE_TOTAL in (answer.attributes or {})  # the enriched copy
    assert (answer.dropped_events, answer.dropped_links) == (3, 2)
    provider.shutdown()


def scored_answer_on(provider: TracerProvider, **options: Any) -> Any:
    from rag_confidence.otel import scored_answer

    return scored_answer(name="answer", tracer_provider=provider, **options)


# -- found by review of the above ------------------------------------------------------------------------------


def test_a_nested_adopting_call_that_fails_leaves_the_outer_answer_scored(setup: Setup) -> None:
    @setup.decorate(name="inner", adopt_current_span=True)
    def check() -> None:
        raise ValueError("the check failed")

    @setup.decorate(name="answer")
    def answer() -> str:
        with setup.tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
            pass
        record_signals(support_level="high", has_conflict=False)
        with contextlib.suppress(ValueError):
            check()  # adopts the answer's own span, and fails on it
        return "fallback text"

    assert answer() == "fallback text"
    expected = compute_confidence({"supportLevel": "high", "hasConflict": False, "candidates": CANDIDATES})
    card = last_scorecard()
    assert card is not None and card.total == expected.total
    attributes = setup.spans()["answer"].attributes or {}
    assert attributes[semconv.RAG_ANSWER] is True and semconv.RAG_CONFIDENCE_ERROR not in attributes


def test_values_recorded_inside_a_nested_answer_stay_with_it(setup: Setup) -> None:
    @setup.decorate(name="answer")
    def answer() -> str:
        with setup.tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
            pass
        with setup.tracer.start_as_current_span("generate"):
            record_signals(support_level="high", has_conflict=False)
        with setup.tracer.start_as_current_span("sub-answer"):
            mark_answer()
            record_signals(support_level="low", has_conflict=True)
        return "text"

    answer()
    outer = compute_confidence({"supportLevel": "high", "hasConflict": False, "candidates": CANDIDATES})
    card = last_scorecard()
    assert card is not None and card.total == outer.total
    spans = setup.spans()
    nested = compute_confidence({"supportLevel": "low", "hasConflict": True, "candidates": []})
    assert (spans["sub-answer"].attributes or {})[semconv.RAG_CONFIDENCE_TOTAL] == nested.total


def test_a_span_the_generator_opens_stays_current_across_its_yields(setup: Setup) -> None:
    @setup.decorate(name="answer")
    def stream() -> Iterator[str]:
        with setup.tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
            pass
        with setup.tracer.start_as_current_span("llm"):
            yield "first"
            with setup.tracer.start_as_current_span("tool"):
                pass
            yield "second"
        record_signals(support_level="high", has_conflict=False)

    assert list(stream()) == ["first", "second"]
    spans = setup.spans()
    assert spans["tool"].parent is not None and spans["llm"].context is not None
    assert spans["tool"].parent.span_id == spans["llm"].context.span_id
    assert spans["llm"].parent is not None and spans["answer"].context is not None
    assert spans["llm"].parent.span_id == spans["answer"].context.span_id
    assert trace.get_current_span() is trace.INVALID_SPAN  # nothing left attached in the consumer


def test_an_abandoned_stream_does_not_clear_another_calls_scorecard(setup: Setup) -> None:
    @setup.decorate(name="answer")
    def stream() -> Iterator[str]:
        yield "partial"
        yield "rest"

    @setup.decorate(name="complete")
    def complete() -> str:
        record_signals(support_level="high", has_conflict=False)
        return "done"

    generator = stream()
    next(generator)
    complete()
    card = last_scorecard()
    assert card is not None
    generator.close()  # as garbage collection would, later and anywhere
    assert last_scorecard() is card
