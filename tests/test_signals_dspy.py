"""Signals from real DSPy programs under ``openinference-instrumentation-dspy``, offline.

Real ``dspy`` 3.x modules (``dspy.Module``, ``dspy.Retrieve``, ``dspy.ChainOfThought``, ``dspy.Predict``, the
``ChatAdapter`` and ``JSONAdapter``) answer with DSPy's offline fake model ``dspy.utils.DummyLM``, which writes
its scripted fields in the adapter's own format, as a real model is asked to. Passages come from the real
``dspy.ColBERTv2`` client whose HTTP request function is replaced by an in-memory word-overlap search (no
network), from a plain retrieval function configured as DSPy's ``rm``, or from ``dspy.retrievers`` over a
deterministic bag-of-words embedder. Expected ids and scores come from calling the same search directly.

What the tracer emits for ``RAG.forward`` (retrieve, then ``ChainOfThought``): the module is a ``CHAIN`` root;
``Retrieve.forward`` a ``RETRIEVER`` with passage text only, wrapping ``ColBERTv2.__call__``, a ``RETRIEVER``
with ids, scores and text; ``ChainOfThought.forward``, ``Predict.forward`` and ``ChatAdapter.__call__`` are
``CHAIN`` spans whose ``output.value`` is the prediction's fields as JSON; ``DummyLM.__call__`` (``LM.__call__``
for a real model) is the ``LLM`` span, whose output message is the adapter-formatted text.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import dspy
import dspy.dsp.colbertv2 as colbertv2_module
import numpy as np
import pytest
from dspy.dsp.utils import dotdict
from dspy.utils import DummyLM
from openinference.instrumentation.dspy import DSPyInstrumentor
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from rag_confidence import compute_confidence, semconv
from rag_confidence.otel import ConfidenceSpanProcessor
from rag_confidence.signals import AnswerGroup, extract_signals, find_answers, records_from_readable_spans
from rag_confidence.signals.dspy_format import adapter_fields

CORPUS = {
    "p1": "Paris is the capital of France.",
    "p2": "Berlin is the capital of Germany.",
    "p3": "The Loire is the longest river in France.",
}
QUESTION = "What is the capital of France?"
COLBERT_URL = "http://colbert.invalid"  # never contacted: the request function is replaced
_WORD = re.compile(r"[a-z]+")


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def search(query: str, k: int) -> list[dict[str, Any]]:
    """Word-overlap search over the corpus, best first, shaped as a ColBERTv2 server's ``topk``."""
    asked = words(query)
    hits = sorted(
        ((len(asked & words(text)) / len(asked), pid, text) for pid, text in CORPUS.items()),
        key=lambda hit: (-hit[0], hit[1]),
    )[:k]
    return [{"pid": pid, "text": text, "long_text": text, "score": score} for score, pid, text in hits]


class Telemetry:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        # The processor forwards every span and an enriched copy of each answer span it scores.
        self.provider.add_span_processor(ConfidenceSpanProcessor(SimpleSpanProcessor(self.exporter)))
        self.tracer: Tracer = self.provider.get_tracer("test")

    def answer(self) -> AnswerGroup:
        groups = find_answers(records_from_readable_spans(self.exporter.get_finished_spans()))
        assert len(groups) == 1, [group.answer.name for group in groups]
        return groups[0]

    def scored(self) -> ReadableSpan:
        scored = [
            span
            for span in self.exporter.get_finished_spans()
            if semconv.RAG_CONFIDENCE_TOTAL in (span.attributes or {})
        ]
        assert len(scored) == 1, [span.name for span in scored]
        return scored[0]


@pytest.fixture(scope="module")
def telemetry() -> Iterator[Telemetry]:
    telemetry = Telemetry()
    instrumentor = DSPyInstrumentor()
    instrumentor.instrument(tracer_provider=telemetry.provider)
    try:
        yield telemetry
    finally:
        instrumentor.uninstrument()
        telemetry.provider.shutdown()


@pytest.fixture
def otel(telemetry: Telemetry, monkeypatch: pytest.MonkeyPatch) -> Telemetry:
    # The real ColBERTv2 client asks a server through this module-level function; the in-memory search
    # answers instead.
    monkeypatch.setattr(colbertv2_module, "colbertv2_get_request", lambda url, query, k: search(query, k))
    telemetry.exporter.clear()
    return telemetry


class RAG(dspy.Module):
    """The DSPy RAG shape: retrieve, then generate over the passages (numbered ``[1]``, ``[2]`` by the
    adapter in the prompt)."""

    def __init__(self, signature: str = "context, question -> answer", reason: bool = True) -> None:
        super().__init__()
        self.retrieve = dspy.Retrieve(k=2)
        self.generate = dspy.ChainOfThought(signature) if reason else dspy.Predict(signature)

    def forward(self, question: str) -> dspy.Prediction:
        context = self.retrieve(question).passages
        return self.generate(context=context, question=question)


class MultiHop(dspy.Module):
    """Two retrievals: the question, then a query the model writes from the first passages."""

    def __init__(self) -> None:
        super().__init__()
        self.retrieve = dspy.Retrieve(k=2)
        self.write_query = dspy.ChainOfThought("context, question -> query")
        self.generate = dspy.ChainOfThought("context, question -> answer")

    def forward(self, question: str) -> dspy.Prediction:
        context = self.retrieve(question).passages
        query = self.write_query(context=context, question=question).query
        # As DSPy's multi-hop tutorial does: new passages after the old, each once.
        context = list(dict.fromkeys([*context, *self.retrieve(query).passages]))
        return self.generate(context=context, question=question)


def candidate(pid: str, score: float, rank: int) -> dict[str, Any]:
    return {
        "documentId": pid,
        "retrievalScores": {"colbertv2": pytest.approx(score)},
        "combinedScore": pytest.approx(score),
        "rank": rank,
    }


def plain(inputs: dict[str, Any]) -> dict[str, Any]:
    """``inputs`` with the approximate numbers replaced by the values they stand for, for scoring."""
    return json.loads(json.dumps(inputs, default=lambda value: value.expected))


def assert_scored_as(otel: Telemetry, expected: dict[str, Any]) -> None:
    """The processor's scorecard on the answer span is the one ``expected`` gives."""
    scorecard = compute_confidence(plain(expected))
    attributes = otel.scored().attributes or {}
    assert attributes[semconv.RAG_CONFIDENCE_TOTAL] == scorecard.total
    assert attributes[semconv.RAG_CONFIDENCE_LABEL] == scorecard.label
    assert attributes[semconv.RAG_CONFIDENCE_ACTION] == scorecard.recommended_action


@pytest.mark.parametrize("adapter", ["chat", "json"])
def test_chain_of_thought_citations_are_read_from_the_answer_field_not_the_reasoning(
    otel: Telemetry, adapter: str
) -> None:
    """The LLM span's output is the adapter's text: ``[[ ## reasoning ## ]] ... [[ ## answer ## ]] ...`` under
    the default ``ChatAdapter``, a JSON object under ``JSONAdapter``. Either way the reasoning's markers (one
    valid, one pointing nowhere) are no citations of the answer."""
    chosen = dspy.JSONAdapter() if adapter == "json" else dspy.ChatAdapter()
    lm = DummyLM(
        [
            {
                "reasoning": "Passage [2] is about Berlin, and [5] is not among the passages.",
                "answer": "Paris is the capital of France [1].",
            }
        ],
        adapter=chosen,
    )
    with dspy.context(lm=lm, rm=dspy.ColBERTv2(url=COLBERT_URL), adapter=chosen):
        prediction = RAG()(question=QUESTION)
    assert prediction.answer == "Paris is the capital of France [1]."

    group = otel.answer()
    assert group.rule == "root" and group.answer.name == "RAG.forward"
    kinds = {span.name: span.attributes.get(semconv.OPENINFERENCE_SPAN_KIND) for span in group.spans}
    assert kinds["Retrieve.forward"] == kinds["ColBERTv2.__call__"] == "RETRIEVER"
    assert kinds["DummyLM.__call__"] == "LLM"
    signals = extract_signals(group.spans)
    expected = {
        "candidates": [
            candidate(hit["pid"], hit["score"], rank) for rank, hit in enumerate(search(QUESTION, 2), 1)
        ],
        "citationCount": 1,
        "invalidCitationCount": 0,
        "citationCoverageScore": 1.0,
        "supportLevel": "medium",
    }
    assert signals.inputs == expected
    # ``Retrieve.forward`` wraps the ColBERTv2 call (the same passages, text only): one retrieval.
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_SPANS] == 1
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 1
    assert signals.skipped == 0
    assert_scored_as(otel, expected)


def test_reasoning_that_starts_like_json_is_no_bad_value(otel: Telemetry) -> None:
    """A reasoning that opens with a marker (``[1] ...``) is text that no key reads: it is neither parsed nor
    counted as a value that failed to parse."""
    lm = DummyLM(
        [
            {
                "reasoning": "[1] says Paris; [2] is about Berlin.",
                "answer": "Paris is the capital of France [1].",
            }
        ],
        adapter=dspy.ChatAdapter(),
    )
    with dspy.context(lm=lm, rm=dspy.ColBERTv2(url=COLBERT_URL), adapter=dspy.ChatAdapter()):
        RAG()(question=QUESTION)
    signals = extract_signals(otel.answer().spans)
    assert signals.skipped == 0
    assert signals.inputs["citationCount"] == 1
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 1


def test_multi_hop_merges_both_retrievals_and_reads_the_final_answer(otel: Telemetry) -> None:
    """Two retrievals of one retriever are one method: a passage found by both is one candidate with its best
    score. The query-writing step is a generation too, but the answer is the last one, and of that only its
    answer field."""
    lm = DummyLM(
        [
            {"reasoning": "The river needs a passage of its own [9].", "query": "longest river France"},
            {
                "reasoning": "Hop one gave [2], which is about Berlin; [7] does not exist.",
                "answer": "Paris is the capital of France [1]. The Loire is its longest river [3].",
            },
        ]
    )
    with dspy.context(lm=lm, rm=dspy.ColBERTv2(url=COLBERT_URL), adapter=dspy.ChatAdapter()):
        MultiHop()(question=QUESTION)

    first, second = search(QUESTION, 2), search("longest river France", 2)
    assert [hit["pid"] for hit in first] == ["p1", "p2"] and [hit["pid"] for hit in second] == ["p3", "p1"]
    best: dict[str, float] = {}
    for hit in first + second:
        best[hit["pid"]] = max(hit["score"], best.get(hit["pid"], 0.0))
    assert best["p1"] == first[0]["score"] > second[1]["score"]

    group = otel.answer()
    assert group.answer.name == "MultiHop.forward"
    signals = extract_signals(group.spans)
    expected = {
        # Presented as the program showed them: the first hop's passages, then the second's new one.
        "candidates": [candidate(pid, best[pid], rank) for rank, pid in enumerate(["p1", "p2", "p3"], 1)],
        "citationCount": 2,
        "invalidCitationCount": 0,
        "citationCoverageScore": 1.0,
        "supportLevel": "medium",
    }
    assert signals.inputs == expected
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_SPANS] == 2
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
    assert_scored_as(otel, expected)


def test_output_fields_of_a_dspy_signature_are_a_structured_answer(otel: Telemetry) -> None:
    """A signature's ``citations`` and ``support_level`` output fields, written by the ``ChatAdapter`` (a
    ``list[int]`` as JSON under its header), are read as a JSON answer's would be."""
    lm = DummyLM([{"answer": "Paris is the capital of France.", "citations": [1], "support_level": "high"}])
    signature = "context, question -> answer, citations: list[int], support_level"
    with dspy.context(lm=lm, rm=dspy.ColBERTv2(url=COLBERT_URL), adapter=dspy.ChatAdapter()):
        prediction = RAG(signature, reason=False)(question=QUESTION)
    assert prediction.citations == [1]

    signals = extract_signals(otel.answer().spans)
    expected = {
        "candidates": [
            candidate(hit["pid"], hit["score"], rank) for rank, hit in enumerate(search(QUESTION, 2), 1)
        ],
        "supportLevel": "high",
        # Listed, not marked in the text: no sentence carries a marker, so no coverage is derived (as for a
        # JSON answer's ``citations``).
        "citationCount": 1,
        "invalidCitationCount": 0,
    }
    assert signals.inputs == expected
    assert signals.sources["supportLevel"] == "structured answer"
    assert "supportLevel" not in signals.derived
    assert_scored_as(otel, expected)


def test_retrieve_over_a_plain_search_function_reports_passages_without_ids_or_scores(
    otel: Telemetry,
) -> None:
    """``dspy.Retrieve`` keeps only each passage's text of what the configured ``rm`` returned, so its span
    has no id and no score (the ids and scores below never reach it): the passages count for citations by
    position but are no candidates. A known limit (docs/signals.md)."""

    def rm(query: str, k: int, **_: Any) -> list[dotdict]:
        return [dotdict(hit) for hit in search(query, k)]

    lm = DummyLM([{"reasoning": "Passage one.", "answer": "Paris [1]."}])
    with dspy.context(lm=lm, rm=rm, adapter=dspy.ChatAdapter()):
        RAG()(question=QUESTION)

    group = otel.answer()
    retriever = next(span for span in group.spans if span.name == "Retrieve.forward")
    assert not any(key.endswith((".document.id", ".document.score")) for key in retriever.attributes)
    signals = extract_signals(group.spans)
    assert signals.inputs["candidates"] == []
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_UNSCORED_DOCUMENTS] == 2
    assert (signals.inputs["citationCount"], signals.inputs["invalidCitationCount"]) == (1, 0)


def embedder(texts: list[str]) -> np.ndarray:
    vocabulary = sorted({word for text in CORPUS.values() for word in words(text)})
    return np.array([[1.0 if word in words(text) else 0.0 for word in vocabulary] for text in texts])


def test_a_search_function_called_inside_the_module_leaves_no_retrieval_span(otel: Telemetry) -> None:
    """DSPy's RAG tutorial calls ``dspy.retrievers.Embeddings`` (no ``dspy.Module``, no ``Retrieve``) inside
    ``forward``: the tracer records no retrieval, so the trace holds no answer. A known limit."""
    searcher = dspy.retrievers.Embeddings(corpus=list(CORPUS.values()), embedder=embedder, k=2)

    class TutorialRAG(dspy.Module):
        def __init__(self) -> None:
            super().__init__()
            self.respond = dspy.ChainOfThought("context, question -> response")

        def forward(self, question: str) -> dspy.Prediction:
            return self.respond(context=searcher(question).passages, question=question)

    with dspy.context(lm=DummyLM([{"reasoning": "r", "response": "Paris [1]."}]), adapter=dspy.ChatAdapter()):
        TutorialRAG()(question=QUESTION)
    spans = records_from_readable_spans(otel.exporter.get_finished_spans())
    assert spans and find_answers(spans) == []


def test_a_retrieval_span_around_the_search_function_makes_the_program_scored(otel: Telemetry) -> None:
    """The documented remedy: report the search on a GenAI retrieval span of your own inside ``forward``
    (``EmbeddingsWithScores`` gives each passage's corpus index and similarity)."""
    searcher = dspy.retrievers.EmbeddingsWithScores(corpus=list(CORPUS.values()), embedder=embedder, k=2)
    direct = searcher(QUESTION)
    expected_hits = [
        (f"doc-{index}", score) for index, score in zip(direct.indices, direct.scores, strict=True)
    ]
    tracer = otel.tracer

    class TracedRAG(dspy.Module):
        def __init__(self) -> None:
            super().__init__()
            self.respond = dspy.ChainOfThought("context, question -> response")

        def forward(self, question: str) -> dspy.Prediction:
            with tracer.start_as_current_span("retrieval corpus") as span:
                found = searcher(question)
                span.set_attribute(semconv.GEN_AI_OPERATION_NAME, semconv.GEN_AI_OPERATION_RETRIEVAL)
                span.set_attribute(semconv.GEN_AI_DATA_SOURCE_ID, "embeddings")
                span.set_attribute(
                    semconv.GEN_AI_RETRIEVAL_DOCUMENTS,
                    json.dumps(
                        [
                            {"id": f"doc-{index}", "score": score}
                            for index, score in zip(found.indices, found.scores, strict=True)
                        ]
                    ),
                )
            return self.respond(context=found.passages, question=question)

    lm = DummyLM([{"reasoning": "Passage [2] is off topic.", "response": "Paris is the capital [1]."}])
    with dspy.context(lm=lm, adapter=dspy.ChatAdapter()):
        TracedRAG()(question=QUESTION)

    group = otel.answer()
    assert group.answer.name == "TracedRAG.forward"
    signals = extract_signals(group.spans)
    expected = {
        "candidates": [
            {
                "documentId": pid,
                "retrievalScores": {"embeddings": pytest.approx(score)},
                "combinedScore": pytest.approx(score),
                "rank": rank,
            }
            for rank, (pid, score) in enumerate(expected_hits, 1)
        ],
        "citationCount": 1,
        "invalidCitationCount": 0,
        "citationCoverageScore": 1.0,
        "supportLevel": "medium",
    }
    assert signals.inputs == expected
    assert_scored_as(otel, expected)


def test_adapter_fields_reads_the_format_as_dspy_does() -> None:
    text = (
        "\n[[ ## reasoning ## ]] First line on the header line.\nSecond line.\n\n"
        "[[ ## answer ## ]]\nParis [1].\n\n[[ ## answer ## ]]\nignored: the first field of a name wins\n\n"
        "[[ ## completed ## ]]\n"
    )
    assert adapter_fields(text) == {
        "reasoning": "First line on the header line.\nSecond line.",
        "answer": "Paris [1].",
    }
    # Prose before the first header, a header with a name DSPy would not write, and plain text: no fields.
    assert adapter_fields("Sure!\n[[ ## answer ## ]]\nParis") is None
    assert adapter_fields("[[ ## two words ## ]]\nParis") is None
    assert adapter_fields("Paris [1].") is None
    assert adapter_fields("[[ ## completed ## ]]") is None


def test_adapter_fields_takes_linear_time_on_hostile_text() -> None:
    # Header openings that never close, and headers without names, line after line (about 1 MB).
    for hostile in ("[[ ## " * 20 + "\n") * 8_000, "[[ ##  ## ]]\n" * 80_000:
        started = time.perf_counter()
        adapter_fields("[[ ## answer ## ]]\n" + hostile)
        assert time.perf_counter() - started < 1.0
