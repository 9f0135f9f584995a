"""OpenLLMetry vector-DB result events whose values need reading of their own: Milvus, Marqo and Chroma.

The spans are built with the SDK tracer exactly as the upstream wrappers write them
(opentelemetry-instrumentation-milvus and -marqo 0.62.4, ``opentelemetry/instrumentation/{milvus,marqo}/
wrapper.py``; -milvus 0.60.0 and -chromadb 0.62.4 where a test says so, each checked by hand against the real
instrumentor over milvus-lite and chromadb 1.5.9), so that a test can choose the exact values (a distance a
rounding error below zero) and send the spans through the gateway too. The Milvus and Marqo instrumentors are
not in the test environment (milvus-lite and pymilvus add some 330 MB; Marqo needs its server); the Chroma one
is, and tests/test_signals_vector_db_chroma.py runs it over a real in-process Chroma.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span, Tracer

from rag_confidence import semconv
from rag_confidence.gateway.spans import iter_spans, to_record
from rag_confidence.signals import (
    EventRecord,
    ExtractedSignals,
    SpanRecord,
    extract_signals,
    find_answers,
    is_retrieval_span,
    may_hold_answer,
    records_from_readable_spans,
)


def milvus_search_events(span: Span, results: list[list[dict[str, Any]]]) -> None:
    """What Milvus wrapper.py ``_add_search_result_events`` writes for ``MilvusClient.search``'s return value:
    one event per hit, the query's index, the hit's id, ``str(float(distance))`` and ``str(entity)``."""
    for query_index, hits in enumerate(results):
        for hit in hits:
            span.add_event(
                semconv.DB_SEARCH_RESULT,
                {
                    semconv.DB_SEARCH_QUERY_ID: query_index,
                    semconv.DB_SEARCH_RESULT_ID: hit["id"],
                    semconv.DB_SEARCH_RESULT_DISTANCE: str(float(hit["distance"])),
                    semconv.DB_SEARCH_RESULT_ENTITY: str(hit["entity"]),
                },
            )


def milvus_scores(
    traced: tuple[Tracer, InMemorySpanExporter],
    results: list[list[dict[str, Any]]],
    search_params: Mapping[str, Any] | None = None,
) -> list[tuple[str, float]]:
    tracer, exporter = traced
    with tracer.start_as_current_span("rag"), tracer.start_as_current_span("milvus.search") as span:
        span.set_attribute(semconv.DB_SYSTEM, semconv.DB_SYSTEM_MILVUS)
        if search_params is not None:
            # _set_search_attributes: _encode_include(kwargs.get("search_params")), the str() of the dict.
            span.set_attribute(semconv.MILVUS_SEARCH_SEARCH_PARAMS, str(search_params))
        milvus_search_events(span, results)
    (group,) = find_answers(records_from_readable_spans(exporter.get_finished_spans()))
    signals = extract_signals(group.spans)
    return [(c["documentId"], c["retrievalScores"]["milvus"]) for c in signals.inputs["candidates"]]


def hits(*pairs: tuple[str, float]) -> list[dict[str, Any]]:
    return [
        {"id": doc_id, "distance": value, "entity": {"text": f"text of {doc_id}"}} for doc_id, value in pairs
    ]


def test_milvus_cosine_similarities_written_as_distances_keep_their_ranking(
    traced: tuple[Tracer, InMemorySpanExporter],
) -> None:
    """``MilvusClient.create_collection`` defaults to ``COSINE``; Milvus then returns the cosine similarity in
    the ``distance`` field, best first. Read as distances (1 / (1 + d)) the best hit would rank last."""
    scores = milvus_scores(traced, [hits(("A", 0.93), ("B", 0.41), ("C", 0.12))])
    assert scores == [("A", pytest.approx(0.93)), ("B", pytest.approx(0.41)), ("C", pytest.approx(0.12))]


def test_milvus_l2_distances_increase_down_the_list_and_stay_distances(
    traced: tuple[Tracer, InMemorySpanExporter],
) -> None:
    scores = milvus_scores(traced, [hits(("A", 0.25), ("B", 1.0), ("C", 3.0))])
    assert scores == [("A", pytest.approx(0.8)), ("B", pytest.approx(0.5)), ("C", pytest.approx(0.25))]


def test_milvus_orders_each_query_of_a_multi_vector_search_on_its_own(
    traced: tuple[Tracer, InMemorySpanExporter],
) -> None:
    """Two query vectors: each query's hits are best first, but the second query's first hit may be better
    than the first query's last; only the order within one query says which way the values run."""
    scores = milvus_scores(traced, [hits(("A", 0.9), ("B", 0.5)), hits(("C", 0.8), ("D", 0.7))])
    assert dict(scores) == {
        "A": pytest.approx(0.9),
        "B": pytest.approx(0.5),
        "C": pytest.approx(0.8),
        "D": pytest.approx(0.7),
    }


@pytest.mark.parametrize(
    ("metric", "expected"),
    [("COSINE", 0.4), ("ip", 0.4), ("L2", 1 / 1.4)],
    ids=["cosine", "inner product, lower case", "l2"],
)
def test_milvus_metric_in_the_search_params_decides_over_the_order(
    traced: tuple[Tracer, InMemorySpanExporter], metric: str, expected: float
) -> None:
    """One hit has no order to read; the metric the span records says what the value is."""
    params = {"metric_type": metric, "params": {"nprobe": 10}}
    assert milvus_scores(traced, [hits(("A", 0.4))], params) == [("A", pytest.approx(expected))]


def test_marqo_hits_written_as_themselves_give_ids_scores_and_metadata(
    traced: tuple[Tracer, InMemorySpanExporter],
) -> None:
    """Marqo wrapper.py ``_set_search_result_attributes`` adds each of ``response["hits"]`` as the attributes of
    a ``db.query.result`` event: Marqo's ``_id`` and ``_score`` next to the document's own fields."""
    tracer, exporter = traced
    response = {
        "processingTimeMs": 12,
        "hits": [
            {"_id": "doc-1", "_score": 0.82, "Title": "Paris", "document_type": "faq"},
            {"_id": "doc-2", "_score": 0.55, "Title": "Lyon"},
        ],
    }
    with tracer.start_as_current_span("rag"), tracer.start_as_current_span("marqo.search") as span:
        span.set_attribute(semconv.DB_SYSTEM, semconv.DB_SYSTEM_MARQO)
        span.set_attribute("db.marqo.search.processing_time", response["processingTimeMs"])
        for hit in response["hits"]:
            span.add_event(semconv.DB_QUERY_RESULT, attributes=hit)
    (group,) = find_answers(records_from_readable_spans(exporter.get_finished_spans()))
    signals = extract_signals(group.spans)
    assert signals.inputs["candidates"] == [
        {
            "retrievalScores": {"marqo": 0.82},
            "combinedScore": 0.82,
            "documentId": "doc-1",
            "documentType": "faq",
            "rank": 1,
        },
        {"retrievalScores": {"marqo": 0.55}, "combinedScore": 0.55, "documentId": "doc-2", "rank": 2},
    ]
    assert signals.skipped == 0


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ((9.0,), [1 / 10.0]),  # beyond [-1, 1]: no cosine, an L2 distance
        ((4.0, 4.0), [1 / 5.0, 1 / 5.0]),  # tied and beyond [-1, 1]
        ((0.8,), [0.8]),  # within it: MilvusClient's default COSINE
        ((0.7, 0.7), [0.7, 0.7]),
    ],
    ids=["one far hit", "tied far hits", "one hit within [-1, 1]", "tied hits within [-1, 1]"],
)
def test_milvus_values_with_no_order_to_read_are_told_apart_by_their_range(
    traced: tuple[Tracer, InMemorySpanExporter], values: tuple[float, ...], expected: list[float]
) -> None:
    names = "ABCD"[: len(values)]
    scores = milvus_scores(traced, [hits(*zip(names, values, strict=True))])
    assert [score for _, score in scores] == [pytest.approx(value) for value in expected]


def milvus_query_events(span: Span, rows: list[dict[str, Any]]) -> None:
    """What Milvus wrapper.py (0.60.0) ``_add_query_result_events`` writes for ``MilvusClient.query``'s return
    value, a scalar lookup by filter: each row, as it is, as the attributes of a ``db.query.result`` event."""
    for row in rows:
        span.add_event(semconv.DB_QUERY_RESULT, attributes=row)


ROWS = [
    {"id": 1, "doc_id": "doc-refund", "document_type": "policy"},
    {"id": 3, "doc_id": "doc-warranty", "document_type": "policy"},
]


def milvus_query_span(tracer: Tracer) -> None:
    """A ``milvus.query`` span as Milvus wrapper.py (0.60.0) ``_wrap`` and ``_set_query_attributes`` make it."""
    with tracer.start_as_current_span("milvus.query") as span:
        span.set_attribute(semconv.DB_SYSTEM, semconv.DB_SYSTEM_MILVUS)
        span.set_attribute("db.operation", "query")
        span.set_attribute("db.milvus.query.collection_name", "kb")
        span.set_attribute("db.milvus.query.filter", 'document_type == "policy"')
        milvus_query_events(span, ROWS)


def test_a_milvus_row_lookup_alone_is_no_retrieval_and_no_answer(
    traced: tuple[Tracer, InMemorySpanExporter],
) -> None:
    """``MilvusClient.query`` looks rows up by a filter, with no similarity: a request that only does that (an
    admin page) is no RAG answer, and must not be scored by rule (c) as one without candidates."""
    tracer, exporter = traced
    with tracer.start_as_current_span("admin.lookup"):
        milvus_query_span(tracer)
    records = records_from_readable_spans(exporter.get_finished_spans())
    (lookup,) = [record for record in records if record.name == "milvus.query"]
    assert not is_retrieval_span(lookup)
    assert not may_hold_answer(lookup.attributes, [event.name for event in lookup.events])
    assert find_answers(records) == []


def test_a_milvus_row_lookup_beside_a_search_adds_no_candidates_and_no_retrieval_span(
    traced: tuple[Tracer, InMemorySpanExporter],
) -> None:
    """A search, then a lookup of more rows in the same request: the rows are no hits (no phantom unscored
    documents), and the lookup is no second retrieval span."""
    tracer, exporter = traced
    with tracer.start_as_current_span("rag"):
        with tracer.start_as_current_span("milvus.search") as span:
            span.set_attribute(semconv.DB_SYSTEM, semconv.DB_SYSTEM_MILVUS)
            milvus_search_events(
                span,
                [
                    [
                        {"id": 1, "distance": 0.55, "entity": {"doc_id": "doc-refund"}},
                        {"id": 3, "distance": 0.45, "entity": {"doc_id": "doc-warranty"}},
                    ]
                ],
            )
        milvus_query_span(tracer)
    (group,) = find_answers(records_from_readable_spans(exporter.get_finished_spans()))
    signals = extract_signals(group.spans)
    assert [(c["documentId"], c["combinedScore"]) for c in signals.inputs["candidates"]] == [
        ("1", pytest.approx(0.55)),
        ("3", pytest.approx(0.45)),
    ]
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_SPANS] == 1
    assert semconv.RAG_CONFIDENCE_RETRIEVAL_UNSCORED_DOCUMENTS not in signals.diagnostics


def chroma_query_events(span: Span, result: Mapping[str, Any]) -> None:
    """What Chroma wrapper.py (0.62.4) ``_add_query_result_events`` writes for ``Collection.query``'s return
    value: one ``db.query.result`` event per hit of each query, holding only what ``include`` asked for."""
    for ids, distances, metadatas, documents in itertools.zip_longest(
        result.get("ids") or [],
        result.get("distances") or [],
        result.get("metadatas") or [],
        result.get("documents") or [],
    ):
        for id_, distance, metadata, document in itertools.zip_longest(
            ids or [], distances or [], metadatas or [], documents or []
        ):
            attributes: dict[str, Any] = {}
            if id_ is not None:
                attributes[semconv.DB_QUERY_RESULT_ID] = id_
            if distance is not None:
                attributes[semconv.DB_QUERY_RESULT_DISTANCE] = distance
            if metadata is not None:
                attributes[semconv.DB_QUERY_RESULT_METADATA] = (
                    json.dumps(metadata) if isinstance(metadata, dict) else metadata
                )
            if document is not None:
                attributes[semconv.DB_QUERY_RESULT_DOCUMENT] = document
            span.add_event(semconv.DB_QUERY_RESULT, attributes=attributes)


def chroma_signals(
    traced: tuple[Tracer, InMemorySpanExporter], result: Mapping[str, Any], answer: str = "See [1]."
) -> ExtractedSignals:
    """An app span around ``chroma.query`` (Chroma wrapper.py sets ``db.system = chroma``) and a completion."""
    tracer, exporter = traced
    with tracer.start_as_current_span("rag.query"):
        with tracer.start_as_current_span("chroma.query") as span:
            span.set_attribute(semconv.DB_SYSTEM, "chroma")
            chroma_query_events(span, result)
        with tracer.start_as_current_span("openai.chat") as span:
            span.set_attribute("gen_ai.completion.0.role", "assistant")
            span.set_attribute("gen_ai.completion.0.content", answer)
    (group,) = find_answers(records_from_readable_spans(exporter.get_finished_spans()))
    return extract_signals(group.spans)


def test_chroma_hits_without_distances_stay_documents_like_unscored_documents_of_any_convention(
    traced: tuple[Tracer, InMemorySpanExporter],
) -> None:
    """``include=["documents", "metadatas"]`` returns no distances: the hits are documents all the same. They
    cannot be candidates (no score), but are counted as unscored and are what the answer's citations point at,
    as OpenInference documents without a score are."""
    result = {
        "ids": [["doc-a", "doc-b", "doc-c"]],
        "distances": None,
        "metadatas": [[{"document_type": "policy"}, {"document_type": "faq"}, {"document_type": "faq"}]],
        "documents": [["text a", "text b", "text c"]],
    }
    signals = chroma_signals(traced, result, "Refunds take 14 days [doc-b]. Returns need a receipt [3].")
    assert signals.inputs["candidates"] == []
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_UNSCORED_DOCUMENTS] == 3
    assert (signals.inputs["citationCount"], signals.inputs["invalidCitationCount"]) == (2, 0)
    assert signals.skipped == 0


@pytest.mark.parametrize(
    "distances",
    [(-3.93, -3.025, -2.818, -2.019), (-0.232, -0.006, 0.045, 0.245)],
    ids=["all below zero (norm 3)", "some below zero (norm 1.5)"],
)
def test_chroma_inner_product_distances_below_zero_keep_their_ranking(
    traced: tuple[Tracer, InMemorySpanExporter], distances: tuple[float, ...]
) -> None:
    """A collection with ``hnsw:space = ip`` reports ``1 - dot``, below zero for the best hits of vectors that
    are not normalised (the values chromadb 1.5.9 returned for the reproduction's vectors of norm 3 and 1.5).
    Every hit stays a candidate, in Chroma's order, with a score in [0, 1]: the inner products ``1 - d``, divided
    by the largest (``score_scale = "max"``)."""
    ids = ["doc-refund", "doc-warranty", "doc-returns", "doc-shipping"]
    signals = chroma_signals(traced, {"ids": [ids], "distances": [list(distances)]})
    candidates = signals.inputs["candidates"]
    top = 1.0 - distances[0]
    assert [(c["documentId"], c["combinedScore"]) for c in candidates] == [
        (doc_id, pytest.approx((1.0 - distance) / top))
        for doc_id, distance in zip(ids, distances, strict=True)
    ]
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_SCORES_RESCALED] is True
    assert semconv.RAG_CONFIDENCE_RETRIEVAL_UNSCORED_DOCUMENTS not in signals.diagnostics
    assert signals.skipped == 0


def test_a_cosine_distance_a_rounding_error_below_zero_is_an_exact_match(
    traced: tuple[Tracer, InMemorySpanExporter],
) -> None:
    """Float32 arithmetic gives an exact match of normalised vectors a cosine distance a few 1e-7 below 0: that
    hit is the best one (it was skipped), and the span is no inner-product space (its other hits keep
    ``1 / (1 + d)``)."""
    signals = chroma_signals(traced, {"ids": [["a", "b"]], "distances": [[-1.1920929e-07, 0.25]]})
    assert [(c["documentId"], c["combinedScore"]) for c in signals.inputs["candidates"]] == [
        ("a", 1.0),
        ("b", pytest.approx(0.8)),
    ]
    assert semconv.RAG_CONFIDENCE_RETRIEVAL_SCORES_RESCALED not in signals.diagnostics
    assert signals.skipped == 0


def test_chroma_distances_of_another_span_are_not_read_as_inner_products(
    traced: tuple[Tracer, InMemorySpanExporter],
) -> None:
    """The inner-product reading is per span: an L2 query beside an ``ip`` one keeps ``1 / (1 + d)``."""
    tracer, exporter = traced
    with tracer.start_as_current_span("rag.query"):
        for name, ids, distances in (("ip", ["a", "b"], [-1.0, 0.5]), ("l2", ["c", "d"], [0.25, 1.0])):
            with tracer.start_as_current_span("chroma.query") as span:
                span.set_attribute(semconv.DB_SYSTEM, "chroma")
                span.set_attribute(semconv.RAG_RETRIEVAL_METHOD, name)
                chroma_query_events(span, {"ids": [ids], "distances": [distances]})
    (group,) = find_answers(records_from_readable_spans(exporter.get_finished_spans()))
    scores = {c["documentId"]: c["combinedScore"] for c in extract_signals(group.spans).inputs["candidates"]}
    assert scores == {
        "a": pytest.approx(1.0),
        "b": pytest.approx(0.25),
        "c": pytest.approx(0.8),
        "d": pytest.approx(0.5),
    }


def test_hits_past_the_span_event_limit_are_reported_in_process_and_through_the_gateway() -> None:
    """The SDK keeps a span's newest 128 events (``OTEL_SPAN_EVENT_COUNT_LIMIT``) and counts the rest in
    ``ReadableSpan.dropped_events`` (OTLP ``dropped_events_count``). Chroma writes its hits best first, so a query
    for 150 loses the 22 best: they cannot be read back, but the scorecard says so."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=SpanLimits(max_events=128))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    ids = [f"c{rank}" for rank in range(150)]
    distances = [0.2 + rank / 100 for rank in range(150)]
    chroma_signals((provider.get_tracer("test"), exporter), {"ids": [ids], "distances": [distances]})
    spans = exporter.get_finished_spans()

    in_process = records_from_readable_spans(spans)
    (query,) = [record for record in in_process if record.name == "chroma.query"]
    assert (len(query.events), query.dropped_events) == (128, 22)
    through_gateway = [to_record(span) for span in iter_spans(encode_spans(spans))]
    (query,) = [record for record in through_gateway if record.name == "chroma.query"]
    assert (len(query.events), query.dropped_events) == (128, 22)

    for records in (in_process, through_gateway):
        (group,) = find_answers(records)
        signals = extract_signals(group.spans)
        assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_DROPPED_RESULT_EVENTS] == 22
        assert len(signals.inputs["candidates"]) == 128
        assert signals.inputs["candidates"][0]["documentId"] == "c22"  # the best hit read is the 23rd


def test_a_span_that_dropped_no_events_or_holds_no_hits_reports_no_dropped_result_events(
    traced: tuple[Tracer, InMemorySpanExporter],
) -> None:
    signals = chroma_signals(traced, {"ids": [["a", "b"]], "distances": [[0.1, 0.2]]})
    assert semconv.RAG_CONFIDENCE_RETRIEVAL_DROPPED_RESULT_EVENTS not in signals.diagnostics
    # A span with no hit among its events (here an app span full of its own events) is no retrieval to report.
    records = [
        SpanRecord(1, 1, None, "rag", {semconv.RAG_ANSWER: True}, dropped_events=40),
        SpanRecord(
            1,
            2,
            1,
            "chroma.query",
            {semconv.DB_SYSTEM: "chroma"},
            dropped_events=3,
            events=(EventRecord(semconv.DB_QUERY_RESULT, {semconv.DB_QUERY_RESULT_ID: "a"}),),
        ),
    ]
    signals = extract_signals(records)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_DROPPED_RESULT_EVENTS] == 3
