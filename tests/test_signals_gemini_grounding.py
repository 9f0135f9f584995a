"""Hosted grounding: Gemini (``google-genai``) with a retrieval tool, under the real Google GenAI instrumentors.

The client is the real ``google-genai`` package; only its HTTP server is faked (a loopback server answering
``generateContent`` as the Gemini API does, reached through ``http_options.base_url``), because no network is
available here. The server's JSON is built from google-genai's own types and dumped by their camelCase aliases,
so the client parses it as it would parse Google's answer. The tracers are the real
``openinference-instrumentation-google-genai`` and ``opentelemetry-instrumentation-google-genai`` (OTel contrib).
Expected inputs are written from what the fake server returns, never from the code under test.
"""

from __future__ import annotations

import sys

import pytest

if sys.version_info < (3, 11):
    # The test extra installs it on 3.11 and newer only (pyproject.toml): nothing to test on 3.10.
    pytest.skip("google-genai 3 requires Python 3.11", allow_module_level=True)

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

from google import genai
from google.genai import types
from openinference.instrumentation.google_genai import GoogleGenAIInstrumentor as OpenInferenceInstrumentor
from opentelemetry.instrumentation.google_genai import GoogleGenAiSdkInstrumentor as ContribInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence import compute_confidence, semconv
from rag_confidence.signals import (
    SpanRecord,
    extract_signals,
    find_answers,
    is_retrieval_span,
)
from tests.instrumented import (
    LoopbackFake,
    LoopbackService,
    bare_call_signals,
    confidence_processor,
    records,
    scored,
    traced,
    traced_fixture,
)

QUESTION = "What is the capital of France, and which river is the longest there?"
FIRST = "Paris is the capital of France."
SECOND = "The Loire is the longest river in France."
ANSWER = f"{FIRST} {SECOND}"
ATLAS = "gs://kb/atlas.pdf"
RIVERS = "https://rivers.example/loire"
MODEL = "gemini-2.5-flash"


def chunks() -> list[types.GroundingChunk]:
    """What the retrieval tool found: two chunks of one RAG file (one candidate) and a web page."""
    return [
        types.GroundingChunk(
            retrieved_context=types.GroundingChunkRetrievedContext(
                uri=ATLAS,
                title="atlas.pdf",
                text=FIRST,
                rag_chunk=types.RagChunk(text=FIRST, chunk_id="c1", file_id="f1"),
            )
        ),
        types.GroundingChunk(web=types.GroundingChunkWeb(uri=RIVERS, title="rivers.example")),
        types.GroundingChunk(
            retrieved_context=types.GroundingChunkRetrievedContext(
                uri=ATLAS, title="atlas.pdf", text="Berlin is the capital of Germany."
            )
        ),
    ]


def support(text: str, indices: list[int], confidence: list[float]) -> types.GroundingSupport:
    start = ANSWER.encode().find(text.encode())
    return types.GroundingSupport(
        segment=types.Segment(start_index=start, end_index=start + len(text.encode()), text=text),
        grounding_chunk_indices=indices,
        confidence_scores=confidence,
    )


ALL_SUPPORTED = [support(FIRST, [0, 2], [0.93, 0.41]), support(SECOND, [1], [0.88])]


def grounded_response(supports: list[types.GroundingSupport] | None = None) -> types.GenerateContentResponse:
    return types.GenerateContentResponse(
        candidates=[
            types.Candidate(
                index=0,
                content=types.Content(role="model", parts=[types.Part(text=ANSWER)]),
                finish_reason=types.FinishReason.STOP,
                grounding_metadata=types.GroundingMetadata(
                    retrieval_queries=["capital of France", "longest river in France"],
                    grounding_chunks=chunks(),
                    grounding_supports=ALL_SUPPORTED if supports is None else supports,
                ),
            )
        ],
        model_version=MODEL,
        response_id="resp-1",
    )


class FakeGemini(LoopbackFake):
    """A loopback server answering every ``generateContent`` request with one response (no network here)."""

    def __init__(self) -> None:
        self.response = grounded_response()
        self.paths: list[str] = []
        # Where a stream carries the grounding metadata: "last" (with the finish reason), "first" (an earlier
        # piece, none on the last), "resent" (the first chunk and support on the first piece, all of it again
        # on the last).
        self.grounding_on = "last"
        self.service = LoopbackService(self._respond)

    def _respond(self, path: str, body: bytes) -> tuple[str, bytes]:
        self.paths.append(path)
        if "streamGenerateContent" in path:
            # A stream (``alt=sse``) as Gemini sends one: the text in pieces, the finish reason with the last.
            pieces = _pieces(self.response, self.grounding_on)
            return "text/event-stream", "".join(f"data: {_dump(piece)}\n\n" for piece in pieces).encode()
        return "application/json", _dump(self.response).encode()

    def client(self) -> genai.Client:
        return genai.Client(api_key="test-key", http_options=types.HttpOptions(base_url=self.service.url))


def _dump(response: types.GenerateContentResponse) -> str:
    return json.dumps(response.model_dump(mode="json", by_alias=True, exclude_none=True))


def _pieces(
    response: types.GenerateContentResponse, grounding_on: str = "last"
) -> list[types.GenerateContentResponse]:
    (candidate,) = response.candidates or ()
    text = ANSWER
    first = types.Candidate(
        index=0, content=types.Content(role="model", parts=[types.Part(text=FIRST + " ")])
    )
    last = candidate.model_copy(
        update={"content": types.Content(role="model", parts=[types.Part(text=text[len(FIRST) + 1 :])])}
    )
    metadata = candidate.grounding_metadata
    assert metadata is not None
    if grounding_on == "first":
        first = first.model_copy(update={"grounding_metadata": metadata})
        last = last.model_copy(update={"grounding_metadata": None})
    elif grounding_on == "resent":
        so_far = metadata.model_copy(
            update={
                "grounding_chunks": (metadata.grounding_chunks or [])[:1],
                "grounding_supports": [support(FIRST, [0], [0.93])],
            }
        )
        first = first.model_copy(update={"grounding_metadata": so_far})
    return [
        response.model_copy(update={"candidates": [first]}),
        response.model_copy(update={"candidates": [last]}),
    ]


@pytest.fixture()
def gemini() -> Iterator[FakeGemini]:
    with FakeGemini() as fake:
        yield fake


# A Gemini API file search store (the Developer API's hosted retrieval; Vertex AI Search and the RAG Engine
# are Vertex-only tools, and their responses carry the same ``grounding_metadata``).
TOOLS = [types.Tool(file_search=types.FileSearch(file_search_store_names=["fileSearchStores/kb"]))]


def ask(client: genai.Client) -> str | None:
    response = client.models.generate_content(
        model=MODEL, contents=QUESTION, config=types.GenerateContentConfig(tools=TOOLS)
    )
    return response.text


def expected_inputs(*, cited: int, invalid: int = 0, coverage: float) -> dict[str, Any]:
    """What the grounding says, written out. No chunk carries a relevance score, so no candidate is scored."""
    return {
        "candidates": [],
        "citationCount": cited,
        "invalidCitationCount": invalid,
        "citationCoverageScore": coverage,
        "supportLevel": "medium",  # the default: nothing on these spans says more
    }


openinference = traced_fixture(OpenInferenceInstrumentor, SimpleSpanProcessor)
openinference_scored = traced_fixture(OpenInferenceInstrumentor)


class _Contrib(ContribInstrumentor):  # type: ignore[misc]
    """opentelemetry-instrumentation-google-genai 1.3b0 declares ``google-genai<3`` and instruments nothing
    with 3.x unless told to skip the check; its wrappers work with 3.x (the spans below)."""

    def instrument(self, **kwargs: Any) -> None:
        super().instrument(skip_dep_check=True, **kwargs)


@pytest.fixture()
def contrib(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[InMemorySpanExporter, TracerProvider]]:
    # Content on the span, so the answer text is there to read (the instrumentor's default records none).
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    yield from traced(_Contrib(), confidence_processor)


# -- what the instrumentors record -----------------------------------------------------------------------------


def test_openinference_records_the_whole_response_grounding_included(
    gemini: FakeGemini, openinference: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    """One LLM span; its ``output.value`` is the GenerateContentResponse by field name, grounding included."""
    exporter, _ = openinference
    assert ask(gemini.client()) == ANSWER
    assert gemini.paths == [f"/v1/models/{MODEL}:generateContent"]

    (span,) = exporter.get_finished_spans()
    attributes = dict(span.attributes or {})
    assert attributes[semconv.OPENINFERENCE_SPAN_KIND] == "LLM"
    metadata = json.loads(attributes[semconv.OI_OUTPUT_VALUE])["candidates"][0]["grounding_metadata"]
    assert [sorted(chunk) for chunk in metadata["grounding_chunks"]] == [
        ["retrieved_context"],
        ["web"],
        ["retrieved_context"],
    ]
    assert [s["grounding_chunk_indices"] for s in metadata["grounding_supports"]] == [[0, 2], [1]]
    assert attributes["llm.output_messages.0.message.content"] == ANSWER


def test_the_contrib_instrumentor_records_the_text_and_nothing_of_the_grounding(
    gemini: FakeGemini, contrib: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    """opentelemetry-instrumentation-google-genai: one ``generate_content`` span with the output text; no chunk,
    no support. No retrieval, no answer, no scorecard."""
    exporter, _ = contrib
    assert ask(gemini.client()) == ANSWER

    (span,) = exporter.get_finished_spans()
    attributes = dict(span.attributes or {})
    assert attributes[semconv.GEN_AI_OPERATION_NAME] == "generate_content"
    assert json.loads(attributes[semconv.GEN_AI_OUTPUT_MESSAGES])[0]["parts"][0]["content"] == ANSWER
    flat = json.dumps(attributes, default=str)
    assert ATLAS not in flat and "grounding" not in flat
    assert find_answers(records(exporter)) == []
    assert scored(exporter) == []


# -- scoring what OpenInference records ------------------------------------------------------------------------


def test_a_bare_grounded_call_is_its_own_answer(
    gemini: FakeGemini, openinference: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    """The LLM span is the trace's root, a retrieval and a generation at once, and so the answer. Its chunks
    have no score (no candidates); the supports cite atlas (twice, one source) and the rivers page and back both
    sentences."""
    exporter, _ = openinference
    ask(gemini.client())

    signals = bare_call_signals(exporter)
    expected = expected_inputs(cited=2, coverage=1.0)
    assert signals.inputs == expected
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 3
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_UNSCORED_DOCUMENTS] == 2
    assert compute_confidence(signals.inputs).total == compute_confidence(expected).total


def test_a_grounded_response_cut_short_by_a_length_limit_is_a_grounded_call_read_as_unreadable(
    gemini: FakeGemini, openinference: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    """A value length limit that cuts ``output.value`` inside the first candidate's chunk list leaves no JSON:
    the call still retrieved (its chunks unreadable, so no citation input is derived), and one cut before the
    list opens says nothing of a retrieval."""
    exporter, _ = openinference
    ask(gemini.client())
    (span,) = records(exporter)
    output = span.attributes[semconv.OI_OUTPUT_VALUE]
    opened = output.index('"grounding_chunks"')

    within = dataclasses.replace(
        span, attributes={**span.attributes, semconv.OI_OUTPUT_VALUE: output[: opened + 40]}
    )
    assert is_retrieval_span(within)
    (group,) = find_answers([within])
    signals = extract_signals(group.spans)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_UNREADABLE_SPANS] == 1
    assert "citationCount" not in signals.inputs

    before = dataclasses.replace(
        span, attributes={**span.attributes, semconv.OI_OUTPUT_VALUE: output[:opened]}
    )
    assert not is_retrieval_span(before)
    assert find_answers([before]) == []


def test_coverage_is_the_share_of_sentences_a_support_backs(
    gemini: FakeGemini, openinference: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    """Only the first sentence backed: coverage one half, one source cited. A support index past the chunk
    list is an invalid citation, and its segment is not covered."""
    exporter, _ = openinference
    gemini.response = grounded_response([support(FIRST, [0], [0.9]), support(SECOND, [7], [0.8])])
    ask(gemini.client())

    (group,) = find_answers(records(exporter))
    signals = extract_signals(group.spans)
    expected = expected_inputs(cited=1, invalid=1, coverage=0.5)
    assert signals.inputs == expected
    assert compute_confidence(signals.inputs).total == compute_confidence(expected).total


def test_grounding_without_supports_derives_no_citation_input(
    gemini: FakeGemini, openinference: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    """Chunks retrieved, nothing attributed: like an answer without markers, nothing is derived."""
    exporter, _ = openinference
    gemini.response = grounded_response([])
    ask(gemini.client())

    (group,) = find_answers(records(exporter))
    signals = extract_signals(group.spans)
    assert signals.inputs == {"candidates": [], "supportLevel": "medium"}


def test_the_span_processor_scores_the_bare_call_and_the_application_span_around_one(
    gemini: FakeGemini, openinference_scored: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    exporter, provider = openinference_scored
    expected = compute_confidence(expected_inputs(cited=2, coverage=1.0))

    ask(gemini.client())
    (answer,) = scored(exporter)
    assert answer.parent is None
    assert answer.attributes is not None
    assert answer.attributes[semconv.RAG_CONFIDENCE_TOTAL] == expected.total
    assert answer.attributes[semconv.RAG_CONFIDENCE_CANDIDATES] == 0

    exporter.clear()
    with provider.get_tracer("app").start_as_current_span("POST /ask"):
        ask(gemini.client())
    (answer,) = scored(exporter)
    assert answer.name == "POST /ask"
    assert answer.attributes is not None
    assert answer.attributes[semconv.RAG_CONFIDENCE_TOTAL] == expected.total


# -- streams; what the contrib tracer leaves out, and the workaround ---------------------------------------------


def ask_streamed(client: genai.Client) -> str:
    stream = client.models.generate_content_stream(
        model=MODEL, contents=QUESTION, config=types.GenerateContentConfig(tools=TOOLS)
    )
    return "".join(chunk.text or "" for chunk in stream)


@pytest.mark.parametrize("grounding_on", ["last", "first"])
def test_a_streamed_grounded_call_is_scored_as_the_whole_response(
    gemini: FakeGemini, openinference: tuple[InMemorySpanExporter, TracerProvider], grounding_on: str
) -> None:
    """Gemini streams the text in pieces and the grounding metadata with one of them (the last, or an earlier
    one); the OpenInference stream accumulator (1.4.14) joins the text and keeps the metadata wherever it came,
    so the streamed call (span ``GenerateContentStream``) scores as the whole one, finish reason included."""
    exporter, _ = openinference
    gemini.grounding_on = grounding_on
    assert ask_streamed(gemini.client()) == ANSWER

    (span,) = records(exporter)
    assert span.name == "GenerateContentStream"
    (group,) = find_answers([span])
    signals = extract_signals(group.spans)
    assert signals.inputs == expected_inputs(cited=2, coverage=1.0)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 3
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_FINISH_REASON] == "stop"


def test_grounding_resent_on_two_pieces_of_a_stream_is_recorded_as_one_longer_list(
    gemini: FakeGemini, openinference: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    """Pins a limit of the OpenInference accumulator (1.4.14): it extends every list of ``grounding_metadata``
    with the next piece's, so a stream that sends the grounding so far on one piece and all of it again on a
    later one is recorded as the concatenation, and a later support's chunk indices (into its own piece's list)
    point into the wrong part of it. Here the last support's ``[1]`` (the rivers page) lands on the resent
    atlas chunk. docs/signals.md, *Hosted grounding: Gemini*, says what follows."""
    exporter, _ = openinference
    gemini.grounding_on = "resent"
    assert ask_streamed(gemini.client()) == ANSWER

    (span,) = records(exporter)
    output = json.loads(span.attributes[semconv.OI_OUTPUT_VALUE])
    metadata = output["candidates"][0]["grounding_metadata"]
    ids = [
        chunk.get("web", chunk.get("retrieved_context", {})).get("uri")
        for chunk in metadata["grounding_chunks"]
    ]
    assert ids == [ATLAS, ATLAS, RIVERS, ATLAS]
    assert [s["grounding_chunk_indices"] for s in metadata["grounding_supports"]] == [[0], [0, 2], [1]]

    (group,) = find_answers([span])
    signals = extract_signals(group.spans)
    # Read as recorded: four markers (three in the response), the second support's chunk 2 read as the rivers
    # page and the third's chunk 1 as atlas; both sources still cited here, by the wrong supports.
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 4
    assert signals.inputs == expected_inputs(cited=2, coverage=1.0)


def test_the_contrib_instrumentor_records_a_stream_as_a_whole_call(
    gemini: FakeGemini, contrib: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    """opentelemetry-instrumentation-google-genai on ``generate_content_stream``: one ``generate_content`` span
    with ``gen_ai.request.stream``, the text joined and the finish reason; no grounding, as for the whole call.
    No retrieval, no answer, no scorecard."""
    exporter, _ = contrib
    assert ask_streamed(gemini.client()) == ANSWER

    (span,) = exporter.get_finished_spans()
    attributes = dict(span.attributes or {})
    assert attributes["gen_ai.request.stream"] is True
    assert json.loads(attributes[semconv.GEN_AI_OUTPUT_MESSAGES])[0]["parts"][0]["content"] == ANSWER
    assert tuple(attributes["gen_ai.response.finish_reasons"]) == ("stop",)
    flat = json.dumps(attributes, default=str)
    assert ATLAS not in flat and "grounding" not in flat
    assert find_answers(records(exporter)) == []
    assert scored(exporter) == []


def record_grounding(tracer: Any, response: types.GenerateContentResponse) -> None:
    """The workaround of docs/signals.md: the grounding chunks on a GenAI retrieval span of the application's
    (no score: the API gives none), the supports' chunk ids as the answer's citations."""
    metadata = response.candidates[0].grounding_metadata  # type: ignore[index]
    assert metadata is not None
    documents = []
    for chunk in metadata.grounding_chunks or ():
        source = chunk.retrieved_context or chunk.web
        assert source is not None
        documents.append({"id": source.uri, "content": getattr(source, "text", None)})
    with tracer.start_as_current_span("retrieval grounding") as span:
        span.set_attribute("gen_ai.operation.name", "retrieval")
        span.set_attribute("gen_ai.data_source.id", "grounding")
        span.set_attribute("gen_ai.retrieval.documents", json.dumps(documents))


def test_under_the_contrib_instrumentor_the_documented_workaround_scores(
    gemini: FakeGemini, contrib: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    """A span around the request, with the grounding recorded on a GenAI retrieval span and the supports'
    citations with ``record_signals``: the request span is scored on them, the text from the contrib span."""
    from rag_confidence.otel import record_signals

    exporter, provider = contrib
    tracer = provider.get_tracer("app")
    client = gemini.client()
    with tracer.start_as_current_span("POST /ask"):
        response = client.models.generate_content(
            model=MODEL, contents=QUESTION, config=types.GenerateContentConfig(tools=TOOLS)
        )
        record_grounding(tracer, response)
        metadata = response.candidates[0].grounding_metadata  # type: ignore[index]
        assert metadata is not None and metadata.grounding_supports is not None
        backed = [s for s in metadata.grounding_supports if s.grounding_chunk_indices]
        sentences = 2  # FIRST and SECOND
        record_signals(
            citation_count=2,  # atlas (chunks 0 and 2) and the rivers page
            invalid_citation_count=0,
            citation_coverage_score=len(backed) / sentences,
        )
    (answer,) = scored(exporter)
    assert answer.name == "POST /ask"
    assert answer.attributes is not None
    expected = compute_confidence(expected_inputs(cited=2, coverage=1.0))
    assert answer.attributes[semconv.RAG_CONFIDENCE_TOTAL] == expected.total


def test_thousands_of_segments_missing_from_a_long_answer_are_located_in_bounded_time() -> None:
    """Span data a sender shaped (to the gateway): a long answer text and thousands of supports whose segments it
    does not hold. Each such segment cost two scans of the whole text: over ten seconds for this span. The
    segments found first still cover their sentence."""
    import time

    sentence = "a" * 99 + "."
    text = " ".join([FIRST, *([sentence] * 10_000)])
    supports = [{"segment": {"text": FIRST}, "grounding_chunk_indices": [0]}] + [
        {"segment": {"text": "a" * 60 + "b"}, "grounding_chunk_indices": [0]} for _ in range(5_000)
    ]
    output = json.dumps(
        {
            "candidates": [
                {
                    "grounding_metadata": {
                        "grounding_chunks": [{"web": {"uri": RIVERS}}],
                        "grounding_supports": supports,
                    }
                }
            ]
        }
    )
    span = SpanRecord(
        1,
        1,
        None,
        "GenerateContent",
        {
            semconv.OPENINFERENCE_SPAN_KIND: "LLM",
            semconv.OI_OUTPUT_VALUE: output,
            "llm.output_messages.0.message.role": "model",
            "llm.output_messages.0.message.content": text,
        },
    )
    started = time.process_time()
    (group,) = find_answers([span])
    signals = extract_signals(group.spans)
    # Not a speed target: a generous bound the unbounded search (over 10 s here) exceeds by far.
    assert time.process_time() - started < 2.0
    assert signals.inputs["citationCount"] == 1
    assert signals.inputs["citationCoverageScore"] == pytest.approx(1 / 10_001)
