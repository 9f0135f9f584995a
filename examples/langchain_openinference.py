"""LangChain, auto-instrumented by OpenInference, scored by ``ConfidenceSpanProcessor``.

Run: ``python examples/langchain_openinference.py`` (offline: an in-memory retriever and a fake chat model).

The OpenInference LangChain tracer records a retriever's documents with their content and metadata only, so
the retriever puts each document's ``id`` and ``score`` into ``Document.metadata`` (the default key map reads
them there). Its spans are not made current inside runnables: the application's own span around the chain
(here the ``@scored_answer`` span) is where ``record_signals`` goes.
"""

from __future__ import annotations

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnablePassthrough
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence import semconv
from rag_confidence.otel import ConfidenceSpanProcessor, last_scorecard, record_signals, scored_answer
from rag_confidence.scoring.render import render_scorecard

PASSAGES = {
    "kb-retention": ("Backups are retained for 35 days in the primary region.", "runbook", "2024-11-02"),
    "kb-restore": ("A point-in-time restore takes about 20 minutes per 100 GB.", "runbook", "2024-08-19"),
    "kb-regions": ("Backups are replicated to a second region every 6 hours.", "architecture", "2023-05-30"),
}


class KeywordRetriever(BaseRetriever):
    """Share of query words found in each passage, reported in the metadata with the document id."""

    k: int = 2

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        words = set(query.lower().rstrip("?").split())
        scored = []
        for doc_id, (text, doc_type, updated) in PASSAGES.items():
            score = round(len(words & set(text.lower().rstrip(".").split())) / len(words), 3)
            metadata = {"id": doc_id, "score": score, "document_type": doc_type, "last_updated": updated}
            scored.append(Document(page_content=text, metadata=metadata))
        return sorted(scored, key=lambda doc: -doc.metadata["score"])[: self.k]


def main() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(ConfidenceSpanProcessor(SimpleSpanProcessor(exporter)))
    LangChainInstrumentor().instrument(tracer_provider=provider)

    prompt = ChatPromptTemplate.from_template("Answer from the context.\n{context}\nQuestion: {question}")
    llm = FakeListChatModel(responses=["Backups are kept for 35 days [kb-retention]."])
    chain = (
        {
            "context": KeywordRetriever() | (lambda docs: "\n".join(d.page_content for d in docs)),
            "question": RunnablePassthrough(),
        }
        | prompt
        | llm
        | StrOutputParser()
    )

    @scored_answer(tracer_provider=provider)
    def ask(question: str) -> str:
        record_signals(has_conflict=False, faithfulness_score=0.95)
        return chain.invoke(question)

    question = "How many days are backups retained?"
    print(f"Q: {question}\nA: {ask(question)}")
    card = last_scorecard()
    print(render_scorecard(card) if card is not None else "(not scored)", end="")
    for span in exporter.get_finished_spans():
        kind = (span.attributes or {}).get(semconv.OPENINFERENCE_SPAN_KIND, "")
        total = (span.attributes or {}).get(semconv.RAG_CONFIDENCE_TOTAL)
        print(f"span {span.name:<28} {kind:<10} {'' if total is None else f'rag.confidence.total={total}'}")
    LangChainInstrumentor().uninstrument()
    provider.shutdown()


if __name__ == "__main__":
    main()
