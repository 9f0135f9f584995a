"""``@scored_answer``, ``record_signals``, ``mark_answer`` and ``last_scorecard`` with real SDK providers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence import semconv
from rag_confidence.otel import (
    ConfidenceSpanProcessor,
    last_scorecard,
    mark_answer,
    record_signals,
    scored_answer,
)
from rag_confidence.scoring import compute_confidence
from rag_confidence.scoring.evaluators import from_custom_judge
from rag_confidence.scoring.models import ConfidenceScorecard
from tests import instrumented

DOCS = [{"id": "policy-1", "score": 0.93}, {"id": "policy-2", "score": 0.81}]
CANDIDATES = [
    {"retrievalScores": {"vector": 0.93}, "combinedScore": 0.93, "documentId": "policy-1", "rank": 1},
    {"retrievalScores": {"vector": 0.81}, "combinedScore": 0.81, "documentId": "policy-2", "rank": 2},
]
RETRIEVAL = {
    semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OPERATION_RETRIEVAL,
    semconv.GEN_AI_RETRIEVAL_DOCUMENTS: json.dumps(DOCS),
    semconv.RAG_RETRIEVAL_METHOD: "vector",
}


class Setup:
    def __init__(self, with_processor: bool) -> None:
        self.exporter = InMemorySpanExporter()
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.provider = TracerProvider()
        downstream = SimpleSpanProcessor(self.exporter)
        self.processor = (
            ConfidenceSpanProcessor(downstream, meter_provider=self.meter_provider)
            if with_processor
            else None
        )
        self.provider.add_span_processor(self.processor or downstream)
        self.tracer = self.provider.get_tracer("test")

    def decorate(self, **options: Any) -> Any:
        return scored_answer(tracer_provider=self.provider, meter_provider=self.meter_provider, **options)

    def spans(self) -> dict[str, ReadableSpan]:
        return {span.name: span for span in self.exporter.get_finished_spans()}

    def score_count(self) -> int:
        return sum(point.count for point in instrumented.score_points(self.reader))


@pytest.fixture
def setup() -> Iterator[Setup]:
    built = Setup(with_processor=True)
    yield built
    built.provider.shutdown()


def test_sync_answer_is_scored_before_its_span_ends_and_handed_to_the_caller(setup: Setup) -> None:
    received: list[tuple[ConfidenceScorecard, Any]] = []

    @setup.decorate(name="answer", on_score=lambda card, result: received.append((card, result)))
    def answer(question: str) -> str:
        with setup.tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
            pass
        record_signals(support_level="high", has_conflict=False)
        return f"answer to {question}"

    assert answer("q") == "answer to q"
    expected = compute_confidence({"supportLevel": "high", "hasConflict": False, "candidates": CANDIDATES})
    card = last_scorecard()
    assert (
        card is not None
        and card.total == expected.total
        and card.recommended_action == expected.recommended_action
    )
    assert received == [(card, "answer to q")]
    attributes = setup.spans()["answer"].attributes or {}
    assert attributes[semconv.RAG_ANSWER] is True
    assert attributes[semconv.RAG_CONFIDENCE_TOTAL] == expected.total
    assert attributes[semconv.RAG_CONFIDENCE_ACTION] == expected.recommended_action
    assert setup.score_count() == 1


def test_signals_from_the_result_win_over_span_signals(setup: Setup) -> None:
    @setup.decorate(
        name="answer",
        signals=lambda result: {
            "support_level": result["support"],
            "faithfulnessScore": result["faithfulness"],
            "claim_support": {"total_claims": 4, "supported_claims": 3},
        },
    )
    def answer() -> dict[str, Any]:
        with setup.tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
            pass
        record_signals(support_level="high", has_conflict=True)
        return {"support": "low", "faithfulness": 0.4}

    answer()
    expected = compute_confidence(
        {
            "supportLevel": "low",
            "hasConflict": True,
            "faithfulnessScore": 0.4,
            "claimSupport": {"totalClaims": 4, "supportedClaims": 3},
            "candidates": CANDIDATES,
        }
    )
    card = last_scorecard()
    assert card is not None and card.total == expected.total
    assert card.model_dump() == expected.model_dump(exclude={"meta"}) | {"meta": card.meta.model_dump()}
    assert (setup.spans()["answer"].attributes or {})[semconv.RAG_CONFIDENCE_TOTAL] == expected.total


def test_async_answers_are_scored_concurrently_each_with_its_own_spans(setup: Setup) -> None:
    @setup.decorate(name="answer", signals=lambda result: {"supportLevel": result})
    async def answer(support: str, delay: float) -> str:
        with setup.tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
            await asyncio.sleep(delay)
        record_signals(has_conflict=False)
        await asyncio.sleep(delay)
        return support

    async def main() -> list[tuple[str, int | None]]:
        async def one(support: str, delay: float) -> tuple[str, int | None]:
            await answer(support, delay)
            card = last_scorecard()  # set in this task's context by the awaited call
            return support, None if card is None else int(card.total)

        return await asyncio.gather(
            *(one(s, d) for s, d in [("high", 0.02), ("low", 0.0), ("medium", 0.01)] * 4)
        )

    results = asyncio.run(main())
    for support, total in results:
        expected = compute_confidence(
            {"supportLevel": support, "hasConflict": False, "candidates": CANDIDATES}
        )
        assert total == expected.total, support
    answers = [span for span in setup.exporter.get_finished_spans() if span.name == "answer"]
    assert len(answers) == 12
    assert all((span.attributes or {})[semconv.RAG_CONFIDENCE_CANDIDATES] == 2 for span in answers)
    assert setup.score_count() == 12
    assert setup.processor is not None and setup.processor.stats().pending_traces == 0


def test_a_raising_answer_is_not_scored_and_the_exception_propagates(setup: Setup) -> None:
    @setup.decorate(name="answer")
    def answer() -> str:
        raise KeyError("boom")

    with pytest.raises(KeyError):
        answer()
    span = setup.spans()["answer"]
    assert span.status.status_code is trace.StatusCode.ERROR
    assert semconv.RAG_CONFIDENCE_TOTAL not in (span.attributes or {})


def test_invalid_signals_from_the_result_mark_the_span_and_do_not_raise(setup: Setup) -> None:
    @setup.decorate(name="answer", signals=lambda result: {"supportLevel": "certain"})
    def answer() -> str:
        return "text"

    assert answer() == "text"
    assert last_scorecard() is None
    attributes = setup.spans()["answer"].attributes or {}
    assert attributes[semconv.RAG_CONFIDENCE_ERROR] == "InputValidationError"


def test_without_a_processor_record_signals_and_the_answer_span_still_score() -> None:
    setup = Setup(with_processor=False)

    @setup.decorate(name="answer")
    def answer() -> str:
        with setup.tracer.start_as_current_span("step"):
            record_signals(support_level="high", has_conflict=False)  # on a child span nobody buffers
        return "text"

    answer()
    expected = compute_confidence({"supportLevel": "high", "hasConflict": False, "candidates": []})
    card = last_scorecard()
    assert card is not None and card.total == expected.total
    assert (setup.spans()["answer"].attributes or {})[semconv.RAG_CONFIDENCE_TOTAL] == expected.total


def test_adopting_the_current_span_scores_it_without_a_new_span(setup: Setup) -> None:
    @setup.decorate(adopt_current_span=True, signals=lambda result: {"supportLevel": "medium"})
    def handler() -> str:
        with setup.tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
            pass
        return "ok"

    with setup.tracer.start_as_current_span("POST /ask"):
        handler()
    spans = setup.spans()
    assert set(spans) == {"POST /ask", "retrieve"}
    expected = compute_confidence({"supportLevel": "medium", "candidates": CANDIDATES})
    assert (spans["POST /ask"].attributes or {})[semconv.RAG_CONFIDENCE_TOTAL] == expected.total
    assert setup.score_count() == 1


def test_bare_decorator_uses_the_global_providers() -> None:
    @scored_answer
    def answer() -> str:
        record_signals(support_level="low")
        return "text"

    assert answer() == "text"
    card = last_scorecard()
    expected = compute_confidence({"supportLevel": "low", "candidates": []})
    assert card is not None and card.total == expected.total


def test_record_signals_maps_keywords_and_rejects_unknown_ones(setup: Setup) -> None:
    with setup.tracer.start_as_current_span("answer"):
        assert record_signals(
            support_level="medium",
            present_types=["contract", "faq"],
            index_integrity={"failedIngestionCount": 2, "acl_filter_confirmed": True},
            ambiguity_notes=None,
        )
        with pytest.raises(TypeError, match="support_levle"):
            record_signals(support_levle="high")
        with pytest.raises(TypeError):
            record_signals(claim_support={"total": 1})
    attributes = setup.spans()["answer"].attributes or {}
    assert attributes[semconv.RAG_SIGNAL_SUPPORT_LEVEL] == "medium"
    assert tuple(attributes[semconv.RAG_SIGNAL_CORPUS_PRESENT_TYPES]) == ("contract", "faq")
    assert attributes[semconv.RAG_SIGNAL_INDEX_FAILED_INGESTION_COUNT] == 2
    assert attributes[semconv.RAG_SIGNAL_INDEX_ACL_FILTER_CONFIRMED] is True
    assert semconv.RAG_SIGNAL_AMBIGUITY_NOTES not in attributes


def test_record_signals_and_mark_answer_without_a_recording_span_are_logged_no_ops() -> None:
    assert trace.get_current_span().is_recording() is False
    assert record_signals(support_level="high") is False
    assert mark_answer() is False


def test_mark_answer_makes_a_nested_span_its_own_answer(setup: Setup) -> None:
    with setup.tracer.start_as_current_span("session"), setup.tracer.start_as_current_span("turn"):
        mark_answer()
        record_signals(support_level="high", has_conflict=False)
        with setup.tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
            pass
    spans = setup.spans()
    expected = compute_confidence({"supportLevel": "high", "hasConflict": False, "candidates": CANDIDATES})
    assert (spans["turn"].attributes or {})[semconv.RAG_CONFIDENCE_TOTAL] == expected.total
    assert semconv.RAG_CONFIDENCE_TOTAL not in (spans["session"].attributes or {})


def test_nested_decorated_answers_each_score_their_own_spans(setup: Setup) -> None:
    inner_docs = [{"id": "inner-1", "score": 0.42}]
    inner_retrieval = {**RETRIEVAL, semconv.GEN_AI_RETRIEVAL_DOCUMENTS: json.dumps(inner_docs)}

    @setup.decorate(name="inner", signals=lambda result: {"supportLevel": "low"})
    def inner() -> str:
        with setup.tracer.start_as_current_span("inner.retrieve", attributes=inner_retrieval):
            pass
        return "inner"

    @setup.decorate(name="outer", signals=lambda result: {"supportLevel": "high"})
    def outer() -> str:
        with setup.tracer.start_as_current_span("outer.retrieve", attributes=RETRIEVAL):
            pass
        inner()  # a sub-answer (an agent's tool call that answers on its own)
        return "outer"

    outer()
    spans = setup.spans()
    expected_inner = compute_confidence(
        {
            "supportLevel": "low",
            "candidates": [
                {
                    "retrievalScores": {"vector": 0.42},
                    "combinedScore": 0.42,
                    "documentId": "inner-1",
                    "rank": 1,
                }
            ],
        }
    )
    expected_outer = compute_confidence({"supportLevel": "high", "candidates": CANDIDATES})
    assert (spans["inner"].attributes or {})[semconv.RAG_CONFIDENCE_TOTAL] == expected_inner.total
    # The inner answer's retrieval belongs to the inner answer only.
    assert (spans["outer"].attributes or {})[semconv.RAG_CONFIDENCE_TOTAL] == expected_outer.total
    assert (spans["outer"].attributes or {})[semconv.RAG_CONFIDENCE_CANDIDATES] == 2
    assert setup.score_count() == 2


def test_decorator_metrics_carry_exemplars_of_the_answer_span(setup: Setup) -> None:
    @setup.decorate(name="answer", signals=lambda result: {"supportLevel": "medium"})
    def answer() -> str:
        with setup.tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
            pass
        return "text"

    answer()
    span = setup.spans()["answer"]
    assert span.context is not None
    (point,) = instrumented.score_points(setup.reader)
    (exemplar,) = point.exemplars
    assert (exemplar.trace_id, exemplar.span_id) == (span.context.trace_id, span.context.span_id)


# Four claims, all supported: support level high, derived from the claims whatever number type carried them.
FOUR_CLAIMS_SUPPORTED = compute_confidence(
    {
        "supportLevel": "high",
        "claimSupport": {"totalClaims": 4, "supportedClaims": 4},
        "candidates": CANDIDATES,
    }
)


@pytest.mark.parametrize(
    "signals",
    [
        lambda result: {"claimSupport": {"totalClaims": 4.0, "supportedClaims": 4.0}},
        lambda result: from_custom_judge({"totalClaims": 4, "supportedClaims": 4}),
    ],
    ids=["explicit-doubles", "custom-judge"],
)
def test_integral_float_claim_counts_derive_the_support_level(setup: Setup, signals: Any) -> None:
    # A judge's result (from_custom_judge returns floats) or an OTel double gives 4.0, not 4: it must count.
    @setup.decorate(name="answer", signals=signals)
    def answer() -> str:
        with setup.tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
            pass
        return "text"

    answer()
    expected = FOUR_CLAIMS_SUPPORTED
    card = last_scorecard()
    assert card is not None
    assert card.model_dump(exclude={"meta"}) == expected.model_dump(exclude={"meta"})
    assert (setup.spans()["answer"].attributes or {})[semconv.RAG_CONFIDENCE_TOTAL] == expected.total


def test_a_double_claims_attribute_counts_like_an_int(setup: Setup) -> None:
    @setup.decorate(name="answer")
    def answer() -> str:
        with setup.tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
            pass
        record_signals(claims_total=4.0, claims_supported=4.0)
        return "text"

    answer()
    expected = FOUR_CLAIMS_SUPPORTED
    card = last_scorecard()
    assert card is not None and card.total == expected.total
    assert card.model_dump(exclude={"meta"}) == expected.model_dump(exclude={"meta"})
