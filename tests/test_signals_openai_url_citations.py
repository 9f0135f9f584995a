"""OpenAI ``url_citation`` annotations (hosted web search), under the real OpenAI instrumentors.

The client is the real ``openai`` package; only its HTTP server is faked (``httpx.MockTransport``). Its JSON is
validated by the openai package's own ``ChatCompletion`` and ``Response`` types. The OpenInference tracer records
the whole response as ``output.value``, annotations included; OpenLLMetry records the text only. Expected inputs
are written from the documents and the citations the fake server returns, never from the code under test.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import httpx
import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import ResponseFunctionWebSearch
from openai.types.responses.response_output_text import AnnotationURLCitation
from openinference.instrumentation.openai import OpenAIInstrumentor as OpenInferenceOpenAIInstrumentor
from opentelemetry import trace
from opentelemetry.instrumentation.openai import OpenAIInstrumentor as OpenLLMetryOpenAIInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence import semconv
from rag_confidence.signals import extract_signals, find_answers
from tests.fake_openai import mock_openai, openai_response, output_message
from tests.instrumented import assert_scored_as, records, traced_fixture

Traced = tuple[InMemorySpanExporter, TracerProvider]

QUESTION = "What is the capital of France, and which river is the longest there?"
SEARCH_MODEL = "gpt-4o-search-preview"
# (id, score, text, metadata): pages the application retrieved itself, each naming its URL in its metadata.
PAGES = [
    ("doc-atlas", 0.91, "Paris is the capital of France.", {"source": "https://atlas.example/paris"}),
    (
        "doc-rivers",
        0.74,
        "The Loire is the longest river in France.",
        {"url": "https://Rivers.example/loire/"},
    ),
]
# OpenAI's links: its own URLs for the same pages, ``utm_source=openai`` appended.
CITED = ("https://atlas.example/paris?utm_source=openai", "https://rivers.example/loire?utm_source=openai")
ANSWER = (
    f"Paris is the capital of France ([atlas.example]({CITED[0]})). "
    f"The Loire is the longest river in France ([rivers.example]({CITED[1]}))."
)


def link_spans(text: str, urls: Sequence[str]) -> list[tuple[str, int, int]]:
    """``(url, start, end)`` of each Markdown link OpenAI writes for a citation: ``([site](url))``."""
    spans = []
    for url in urls:
        end = text.index(url) + len(url) + 2  # the link's ``)`` and the parenthesis around it
        spans.append((url, text.rindex("([", 0, end), end))
    return spans


def chat_completion_citing(
    text: str, urls: Sequence[str], alternatives: Sequence[str] = ()
) -> dict[str, Any]:
    """A search model's Chat Completion: ``text`` with one ``url_citation`` per URL in ``urls`` (and further
    choices, citing the same pages, when ``alternatives`` are given)."""

    def choice(index: int, content: str) -> dict[str, Any]:
        annotations = [
            {
                "type": "url_citation",
                "url_citation": {"url": url, "title": url, "start_index": start, "end_index": end},
            }
            for url, start, end in link_spans(content, [url for url in urls if url in content])
        ]
        return {
            "index": index,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": content, "annotations": annotations},
        }

    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_764_500_000,
        "model": SEARCH_MODEL,
        "choices": [choice(index, content) for index, content in enumerate([text, *alternatives])],
    }
    return ChatCompletion.model_validate(body).model_dump(mode="json", exclude_unset=True)


def serving(body: Any) -> openai.OpenAI:
    return mock_openai(lambda request: httpx.Response(200, json=body))


def retrieve(tracer: trace.Tracer, pages: Sequence[tuple[str, float, str, dict[str, str]]] = PAGES) -> None:
    """The application's own retriever span (OpenInference ``RETRIEVER``), each page's URL in its metadata."""
    with tracer.start_as_current_span("retrieve") as span:
        span.set_attribute(semconv.OPENINFERENCE_SPAN_KIND, semconv.OPENINFERENCE_KIND_RETRIEVER)
        span.set_attribute(semconv.RAG_RETRIEVAL_METHOD, "app")
        for index, (doc_id, score, text, metadata) in enumerate(pages):
            prefix = f"{semconv.OI_RETRIEVAL_DOCUMENTS}.{index}."
            span.set_attribute(prefix + semconv.OI_DOCUMENT_ID, doc_id)
            span.set_attribute(prefix + semconv.OI_DOCUMENT_SCORE, score)
            span.set_attribute(prefix + semconv.OI_DOCUMENT_CONTENT, text)
            span.set_attribute(prefix + semconv.OI_DOCUMENT_METADATA, json.dumps(metadata))


def app_candidates(pages: Sequence[tuple[str, float, str, dict[str, str]]] = PAGES) -> list[dict[str, Any]]:
    return [
        {"documentId": doc_id, "retrievalScores": {"app": score}, "combinedScore": score, "rank": rank}
        for rank, (doc_id, score, _, _) in enumerate(pages, start=1)
    ]


openinference = traced_fixture(OpenInferenceOpenAIInstrumentor)
openllmetry = traced_fixture(OpenLLMetryOpenAIInstrumentor)


def test_url_citations_of_retrieved_pages_cite_them(openinference: Traced) -> None:
    """Each citation's URL is a retrieved page's ``source``/``url`` metadata once OpenAI's ``utm_source`` (and
    case in the host, a trailing ``/``) are set aside: both pages are cited, none invalid, and each sentence
    holds the link of a citation, so it is covered."""
    exporter, provider = openinference
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("POST /ask"):
        retrieve(tracer)
        reply = serving(chat_completion_citing(ANSWER, CITED)).chat.completions.create(
            model=SEARCH_MODEL, messages=[{"role": "user", "content": QUESTION}]
        )
    assert reply.choices[0].message.annotations is not None and len(reply.choices[0].message.annotations) == 2
    expected = {
        "candidates": app_candidates(),
        "supportLevel": "medium",
        "citationCount": 2,
        "invalidCitationCount": 0,
        "citationCoverageScore": 1.0,
    }

    signals = assert_scored_as(exporter, expected, "POST /ask")
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
    assert semconv.RAG_CONFIDENCE_CITATION_UNMATCHED_SOURCES not in signals.diagnostics


def test_a_url_citation_of_a_page_nobody_retrieved_is_unmatched_not_invalid(openinference: Traced) -> None:
    """Only the first page was retrieved: the citation of the second names a page OpenAI's search found, not a
    made-up one. It is no invalid citation but an unmatched source, so ``citationCount`` is not derived (the one
    page cited would be a lower bound); its sentence is still backed by it."""
    exporter, provider = openinference
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("POST /ask"):
        retrieve(tracer, PAGES[:1])
        serving(chat_completion_citing(ANSWER, CITED)).chat.completions.create(
            model=SEARCH_MODEL, messages=[{"role": "user", "content": QUESTION}]
        )
    expected = {
        "candidates": app_candidates(PAGES[:1]),
        "supportLevel": "medium",
        "invalidCitationCount": 0,
        "citationCoverageScore": 1.0,
    }

    signals = assert_scored_as(exporter, expected, "POST /ask")
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_UNMATCHED_SOURCES] == 1


def streamed_citing(text: str, urls: Sequence[str]) -> str:
    """The server-sent events of a search model's streamed answer: the text, then its annotations in a delta of
    their own, then the finish reason."""
    base = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1_764_500_000,
        "model": SEARCH_MODEL,
    }
    annotations = [
        {
            "type": "url_citation",
            "url_citation": {"url": url, "title": url, "start_index": start, "end_index": end},
        }
        for url, start, end in link_spans(text, urls)
    ]
    chunks = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]},
        {**base, "choices": [{"index": 0, "delta": {"annotations": annotations}}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    events = [
        ChatCompletionChunk.model_validate(chunk).model_dump_json(exclude_unset=True) for chunk in chunks
    ]
    return "".join(f"data: {event}\n\n" for event in events) + "data: [DONE]\n\n"


def test_a_streamed_answers_citations_are_read_as_the_tracer_accumulated_them(openinference: Traced) -> None:
    """``stream=True``: the OpenInference tracer merges the chunks, annotations included, into ``output.value``;
    the citations read are those of the whole answer."""
    exporter, provider = openinference
    tracer = provider.get_tracer("app")
    body = streamed_citing(ANSWER, CITED)
    client = mock_openai(
        lambda request: httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})
    )
    with tracer.start_as_current_span("POST /ask"):
        retrieve(tracer)
        stream = client.chat.completions.create(
            model=SEARCH_MODEL, messages=[{"role": "user", "content": QUESTION}], stream=True
        )
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text == ANSWER
    expected = {
        "candidates": app_candidates(),
        "supportLevel": "medium",
        "citationCount": 2,
        "invalidCitationCount": 0,
        "citationCoverageScore": 1.0,
    }

    assert_scored_as(exporter, expected, "POST /ask")


def test_with_n_choices_only_the_first_choices_citations_count(openinference: Traced) -> None:
    """``n=2``: the second choice cites a page nobody retrieved; it is an alternative the application did not
    show, and its citation is not the answer's."""
    exporter, provider = openinference
    tracer = provider.get_tracer("app")
    other = "Lyon is the capital ([lyon.example](https://lyon.example/?utm_source=openai))."
    with tracer.start_as_current_span("POST /ask"):
        retrieve(tracer)
        reply = serving(
            chat_completion_citing(ANSWER, [*CITED, "https://lyon.example/?utm_source=openai"], [other])
        ).chat.completions.create(model=SEARCH_MODEL, messages=[{"role": "user", "content": QUESTION}], n=2)
    assert len(reply.choices) == 2 and reply.choices[1].message.annotations
    expected = {
        "candidates": app_candidates(),
        "supportLevel": "medium",
        "citationCount": 2,
        "invalidCitationCount": 0,
        "citationCoverageScore": 1.0,
    }

    assert_scored_as(exporter, expected, "POST /ask")


def test_a_marked_web_search_answer_has_its_citations_judged_as_sources(openinference: Traced) -> None:
    """A Responses call with the hosted ``web_search`` tool and nothing retrieved by the application: the call
    is still no retrieval (no result, no score), so the answer must be marked. Its citations name pages no
    retrieval reported: no invalid citation, no ``citationCount``, and both sentences covered by their links."""
    exporter, provider = openinference
    response = openai_response(
        [
            ResponseFunctionWebSearch.model_validate(
                {
                    "id": "ws_1",
                    "type": "web_search_call",
                    "status": "completed",
                    "action": {"type": "search", "query": QUESTION},
                }
            ),
            output_message(
                ANSWER,
                [
                    AnnotationURLCitation(
                        type="url_citation", start_index=start, end_index=end, url=url, title=url
                    )
                    for url, start, end in link_spans(ANSWER, CITED)
                ],
            ),
        ],
        tools=[{"type": "web_search"}],
    )
    client = serving(response.model_dump(mode="json"))
    with provider.get_tracer("app").start_as_current_span("POST /ask") as request:
        request.set_attribute(semconv.RAG_ANSWER, True)
        reply = client.responses.create(model="gpt-4.1-mini", input=QUESTION, tools=[{"type": "web_search"}])
    assert reply.output_text == ANSWER
    expected = {
        "candidates": [],
        "supportLevel": "medium",
        "invalidCitationCount": 0,
        "citationCoverageScore": 1.0,
    }

    signals = assert_scored_as(exporter, expected, "POST /ask")
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_UNMATCHED_SOURCES] == 2


def test_openllmetry_records_no_annotation_so_none_is_read(openllmetry: Traced) -> None:
    """OpenLLMetry (0.62) writes the message's text into ``gen_ai.output.messages`` and drops its annotations:
    nothing on its span names a cited page, and the links in the text are no markers."""
    exporter, provider = openllmetry
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("POST /ask"):
        retrieve(tracer)
        serving(chat_completion_citing(ANSWER, CITED)).chat.completions.create(
            model=SEARCH_MODEL, messages=[{"role": "user", "content": QUESTION}]
        )
    (chat,) = [span for span in records(exporter) if span.name == "openai.chat"]
    assert not any("url_citation" in str(value) for value in chat.attributes.values())
    assert ANSWER in str(chat.attributes[semconv.GEN_AI_OUTPUT_MESSAGES])
    (group,) = find_answers(records(exporter))
    signals = extract_signals(group.spans)
    assert signals.inputs == {"candidates": app_candidates(), "supportLevel": "medium"}
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 0
