"""Extraction rules one by one: citations, score scales, precedence, support level, options, records."""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from rag_confidence import semconv
from rag_confidence.errors import ConfigValidationError
from rag_confidence.signals import (
    ATTRIBUTE_BY_KEYWORD,
    SignalOptions,
    SpanRecord,
    extract_signals,
    records_from_readable_spans,
)


def retrieval(
    span_id: int, documents: list[dict[str, Any]], *, source: str = "kb", end: int = 1
) -> SpanRecord:
    return SpanRecord(
        1,
        span_id,
        1,
        f"retrieval {source}",
        {
            semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OPERATION_RETRIEVAL,
            semconv.GEN_AI_DATA_SOURCE_ID: source,
            semconv.GEN_AI_RETRIEVAL_DOCUMENTS: json.dumps(documents),
        },
        end_time=end,
    )


def generation(text: str, span_id: int = 50, end: int = 5) -> SpanRecord:
    return SpanRecord(
        1,
        span_id,
        1,
        "llm",
        {semconv.OPENINFERENCE_SPAN_KIND: "LLM", "llm.output_messages.0.message.content": text},
        end_time=end,
    )


def answer(**attributes: Any) -> SpanRecord:
    return SpanRecord(1, 1, None, "answer", {semconv.RAG_ANSWER: True, **attributes}, end_time=10)


DOCS = [{"id": "alpha", "score": 0.9}, {"id": "beta", "score": 0.7}, {"id": "gamma", "score": 0.5}]


@pytest.mark.parametrize(
    ("text", "cited", "invalid", "coverage"),
    [
        ("One [1]. Two [2]. Three.", 2, 0, 2 / 3),
        ("Both [1, 3].", 2, 0, 1.0),
        ("Footnote[^2] and [^alpha].", 2, 0, 1.0),
        ("See [doc-3] and [source: 1]. Also [ref 9].", 2, 1, 0.5),
        ("By id [beta] and [BETA] and [Alpha].", 2, 0, 1.0),
        ("A sentence.\n[2]", 1, 0, 1.0),
        ("Not citations: [docs] and [link](https://example.com) and [note].", 0, 0, None),
        ("Wrong [7] and [doc-0].", 0, 2, 0.0),
        ("退款需要三十天[1]。运费由买方承担。", 1, 0, 0.5),  # CJK full stops end sentences without a space
        ("巴黎是法国的首都。[1]东京是日本的首都。[2]", 2, 0, 1.0),  # a marker after 。 cites that sentence
        # Lines that claim nothing (a sources list under its heading, in any case and script; a heading; a
        # footnote definition) are no sentences; text without them is read as any other.
        ("One [1]. Two.\n\nSOURCES\n[1] Atlas\n[2] Rivers", 2, 0, 0.5),
        ("One [1]. Two, at the café.\n\nSources:\n[1] Atlas\n[2] Rivers", 2, 0, 0.5),
        ("## Facts\nOne [1]. Two.", 1, 0, 0.5),
        ("One [^1]. Two.\n\n[^1]: Atlas, second edition.", 1, 0, 0.5),
        ("The source is one [1]. The reference works cited two.", 1, 0, 0.5),
    ],
)
def test_citation_rules(text: str, cited: int, invalid: int, coverage: float | None) -> None:
    signals = extract_signals([answer(), retrieval(2, DOCS), generation(text)])
    if coverage is None:
        assert "citationCount" not in signals.inputs
        assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 0
        return
    assert signals.inputs["citationCount"] == cited
    assert signals.inputs["invalidCitationCount"] == invalid
    assert signals.inputs["citationCoverageScore"] == pytest.approx(coverage)


def test_a_reference_shaped_like_the_retrieved_ids_is_an_id_not_a_position() -> None:
    documents = [{"id": f"doc-{n}", "score": 0.9 - n / 10} for n in (1, 2, 4)]
    text = "Known [doc-2]. Not retrieved [doc-3]. Third shown [3]."
    signals = extract_signals([answer(), retrieval(2, documents), generation(text)])
    assert signals.inputs["citationCount"] == 2  # doc-2 and the third document by position
    assert signals.inputs["invalidCitationCount"] == 1  # doc-3 was never retrieved


def test_ids_of_another_scale_leave_a_prefixed_reference_a_position() -> None:
    documents = [{"id": f"doc-{n}", "score": 0.9 - n / 1e6} for n in (98765, 98766)]
    signals = extract_signals(
        [answer(), retrieval(2, documents), generation("First [doc-1]. Second [doc-2].")]
    )
    assert (signals.inputs["citationCount"], signals.inputs["invalidCitationCount"]) == (2, 0)


def test_custom_citation_pattern_and_zero_based_positions() -> None:
    options = SignalOptions(citation_patterns=(r"【(\d+)】",), citation_position_base=0)
    signals = extract_signals([answer(), retrieval(2, DOCS), generation("Yes【0】【2】【3】.")], options)
    assert (signals.inputs["citationCount"], signals.inputs["invalidCitationCount"]) == (2, 1)


@pytest.mark.parametrize(
    ("scale", "expected"),
    [("max", [1.0, 0.5, 0.0]), ("squash", [12 / 13, 6 / 7, 0.0]), ("clamp", [1.0, 1.0, 0.0])],
)
def test_scores_above_one_are_rescaled_per_span(scale: str, expected: list[float]) -> None:
    bm25 = [{"id": "a", "score": 12.0}, {"id": "b", "score": 6.0}, {"id": "c", "score": -1.0}]
    signals = extract_signals([answer(), retrieval(2, bm25)], SignalOptions(score_scale=scale))  # type: ignore[arg-type]
    scores = {c["documentId"]: c["retrievalScores"]["kb"] for c in signals.inputs["candidates"]}
    assert [scores["a"], scores["b"], scores["c"]] == pytest.approx(expected)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_SCORES_RESCALED] is True


def test_in_range_scores_are_untouched_and_distances_become_similarities() -> None:
    span = SpanRecord(
        1,
        2,
        1,
        "retrieve",
        {
            semconv.OPENINFERENCE_SPAN_KIND: "RETRIEVER",
            "retrieval.documents.0.document.id": "near",
            "retrieval.documents.0.document.metadata": json.dumps({"distance": 0.0}),
            "retrieval.documents.1.document.id": "far",
            "retrieval.documents.1.document.metadata": json.dumps({"_distance": 3.0}),
        },
    )
    signals = extract_signals([answer(), span])
    assert [(c["documentId"], c["combinedScore"]) for c in signals.inputs["candidates"]] == [
        ("near", 1.0),
        ("far", 0.25),
    ]
    assert semconv.RAG_CONFIDENCE_RETRIEVAL_SCORES_RESCALED not in signals.diagnostics


def test_multi_query_keeps_the_best_score_of_one_method() -> None:
    first = retrieval(2, [{"id": "a", "score": 0.4}], end=1)
    second = retrieval(3, [{"id": "a", "score": 0.6}, {"id": "b", "score": 0.2}], end=2)
    signals = extract_signals([answer(), first, second])
    assert signals.inputs["candidates"][0] == {
        "retrievalScores": {"kb": 0.6},
        "combinedScore": 0.6,
        "documentId": "a",
        "rank": 1,
    }
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_SPANS] == 2


def test_two_methods_whose_rescaled_scores_coincide_stay_two_methods() -> None:
    # BM25 (8.5) and SPLADE (3.2) each find one document: both rescale to 1.0, yet they are two methods.
    bm25 = retrieval(2, [{"id": "doc-1", "score": 8.5}], source="bm25", end=1)
    splade = retrieval(3, [{"id": "doc-1", "score": 3.2}], source="splade", end=2)
    signals = extract_signals([answer(), bm25, splade])
    (candidate,) = signals.inputs["candidates"]
    assert candidate["retrievalScores"] == {"bm25": 1.0, "splade": 1.0}
    # The same retriever reported twice (two tracers on one retriever) still counts once.
    again = retrieval(4, [{"id": "doc-1", "score": 8.5}], source="bm25", end=3)
    (candidate,) = extract_signals([answer(), bm25, again]).inputs["candidates"]
    assert candidate["retrievalScores"] == {"bm25": 1.0}


def test_a_method_without_ids_merges_by_text_with_a_method_that_has_them() -> None:
    texts = ["Refunds within 30 days.", "Shipping takes a week."]
    vector = retrieval(
        2,
        [{"id": f"doc-{i}", "score": 0.9 - i / 10, "content": t} for i, t in enumerate(texts)],
        source="vector",
        end=1,
    )
    keyword = retrieval(
        3, [{"score": 0.8 - i / 10, "content": t} for i, t in enumerate(texts)], source="bm25", end=2
    )
    for order in ([vector, keyword], [keyword, vector]):
        candidates = extract_signals([answer(), *order]).inputs["candidates"]
        assert [(c.get("documentId"), sorted(c["retrievalScores"])) for c in candidates] == [
            ("doc-0", ["bm25", "vector"]),
            ("doc-1", ["bm25", "vector"]),
        ]


def test_documents_with_different_ids_and_the_same_text_stay_two_beside_an_id_less_method() -> None:
    text = "Refunds within 30 days."
    vector = retrieval(
        2,
        [
            {"id": "policy-2023", "score": 0.9, "content": text},
            {"id": "policy-2024", "score": 0.8, "content": text},
            {"id": "faq", "score": 0.7, "content": "Shipping takes a week."},
        ],
        source="vector",
        end=1,
    )
    keyword = retrieval(3, [{"score": 0.6, "content": "Something else entirely."}], source="bm25", end=2)
    ids = [c.get("documentId") for c in extract_signals([answer(), vector, keyword]).inputs["candidates"]]
    assert sorted(ids, key=str) == sorted(["policy-2023", "policy-2024", "faq", None], key=str)


def test_metadata_key_map_fields_and_ranks() -> None:
    metadata = {
        "doc_id": "m1",
        "relevance_score": 0.66,
        "doc_type": "policy",
        "updated_at": 1_700_000_000,
        "sha256": "abc",
        "extraction_quality": 0.9,
        "authority_rank": 1.0,
        "is_amendment": "true",
        "rank": 4,
    }
    span = SpanRecord(
        1,
        2,
        1,
        "retrieve",
        {
            semconv.OPENINFERENCE_SPAN_KIND: "RETRIEVER",
            "retrieval.documents.0.document.metadata": json.dumps(metadata),
        },
    )
    (candidate,) = extract_signals([answer(), span]).inputs["candidates"]
    assert candidate == {
        "retrievalScores": {"retrieve": 0.66},
        "combinedScore": 0.66,
        "documentId": "m1",
        "documentType": "policy",
        "lastUpdated": "2023-11-14T22:13:20+00:00",
        "contentHash": "abc",
        "extractionQuality": 0.9,
        "authorityRank": 1,
        "isAmendment": True,
        "rank": 4,
    }


def test_precedence_explicit_over_rag_signal_over_structured_over_derived() -> None:
    structured = json.dumps({"answer": "Yes [1].", "support_level": "high", "faithfulness": 0.9})
    spans = [
        answer(**{semconv.RAG_SIGNAL_SUPPORT_LEVEL: "medium"}),
        SpanRecord(1, 7, 1, "step", {semconv.RAG_SIGNAL_CITATION_COUNT: 5}, end_time=3),
        retrieval(2, DOCS),
        generation(structured),
    ]
    signals = extract_signals(spans, explicit={"faithfulnessScore": 0.2, "hasConflict": True})
    assert signals.inputs["supportLevel"] == "medium" and signals.sources["supportLevel"] == "rag.signal"
    assert signals.inputs["faithfulnessScore"] == 0.2 and signals.sources["faithfulnessScore"] == "explicit"
    assert signals.inputs["citationCount"] == 5 and "citationCount" not in signals.derived
    assert signals.inputs["invalidCitationCount"] == 0 and "invalidCitationCount" in signals.derived
    assert signals.inputs["hasConflict"] is True


def test_answer_span_value_beats_other_spans_and_later_beats_earlier() -> None:
    spans = [
        SpanRecord(1, 8, 1, "late", {semconv.RAG_SIGNAL_QUERY_COMPLEXITY: "comparative"}, end_time=9),
        SpanRecord(1, 7, 1, "early", {semconv.RAG_SIGNAL_QUERY_COMPLEXITY: "direct"}, end_time=2),
        answer(**{semconv.RAG_SIGNAL_FAITHFULNESS_SCORE: 0.6}),
        SpanRecord(1, 9, 1, "child", {semconv.RAG_SIGNAL_FAITHFULNESS_SCORE: 0.99}, end_time=4),
    ]
    signals = extract_signals(spans)
    assert signals.inputs["queryComplexity"] == "comparative"
    assert signals.inputs["faithfulnessScore"] == 0.6


@pytest.mark.parametrize(
    ("attributes", "level", "source"),
    [
        ({}, "medium", "default"),
        ({semconv.RAG_SIGNAL_FAITHFULNESS_SCORE: 0.85}, "high", "faithfulnessScore"),
        ({semconv.RAG_SIGNAL_FAITHFULNESS_SCORE: 0.5}, "medium", "faithfulnessScore"),
        ({semconv.RAG_SIGNAL_FAITHFULNESS_SCORE: 0.49}, "low", "faithfulnessScore"),
        (
            {semconv.RAG_SIGNAL_CLAIMS_TOTAL: 4, semconv.RAG_SIGNAL_CLAIMS_SUPPORTED: 4},
            "high",
            "claimSupport",
        ),
        (
            {
                semconv.RAG_SIGNAL_CLAIMS_TOTAL: 4,
                semconv.RAG_SIGNAL_CLAIMS_SUPPORTED: 4,
                semconv.RAG_SIGNAL_CLAIMS_CONTRADICTED: 1,
            },
            "low",
            "claimSupport",
        ),
        (
            {
                semconv.RAG_SIGNAL_FAITHFULNESS_SCORE: 0.95,
                semconv.RAG_SIGNAL_CLAIMS_TOTAL: 4,
                semconv.RAG_SIGNAL_CLAIMS_SUPPORTED: 3,
            },
            "medium",
            "claimSupport",
        ),
    ],
)
def test_support_level_derivation(attributes: dict[str, Any], level: str, source: str) -> None:
    signals = extract_signals([answer(**attributes)])
    assert (signals.inputs["supportLevel"], signals.sources["supportLevel"]) == (level, source)
    assert signals.derived[0] == "supportLevel"


def test_configured_default_support_level() -> None:
    signals = extract_signals([answer()], SignalOptions(default_support_level="low"))
    assert signals.inputs["supportLevel"] == "low"


def test_bad_rag_signal_values_are_skipped_and_counted() -> None:
    spans = [
        answer(
            **{
                semconv.RAG_SIGNAL_SUPPORT_LEVEL: "very high",
                semconv.RAG_SIGNAL_FAITHFULNESS_SCORE: float("nan"),
                semconv.RAG_SIGNAL_ANSWER_RELEVANCE_SCORE: 1.5,
                semconv.RAG_SIGNAL_CITATION_COUNT: -1,
                semconv.RAG_SIGNAL_HAS_CONFLICT: "maybe",
                semconv.RAG_SIGNAL_CLAIMS_TOTAL: 3,  # without supported: dropped
                semconv.RAG_SIGNAL_CORPUS_PRESENT_TYPES: ("policy", "faq"),
                semconv.RAG_SIGNAL_INDEX_ACL_FILTER_CONFIRMED: True,
                semconv.RAG_SIGNAL_AMBIGUITY_NOTES: "",
            }
        )
    ]
    signals = extract_signals(spans)
    assert signals.skipped == 6
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_SIGNALS_SKIPPED] == 6
    assert signals.inputs["presentTypes"] == ["policy", "faq"]
    assert signals.inputs["indexIntegrity"] == {"aclFilterConfirmed": True}
    assert signals.inputs["ambiguityNotes"] == ""
    assert "claimSupport" not in signals.inputs and "faithfulnessScore" not in signals.inputs


def test_record_signals_keywords_cover_every_attribute() -> None:
    assert ATTRIBUTE_BY_KEYWORD["support_level"] == semconv.RAG_SIGNAL_SUPPORT_LEVEL
    assert ATTRIBUTE_BY_KEYWORD["claims_total"] == semconv.RAG_SIGNAL_CLAIMS_TOTAL
    assert (
        ATTRIBUTE_BY_KEYWORD["index_failed_ingestion_count"]
        == semconv.RAG_SIGNAL_INDEX_FAILED_INGESTION_COUNT
    )
    signal_names = {name for name in vars(semconv).values() if isinstance(name, str)}
    expected = {name for name in signal_names if name.startswith(semconv.RAG_SIGNAL_PREFIX)} - {
        semconv.RAG_SIGNAL_PREFIX,
        semconv.RAG_SIGNAL_INDEX_PREFIX,
    }
    assert set(ATTRIBUTE_BY_KEYWORD.values()) == expected


@pytest.mark.parametrize(
    "kwargs",
    [
        {"default_support_level": "certain"},
        {"support_thresholds": (0.4, 0.6)},
        {"score_scale": "log"},
        {"citation_patterns": ("[unclosed",)},
        {"citation_patterns": (r"\[\d+\]",)},
    ],
)
def test_invalid_options_fail_at_setup(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigValidationError):
        SignalOptions(**kwargs)


def test_method_namer_wins_and_a_failing_namer_falls_back() -> None:
    span = retrieval(2, DOCS, source="kb-7")
    named = extract_signals([answer(), span], SignalOptions(method_namer=lambda record: "dense"))
    assert set(named.inputs["candidates"][0]["retrievalScores"]) == {"dense"}

    def broken(record: SpanRecord) -> str:
        raise RuntimeError("bug in user code")

    fallback = extract_signals([answer(), span], SignalOptions(method_namer=broken))
    assert set(fallback.inputs["candidates"][0]["retrievalScores"]) == {"kb-7"}
    assert fallback.skipped == 1  # the failed callback, counted once for the one retrieval span


def test_records_from_readable_spans_keep_kind_status_events_and_remote_parents() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    with (
        tracer.start_as_current_span("root") as root,
        tracer.start_as_current_span("db", kind=SpanKind.CLIENT) as db,
    ):
        db.add_event("db.query.result", {"db.query.result.id": "x"})
        db.set_status(Status(StatusCode.ERROR))
        root.set_attribute(semconv.RAG_ANSWER, True)
    records = {record.name: record for record in records_from_readable_spans(exporter.get_finished_spans())}
    assert records["db"].kind == "CLIENT" and records["db"].status_code == "ERROR"
    assert records["db"].parent_span_id == records["root"].span_id and not records["db"].parent_is_remote
    assert records["db"].events[0].name == "db.query.result"
    assert dict(records["db"].events[0].attributes) == {"db.query.result.id": "x"}
    assert records["root"].parent_span_id is None and records["root"].attributes[semconv.RAG_ANSWER] is True
    assert records["root"].end_time is not None and records["root"].start_time is not None


def test_integers_beyond_any_float_are_skipped_not_raised() -> None:
    # Python ints are unbounded (a JSON document or a kvlist can carry one); float() of them overflows.
    huge = 2**1100
    retriever = SpanRecord(
        1,
        2,
        1,
        "search",
        {
            semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OPERATION_RETRIEVAL,
            semconv.GEN_AI_RETRIEVAL_DOCUMENTS: json.dumps(
                [{"id": "a", "score": huge}, {"id": "b", "score": 0.5, "metadata": {"rank": huge}}]
            ),
        },
    )
    answer = SpanRecord(
        1,
        1,
        None,
        "answer",
        {
            "rag.answer": True,
            "rag.signal.faithfulness_score": huge,
            "rag.signal.citation_count": huge,
            "rag.signal.claim_support.total_claims": huge,
        },
    )
    signals = extract_signals([retriever, answer])
    assert signals.skipped >= 3
    assert "faithfulnessScore" not in signals.inputs and "citationCount" not in signals.inputs
    # "a" has no readable score, so it is reported as unscored rather than guessed.
    assert [candidate["documentId"] for candidate in signals.inputs["candidates"]] == ["b"]
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_UNSCORED_DOCUMENTS] == 1


def test_thousands_of_citation_markers_are_read_in_near_linear_time() -> None:
    import time

    text = " ".join(f"Claim {i} [{i % 4}]." for i in range(8000))
    started = time.process_time()
    signals = extract_signals([answer(), retrieval(2, DOCS), generation(text)])
    # Not a speed target: a generous bound the quadratic reading (over 5 s here) exceeds by far.
    assert time.process_time() - started < 2.0
    assert (
        signals.inputs["citationCount"] == 3 and signals.inputs["invalidCitationCount"] == 1
    )  # [0] is no position
    assert signals.inputs["citationCoverageScore"] == 0.75


@pytest.mark.parametrize(
    "text",
    [
        "[doc" + "_" * 200_000,  # [-_:\s]+[\w.\-]+ split every way before a missing "]"
        "[^" * 100_000,  # each "[^" scanned to the end of the text
        "[doc" + " " * 200_000 + "x]",  # \s*[,;]\s* rescanning a long run of spaces
        "[1" + ", 1" * 100_000,  # a list that never closes
        ("[source:" + " " * 7 + "-" * 300) * 500,
    ],
    ids=["underscores", "caret brackets", "spaces", "open list", "long separators"],
)
def test_an_answer_written_to_make_citation_matching_backtrack_is_read_in_linear_time(text: str) -> None:
    # The answer is a model's output, which a user can steer. Not a speed target: the backtracking patterns
    # took minutes on a few dozen kilobytes, holding the GIL (the gateway stopped answering its probes).
    import time

    started = time.process_time()
    extract_signals([answer(), retrieval(2, DOCS), generation(text)])
    assert time.process_time() - started < 5.0


@pytest.mark.parametrize(
    ("text", "cited", "invalid"),
    [
        ("A [1]. B [2].", 2, 0),
        ("A [1, 2]. B [1;2]. C [2 ,1]. D [1,\n2].", 2, 0),
        ("A [^alpha]. B [^2].", 2, 0),
        ("A [doc-1]. B [source: 2]. C [ref 3]. D [chunk_1].", 3, 0),
        ("A [doc-zz]. B [Doc_9].", 0, 2),
        ("A [docs]. B [references]. C [link](https://example.com).", 0, 0),
        ("A [doc-_1].", 1, 0),
    ],
)
def test_citation_markers_read_as_before_the_patterns_were_bounded(
    text: str, cited: int, invalid: int
) -> None:
    # The same counts as the unbounded patterns gave (checked against them when they were replaced).
    signals = extract_signals([answer(), retrieval(2, DOCS), generation(text)])
    assert signals.inputs.get("citationCount", 0) == cited
    assert signals.inputs.get("invalidCitationCount", 0) == invalid


def test_numbers_too_long_for_python_to_read_are_no_positions_and_raise_nothing() -> None:
    # Python refuses int() of more than 4,300 digits: a citation or an id that long raised out of extraction.
    structured = json.dumps({"answer": "Paris.", "citations": ["1" * 5000]})
    signals = extract_signals([answer(), retrieval(2, DOCS), generation(structured)])
    assert signals.inputs["invalidCitationCount"] == 1
    documents = [{"id": "doc-1", "score": 0.9}, {"id": "doc-" + "9" * 5000, "score": 0.5}]
    signals = extract_signals([answer(), retrieval(2, documents), generation("A [doc-3].")])
    assert signals.inputs["invalidCitationCount"] == 1


# -- what the generator was shown: several presenters ----------------------------------------------------------


def oi_retriever(span_id: int, parent: int, documents: list[tuple[str, float]], end: int) -> SpanRecord:
    return oi_documents(span_id, parent, documents, end, reranker=False)


def oi_reranker(span_id: int, parent: int, documents: list[tuple[str, float]], end: int) -> SpanRecord:
    return oi_documents(span_id, parent, documents, end, reranker=True)


def oi_documents(
    span_id: int, parent: int, documents: list[tuple[str, float]], end: int, *, reranker: bool
) -> SpanRecord:
    kind = semconv.OPENINFERENCE_KIND_RERANKER if reranker else semconv.OPENINFERENCE_KIND_RETRIEVER
    prefix = semconv.OI_RERANKER_OUTPUT_DOCUMENTS if reranker else semconv.OI_RETRIEVAL_DOCUMENTS
    attributes: dict[str, Any] = {semconv.OPENINFERENCE_SPAN_KIND: kind}
    for index, (document_id, score) in enumerate(documents):
        attributes[f"{prefix}.{index}.{semconv.OI_DOCUMENT_ID}"] = document_id
        attributes[f"{prefix}.{index}.{semconv.OI_DOCUMENT_SCORE}"] = score
    name = "rerank" if reranker else "VectorIndexRetriever.retrieve"
    return SpanRecord(1, span_id, parent, name, attributes, end_time=end)


def candidate_ids(signals: Any) -> list[str]:
    return [candidate["documentId"] for candidate in signals.inputs["candidates"]]


def test_each_reranker_presents_what_it_kept_of_its_own_retrieval() -> None:
    # A LlamaIndex sub-question engine with a reranker per sub-question: both sub-answers' documents reached the
    # generator. (The last reranker alone used to decide, losing the first sub-question's documents.)
    spans = [
        answer(),
        oi_retriever(2, 1, [("retention", 0.45), ("regions", 0.32), ("encryption", 0.30)], end=1),
        oi_reranker(3, 1, [("retention", 0.6), ("regions", 0.4)], end=2),
        oi_retriever(4, 1, [("cost", 0.6), ("restore", 0.35), ("legal", 0.1)], end=3),
        oi_reranker(5, 1, [("cost", 0.57), ("restore", 0.43)], end=4),
        generation("Kept 35 days [retention]; 0.02 USD per GB-month [cost].", end=6),
    ]
    signals = extract_signals(spans)
    assert candidate_ids(signals) == ["retention", "regions", "cost", "restore"]
    assert [c["rank"] for c in signals.inputs["candidates"]] == [1, 2, 3, 4]
    assert [c["combinedScore"] for c in signals.inputs["candidates"]] == [0.6, 0.4, 0.57, 0.43]
    assert signals.inputs["citationCount"] == 2 and signals.inputs["invalidCitationCount"] == 0


def test_a_reranker_right_after_another_is_a_further_stage_of_it() -> None:
    spans = [
        answer(),
        oi_retriever(2, 1, [("a", 0.9), ("b", 0.8), ("c", 0.7)], end=1),
        oi_reranker(3, 1, [("c", 0.9), ("a", 0.5), ("b", 0.4)], end=2),  # cheap first stage
        oi_reranker(4, 1, [("a", 0.95), ("c", 0.6)], end=3),  # cross-encoder on its output
    ]
    signals = extract_signals(spans)
    assert candidate_ids(signals) == ["a", "c"]
    assert signals.inputs["candidates"][0]["retrievalScores"] == {"vectorindex": 0.9, "rerank": 0.95}


def test_a_retrieval_no_presenter_covers_was_shown_as_it_is() -> None:
    # An agent's first round through a compressing wrapper, its second round through the plain retriever.
    wrapper_docs = [("retention", 0.0), ("restore", 0.0)]
    spans = [
        answer(),
        oi_retriever(3, 2, [("retention", 0.45), ("restore", 0.35), ("cost", 0.2)], end=1),
        oi_retriever(2, 1, wrapper_docs, end=2),  # the wrapper, around span 3, keeps two
        oi_retriever(4, 1, [("cost", 0.8), ("restore", 0.35)], end=3),
    ]
    for span in spans[2:3]:  # the wrapper's documents carry no score of their own
        for index in range(2):
            del span.attributes[f"{semconv.OI_RETRIEVAL_DOCUMENTS}.{index}.{semconv.OI_DOCUMENT_SCORE}"]
    signals = extract_signals(spans)
    assert candidate_ids(signals) == ["retention", "restore", "cost"]
    assert signals.inputs["candidates"][2]["retrievalScores"] == {"vectorindex": 0.8}


def test_citing_a_document_a_reranker_dropped_is_invalid() -> None:
    spans = [
        answer(),
        oi_retriever(2, 1, [("legal", 0.9), ("retention", 0.8), ("regions", 0.7)], end=1),
        oi_reranker(3, 1, [("legal", 0.9), ("retention", 0.6)], end=2),
        generation("Kept 35 days [legal]. Replicated to a second region [regions].", end=3),
    ]
    signals = extract_signals(spans)
    assert candidate_ids(signals) == ["legal", "retention"]
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
    assert signals.inputs["citationCount"] == 1
    assert signals.inputs["invalidCitationCount"] == 1
    assert signals.inputs["citationCoverageScore"] == 0.5


def test_interleaved_markers_of_every_pattern_are_read_in_near_linear_time() -> None:
    # Each pattern's matches used to be inserted one by one into the middle of the sorted list of those
    # taken: 2 MB of "[doc-1] [^1] [1] " took 16 s. Not a speed target: a generous ceiling.
    import time

    text = "[doc-1] [^1] [1] " * 120_000
    started = time.process_time()
    signals = extract_signals([answer(), retrieval(2, DOCS), generation(text)])
    assert time.process_time() - started < 12.0
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 360_000


def test_a_bare_number_stays_a_position_even_when_a_dropped_document_has_it_for_id() -> None:
    # The model numbers what it was shown: [3] is the third presented document, not the dropped id 3.
    spans = [
        answer(),
        oi_retriever(2, 1, [("7", 0.9), ("12", 0.8), ("5", 0.7), ("3", 0.6)], end=1),
        oi_reranker(3, 1, [("7", 0.9), ("12", 0.8), ("5", 0.7)], end=2),
        generation("One [1]. Three [3].", end=3),
    ]
    signals = extract_signals(spans)
    assert signals.inputs["citationCount"] == 2 and signals.inputs["invalidCitationCount"] == 0


def test_a_reranker_covers_the_retrievals_of_its_own_query_not_a_parallel_branch_or_an_earlier_round() -> (
    None
):
    def step(span_id: int, parent: int, end: int) -> SpanRecord:
        return SpanRecord(1, span_id, parent, f"query {span_id}", end_time=end)

    # Two sub-queries run in parallel: both retrievals end before either reranker.
    parallel = [
        answer(),
        step(10, 1, end=5),
        step(20, 1, end=6),
        oi_retriever(11, 10, [("a1", 0.9), ("a2", 0.8), ("a3", 0.1)], end=1),
        oi_retriever(21, 20, [("b1", 0.9), ("b2", 0.2), ("b3", 0.7)], end=2),
        oi_reranker(12, 10, [("a2", 0.9), ("a1", 0.8)], end=3),
        oi_reranker(22, 20, [("b3", 0.9), ("b1", 0.6)], end=4),
    ]
    assert candidate_ids(extract_signals(parallel)) == ["a2", "a1", "b3", "b1"]
    # An agent's first round without a reranker, its second with one.
    rounds = [
        answer(),
        step(10, 1, end=2),
        step(20, 1, end=6),
        oi_retriever(11, 10, [("x1", 0.9), ("x2", 0.5)], end=1),
        oi_retriever(21, 20, [("y1", 0.8), ("y2", 0.7), ("y3", 0.1)], end=3),
        oi_reranker(22, 20, [("y2", 0.9), ("y1", 0.6)], end=4),
        generation("Round one [x1]; round two [y2].", end=7),
    ]
    signals = extract_signals(rounds)
    assert candidate_ids(signals) == ["y2", "y1", "x1", "x2"]
    assert signals.inputs["citationCount"] == 2 and signals.inputs["invalidCitationCount"] == 0


@pytest.mark.parametrize(
    ("claims", "source"),
    [
        ({"totalClaims": 4.0, "supportedClaims": 4.0}, "claimSupport"),
        ({"totalClaims": 4.5, "supportedClaims": 4.0}, "default"),
        ({"totalClaims": float("inf"), "supportedClaims": 4.0}, "default"),
        ({"totalClaims": 4, "supportedClaims": float("nan")}, "default"),
        ({"totalClaims": True, "supportedClaims": True}, "default"),
    ],
)
def test_explicit_claim_counts_derive_support_only_when_whole(claims: dict[str, Any], source: str) -> None:
    signals = extract_signals([answer()], explicit={"claimSupport": claims})
    assert signals.sources["supportLevel"] == source
