"""RAG built with the OpenAI Agents SDK, traced by ``openinference-instrumentation-openai-agents``.

The agent, its runner, its function tools and the hosted ``FileSearchTool`` / ``WebSearchTool`` are the real
``openai-agents`` objects driving the real ``openai`` client; only the model's HTTP server is faked
(``httpx.MockTransport``), because no network is available here. Its JSON is built from the openai package's
own Response types. The tracer is the real OpenInference Agents instrumentor, which turns the SDK's own
tracing events into OTel spans (alone, and with the OpenInference OpenAI tracer beneath it, as Phoenix's
``register(auto_instrument=True)`` installs both). Expected inputs are written from what the tool and the fake
server return, never from the code under test.

Checked with openai-agents 0.20 (openai 2.54) and 0.24 (openai 3.57, which needs ``httpx2``; its spans were
the same); the instrumentor 2.6.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from agents import (
    Agent,
    FileSearchTool,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    WebSearchTool,
    function_tool,
)
from openai.types.responses import (
    Response,
    ResponseFileSearchToolCall,
    ResponseFunctionToolCall,
    ResponseFunctionWebSearch,
)
from openai.types.responses.response_file_search_tool_call import Result
from openai.types.responses.response_output_text import AnnotationFileCitation, AnnotationURLCitation
from openinference.instrumentation.openai import OpenAIInstrumentor
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence import compute_confidence, semconv
from rag_confidence.signals import extract_signals, find_answers
from tests.fake_openai import mock_async_openai, openai_response, output_message
from tests.instrumented import Traced, assert_scored_as, candidates, confidence_processor, records, scored
from tests.test_gateway_support import (
    DownstreamReceiver,
    Recording,
    attributes_of,
    downstream,
    running_gateway,
    tracer_provider,
)

__all__ = ["downstream"]  # the fixture, imported for pytest

QUESTION = "How many days of leave do I get, and do unused days carry over?"
# What the application's knowledge base search returns: (id, score, text).
DOCUMENTS = [
    ("kb-leave", 0.88, "Employees get 25 days of paid leave per year."),
    ("kb-carry", 0.61, "Up to 5 unused days carry over to the next year."),
    ("kb-sick", 0.34, "Sick leave is separate from annual leave."),
]
ANSWER = "You get 25 days of paid leave per year [1]. Up to 5 unused days carry over [2]."


def tool_round_trip(answer: str = ANSWER) -> list[Response]:
    """The model calls ``search_docs``, then answers from what it returned."""
    return [
        openai_response(
            [
                ResponseFunctionToolCall(
                    type="function_call",
                    id="fc_1",
                    call_id="call_1",
                    name="search_docs",
                    arguments=json.dumps({"query": "annual leave days carry over"}),
                    status="completed",
                )
            ],
            response_id="resp_1",
        ),
        openai_response([output_message(answer)], response_id="resp_2"),
    ]


class FakeModelServer:
    """The Responses endpoint, answering the n-th request with the n-th response (no network here)."""

    def __init__(self, responses: list[Response]) -> None:
        self.responses = responses
        self.requests: list[dict[str, Any]] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(json.loads(request.content))
        response = self.responses[min(len(self.requests), len(self.responses)) - 1]
        return httpx.Response(200, json=response.model_dump(mode="json"))

    def model(self) -> OpenAIResponsesModel:
        return OpenAIResponsesModel("gpt-4.1-mini", mock_async_openai(self.handle))


@function_tool
def search_docs(query: str) -> list[dict[str, Any]]:
    """Search the HR knowledge base."""
    return [{"id": doc_id, "score": score, "content": text} for doc_id, score, text in DOCUMENTS]


@function_tool(name_override="search_docs")
def search_docs_as_text(query: str) -> str:
    """Search the HR knowledge base (results formatted for the model, as many agents' tools do)."""
    return "\n".join(
        f"[{position}] {doc_id}: {text}" for position, (doc_id, _, text) in enumerate(DOCUMENTS, start=1)
    )


def run(agent: Agent[Any], config: RunConfig | None = None) -> str:
    result = asyncio.run(Runner.run(agent, QUESTION, run_config=config))
    return str(result.final_output)


def rag_agent(server: FakeModelServer, tool: Any = search_docs) -> Agent[Any]:
    return Agent(
        name="HR assistant",
        instructions="Answer from search_docs only; cite results as [n].",
        tools=[tool],
        model=server.model(),
    )


def expected_tool_inputs() -> dict[str, Any]:
    """The tool's documents as candidates (one method, named after the tool), both markers valid."""
    return {
        "candidates": candidates(DOCUMENTS, "search_docs"),
        "citationCount": 2,
        "invalidCitationCount": 0,
        "citationCoverageScore": 1.0,
        "supportLevel": "medium",  # the default: nothing on these spans says more
    }


def _traced(
    processor: Callable[[InMemorySpanExporter], SpanProcessor],
    *,
    tool_span_kinds: dict[str, str] | None = None,
    with_openai: bool = False,
) -> Iterator[Traced]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(processor(exporter))
    agents_instrumentor = OpenAIAgentsInstrumentor()
    # Exclusive (the default): the SDK's own processor, which uploads to OpenAI, is displaced until uninstrument.
    agents_instrumentor.instrument(tracer_provider=provider, tool_span_kinds=tool_span_kinds)
    openai_instrumentor = OpenAIInstrumentor() if with_openai else None
    if openai_instrumentor is not None:
        openai_instrumentor.instrument(tracer_provider=provider)
    try:
        yield exporter, provider
    finally:
        agents_instrumentor.uninstrument()
        if openai_instrumentor is not None:
            openai_instrumentor.uninstrument()


@pytest.fixture()
def agents_tracer() -> Iterator[Traced]:
    yield from _traced(SimpleSpanProcessor)


@pytest.fixture()
def retriever_tool() -> Iterator[Traced]:
    """``tool_span_kinds`` declares ``search_docs`` a retriever: its span is a RETRIEVER with the documents."""
    yield from _traced(confidence_processor, tool_span_kinds={"search_docs": "RETRIEVER"})


@pytest.fixture()
def retriever_tool_with_openai() -> Iterator[Traced]:
    yield from _traced(confidence_processor, tool_span_kinds={"search_docs": "RETRIEVER"}, with_openai=True)


def _by_name(spans: tuple[ReadableSpan, ...]) -> dict[str, list[ReadableSpan]]:
    named: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        named.setdefault(span.name, []).append(span)
    return named


# -- a function tool that retrieves in application code ---------------------------------------------------------


def test_a_function_tool_is_a_tool_span_and_no_retrieval(agents_tracer: Traced) -> None:
    """By default the tool's span is a TOOL span whose ``output.value`` is its return value as JSON. A tool is
    any function (a calculator, a ticket API): its output is not read as documents, so the run holds no
    retrieval and gets no scorecard. What the tracer records is pinned here."""
    exporter, _ = agents_tracer
    server = FakeModelServer(tool_round_trip())
    assert run(rag_agent(server)) == ANSWER

    named = _by_name(exporter.get_finished_spans())
    (tool,) = named["search_docs"]
    attributes = dict(tool.attributes or {})
    assert attributes[semconv.OPENINFERENCE_SPAN_KIND] == "TOOL"
    assert json.loads(attributes[semconv.OI_OUTPUT_VALUE]) == [
        {"id": doc_id, "score": score, "content": text} for doc_id, score, text in DOCUMENTS
    ]
    assert not any(key.startswith(semconv.OI_RETRIEVAL_DOCUMENTS) for key in attributes)
    (root,) = [span for span in exporter.get_finished_spans() if span.parent is None]
    assert root.name == "Agent workflow"
    assert dict(root.attributes or {}) == {semconv.OPENINFERENCE_SPAN_KIND: "AGENT"}
    # Each model call is an LLM span holding the whole Response; the last one's text is the answer.
    assert [span.attributes[semconv.OPENINFERENCE_SPAN_KIND] for span in named["response"]] == ["LLM", "LLM"]

    assert find_answers(records(exporter)) == []


def test_a_marked_run_over_an_undeclared_tool_leaves_its_citations_unjudged(agents_tracer: Traced) -> None:
    """The same run inside a marked span (``@scored_answer`` around ``Runner.run`` makes one): the span answers,
    with no retrieval beneath it. The documents ``[1]`` and ``[2]`` name are unknown (they went to the model
    through a tool nobody declared a retriever), so they are counted as markers and not judged, rather than
    every valid citation being called invalid."""
    exporter, provider = agents_tracer
    with provider.get_tracer("app").start_as_current_span("POST /ask") as request:
        request.set_attribute(semconv.RAG_ANSWER, True)
        assert run(rag_agent(FakeModelServer(tool_round_trip()))) == ANSWER

    (group,) = find_answers(records(exporter))
    assert group.answer.name == "POST /ask" and not group.has_retrieval
    assert {"search_docs", "response"} <= {span.name for span in group.spans}
    signals = extract_signals(group.spans)
    assert signals.inputs == {"candidates": [], "supportLevel": "medium"}
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2


def test_a_tool_declared_a_retriever_is_read_and_the_run_root_answers(retriever_tool: Traced) -> None:
    """With ``tool_span_kinds={"search_docs": "RETRIEVER"}`` the instrumentor writes the tool's output as
    ``retrieval.documents.*`` (``id``, ``score``, ``content`` keys of each returned dict); the run's root span is
    the answer by rule (c) and carries the scorecard."""
    exporter, _ = retriever_tool
    assert run(rag_agent(FakeModelServer(tool_round_trip()))) == ANSWER

    signals = assert_scored_as(exporter, expected_tool_inputs(), "Agent workflow")
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_SPANS] == 1
    (group,) = find_answers(records(exporter))
    assert group.rule == "root"
    (answer,) = scored(exporter)
    assert answer.parent is None


def test_the_openai_tracer_beneath_changes_nothing(retriever_tool_with_openai: Traced) -> None:
    """With the OpenInference OpenAI tracer installed too, each model call has a second LLM span (``Response``)
    beneath the Agents SDK's (``response``), with the same text: the same inputs, one scorecard."""
    exporter, _ = retriever_tool_with_openai
    run(rag_agent(FakeModelServer(tool_round_trip())))

    named = _by_name(exporter.get_finished_spans())
    assert len(named["Response"]) == len(named["response"]) == 2
    (group,) = find_answers(records(exporter))
    assert extract_signals(group.spans).inputs == expected_tool_inputs()
    assert [span.name for span in scored(exporter)] == ["Agent workflow"]


@function_tool(name_override="search_docs")
def search_docs_as_dict(query: str) -> dict[str, Any]:
    """Search the HR knowledge base (the formatted results under a key, with the query echoed)."""
    return {"query": query, "results": _formatted()}


def _formatted() -> str:
    return "\n".join(
        f"[{position}] {doc_id}: {text}" for position, (doc_id, _, text) in enumerate(DOCUMENTS, start=1)
    )


@pytest.mark.parametrize(
    ("tool", "results_of"),
    [
        (search_docs_as_text, lambda output: output),
        (search_docs_as_dict, lambda output: json.loads(output)["results"]),
    ],
    ids=["text", "text in an object"],
)
def test_a_retriever_tool_returning_text_leaves_its_citations_unjudged(
    retriever_tool: Traced, tool: Any, results_of: Callable[[str], str]
) -> None:
    """A tool returning formatted text (the usual shape for a model) gives the tracer no documents to write:
    the RETRIEVER span holds only ``output.value``. Which documents ``[1]`` and ``[2]`` name is unknown, so no
    citation input is derived (they are not counted invalid), and the span counts as unreadable.

    A tool returning a dict is written as its JSON (the Agents tracer lists documents only for a list of
    objects): the formatted results under ``results`` are as unreadable as the bare text, so ``[1]``, ``[2]`` are
    not counted invalid. The query it echoes is the tool's own input, no result."""
    exporter, _ = retriever_tool
    run(rag_agent(FakeModelServer(tool_round_trip()), tool))

    (tool_span,) = _by_name(exporter.get_finished_spans())["search_docs"]
    attributes = dict(tool_span.attributes or {})
    assert attributes[semconv.OPENINFERENCE_SPAN_KIND] == "RETRIEVER"
    assert results_of(attributes[semconv.OI_OUTPUT_VALUE]).startswith("[1] kb-leave: ")
    assert not any(key.startswith(semconv.OI_RETRIEVAL_DOCUMENTS) for key in attributes)

    (group,) = find_answers(records(exporter))
    signals = extract_signals(group.spans)
    assert signals.inputs == {"candidates": [], "supportLevel": "medium"}
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_UNREADABLE_SPANS] == 1
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2


def test_without_sensitive_data_the_run_is_scored_blind(retriever_tool: Traced) -> None:
    """``RunConfig(trace_include_sensitive_data=False)`` (or ``OPENAI_AGENTS_TRACE_INCLUDE_SENSITIVE_DATA=false``)
    keeps every input and output off the spans: the retriever span is still one, so the root is the answer, but
    with no documents and no answer text it is scored without candidates or citations."""
    exporter, _ = retriever_tool
    run(rag_agent(FakeModelServer(tool_round_trip())), RunConfig(trace_include_sensitive_data=False))

    spans = exporter.get_finished_spans()
    assert not any(semconv.OI_OUTPUT_VALUE in (span.attributes or {}) for span in spans)
    (group,) = find_answers(records(exporter))
    signals = extract_signals(group.spans)
    assert signals.inputs == {"candidates": [], "supportLevel": "medium"}
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 0


@pytest.mark.parametrize(
    ("tool_name", "output", "unreadable", "judged"),
    [
        ("search_docs", "[1] kb-leave: Employees get 25 days.", True, False),  # text
        # a JSON string of text
        ("search_docs", json.dumps("[1] kb-leave: Employees get 25 days."), True, False),
        # objects of another shape
        ("search_docs", json.dumps({"results": [{"doc": "kb-leave"}]}), True, False),
        ("search_docs", "[]", False, True),  # found nothing
        # the query it was given
        ("search_docs", json.dumps({"documents": [], "query": "leave"}), False, True),
        # text in JSON
        ("search_docs", json.dumps({"results": "[1] kb-leave: Employees get 25 days."}), True, False),
        ("search_docs", "  ", False, True),
        # 4 KB and more is no "found nothing", not parsed (parsed, numbers and the echoed query would be)
        (
            "search_docs",
            json.dumps({"documents": [], "query": "leave", "ms": {f"s{n}": n for n in range(400)}}),
            True,
            False,
        ),
        # hidden: read as absent, as everywhere: nothing recorded, so the marker is not judged
        ("search_docs", semconv.OI_REDACTED_VALUE, False, False),
        # no tool: LlamaIndex's ``_retrieve``, whose documents its ``retrieve`` lists; alone, nothing recorded
        (None, json.dumps([{"id_": "node-1", "text": "..."}]), False, False),
    ],
)
def test_which_retriever_tools_without_documents_are_unreadable(
    tool_name: str | None, output: str, unreadable: bool, judged: bool
) -> None:
    """The rule on span data alone: a tool declared a retriever that returned something but listed no document."""
    from rag_confidence.signals import SpanRecord

    attributes: dict[str, Any] = {
        semconv.OPENINFERENCE_SPAN_KIND: "RETRIEVER",
        semconv.OI_INPUT_VALUE: json.dumps(
            {"query": "leave"}
        ),  # the tool's arguments, as the tracer writes them
        semconv.OI_OUTPUT_VALUE: output,
    }
    if tool_name is not None:
        attributes["tool.name"] = tool_name  # as the Agents tracer writes it
    root = SpanRecord(1, 1, None, "Agent workflow", {semconv.OPENINFERENCE_SPAN_KIND: "AGENT"}, end_time=3)
    tool = SpanRecord(1, 2, 1, "search_docs", attributes, end_time=1)
    llm = SpanRecord(
        1,
        3,
        1,
        "response",
        {semconv.OPENINFERENCE_SPAN_KIND: "LLM", semconv.OI_OUTPUT_VALUE: "25 days [1]."},
        end_time=2,
    )
    signals = extract_signals([tool, llm, root])
    assert (semconv.RAG_CONFIDENCE_RETRIEVAL_UNREADABLE_SPANS in signals.diagnostics) is unreadable
    # Found nothing, the marker is invalid; unreadable, or nothing recorded of what was found, it is left
    # unjudged.
    assert signals.inputs.get("invalidCitationCount") == (1 if judged else None)


def test_a_long_retriever_tool_output_is_not_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gateway reads sender-shaped spans: a megabyte of JSON in the ``output.value`` of each of many retriever
    tool spans cost one parse apiece (about 90 ms each here) only to tell "found nothing" from results."""
    from rag_confidence.signals import SpanRecord
    from rag_confidence.signals import _values as values_module

    # Spies on the two parsers every JSON read ends in: the scanner ``loads_json`` calls and ``json.loads``. Both
    # are looked up at each call even from mypyc-compiled code (a module variable, a module of the standard
    # library), where a patch of ``loads_json`` itself would never be called.
    parsed: list[int] = []
    real_scan, real_loads = values_module._SCAN, json.loads

    def counting_scan(text: str, index: int) -> Any:
        parsed.append(len(text))
        return real_scan(text, index)

    def counting_loads(text: str, *args: Any, **kwargs: Any) -> Any:
        parsed.append(len(text))
        return real_loads(text, *args, **kwargs)

    monkeypatch.setattr(values_module, "_SCAN", counting_scan)
    monkeypatch.setattr(json, "loads", counting_loads)
    payload = json.dumps({f"k{n}": {"v": n} for n in range(40_000)})
    tools = [
        SpanRecord(
            1,
            10 + n,
            1,
            "search_docs",
            {
                semconv.OPENINFERENCE_SPAN_KIND: "RETRIEVER",
                "tool.name": "search_docs",
                semconv.OI_OUTPUT_VALUE: payload,
            },
            end_time=n,
        )
        for n in range(20)
    ]
    root = SpanRecord(1, 1, None, "run", {semconv.RAG_ANSWER: True}, end_time=100)
    signals = extract_signals([*tools, root])
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_UNREADABLE_SPANS] == 20
    assert not [size for size in parsed if size >= len(payload)]


# -- hosted tools -------------------------------------------------------------------------------------------------

FILE_ANSWER = "Employees get 25 days of paid leave per year. Up to 5 unused days carry over."
FILE_RESULTS = [
    (
        "file-handbook",
        "handbook.pdf",
        0.92,
        "Employees get 25 days of paid leave per year.",
        {"document_type": "policy"},
    ),
    ("file-faq", "faq.md", 0.67, "Up to 5 unused days carry over.", {"document_type": "faq"}),
]


def file_search_response(*, results: bool = True) -> Response:
    return openai_response(
        [
            ResponseFileSearchToolCall(
                id="fs_1",
                type="file_search_call",
                status="completed",
                queries=["annual leave days"],
                results=[
                    Result(file_id=file_id, filename=name, score=score, text=text, attributes=attributes)
                    for file_id, name, score, text, attributes in FILE_RESULTS
                ]
                if results
                else None,
            ),
            output_message(
                FILE_ANSWER,
                [
                    AnnotationFileCitation(
                        type="file_citation", file_id="file-handbook", filename="handbook.pdf", index=45
                    ),
                    AnnotationFileCitation(
                        type="file_citation", file_id="file-faq", filename="faq.md", index=len(FILE_ANSWER)
                    ),
                ],
            ),
        ],
        response_id="resp_fs",
    )


def expected_file_search_inputs() -> dict[str, Any]:
    return {
        "candidates": [
            {
                "retrievalScores": {"file_search": score},
                "combinedScore": score,
                "documentId": file_id,
                "documentType": attributes["document_type"],
                "rank": rank,
            }
            for rank, (file_id, _, score, _, attributes) in enumerate(FILE_RESULTS, start=1)
        ],
        "citationCount": 2,
        "invalidCitationCount": 0,
        "supportLevel": "medium",
    }


def test_hosted_file_search_is_read_from_the_agents_response_span(agents_tracer: Traced) -> None:
    """``FileSearchTool(include_search_results=True)`` asks for the results; the Agents tracer's ``response``
    LLM span holds the whole Response in ``output.value``, read as under the OpenAI tracer (docs/signals.md,
    *Hosted retrieval*). The run's root is the answer."""
    exporter, _ = agents_tracer
    server = FakeModelServer([file_search_response()])
    agent = Agent(
        name="HR assistant",
        tools=[FileSearchTool(vector_store_ids=["vs_hr"], include_search_results=True)],
        model=server.model(),
    )
    assert run(agent) == FILE_ANSWER
    assert server.requests[0]["include"] == ["file_search_call.results"]

    (group,) = find_answers(records(exporter))
    assert group.answer.name == "Agent workflow"
    assert extract_signals(group.spans).inputs == expected_file_search_inputs()


def test_hosted_file_search_without_its_results_is_unreadable(agents_tracer: Traced) -> None:
    """``include_search_results`` defaults to False: OpenAI returns ``results: null``, the search is known, what
    it found is not (no candidates, no citation input)."""
    exporter, _ = agents_tracer
    server = FakeModelServer([file_search_response(results=False)])
    agent = Agent(
        name="HR assistant", tools=[FileSearchTool(vector_store_ids=["vs_hr"])], model=server.model()
    )
    run(agent)
    assert "file_search_call.results" not in (server.requests[0].get("include") or [])

    (group,) = find_answers(records(exporter))
    signals = extract_signals(group.spans)
    assert signals.inputs == {"candidates": [], "supportLevel": "medium"}
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_UNREADABLE_SPANS] == 1


WEB_ANSWER = (
    "Iceland has about 390,000 inhabitants ([hagstofa.is](https://hagstofa.is/population)). "
    "Reykjavik is its capital ([iceland.is](https://iceland.is/reykjavik))."
)
WEB_SOURCES = ("https://hagstofa.is/population", "https://iceland.is/reykjavik")


def web_search_response() -> Response:
    annotations = []
    for url in WEB_SOURCES:
        start = WEB_ANSWER.index("([", WEB_ANSWER.index(url) - 40)
        end = WEB_ANSWER.index(")", WEB_ANSWER.index(url)) + 1
        annotations.append(
            AnnotationURLCitation(type="url_citation", start_index=start, end_index=end, url=url, title=url)
        )
    return openai_response(
        [
            ResponseFunctionWebSearch.model_validate(
                {
                    "id": "ws_1",
                    "type": "web_search_call",
                    "status": "completed",
                    "action": {"type": "search", "query": "Iceland population capital"},
                }
            ),
            output_message(WEB_ANSWER, annotations),
        ],
        response_id="resp_ws",
    )


def test_hosted_web_search_is_no_retrieval_and_its_citations_are_unmatched_sources(
    agents_tracer: Traced,
) -> None:
    """``WebSearchTool``: the Response holds a ``web_search_call`` (the query, no result, no score) and
    ``url_citation`` annotations on the text, which OpenAI writes as Markdown links. Nothing says how relevant a
    page was, so the call is no retrieval: alone, the run gets no scorecard. Marked as the answer (here a span of
    the application's around the run), it is scored without candidates; its citations name pages OpenAI's search
    found and no retrieval reported: unmatched sources, never invalid, each sentence covered by its link, and no
    ``citationCount`` (see tests/test_signals_openai_url_citations.py)."""
    exporter, provider = agents_tracer
    server = FakeModelServer([web_search_response()])
    agent = Agent(name="Researcher", tools=[WebSearchTool()], model=server.model())
    assert run(agent) == WEB_ANSWER

    (llm,) = _by_name(exporter.get_finished_spans())["response"]
    recorded = json.loads(dict(llm.attributes or {})[semconv.OI_OUTPUT_VALUE])
    search, message = recorded["output"]
    assert search["type"] == "web_search_call" and "results" not in search
    annotations = message["content"][0]["annotations"]
    assert [(a["type"], a["url"]) for a in annotations] == [("url_citation", url) for url in WEB_SOURCES]
    assert find_answers(records(exporter)) == []

    exporter.clear()
    with provider.get_tracer("app").start_as_current_span("POST /ask") as request:
        request.set_attribute(semconv.RAG_ANSWER, True)
        run(
            Agent(
                name="Researcher",
                tools=[WebSearchTool()],
                model=FakeModelServer([web_search_response()]).model(),
            )
        )
    (group,) = find_answers(records(exporter))
    assert group.answer.name == "POST /ask"
    # The run's spans start beneath the current span, the model call's (whose text is read) among them.
    assert {"Agent workflow", "response"} <= {span.name for span in group.spans}
    signals = extract_signals(group.spans)
    assert signals.inputs == {
        "candidates": [],
        "supportLevel": "medium",
        "invalidCitationCount": 0,
        "citationCoverageScore": 1.0,
    }
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == len(WEB_SOURCES)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_UNMATCHED_SOURCES] == len(WEB_SOURCES)


# -- the gateway's path -----------------------------------------------------------------------------------------


def test_the_gateway_scores_the_exported_agent_run_like_the_processor(downstream: DownstreamReceiver) -> None:
    """The same run exported with the real OTLP/gRPC exporter through a running gateway: the root span arrives
    downstream with the scorecard of the inputs the tool's documents and the answer state."""
    expected = compute_confidence(expected_tool_inputs())
    with running_gateway() as running:
        exporter = Recording(
            OTLPSpanExporter(endpoint=f"http://127.0.0.1:{running.grpc_port}", insecure=True)
        )
        provider = tracer_provider(exporter)
        instrumentor = OpenAIAgentsInstrumentor()
        instrumentor.instrument(tracer_provider=provider, tool_span_kinds={"search_docs": "RETRIEVER"})
        try:
            run(rag_agent(FakeModelServer(tool_round_trip())))
        finally:
            instrumentor.uninstrument()
        provider.shutdown()
        assert all(result is SpanExportResult.SUCCESS for result in exporter.results)
        spans = downstream.wait_for_spans(len(exporter.exported))
    scored_spans = [span for span in spans if semconv.RAG_CONFIDENCE_TOTAL in attributes_of(span)]
    (answer,) = scored_spans
    assert answer.name == "Agent workflow" and not answer.parent_span_id
    attributes = attributes_of(answer)
    assert attributes[semconv.RAG_CONFIDENCE_TOTAL] == expected.total
    assert attributes[semconv.RAG_CONFIDENCE_ACTION] == expected.recommended_action
    assert attributes[semconv.RAG_CONFIDENCE_CANDIDATES] == len(DOCUMENTS)
