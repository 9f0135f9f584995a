"""``rag-confidence demo``: a small self-contained RAG pipeline, traced with OpenTelemetry, scored in-process.

Nothing leaves the process: the corpus is in memory, retrieval is deterministic (a keyword retriever and a
bag-of-words "vector" retriever, fused by a reranker), the "LLM" composes its answer from the best passage and
cites it, and a tiny judge measures how much of the answer the cited passages support. The spans follow the
OpenInference conventions real instrumentors emit; ``ConfidenceSpanProcessor`` and ``@scored_answer`` do the
rest. Three questions show a strong, a conflicting and a weak answer.

Run it with ``rag-confidence demo`` or ``python -m rag_confidence.otel.demo``.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader, NumberDataPoint
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from .. import semconv
from ..scoring.render import render_scorecard
from .decorator import last_scorecard, scored_answer
from .processor import ConfidenceSpanProcessor
from .recording import record_signals

__all__ = ["CORPUS", "QUESTIONS", "run_demo"]

_WORD = re.compile(r"[a-z0-9]+")
_DAYS = re.compile(r"(\d+)\s+days?")
_STOP = frozenset(
    ("a", "an", "the", "is", "are", "be", "of", "to", "for", "in", "on", "at", "by", "and", "or", "do")
    + ("does", "can", "i", "my", "we", "our", "per", "what", "how", "many")
)


@dataclass(frozen=True)
class Passage:
    id: str
    text: str
    document_type: str
    last_updated: str


CORPUS: tuple[Passage, ...] = (
    Passage(
        "doc-leave-2024",
        "Employees accrue 25 days of paid annual leave per year. Unused leave carries over for one year.",
        "policy",
        "2024-09-01",
    ),
    Passage(
        "doc-leave-faq",
        "Full-time employees get 25 days of paid annual leave each year, plus public holidays.",
        "faq",
        "2024-10-15",
    ),
    Passage(
        "doc-notice-2024",
        "Employees who resign must give a notice period of 30 days to their manager in writing.",
        "policy",
        "2024-06-01",
    ),
    Passage(
        "doc-notice-2019",
        "The notice period for employees who resign is 14 days, given to their manager in writing.",
        "handbook",
        "2019-03-01",
    ),
    Passage(
        "doc-expenses",
        "Expenses above 500 EUR need the approval of a manager before they are reimbursed.",
        "policy",
        "2023-01-10",
    ),
    Passage(
        "doc-passwords",
        "Passwords must be rotated every 90 days and must never be shared with colleagues.",
        "standard",
        "2022-11-30",
    ),
)

QUESTIONS: tuple[tuple[str, str], ...] = (
    ("strong", "How many days of paid annual leave do employees get per year?"),
    ("conflicting", "What notice period must employees give when they resign?"),
    ("weak", "Can I bring my dog to the office on Fridays?"),
)

TOP_K = 3
# An HR assistant answers on its own only when confident: the answer threshold is raised from 65 to 80.
DEMO_CONFIG: dict[str, Any] = {"actionPolicy": {"answerAt": 80}}


def _terms(text: str) -> list[str]:
    return [word for word in _WORD.findall(text.lower()) if word not in _STOP]


def keyword_scores(question: str, corpus: Sequence[Passage]) -> list[tuple[Passage, float]]:
    """Share of the question's terms that a passage contains (0-1)."""
    query = set(_terms(question))
    scored = [(passage, len(query & set(_terms(passage.text))) / max(1, len(query))) for passage in corpus]
    return sorted(scored, key=lambda item: (-item[1], item[0].id))[:TOP_K]


def vector_scores(question: str, corpus: Sequence[Passage]) -> list[tuple[Passage, float]]:
    """Cosine similarity of bag-of-words vectors (a deterministic stand-in for an embedding model)."""
    query = _bag(_terms(question))
    scored = [(passage, _cosine(query, _bag(_terms(passage.text)))) for passage in corpus]
    return sorted(scored, key=lambda item: (-item[1], item[0].id))[:TOP_K]


def _bag(terms: Iterable[str]) -> dict[str, float]:
    bag: dict[str, float] = {}
    for term in terms:
        bag[term] = bag.get(term, 0.0) + 1.0
    return bag


def _cosine(left: dict[str, float], right: dict[str, float]) -> float:
    dot = sum(value * right.get(term, 0.0) for term, value in left.items())
    norm = math.sqrt(sum(v * v for v in left.values())) * math.sqrt(sum(v * v for v in right.values()))
    return round(dot / norm, 4) if norm else 0.0


class DemoPipeline:
    """The traced pipeline: retrieve twice, rerank, generate, judge; one answer per call."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer

    def retrieve(self, method: str, question: str) -> list[tuple[Passage, float]]:
        with self.tracer.start_as_current_span(f"retrieve.{method}") as span:
            found = (
                keyword_scores(question, CORPUS) if method == "keyword" else vector_scores(question, CORPUS)
            )
            span.set_attributes(
                {
                    semconv.OPENINFERENCE_SPAN_KIND: semconv.OPENINFERENCE_KIND_RETRIEVER,
                    semconv.RAG_RETRIEVAL_METHOD: method,
                    semconv.OI_INPUT_VALUE: question,
                    **_documents(semconv.OI_RETRIEVAL_DOCUMENTS, found),
                }
            )
            return found

    def rerank(self, question: str, *hits: list[tuple[Passage, float]]) -> list[tuple[Passage, float]]:
        with self.tracer.start_as_current_span("rerank") as span:
            best: dict[str, tuple[Passage, list[float]]] = {}
            for results in hits:
                for passage, score in results:
                    best.setdefault(passage.id, (passage, []))[1].append(score)
            # Mean over the retrievers that found it, so agreement between methods ranks a passage higher.
            fused = [(p, round(sum(s) / len(hits), 4)) for p, s in best.values()]
            ranked = sorted(fused, key=lambda item: (-item[1], item[0].id))[:TOP_K]
            span.set_attributes(
                {
                    semconv.OPENINFERENCE_SPAN_KIND: semconv.OPENINFERENCE_KIND_RERANKER,
                    semconv.OI_RERANKER_QUERY: question,
                    **_documents(semconv.OI_RERANKER_OUTPUT_DOCUMENTS, ranked),
                }
            )
            return ranked

    def generate(self, question: str, ranked: list[tuple[Passage, float]]) -> str:
        with self.tracer.start_as_current_span("llm.generate") as span:
            usable = [passage for passage, score in ranked if score >= 0.3]
            if not usable:
                text = "The documents do not say."
            else:
                text = " ".join(
                    f"{_first_sentence(p.text)} [{p.id}]" for p in usable[:2] if _overlaps(question, p)
                )
                text = text or f"{_first_sentence(usable[0].text)} [{usable[0].id}]"
            span.set_attributes(
                {
                    semconv.OPENINFERENCE_SPAN_KIND: semconv.OPENINFERENCE_KIND_LLM,
                    semconv.OI_OUTPUT_VALUE: text,
                    semconv.OI_LLM_MODEL_NAME: "demo-extractive-llm",
                }
            )
            return text

    def judge(self, answer: str, ranked: list[tuple[Passage, float]]) -> None:
        """Faithfulness (share of answer terms found in the cited passages) and a conflict check."""
        cited = [passage for passage, _ in ranked if f"[{passage.id}]" in answer]
        if not cited:
            record_signals(documents_silent=True, faithfulness_score=0.0, has_conflict=False)
            return
        answer_terms = set(_terms(re.sub(r"\[[^\]]+\]", " ", answer)))
        cited_terms = set().union(*(_terms(passage.text) for passage in cited))
        faithfulness = round(len(answer_terms & cited_terms) / max(1, len(answer_terms)), 3)
        stated = {match for passage in cited for match in _DAYS.findall(passage.text)}
        record_signals(
            faithfulness_score=faithfulness,
            has_conflict=len(stated) > 1,
            conflicting_candidate_count=len(cited) if len(stated) > 1 else 0,
        )


def _overlaps(question: str, passage: Passage) -> bool:
    return len(set(_terms(question)) & set(_terms(passage.text))) >= 2


def _first_sentence(text: str) -> str:
    return text.split(". ")[0].rstrip(".") + "."


def _documents(prefix: str, found: Sequence[tuple[Passage, float]]) -> dict[str, Any]:
    attributes: dict[str, Any] = {}
    for index, (passage, score) in enumerate(found):
        key = f"{prefix}.{index}."
        attributes[key + semconv.OI_DOCUMENT_ID] = passage.id
        attributes[key + semconv.OI_DOCUMENT_SCORE] = score
        attributes[key + semconv.OI_DOCUMENT_CONTENT] = passage.text
        attributes[key + semconv.OI_DOCUMENT_METADATA] = json.dumps(
            {"document_type": passage.document_type, "last_updated": passage.last_updated}
        )
    return attributes


def run_demo(out: TextIO | None = None) -> int:
    """Run the three questions and print scorecards, enriched span attributes and metric points; returns 0."""
    out = out if out is not None else sys.stdout
    resource = Resource.create({SERVICE_NAME: "rag-confidence-demo"})
    spans = InMemorySpanExporter()
    reader = InMemoryMetricReader()
    logs = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    meter_provider = MeterProvider(metric_readers=[reader], resource=resource)
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(
        ConfidenceSpanProcessor(SimpleSpanProcessor(spans), meter_provider=meter_provider)
    )
    pipeline = DemoPipeline(tracer_provider.get_tracer("rag_confidence.demo"))

    @scored_answer(
        DEMO_CONFIG,
        name="rag.answer",
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        logger_provider=logger_provider,
    )
    def answer(question: str) -> str:
        ranked = pipeline.rerank(
            question, pipeline.retrieve("keyword", question), pipeline.retrieve("vector", question)
        )
        text = pipeline.generate(question, ranked)
        pipeline.judge(text, ranked)
        return text

    write = out.write
    write("rag-confidence demo: an in-memory RAG pipeline traced with OpenTelemetry and scored in-process\n")
    write(f"({len(CORPUS)} passages in memory; keyword + vector retrieval, reranker, extractive LLM)\n")
    write(f"scoring config: {json.dumps(DEMO_CONFIG)}\n")
    for index, (kind, question) in enumerate(QUESTIONS, start=1):
        spans.clear()
        text = answer(question)
        card = last_scorecard()
        write(f"\n{'=' * 100}\n[{index}/{len(QUESTIONS)}] {kind}: {question}\n")
        write(f"answer: {text}\n\n")
        if card is None:
            write("scoring failed (see the log)\n")
            continue
        write(render_scorecard(card))
        answer_span = next(span for span in spans.get_finished_spans() if span.name == "rag.answer")
        write(f"\nspan {answer_span.name!r} as exported ({_span_id(answer_span)}):\n")
        # The decorator sets the headline attributes last (see scored_answer); print them first.
        for key, value in reversed(list((answer_span.attributes or {}).items())):
            if key.startswith(semconv.RAG_CONFIDENCE_PREFIX):
                write(f"  {key} = {_show(value)}\n")

    write(
        f"\n{'=' * 100}\nmetric points (cumulative over the three answers; exemplars point at the answers):\n"
    )
    data = reader.get_metrics_data()
    for resource_metrics in data.resource_metrics if data is not None else ():
        for scope in resource_metrics.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    write(f"  {_point(metric.name, metric.unit, point)}\n")
    events = logs.get_finished_logs()
    write(
        f"\n{len(events)} {semconv.GEN_AI_EVALUATION_RESULT} log records, each parented to its answer span.\n"
    )
    tracer_provider.shutdown()
    meter_provider.shutdown()
    logger_provider.shutdown()
    return 0


def _show(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(repr(item) for item in value) + "]"
    return repr(value)


def _span_id(span: ReadableSpan) -> str:
    context = span.context
    return (
        f"trace {context.trace_id:032x} span {context.span_id:016x}" if context is not None else "no context"
    )


def _point(name: str, unit: str | None, point: Any) -> str:
    labels = ",".join(f"{key}={value}" for key, value in (point.attributes or {}).items())
    head = f"{name}{{{labels}}}" if labels else name
    if isinstance(point, HistogramDataPoint):
        exemplars = len(point.exemplars)
        return f"{head} [{unit}] count={point.count} sum={point.sum:g} exemplars={exemplars}"
    if isinstance(point, NumberDataPoint):
        return f"{head} [{unit}] value={point.value}"
    return head


if __name__ == "__main__":
    raise SystemExit(run_demo())
