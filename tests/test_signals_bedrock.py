"""AWS Bedrock Knowledge Bases (``bedrock-agent-runtime`` ``retrieve`` and ``retrieve_and_generate``) under the
real Bedrock tracers.

The client is the real ``boto3`` client; the service is stubbed with botocore's own ``Stubber``
(``botocore.stub``, the SDK's testing facility) because no network is available here: the client validates the
stubbed responses against the service model and returns them as it would AWS's. Stubber answers inside
``BaseClient._make_api_call``, beneath every tracer here (OpenInference wraps the client's methods, the botocore
instrumentor ``_make_api_call`` itself). The tracers are the real ``openinference-instrumentation-bedrock``,
``opentelemetry-instrumentation-bedrock`` (OpenLLMetry) and ``opentelemetry-instrumentation-botocore`` (OTel
contrib). Expected inputs are written out from the stubbed responses, never from the code under test.

``Stubber`` cannot answer ``retrieve_and_generate_stream``: its response is an event stream, which botocore
parses from the bytes of the HTTP body, and a stubbed response holds parsed values only. The stream tests use a
loopback server instead (``endpoint_url``), answering with the AWS event-stream encoding (binary frames with
CRC32 checksums, :func:`event_stream`), which the real client decodes with botocore's own parser.
"""

from __future__ import annotations

import binascii
import json
import struct
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.client import BaseClient
from botocore.stub import Stubber
from openinference.instrumentation.bedrock import BedrockInstrumentor as OpenInferenceBedrockInstrumentor
from opentelemetry import trace
from opentelemetry.instrumentation.bedrock import BedrockInstrumentor as OpenLLMetryBedrockInstrumentor
from opentelemetry.instrumentation.botocore import BotocoreInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence import compute_confidence, semconv
from rag_confidence.otel import record_signals
from rag_confidence.signals import (
    SpanRecord,
    extract_signals,
    find_answers,
)
from tests.instrumented import (
    LoopbackFake,
    LoopbackService,
    assert_feedback_grades_the_answer,
    assert_scored_as,
    bare_call_signals,
    confidence_processor,
    records,
    scored,
    traced,
    traced_fixture,
)

KNOWLEDGE_BASE = "KBATLAS123"
MODEL_ARN = "arn:aws:bedrock:eu-west-1::foundation-model/anthropic.claude-3-haiku-20240307-v1:0"
QUESTION = "What is the capital of France, and which river is the longest there?"
# What the knowledge base holds and the stubbed service finds: (chunk id, source URI, score, chunk text, the
# attributes of the source's .metadata.json).
CHUNKS = [
    (
        "chunk-atlas-1",
        "s3://kb-docs/atlas.md",
        0.82,
        "Paris is the capital of France.",
        {"document_type": "atlas"},
    ),
    (
        "chunk-rivers-1",
        "s3://kb-docs/rivers.md",
        0.64,
        "The Loire is the longest river in France.",
        {"document_type": "guide"},
    ),
    (
        "chunk-atlas-2",
        "s3://kb-docs/atlas.md",
        0.31,
        "Berlin is the capital of Germany.",
        {"document_type": "atlas"},
    ),
]
ANSWER = "Paris is the capital of France. The Loire is the longest river in France."


def reference(chunk_id: str, uri: str, text: str, attributes: dict[str, Any]) -> dict[str, Any]:
    """A reference as Bedrock returns it: text content, its S3 location, Bedrock's own metadata keys beside the
    source's attributes."""
    return {
        "content": {"type": "TEXT", "text": text},
        "location": {"type": "S3", "s3Location": {"uri": uri}},
        "metadata": {
            "x-amz-bedrock-kb-source-uri": uri,
            "x-amz-bedrock-kb-chunk-id": chunk_id,
            "x-amz-bedrock-kb-data-source-id": "DSATLAS1",
            **attributes,
        },
    }


def retrieve_response() -> dict[str, Any]:
    return {
        "retrievalResults": [
            {**reference(chunk_id, uri, text, attributes), "score": score}
            for chunk_id, uri, score, text, attributes in CHUNKS
        ]
    }


def rag_response(cited: tuple[tuple[int, ...], ...] = ((0,), (1,))) -> dict[str, Any]:
    """``retrieve_and_generate``'s answer: one citation per sentence, each with the references (indices into
    ``CHUNKS``) it rests on, and the part of the text it covers."""
    sentences = ["Paris is the capital of France.", "The Loire is the longest river in France."]
    citations = []
    start = 0
    for sentence, indices in zip(sentences, cited, strict=False):
        citations.append(
            {
                "generatedResponsePart": {
                    "textResponsePart": {
                        "text": sentence,
                        "span": {"start": start, "end": start + len(sentence)},
                    }
                },
                "retrievedReferences": [
                    reference(CHUNKS[i][0], CHUNKS[i][1], CHUNKS[i][3], CHUNKS[i][4]) for i in indices
                ],
            }
        )
        start += len(sentence) + 1
    return {"sessionId": "session-1", "output": {"text": ANSWER}, "citations": citations}


RAG_CONFIGURATION: Any = {
    "type": "KNOWLEDGE_BASE",
    "knowledgeBaseConfiguration": {"knowledgeBaseId": KNOWLEDGE_BASE, "modelArn": MODEL_ARN},
}


def stubbed(service: str, *responses: tuple[str, dict[str, Any]]) -> BaseClient:
    """The real boto3 client, its service stubbed (no network here): each call gets the next response."""
    client = boto3.client(
        service, region_name="eu-west-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    stubber = Stubber(client)
    for operation, response in responses:
        stubber.add_response(operation, response)
    stubber.activate()
    return client


def retrieve(client: BaseClient) -> dict[str, Any]:
    response: dict[str, Any] = client.retrieve(  # type: ignore[attr-defined]
        knowledgeBaseId=KNOWLEDGE_BASE, retrievalQuery={"text": QUESTION}
    )
    return response


def retrieve_and_generate(client: BaseClient) -> dict[str, Any]:
    response: dict[str, Any] = client.retrieve_and_generate(  # type: ignore[attr-defined]
        input={"text": QUESTION}, retrieveAndGenerateConfiguration=RAG_CONFIGURATION
    )
    return response


def retrieve_candidates() -> list[dict[str, Any]]:
    """What ``retrieve`` found, written out: one candidate per chunk, best first, the knowledge base as the
    method, the document type from the source's attributes."""
    return [
        {
            "retrievalScores": {KNOWLEDGE_BASE: score},
            "combinedScore": score,
            "documentId": chunk_id,
            "documentType": attributes["document_type"],
            "rank": rank,
        }
        for rank, (chunk_id, _, score, _, attributes) in enumerate(CHUNKS, start=1)
    ]


def _frame(event_type: str, payload: dict[str, Any]) -> bytes:
    """One event of an AWS event stream (``application/vnd.amazon.eventstream``): a prelude (total length,
    headers length, its CRC32), headers (name length, name, type 7 = string, value length, value), the JSON
    payload, and the CRC32 of all before it."""
    headers = b""
    for name, value in (
        (":event-type", event_type),
        (":content-type", "application/json"),
        (":message-type", "event"),
    ):
        headers += struct.pack("!B", len(name)) + name.encode()
        headers += struct.pack("!BH", 7, len(value.encode())) + value.encode()
    body = json.dumps(payload).encode()
    prelude = struct.pack("!II", 12 + len(headers) + len(body) + 4, len(headers))
    message = prelude + struct.pack("!I", binascii.crc32(prelude)) + headers + body
    return message + struct.pack("!I", binascii.crc32(message))


def event_stream(response: dict[str, Any], *, nested_citations: bool = False) -> bytes:
    """``retrieve_and_generate_stream``'s events for ``response``: the text in ``output`` pieces, then one
    ``citation`` event per citation, with ``generatedResponsePart`` and ``retrievedReferences`` at its top level
    (the shape the service model documents), or with ``nested_citations`` under the deprecated ``citation``
    member only."""
    text = response["output"]["text"]
    frames = [_frame("output", {"text": text[i : i + 20]}) for i in range(0, len(text), 20)]
    for citation in response["citations"]:
        frames.append(_frame("citation", {"citation": citation} if nested_citations else citation))
    return b"".join(frames)


class FakeAgentRuntime(LoopbackFake):
    """A loopback ``bedrock-agent-runtime`` answering every request with ``body`` (no network here)."""

    def __init__(self, body: bytes) -> None:
        self.service = LoopbackService(lambda path, _: ("application/vnd.amazon.eventstream", body))

    def client(self) -> BaseClient:
        """A real client of the loopback, made after the tracer is set up (OpenInference wraps new clients)."""
        return boto3.client(
            "bedrock-agent-runtime",
            region_name="eu-west-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            endpoint_url=self.service.url,
        )


@pytest.fixture()
def agent_runtime() -> Iterator[FakeAgentRuntime]:
    with FakeAgentRuntime(event_stream(rag_response())) as fake:
        yield fake


def retrieve_and_generate_stream(client: BaseClient) -> str:
    """The streamed call, read to the end as a chat front end would; the text it showed."""
    response = client.retrieve_and_generate_stream(  # type: ignore[attr-defined]
        input={"text": QUESTION}, retrieveAndGenerateConfiguration=RAG_CONFIGURATION
    )
    return "".join(event["output"]["text"] for event in response["stream"] if "output" in event)


openinference = traced_fixture(OpenInferenceBedrockInstrumentor, SimpleSpanProcessor)
# Exporting through ConfidenceSpanProcessor, as an application would.
openinference_scored = traced_fixture(OpenInferenceBedrockInstrumentor)


@pytest.fixture(params=["openllmetry", "botocore"])
def uninformed(request: pytest.FixtureRequest) -> Iterator[tuple[InMemorySpanExporter, TracerProvider]]:
    """The two tracers that record nothing of what a Knowledge Base returned, exporting through the processor."""
    instrumentor = (
        OpenLLMetryBedrockInstrumentor() if request.param == "openllmetry" else BotocoreInstrumentor()
    )
    yield from traced(instrumentor, confidence_processor)


# -- what the tracers record -----------------------------------------------------------------------------------


def test_openinference_records_retrieve_as_a_retriever_span_with_the_reference_nested_in_the_metadata(
    openinference: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    exporter, _ = openinference
    retrieve(stubbed("bedrock-agent-runtime", ("retrieve", retrieve_response())))

    (span,) = exporter.get_finished_spans()
    attributes = dict(span.attributes or {})
    assert span.name == "bedrock.retrieve"
    assert attributes[semconv.OPENINFERENCE_SPAN_KIND] == "RETRIEVER"
    assert json.loads(attributes["llm.invocation_parameters"]) == {"knowledgeBaseId": KNOWLEDGE_BASE}
    for index, (chunk_id, uri, score, text, source_attributes) in enumerate(CHUNKS):
        prefix = f"retrieval.documents.{index}.document."
        assert attributes[prefix + "id"] == chunk_id
        assert attributes[prefix + "score"] == score
        assert attributes[prefix + "content"] == text
        # The whole reference, Bedrock's metadata map one level down, the content type beside it.
        assert json.loads(attributes[prefix + "metadata"]) == {
            "location": {"type": "S3", "s3Location": {"uri": uri}},
            "metadata": reference(chunk_id, uri, text, source_attributes)["metadata"],
            "type": "TEXT",
        }


def test_openinference_records_retrieve_and_generate_as_a_retriever_span_with_the_answer(
    openinference: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """The cited references in citation order, without scores (Bedrock gives none), the generated text as
    ``output.value``; nothing of which part of the text each citation covers."""
    exporter, _ = openinference
    response = retrieve_and_generate(
        stubbed("bedrock-agent-runtime", ("retrieve_and_generate", rag_response()))
    )
    assert response["output"]["text"] == ANSWER

    (span,) = exporter.get_finished_spans()
    attributes = dict(span.attributes or {})
    assert span.name == "bedrock.retrieve_and_generate"
    assert attributes[semconv.OPENINFERENCE_SPAN_KIND] == "RETRIEVER"
    assert attributes[semconv.OI_OUTPUT_VALUE] == ANSWER
    assert attributes[semconv.OI_LLM_MODEL_NAME] == MODEL_ARN
    assert [attributes[f"retrieval.documents.{i}.document.id"] for i in (0, 1)] == [
        "chunk-atlas-1",
        "chunk-rivers-1",
    ]
    assert not any(key.endswith("document.score") for key in attributes)
    assert "retrieval.documents.2.document.id" not in attributes  # the uncited chunk is nowhere
    flat = json.dumps(attributes)
    assert "generatedResponsePart" not in flat and '"start"' not in flat


def test_openllmetry_and_botocore_record_nothing_of_what_the_knowledge_base_returned(
    uninformed: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """OpenLLMetry wraps ``bedrock-runtime`` clients only: no span at all. The botocore instrumentor records the
    AWS call (``rpc.*``), no document and no text. No retrieval, no answer, no scorecard."""
    exporter, _ = uninformed
    client = stubbed(
        "bedrock-agent-runtime", ("retrieve", retrieve_response()), ("retrieve_and_generate", rag_response())
    )
    retrieve(client)
    retrieve_and_generate(client)

    spans = exporter.get_finished_spans()
    for span in spans:
        attributes = dict(span.attributes or {})
        assert attributes["rpc.service"] == "Bedrock Agent Runtime"
        assert attributes["rpc.method"] in ("Retrieve", "RetrieveAndGenerate")
        flat = json.dumps(attributes)
        assert "chunk-atlas-1" not in flat and "Paris" not in flat
    assert len(spans) in (0, 2)  # OpenLLMetry: none; botocore: one per call
    assert find_answers(records(exporter)) == []
    assert scored(exporter) == []


# -- scoring what OpenInference records ------------------------------------------------------------------------


TWO_CITED = "Paris is the capital of France [1]. The Loire is the longest river in France [2]."


def converse_response(text: str) -> dict[str, Any]:
    """A ``Converse`` reply as Bedrock returns it (the stubbed service's body): the model's text, ended."""
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 120, "outputTokens": 24, "totalTokens": 144},
        "metrics": {"latencyMs": 300},
    }


def test_retrieve_then_converse_is_scored_on_the_knowledge_base_documents(
    openinference: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """``retrieve`` and a model call of the application's under one request span: the candidates are the chunks,
    the method the knowledge base, the document type the source's attribute (not the content type ``TEXT``
    beside it), and the answer's markers count against them."""
    exporter, provider = openinference
    converse = converse_response(TWO_CITED)
    agent = stubbed("bedrock-agent-runtime", ("retrieve", retrieve_response()))
    runtime = stubbed("bedrock-runtime", ("converse", converse))
    with provider.get_tracer("app").start_as_current_span("POST /ask"):
        retrieve(agent)
        runtime.converse(  # type: ignore[attr-defined]
            modelId=MODEL_ARN, messages=[{"role": "user", "content": [{"text": QUESTION}]}]
        )

    expected = {
        "candidates": retrieve_candidates(),
        "citationCount": 2,
        "invalidCitationCount": 0,
        "citationCoverageScore": 1.0,
        "supportLevel": "medium",
    }
    (group,) = find_answers(records(exporter))
    assert group.answer.name == "POST /ask"
    signals = extract_signals(group.spans)
    assert signals.inputs == expected
    assert compute_confidence(signals.inputs).total == compute_confidence(expected).total


def test_a_retrieve_that_found_nothing_records_no_document_list_so_the_markers_are_not_judged(
    openinference_scored: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """Pins what the OpenInference Bedrock tracer records of a ``retrieve`` that found nothing: the
    ``RETRIEVER`` span with its query and knowledge base, and no ``retrieval.documents`` and no ``output.value``,
    as for a response it could not record. "Found nothing" cannot be told from "not recorded", so the answer's
    markers are counted and not judged (no citation input), rather than called invalid. A tracer release that
    writes an empty list would make them invalid again."""
    exporter, provider = openinference_scored
    converse = converse_response(TWO_CITED)
    agent = stubbed("bedrock-agent-runtime", ("retrieve", {"retrievalResults": []}))
    runtime = stubbed("bedrock-runtime", ("converse", converse))
    with provider.get_tracer("app").start_as_current_span("POST /ask") as request:
        request.set_attribute(semconv.RAG_ANSWER, True)
        retrieve(agent)
        runtime.converse(  # type: ignore[attr-defined]
            modelId=MODEL_ARN, messages=[{"role": "user", "content": [{"text": QUESTION}]}]
        )

    (search,) = [span for span in exporter.get_finished_spans() if span.name == "bedrock.retrieve"]
    assert set(search.attributes or {}) == {
        "input.value",
        "input.mime_type",
        "llm.invocation_parameters",
        "openinference.span.kind",
    }
    expected = {"candidates": [], "supportLevel": "medium"}
    (group,) = find_answers(records(exporter))
    signals = extract_signals(group.spans)
    assert signals.inputs == expected
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
    (answer,) = scored(exporter)
    assert answer.attributes is not None
    assert answer.attributes[semconv.RAG_CONFIDENCE_TOTAL] == compute_confidence(expected).total


def test_a_bare_retrieve_and_generate_is_its_own_answer(
    openinference: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """No span of the application's: the RETRIEVER span is the trace's root, a retrieval and a generation at
    once, so the answer. Its references are the answer's citations, all valid (Bedrock lists only what it
    cites); unscored, they are no candidates."""
    exporter, _ = openinference
    retrieve_and_generate(stubbed("bedrock-agent-runtime", ("retrieve_and_generate", rag_response())))

    signals = bare_call_signals(exporter)
    expected = {"candidates": [], "citationCount": 2, "invalidCitationCount": 0, "supportLevel": "medium"}
    assert signals.inputs == expected
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_UNSCORED_DOCUMENTS] == 2
    assert "citationCoverageScore" not in signals.inputs
    assert "missing-candidates" in [w.code for w in compute_confidence(expected).meta.warnings]


def test_the_span_processor_scores_retrieve_and_generate_bare_and_inside_a_request(
    openinference_scored: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    exporter, provider = openinference_scored
    expected = compute_confidence(
        {"candidates": [], "citationCount": 2, "invalidCitationCount": 0, "supportLevel": "medium"}
    )

    retrieve_and_generate(stubbed("bedrock-agent-runtime", ("retrieve_and_generate", rag_response())))
    (answer,) = scored(exporter)
    assert answer.name == "bedrock.retrieve_and_generate"
    assert answer.attributes is not None
    assert answer.attributes[semconv.RAG_CONFIDENCE_TOTAL] == expected.total

    exporter.clear()
    with provider.get_tracer("app").start_as_current_span("POST /ask"):
        retrieve_and_generate(stubbed("bedrock-agent-runtime", ("retrieve_and_generate", rag_response())))
    (answer,) = scored(exporter)
    assert answer.name == "POST /ask"
    assert answer.attributes is not None
    assert answer.attributes[semconv.RAG_CONFIDENCE_TOTAL] == expected.total


def cited_chunks_inputs() -> dict[str, Any]:
    """``retrieve``'s chunks as candidates, two of them cited by the answer, none invalid."""
    return {
        "candidates": retrieve_candidates(),
        "citationCount": 2,
        "invalidCitationCount": 0,
        "supportLevel": "medium",
    }


def test_retrieve_beside_retrieve_and_generate_scores_the_cited_chunks(
    openinference: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """Bedrock gives scores to ``retrieve`` only. Calling it on the same knowledge base beside
    ``retrieve_and_generate`` makes the chunks candidates (one method: the knowledge base), and the answer's
    references cite them. A chunk cited by two citations is one citation."""
    exporter, provider = openinference
    client = stubbed(
        "bedrock-agent-runtime",
        ("retrieve", retrieve_response()),
        ("retrieve_and_generate", rag_response(cited=((0,), (1, 0)))),
    )
    with provider.get_tracer("app").start_as_current_span("POST /ask"):
        retrieve(client)
        retrieve_and_generate(client)

    expected = cited_chunks_inputs()
    (group,) = find_answers(records(exporter))
    signals = extract_signals(group.spans)
    assert signals.inputs == expected
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 3
    assert compute_confidence(signals.inputs).total == compute_confidence(expected).total


def test_a_reference_without_a_chunk_id_is_known_by_its_source(
    openinference: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """A vector store that keeps no chunk id: the instrumentor records no ``document.id``; the source URI (or the
    location, without it) names the document."""
    exporter, _ = openinference
    response = retrieve_response()
    del response["retrievalResults"][0]["metadata"]["x-amz-bedrock-kb-chunk-id"]
    del response["retrievalResults"][1]["metadata"]["x-amz-bedrock-kb-chunk-id"]
    del response["retrievalResults"][1]["metadata"]["x-amz-bedrock-kb-source-uri"]
    response["retrievalResults"][1]["location"] = {
        "type": "WEB",
        "webLocation": {"url": "https://example.org/rivers"},
    }
    retrieve(stubbed("bedrock-agent-runtime", ("retrieve", response)))

    (span,) = records(exporter)
    assert "retrieval.documents.0.document.id" not in span.attributes
    answer = SpanRecord(span.trace_id, 99, None, "answer", {semconv.RAG_ANSWER: True})
    nested = SpanRecord(span.trace_id, span.span_id, 99, span.name, span.attributes)
    (group,) = find_answers([answer, nested])
    ids = [candidate["documentId"] for candidate in extract_signals(group.spans).inputs["candidates"]]
    assert ids == ["s3://kb-docs/atlas.md", "https://example.org/rivers", "chunk-atlas-2"]


def test_feedback_on_retrieve_and_generate_is_about_its_answer(
    openinference: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """Span feedback on a retriever grades the retrieval; on a call that retrieved and answered, the answer."""
    exporter, _ = openinference
    retrieve_and_generate(stubbed("bedrock-agent-runtime", ("retrieve_and_generate", rag_response())))
    (call,) = records(exporter)
    assert call.parent_span_id is None
    assert_feedback_grades_the_answer(call)


# -- the workaround where the spans do not carry the results ----------------------------------------------------


def record_knowledge_base(response: dict[str, Any], tracer: trace.Tracer) -> None:
    """The documented workaround: what ``retrieve`` found, on a GenAI retrieval span of the application's."""
    documents = [
        {
            "id": result["metadata"]["x-amz-bedrock-kb-chunk-id"],
            "score": result["score"],
            "content": result["content"]["text"],
            "metadata": result["metadata"],
        }
        for result in response["retrievalResults"]
    ]
    with tracer.start_as_current_span(f"retrieval {KNOWLEDGE_BASE}") as span:
        span.set_attribute(semconv.GEN_AI_OPERATION_NAME, semconv.GEN_AI_OPERATION_RETRIEVAL)
        span.set_attribute(semconv.GEN_AI_DATA_SOURCE_ID, KNOWLEDGE_BASE)
        span.set_attribute(semconv.GEN_AI_RETRIEVAL_DOCUMENTS, json.dumps(documents))


def test_under_openllmetry_or_botocore_a_retrieval_span_of_your_own_is_scored(
    uninformed: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """Record what ``retrieve`` returned yourself, and the citations ``retrieve_and_generate`` gave with
    ``record_signals``: the request span is scored on them."""
    exporter, provider = uninformed
    tracer = provider.get_tracer("app")
    client = stubbed(
        "bedrock-agent-runtime", ("retrieve", retrieve_response()), ("retrieve_and_generate", rag_response())
    )
    with tracer.start_as_current_span("POST /ask") as request:
        request.set_attribute(semconv.RAG_ANSWER, True)
        record_knowledge_base(retrieve(client), tracer)
        answer = retrieve_and_generate(client)
        cited = {
            reference["metadata"]["x-amz-bedrock-kb-chunk-id"]
            for citation in answer["citations"]
            for reference in citation["retrievedReferences"]
        }
        record_signals(citation_count=len(cited), invalid_citation_count=0)

    assert_scored_as(exporter, cited_chunks_inputs(), "POST /ask")


# -- retrieve_and_generate_stream ------------------------------------------------------------------------------


def test_the_event_stream_fake_is_what_botocore_decodes() -> None:
    """The loopback's frames are read by botocore's own event-stream parser, checksums checked: the events the
    client yields are the ones encoded."""
    with FakeAgentRuntime(event_stream(rag_response())) as fake:
        response = fake.client().retrieve_and_generate_stream(  # type: ignore[attr-defined]
            input={"text": QUESTION}, retrieveAndGenerateConfiguration=RAG_CONFIGURATION
        )
        events = list(response["stream"])
    assert "".join(event["output"]["text"] for event in events if "output" in event) == ANSWER
    citations = [event["citation"] for event in events if "citation" in event]
    assert citations == rag_response()["citations"]


def test_a_streamed_retrieve_and_generate_scores_as_the_whole_one(
    agent_runtime: FakeAgentRuntime, openinference_scored: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    """openinference-instrumentation-bedrock 0.1.61 joins the ``output`` events' text and gathers the
    ``citation`` events, and records them when the stream ends as it records a whole call, on a ``RETRIEVER``
    span ``bedrock_agent.retrieve_and_generate_stream``: the same inputs as
    ``test_a_bare_retrieve_and_generate_is_its_own_answer``, and the span processor scores that span."""
    exporter, _ = openinference_scored
    assert retrieve_and_generate_stream(agent_runtime.client()) == ANSWER

    (span,) = records(exporter)
    assert span.name == "bedrock_agent.retrieve_and_generate_stream"
    assert span.attributes[semconv.OPENINFERENCE_SPAN_KIND] == "RETRIEVER"
    assert span.attributes[semconv.OI_OUTPUT_VALUE] == ANSWER
    assert [span.attributes[f"retrieval.documents.{i}.document.id"] for i in (0, 1)] == [
        "chunk-atlas-1",
        "chunk-rivers-1",
    ]
    (group,) = find_answers([span])
    assert group.answer is span and group.rule == "root"
    signals = extract_signals(group.spans)
    expected = {"candidates": [], "citationCount": 2, "invalidCitationCount": 0, "supportLevel": "medium"}
    assert signals.inputs == expected
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_UNSCORED_DOCUMENTS] == 2
    (answer,) = scored(exporter)
    assert answer.attributes is not None
    assert answer.attributes[semconv.RAG_CONFIDENCE_TOTAL] == compute_confidence(expected).total


def test_citation_events_under_the_deprecated_member_only_leave_the_citations_unknown_not_zero(
    openinference_scored: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """The tracer reads ``retrievedReferences`` at the top of each citation event. An event carrying them only
    under the deprecated ``citation`` member (the service model still lists it) gives the span no document:
    the answer is still scored, on its text, with no citation input at all, rather than as one citing nothing
    (``citationCount`` 0 would count against it)."""
    exporter, _ = openinference_scored
    with FakeAgentRuntime(event_stream(rag_response(), nested_citations=True)) as fake:
        assert retrieve_and_generate_stream(fake.client()) == ANSWER

    (span,) = records(exporter)
    assert not any(key.startswith("retrieval.documents.") for key in span.attributes)
    (group,) = find_answers([span])
    signals = extract_signals(group.spans)
    assert signals.inputs == {"candidates": [], "supportLevel": "medium"}
    (answer,) = scored(exporter)
    assert answer.attributes is not None
    expected = compute_confidence({"candidates": [], "supportLevel": "medium"})
    assert answer.attributes[semconv.RAG_CONFIDENCE_TOTAL] == expected.total


def test_openllmetry_and_botocore_record_nothing_of_a_streamed_answer(
    agent_runtime: FakeAgentRuntime, uninformed: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    """As for the whole call: OpenLLMetry no span, the botocore instrumentor a ``CLIENT`` span
    ``Bedrock Agent Runtime.RetrieveAndGenerateStream`` with ``rpc.*`` only. No answer, no scorecard."""
    exporter, _ = uninformed
    assert retrieve_and_generate_stream(agent_runtime.client()) == ANSWER
    spans = exporter.get_finished_spans()
    assert [span.name for span in spans] in (
        [],
        ["Bedrock Agent Runtime.RetrieveAndGenerateStream"],
    )
    flat = json.dumps([dict(span.attributes or {}) for span in spans])
    assert "chunk-atlas-1" not in flat and "Paris" not in flat
    assert find_answers(records(exporter)) == []
    assert scored(exporter) == []
