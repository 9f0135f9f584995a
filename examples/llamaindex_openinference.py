"""LlamaIndex, auto-instrumented by OpenInference, scored by ``ConfidenceSpanProcessor`` with no code changes.

Run: ``python examples/llamaindex_openinference.py`` (offline: a bag-of-words embedding and ``MockLLM``).

No decorator here: the processor treats the local root span of a trace that holds a retrieval as the answer
(the query engine's ``query`` span) and scores it from the retriever's node ids and scores. The support level
is not stated anywhere, so the default is assumed and listed in ``rag.confidence.derived_signals``.
"""

from __future__ import annotations

import re

from llama_index.core import Document, Settings, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms import MockLLM
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence import semconv
from rag_confidence.otel import ConfidenceSpanProcessor

TEXTS = {
    "doc-onboarding": "New engineers get laptop access on day one and production access after two weeks.",
    "doc-oncall": "Engineers join the on-call rotation after their first three months.",
    "doc-expenses": "Travel expenses are reimbursed within ten working days of approval.",
    "doc-holidays": "The office is closed between Christmas and New Year.",
}
_WORD = re.compile(r"[a-z]+")
VOCABULARY = sorted({word for text in TEXTS.values() for word in _WORD.findall(text.lower())})


class WordEmbedding(BaseEmbedding):
    """Bag-of-words vectors over the corpus vocabulary: offline and deterministic."""

    def _vector(self, text: str) -> list[float]:
        present = set(_WORD.findall(text.lower()))
        return [1.0 if word in present else 0.0 for word in VOCABULARY]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)


def main() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(ConfidenceSpanProcessor(SimpleSpanProcessor(exporter)))
    LlamaIndexInstrumentor().instrument(tracer_provider=provider)

    Settings.embed_model = WordEmbedding()
    index = VectorStoreIndex.from_documents(
        [Document(text=text, id_=doc_id) for doc_id, text in TEXTS.items()]
    )
    exporter.clear()  # indexing spans are not part of the answer

    question = "When do new engineers get production access?"
    response = index.as_query_engine(similarity_top_k=2, llm=MockLLM(max_tokens=16)).query(question)
    print(f"Q: {question}\nA (MockLLM): {str(response)[:80]!r}")
    for span in exporter.get_finished_spans():
        attributes = span.attributes or {}
        if semconv.RAG_CONFIDENCE_TOTAL in attributes:
            print(f"scored span {span.name!r}:")
            for key, value in attributes.items():
                if key.startswith(semconv.RAG_CONFIDENCE_PREFIX) and ".dimension." not in key:
                    print(f"  {key} = {str(value)}")
    LlamaIndexInstrumentor().uninstrument()
    provider.shutdown()


if __name__ == "__main__":
    main()
