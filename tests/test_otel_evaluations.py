"""Evaluators' ``gen_ai.evaluation.result`` log records count for the answer they evaluate.

An inline judge logs its verdict as the GenAI event (a log record with ``event_name``, in the evaluated span's
context); ``EvaluationLogProcessor`` on the logger provider hands it to ``ConfidenceSpanProcessor``, which reads
it as an event of that span. Real SDK tracer and logger providers; expected scorecards from
``compute_confidence`` on inputs written out by hand.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from rag_confidence import semconv
from rag_confidence.otel import EvaluationLogProcessor, last_scorecard, record_signals, scored_answer
from rag_confidence.scoring import compute_confidence
from tests.test_otel_processor import (
    DOCS,
    Pipeline,
    expected_candidates,
    make_pipeline,
    retrieval_attributes,
)

FAITHFULNESS = 0.91


@pytest.fixture(params=["simple", "batch", "batch-background"])
def pipeline(request: pytest.FixtureRequest) -> Iterator[Pipeline]:
    built = make_pipeline(request.param)
    built.logger_provider.add_log_record_processor(EvaluationLogProcessor(built.processor))
    yield built
    built.tracer_provider.shutdown()


def judge(logger_provider: LoggerProvider, name: str = "faithfulness", **options: Any) -> None:
    """An inline evaluator logging its verdict as the GenAI event, in the current (or given) context."""
    logger_provider.get_logger("judge").emit(
        event_name=semconv.GEN_AI_EVALUATION_RESULT,
        attributes={
            semconv.GEN_AI_EVALUATION_NAME: name,
            semconv.GEN_AI_EVALUATION_SCORE_VALUE: FAITHFULNESS,
        },
        **options,
    )


def expected(**extra: Any) -> Any:
    return compute_confidence(
        {"supportLevel": "high", "hasConflict": False, "candidates": expected_candidates(DOCS), **extra}
    )


def scored(pipeline: Pipeline) -> dict[str, Any]:
    return dict(pipeline.spans()["rag.pipeline"].attributes or {})


def assert_scored_like(attributes: dict[str, Any], card: Any) -> None:
    # The warnings tell a judged answer from an unjudged one (the total alone may coincide).
    assert attributes[semconv.RAG_CONFIDENCE_TOTAL] == card.total
    assert list(attributes[semconv.RAG_CONFIDENCE_WARNINGS]) == [w.code for w in card.meta.warnings]


def test_an_evaluation_logged_for_the_generation_span_counts_for_the_answer(pipeline: Pipeline) -> None:
    tracer = pipeline.tracer
    with tracer.start_as_current_span("rag.pipeline"):
        with tracer.start_as_current_span("retrieve", attributes=retrieval_attributes(DOCS)):
            pass
        with tracer.start_as_current_span("generate"):
            judge(pipeline.logger_provider)
        record_signals(support_level="high", has_conflict=False)

    with_judge = expected(faithfulnessScore=FAITHFULNESS)
    assert_scored_like(scored(pipeline), with_judge)
    # Without the judge the scorecard would say so: the evaluation is what changed it.
    without = expected()
    assert [w.code for w in without.meta.warnings] != [w.code for w in with_judge.meta.warnings]
    assert pipeline.processor.stats().pending_traces == 0


def test_an_evaluation_logged_before_any_span_ended_opens_the_traces_buffer(pipeline: Pipeline) -> None:
    tracer = pipeline.tracer
    with tracer.start_as_current_span("rag.pipeline"):
        judge(pipeline.logger_provider)  # for the answer span itself, nothing buffered yet
        with tracer.start_as_current_span("retrieve", attributes=retrieval_attributes(DOCS)):
            pass
        record_signals(support_level="high", has_conflict=False)

    assert_scored_like(scored(pipeline), expected(faithfulnessScore=FAITHFULNESS))
    assert pipeline.processor.stats().pending_traces == 0


def test_a_late_evaluation_is_not_held_and_leaves_no_buffer_behind(pipeline: Pipeline) -> None:
    tracer = pipeline.tracer
    with tracer.start_as_current_span("rag.pipeline") as root:
        with tracer.start_as_current_span("retrieve", attributes=retrieval_attributes(DOCS)):
            pass
        record_signals(support_level="high", has_conflict=False)
    pipeline.tracer_provider.force_flush()
    judge(pipeline.logger_provider, context=trace.set_span_in_context(root))  # an offline judge, too late

    assert_scored_like(scored(pipeline), expected())
    assert pipeline.processor.stats().pending_traces == 0


def test_our_own_event_and_other_log_records_are_not_held(pipeline: Pipeline) -> None:
    tracer = pipeline.tracer
    logger = pipeline.logger_provider.get_logger("app")
    with tracer.start_as_current_span("rag.pipeline"):
        logger.emit(body="retrieving", attributes={"step": "retrieve"})  # a plain log line
        judge(pipeline.logger_provider, name=semconv.RAG_CONFIDENCE_EVALUATION_NAME)  # looks like ours
        logger.emit(event_name="other.event")
        assert pipeline.processor.stats().pending_traces == 0  # nothing held, no buffer opened
        with tracer.start_as_current_span("retrieve", attributes=retrieval_attributes(DOCS)):
            pass
        record_signals(support_level="high", has_conflict=False)

    assert_scored_like(scored(pipeline), expected())
    # Our own event went out through the same logger provider without being read back.
    ours = [
        record
        for record in pipeline.logs()
        if (record.log_record.attributes or {}).get(semconv.GEN_AI_EVALUATION_NAME)
        == semconv.RAG_CONFIDENCE_EVALUATION_NAME
        and record.log_record.event_name == semconv.GEN_AI_EVALUATION_RESULT
    ]
    assert len(ours) == 2  # the look-alike above and the scorecard's event
    assert pipeline.processor.stats().pending_traces == 0


def test_the_decorator_reads_an_evaluation_logged_inside_the_answer() -> None:
    pipeline = make_pipeline("simple")
    pipeline.logger_provider.add_log_record_processor(EvaluationLogProcessor(pipeline.processor))
    tracer = pipeline.tracer

    @scored_answer(
        tracer_provider=pipeline.tracer_provider,
        meter_provider=pipeline.meter_provider,
        logger_provider=pipeline.logger_provider,
    )
    def answer(question: str) -> str:
        with tracer.start_as_current_span("retrieve", attributes=retrieval_attributes(DOCS)):
            pass
        record_signals(support_level="high", has_conflict=False)
        judge(pipeline.logger_provider)  # in the answer span's context
        return f"About {question}."

    try:
        answer("refunds")
        card = last_scorecard()
        assert card is not None
        assert card.total == expected(faithfulnessScore=FAITHFULNESS).total
        assert [w.code for w in card.meta.warnings] == [
            w.code for w in expected(faithfulnessScore=FAITHFULNESS).meta.warnings
        ]
        assert pipeline.processor.stats().pending_traces == 0
    finally:
        pipeline.tracer_provider.shutdown()


def test_a_failing_log_record_never_reaches_the_application() -> None:
    pipeline = make_pipeline("simple")

    class Broken:
        def add_evaluation(self, *args: Any, **kwargs: Any) -> bool:
            raise RuntimeError("boom")

    # A stand-in span processor that raises: the log processor must swallow it (mock: the real one never raises
    # here, and the point is the guard).
    pipeline.logger_provider.add_log_record_processor(EvaluationLogProcessor(Broken()))  # type: ignore[arg-type]
    with pipeline.tracer.start_as_current_span("rag.pipeline"):
        judge(pipeline.logger_provider)
    pipeline.tracer_provider.shutdown()


@pytest.mark.parametrize("bad", ["high", float("nan"), float("inf"), [0.9, 0.8], True, -3, 10**30])
def test_an_unreadable_evaluation_score_is_skipped_and_the_answer_still_scored(bad: Any) -> None:
    pipeline = make_pipeline("simple")
    pipeline.logger_provider.add_log_record_processor(EvaluationLogProcessor(pipeline.processor))
    tracer = pipeline.tracer
    try:
        with tracer.start_as_current_span("rag.pipeline"):
            with tracer.start_as_current_span("retrieve", attributes=retrieval_attributes(DOCS)):
                pass
            pipeline.logger_provider.get_logger("judge").emit(
                event_name=semconv.GEN_AI_EVALUATION_RESULT,
                attributes={
                    semconv.GEN_AI_EVALUATION_NAME: "faithfulness",
                    semconv.GEN_AI_EVALUATION_SCORE_VALUE: bad,
                },
            )
            record_signals(support_level="high", has_conflict=False)
        attributes = scored(pipeline)
        assert semconv.RAG_CONFIDENCE_ERROR not in attributes
        assert_scored_like(attributes, expected())  # as if no judge had spoken
    finally:
        pipeline.tracer_provider.shutdown()


# Two requests of one remote trace served here at once (each is a local root), as a fan-out service sees them.
REMOTE_PARENT = SpanContext(
    trace_id=0xABC, span_id=0x1, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED)
)


def _remote() -> Context:
    return trace.set_span_in_context(NonRecordingSpan(REMOTE_PARENT))


@pytest.mark.parametrize("kind", ["simple", "batch-background"])
def test_another_request_of_the_same_trace_ending_first_keeps_this_ones_evaluation(kind: str) -> None:
    pipeline = make_pipeline(kind)
    pipeline.logger_provider.add_log_record_processor(EvaluationLogProcessor(pipeline.processor))
    tracer = pipeline.tracer
    try:
        other = tracer.start_span("other.request", context=_remote())
        with tracer.start_as_current_span("child", context=trace.set_span_in_context(other)):
            pass
        mine = tracer.start_span("rag.pipeline", context=_remote())
        with trace.use_span(mine):
            judge(pipeline.logger_provider)  # before any span of this request ended
        other.end()  # releases the trace's buffer (no retrieval in it)
        pipeline.processor.force_flush()
        with trace.use_span(mine):
            with tracer.start_as_current_span("retrieve", attributes=retrieval_attributes(DOCS)):
                pass
            record_signals(support_level="high", has_conflict=False)
        mine.end()
        assert_scored_like(scored(pipeline), expected(faithfulnessScore=FAITHFULNESS))
        assert pipeline.processor.stats().pending_traces == 0
    finally:
        pipeline.tracer_provider.shutdown()


def test_an_evaluation_for_spans_this_processor_never_sees_opens_no_span_buffer() -> None:
    pipeline = make_pipeline("simple")
    pipeline.logger_provider.add_log_record_processor(EvaluationLogProcessor(pipeline.processor))
    elsewhere = make_pipeline("simple")  # another tracer provider, with its own processor
    try:
        with elsewhere.tracer.start_as_current_span("elsewhere"):
            judge(pipeline.logger_provider)
        stats = pipeline.processor.stats()
        assert (stats.pending_traces, stats.traces_evicted) == (0, 0)
    finally:
        pipeline.tracer_provider.shutdown()
        elsewhere.tracer_provider.shutdown()


def test_with_no_span_buffered_beneath_the_answer_the_decorator_still_reads_record_signals() -> None:
    pipeline = make_pipeline("simple")  # a live processor whose logger provider holds the judge's verdicts
    pipeline.logger_provider.add_log_record_processor(EvaluationLogProcessor(pipeline.processor))
    plain = TracerProvider()  # the decorated function's provider has no ConfidenceSpanProcessor
    tracer = plain.get_tracer("app")

    def run(with_judge: bool) -> Any:
        @scored_answer(tracer_provider=plain)
        def answer() -> str:
            with tracer.start_as_current_span("step"):
                record_signals(support_level="high", has_conflict=False, faithfulness_score=0.5)
                if with_judge:  # a verdict the processor holds for this trace, and no span of it
                    judge(pipeline.logger_provider, name="answer_relevancy")
            return "x"

        answer()
        return last_scorecard()

    try:
        without, with_judge = run(False), run(True)
        assert without is not None and with_judge is not None
        assert "missing-faithfulness" not in [w.code for w in with_judge.meta.warnings]
        assert [w.code for w in with_judge.meta.warnings] == [w.code for w in without.meta.warnings]
    finally:
        pipeline.tracer_provider.shutdown()
        plain.shutdown()


@pytest.mark.parametrize("kind", ["simple", "batch-background"])
def test_sixteen_threads_judging_their_own_answers_at_once(kind: str) -> None:
    pipeline = make_pipeline(kind)
    pipeline.logger_provider.add_log_record_processor(EvaluationLogProcessor(pipeline.processor))
    tracer = pipeline.tracer
    judge_logger = pipeline.logger_provider.get_logger("judge")
    threads_count, answers_per_thread = 16, 15
    barrier = threading.Barrier(threads_count)
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        try:
            barrier.wait()
            for number in range(answers_per_thread):
                verdict = round(0.2 + 0.7 * ((index + number) % 8) / 7, 3)
                with tracer.start_as_current_span(f"answer-{index}-{number}") as root:
                    root.set_attribute("expected.faithfulness", verdict)
                    with tracer.start_as_current_span("retrieve", attributes=retrieval_attributes(DOCS)):
                        pass
                    with tracer.start_as_current_span("generate"):
                        judge_logger.emit(
                            event_name=semconv.GEN_AI_EVALUATION_RESULT,
                            attributes={
                                semconv.GEN_AI_EVALUATION_NAME: "faithfulness",
                                semconv.GEN_AI_EVALUATION_SCORE_VALUE: verdict,
                            },
                        )
                    record_signals(support_level="high", has_conflict=False)
        except BaseException as error:  # noqa: BLE001 - collected: a thread's exception would otherwise vanish
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(index,)) for index in range(threads_count)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        pipeline.tracer_provider.force_flush()
        assert errors == []
        answers = [s for s in pipeline.exporter.get_finished_spans() if s.name.startswith("answer-")]
        assert len(answers) == threads_count * answers_per_thread
        by_verdict: dict[float, Any] = {}
        for answer in answers:
            attributes = dict(answer.attributes or {})
            verdict = float(attributes["expected.faithfulness"])
            if verdict not in by_verdict:
                by_verdict[verdict] = expected(faithfulnessScore=verdict)
            # Each answer read its own judge's verdict, never another thread's.
            assert_scored_like(attributes, by_verdict[verdict])
        stats = pipeline.processor.stats()
        assert stats.answers_scored == threads_count * answers_per_thread
        assert (stats.pending_traces, stats.traces_evicted, stats.scoring_failures) == (0, 0, 0)
    finally:
        pipeline.tracer_provider.shutdown()
