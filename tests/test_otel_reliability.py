"""Reliability of ConfidenceSpanProcessor: fuzzed attributes over more than 100k spans, 16 threads ending
spans at once, under both downstream processors. Every span that goes in comes out, exactly once, and nothing
raises into the application."""

from __future__ import annotations

import json
import math
import os
import random
import threading
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator

from rag_confidence import semconv
from rag_confidence.otel import ConfidenceSpanProcessor
from rag_confidence.scoring import compute_confidence

# Keys the readers look at (so fuzzed values reach real parsing code), plus a few they do not.
KEYS = [
    semconv.RAG_ANSWER,
    semconv.RAG_SIGNAL_SUPPORT_LEVEL,
    semconv.RAG_SIGNAL_HAS_CONFLICT,
    semconv.RAG_SIGNAL_FAITHFULNESS_SCORE,
    semconv.RAG_SIGNAL_CITATION_COUNT,
    semconv.RAG_SIGNAL_CLAIMS_TOTAL,
    semconv.RAG_SIGNAL_CLAIMS_SUPPORTED,
    semconv.RAG_SIGNAL_CORPUS_PRESENT_TYPES,
    semconv.RAG_SIGNAL_INDEX_STALE_INDEXED_DOCUMENT_RATIO,
    semconv.RAG_SIGNAL_QUERY_COMPLEXITY,
    semconv.RAG_RETRIEVAL_METHOD,
    semconv.GEN_AI_OPERATION_NAME,
    semconv.GEN_AI_RETRIEVAL_DOCUMENTS,
    semconv.GEN_AI_OUTPUT_MESSAGES,
    semconv.GEN_AI_RESPONSE_FINISH_REASONS,
    semconv.OPENINFERENCE_SPAN_KIND,
    "retrieval.documents.0.document.id",
    "retrieval.documents.0.document.score",
    "retrieval.documents.0.document.metadata",
    "retrieval.documents.1.document.content",
    "reranker.output_documents.0.document.score",
    semconv.OI_OUTPUT_VALUE,
    semconv.TRACELOOP_ENTITY_OUTPUT,
    "llm.output_messages.0.message.content",
    "http.route",
]
TEXT = st.sampled_from(
    [
        "",
        "high",
        "LOW",
        "retrieval",
        "RETRIEVER",
        "RERANKER",
        "LLM",
        "nan",
        "[1] [doc-3] [^2]",
        '{"id": "a", "score": 0.9}',
        '[{"id": "a", "score": 0.9}, {"id": "b", "score": "x"}]',
        '{"documents": [{"page_content": "p", "metadata": {"id": 1, "score": 2.5}}]}',
        '{"generations": [[{"text": "See [1]."}]]}',
        "{not json",
        "\x00\udcff",
    ]
)
NUMBER = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, 1.0, 0.5, -1.0, 1e308, math.nan]),
)
VALUE = st.one_of(
    TEXT,
    NUMBER,
    st.booleans(),
    st.lists(TEXT, max_size=3),
    st.lists(NUMBER, max_size=3),
    st.lists(st.booleans(), max_size=3),
)
TEMPLATE = st.dictionaries(st.sampled_from(KEYS), VALUE, max_size=6)


def _sanitize(value: Any) -> Any:
    # The SDK itself drops lone surrogates at export time only; keep the attribute but make it encodable.
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, list):
        return [_sanitize(item) for item in value]
    return value


SPANS_PER_EXAMPLE = 1_100
EXAMPLES = 100


class IndependentIds(IdGenerator):
    """Ids from a private generator: Hypothesis reseeds the ``random`` module the SDK's default generator
    uses for every example, which would repeat trace and span ids across examples."""

    def __init__(self) -> None:
        self._random = random.Random(os.urandom(16))
        self._lock = threading.Lock()

    def generate_span_id(self) -> int:
        with self._lock:
            return self._random.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        with self._lock:
            return self._random.getrandbits(128) or 1


class Harness:
    def __init__(self, kind: str) -> None:
        self.exporter = InMemorySpanExporter()
        downstream = (
            SimpleSpanProcessor(self.exporter)
            if kind == "simple"
            else BatchSpanProcessor(self.exporter, max_queue_size=100_000, schedule_delay_millis=50)
        )
        self.processor = ConfidenceSpanProcessor(downstream, max_pending_traces=64)
        self.provider = TracerProvider(id_generator=IndependentIds())
        self.provider.add_span_processor(self.processor)
        self.tracer = self.provider.get_tracer("fuzz")
        self.started = 0


def _emit_traces(harness: Harness, templates: list[dict[str, Any]], seed: int, spans: int) -> None:
    """Random trees built from the templates: some spans left open past their children, some answers."""
    rng = random.Random(seed)
    tracer = harness.tracer
    emitted = 0
    while emitted < spans:
        root = tracer.start_span("root", attributes=rng.choice(templates))
        emitted += 1
        open_spans = [root]
        for _ in range(rng.randint(0, 12)):
            parent = rng.choice(open_spans)
            child = tracer.start_span(
                "child", context=trace.set_span_in_context(parent), attributes=rng.choice(templates)
            )
            emitted += 1
            if rng.random() < 0.3:
                child.add_event(
                    rng.choice([semconv.DB_QUERY_RESULT, semconv.GEN_AI_EVALUATION_RESULT, "other"]),
                    rng.choice(templates),
                )
            if rng.random() < 0.5:
                open_spans.append(child)
            else:
                child.end()
        # End the rest in random order: a parent may end before its children (fire-and-forget work).
        rng.shuffle(open_spans)
        for span in open_spans:
            span.end()
    harness.started += emitted


@pytest.mark.parametrize("kind", ["simple", "batch"])
def test_fuzzed_attributes_over_100k_spans_never_raise_and_never_lose_a_span(kind: str) -> None:
    harness = Harness(kind)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(templates=st.lists(TEMPLATE, min_size=1, max_size=8), seed=st.integers(0, 2**32))
    def run(templates: list[dict[str, Any]], seed: int) -> None:
        cleaned = [{key: _sanitize(value) for key, value in template.items()} for template in templates]
        _emit_traces(harness, cleaned, seed, SPANS_PER_EXAMPLE // (1 if kind == "simple" else 10))

    run()
    harness.provider.force_flush()
    finished = harness.exporter.get_finished_spans()
    assert harness.started >= (100_000 if kind == "simple" else 10_000)
    assert len(finished) == harness.started
    ids = Counter(span.context.span_id for span in finished if span.context is not None)
    assert len(ids) == harness.started  # each span exactly once
    stats = harness.processor.stats()
    assert stats.spans_forwarded == harness.started
    # Extraction skips every wrong-typed, non-finite or unparsable value, so every fuzzed answer is scoreable:
    # no answer carries rag.confidence.error.
    errors = Counter(
        (span.attributes or {}).get(semconv.RAG_CONFIDENCE_ERROR)
        for span in finished
        if semconv.RAG_CONFIDENCE_ERROR in (span.attributes or {})
    )
    assert errors == Counter(), errors
    assert stats.scoring_failures == 0
    assert stats.answers_scored > 1_000 if kind == "simple" else stats.answers_scored > 100
    harness.provider.shutdown()


@pytest.mark.parametrize("kind", ["simple", "batch", "batch-background"])
def test_sixteen_threads_ending_spans_at_once(kind: str) -> None:
    harness = Harness("simple")
    harness.processor = ConfidenceSpanProcessor(
        SimpleSpanProcessor(harness.exporter)
        if kind == "simple"
        else BatchSpanProcessor(harness.exporter, max_queue_size=100_000),
        background_scoring=kind.endswith("background"),
        max_scoring_queue=64,
    )
    provider = TracerProvider()
    provider.add_span_processor(harness.processor)
    tracer = provider.get_tracer("threads")
    threads_count, traces_per_thread = 16, 40
    barrier = threading.Barrier(threads_count)
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        try:
            barrier.wait()
            for number in range(traces_per_thread):
                score = round(0.3 + 0.6 * ((index * traces_per_thread + number) % 7) / 6, 3)
                docs = json.dumps([{"id": f"t{index}-{number}", "score": score}])
                with tracer.start_as_current_span(f"answer-{index}-{number}") as root:
                    root.set_attribute(semconv.RAG_SIGNAL_SUPPORT_LEVEL, "high")
                    root.set_attribute("expected.score", score)
                    with (
                        tracer.start_as_current_span(
                            "retrieve",
                            attributes={
                                semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OPERATION_RETRIEVAL,
                                semconv.GEN_AI_RETRIEVAL_DOCUMENTS: docs,
                                semconv.RAG_RETRIEVAL_METHOD: "vector",
                            },
                        ),
                        tracer.start_as_current_span("embed"),
                    ):
                        pass
                    with tracer.start_as_current_span("generate"):
                        pass
        except BaseException as error:  # collected: a thread's exception would otherwise vanish
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(index,)) for index in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    provider.force_flush()
    assert errors == []
    finished = harness.exporter.get_finished_spans()
    assert len(finished) == threads_count * traces_per_thread * 4
    answers = [span for span in finished if span.name.startswith("answer-")]
    assert len(answers) == threads_count * traces_per_thread
    expected_by_score: dict[float, int] = {}
    for answer in answers:
        attributes = answer.attributes or {}
        score = float(attributes["expected.score"])  # type: ignore[arg-type]
        if score not in expected_by_score:
            candidate = {"retrievalScores": {"vector": score}, "combinedScore": score, "rank": 1}
            expected_by_score[score] = int(
                compute_confidence(
                    {"supportLevel": "high", "candidates": [{**candidate, "documentId": "x"}]}
                ).total
            )
        # Each answer was scored from its own trace's retrieval, never from another thread's.
        assert attributes[semconv.RAG_CONFIDENCE_TOTAL] == expected_by_score[score], answer.name
        assert attributes[semconv.RAG_CONFIDENCE_CANDIDATES] == 1
    stats = harness.processor.stats()
    assert stats.answers_scored == threads_count * traces_per_thread
    assert stats.pending_traces == 0 and stats.traces_evicted == 0 and stats.scoring_failures == 0
    provider.shutdown()
