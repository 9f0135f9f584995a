"""Hypothesis-fuzzed span data: extraction never raises, bad values are counted, output stays scoreable."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_confidence import compute_confidence, semconv
from rag_confidence.scoring import create_scorer
from rag_confidence.scoring.api import extracted_inputs, plain_inputs
from rag_confidence.signals import EventRecord, SpanRecord, extract_signals, find_answers
from rag_confidence.signals.native import FIELDS

_SCORER = create_scorer()

# Every key the readers look at, so fuzzed values land where they matter.
KEYS = [
    *FIELDS,
    semconv.RAG_ANSWER,
    semconv.RAG_RETRIEVAL_METHOD,
    semconv.OPENINFERENCE_SPAN_KIND,
    semconv.GEN_AI_OPERATION_NAME,
    semconv.GEN_AI_RETRIEVAL_DOCUMENTS,
    semconv.GEN_AI_DATA_SOURCE_ID,
    semconv.GEN_AI_OUTPUT_MESSAGES,
    semconv.GEN_AI_RESPONSE_FINISH_REASONS,
    semconv.OI_OUTPUT_VALUE,
    semconv.OI_OUTPUT_MIME_TYPE,
    semconv.OI_METADATA,
    semconv.OI_LLM_FINISH_REASON,
    semconv.TRACELOOP_ENTITY_OUTPUT,
    "retrieval.documents",
    "retrieval.documents.0.document.id",
    "retrieval.documents.0.document.score",
    "retrieval.documents.0.document.metadata",
    "retrieval.documents.1.document.score",
    "retrieval.documents.x.document.id",
    "reranker.output_documents.0.document.id",
    "reranker.output_documents.0.document.score",
    "llm.output_messages.0.message.content",
    "evaluations.0.evaluation.name",
    "evaluations.0.evaluation.score",
    "gen_ai.completion.0.content",
    "gen_ai.completion.0.finish_reason",
]
KINDS = ["RETRIEVER", "RERANKER", "LLM", "EVALUATOR", "CHAIN"]
SAMPLE_TIMESTAMPS = [
    "2024-05-01",
    "2024-05-01T10:00:00Z",
    "2024-05-01T10:00:00z",
    "2024-05-01T10:00:00+02:00",
    "2024-05-01 10:00:00.123456",
    " 2024-05-01T10:00:00Z ",
    "2024-13-01",
    "yesterday",
    1714557600,
    1714557600123,
    -1.5,
    True,
]
OPERATIONS = ["retrieval", "vector_db_retrieve", "chat", "text_completion"]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(
        KINDS + OPERATIONS + ["high", "medium", "low", "length", "faithfulness", "[1]", "{", "[]"]
    ),
    # Timestamps as instrumentations write them (and as they should not).
    st.sampled_from(SAMPLE_TIMESTAMPS),
)
json_like = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(
            st.sampled_from(
                [
                    "id",
                    "score",
                    "metadata",
                    "documents",
                    "page_content",
                    "role",
                    "parts",
                    "type",
                    "content",
                    "finish_reason",
                    "answer",
                    "citations",
                    "support_level",
                    "generations",
                    "text",
                    "distance",
                    "last_updated",
                    "updated_at",
                ]
            ),
            children,
            max_size=5,
        ),
    ),
    max_leaves=12,
)


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value)
    except (ValueError, TypeError):
        return "{not json"


values = st.one_of(
    json_like,
    json_like.map(_json_text),
    st.lists(st.text(max_size=8), max_size=4).map(tuple),
    st.lists(st.floats(allow_nan=True), max_size=3).map(tuple),
)
attributes = st.dictionaries(st.sampled_from(KEYS), values, max_size=10)
events = st.lists(
    st.builds(
        EventRecord,
        name=st.sampled_from(
            [semconv.GEN_AI_EVALUATION_RESULT, semconv.DB_QUERY_RESULT, semconv.DB_SEARCH_RESULT, "other"]
        ),
        attributes=st.dictionaries(
            st.sampled_from(
                [
                    semconv.GEN_AI_EVALUATION_NAME,
                    semconv.GEN_AI_EVALUATION_SCORE_VALUE,
                    semconv.DB_QUERY_RESULT_ID,
                    semconv.DB_QUERY_RESULT_SCORE,
                    semconv.DB_QUERY_RESULT_DISTANCE,
                    semconv.DB_QUERY_RESULT_METADATA,
                    semconv.DB_SEARCH_RESULT_ID,
                    semconv.DB_SEARCH_RESULT_SCORE,
                ]
            ),
            values,
            max_size=4,
        ),
    ),
    max_size=3,
).map(tuple)
spans = st.lists(
    st.builds(
        SpanRecord,
        trace_id=st.just(1),
        span_id=st.integers(min_value=1, max_value=8),
        parent_span_id=st.one_of(st.none(), st.integers(min_value=1, max_value=8)),
        name=st.sampled_from(
            ["root", "VectorIndexRetriever.retrieve", "vector_db_retrieve BM25Retriever", ""]
        ),
        attributes=attributes,
        events=events,
        end_time=st.one_of(st.none(), st.integers(min_value=0, max_value=100)),
        parent_is_remote=st.booleans(),
    ),
    max_size=8,
)


def _finite_unit(value: Any) -> bool:
    return (
        isinstance(value, float | int)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0 <= value <= 1
    )


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spans)
def test_fuzzed_spans_never_raise_and_stay_scoreable(records: list[SpanRecord]) -> None:
    groups = find_answers(records)
    assert sum(len(group.spans) for group in groups) <= len(records)
    for group in [*groups, None]:
        signals = extract_signals(group.spans if group else records)
        assert signals.skipped >= 0
        inputs = signals.inputs
        assert inputs["supportLevel"] in ("high", "medium", "low")
        for candidate in inputs["candidates"]:
            assert candidate["retrievalScores"]
            assert all(_finite_unit(score) for score in candidate["retrievalScores"].values())
            assert _finite_unit(candidate["combinedScore"])
        for name in ("faithfulnessScore", "answerRelevanceScore", "citationCoverageScore"):
            if name in inputs:
                assert _finite_unit(inputs[name])
        assert all(isinstance(value, str | int | float | bool) for value in signals.diagnostics.values())
        # Whatever the spans held, what extraction hands on is valid scoring input, and what validation makes
        # of it is exactly what the span path (which skips validating it again) scores.
        assert extracted_inputs(inputs) == plain_inputs(inputs)
        assert _SCORER._compute_extracted(inputs) == compute_confidence(inputs)


TIMESTAMPS = st.one_of(
    st.sampled_from(SAMPLE_TIMESTAMPS),
    st.datetimes(timezones=st.one_of(st.none(), st.timezones())).map(lambda moment: moment.isoformat()),
    st.integers(min_value=-(2**40), max_value=2**45),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(TIMESTAMPS, min_size=1, max_size=4))
def test_extracted_timestamps_score_as_validation_would_make_them(timestamps: list[Any]) -> None:
    # The span path skips validating extraction's output; the one thing validation changes in it is
    # turning candidate timestamps into datetimes, which the span path does with the validator's parser.
    attributes: dict[str, Any] = {semconv.OPENINFERENCE_SPAN_KIND: semconv.OPENINFERENCE_KIND_RETRIEVER}
    for index, value in enumerate(timestamps):
        prefix = f"{semconv.OI_RETRIEVAL_DOCUMENTS}.{index}."
        attributes[prefix + semconv.OI_DOCUMENT_ID] = f"doc-{index}"
        attributes[prefix + semconv.OI_DOCUMENT_SCORE] = 0.9 - index * 0.1
        attributes[prefix + semconv.OI_DOCUMENT_METADATA] = json.dumps({"last_updated": value})
    retriever = SpanRecord(1, 2, 1, "retrieve", attributes, end_time=1)
    answer = SpanRecord(1, 1, None, "answer", {"rag.answer": True}, end_time=2)
    inputs = extract_signals([retriever, answer]).inputs
    assert extracted_inputs(inputs) == plain_inputs(inputs)
    assert _SCORER._compute_extracted(inputs) == compute_confidence(inputs)


def test_the_timestamp_property_is_not_vacuous() -> None:
    attributes = {
        semconv.OPENINFERENCE_SPAN_KIND: semconv.OPENINFERENCE_KIND_RETRIEVER,
        f"{semconv.OI_RETRIEVAL_DOCUMENTS}.0.{semconv.OI_DOCUMENT_ID}": "doc-0",
        f"{semconv.OI_RETRIEVAL_DOCUMENTS}.0.{semconv.OI_DOCUMENT_SCORE}": 0.8,
        f"{semconv.OI_RETRIEVAL_DOCUMENTS}.0.{semconv.OI_DOCUMENT_METADATA}": '{"last_updated": "2024-05-01Z"}',
    }
    inputs = extract_signals(
        [SpanRecord(1, 2, 1, "retrieve", attributes), SpanRecord(1, 1, None, "a")]
    ).inputs
    (candidate,) = inputs["candidates"]
    assert isinstance(candidate["lastUpdated"], str)
    (converted,) = extracted_inputs(inputs)["candidates"]
    assert converted["lastUpdated"] == plain_inputs(inputs)["candidates"][0]["lastUpdated"]
    assert converted["lastUpdated"].tzinfo is not None
