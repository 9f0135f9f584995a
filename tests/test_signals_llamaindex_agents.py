"""Agentic RAG in LlamaIndex under ``openinference-instrumentation-llama-index``, offline: retrieval inside tools.

Real ``llama-index-core`` agents and workflows (``FunctionAgent``, ``ReActAgent``, ``AgentWorkflow`` with a
handoff, a ``Workflow`` of our own with a retrieve and a synthesize step) over ``QueryEngineTool`` and
``RetrieverTool`` on an in-memory ``VectorStoreIndex``. What is faked: the embedding (a bag-of-words
``BaseEmbedding`` in tests/fake_llamaindex.py, offline and deterministic with distinct similarities) and the
models. The one fake model is LlamaIndex's own ``MockFunctionCallingLLM``, given a scripted
``response_generator`` (tool calls, then a final answer with ``[n]`` markers), as no model can run here; the
query engines' synthesis uses ``MockLLM`` (``text text ...``, or its prompt echoed). The expected documents and
scores come from running the retrievers directly; the expected scorecard from ``compute_confidence`` on inputs
written out by hand.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent, ReActAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms import MockLLM
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.prompts import PromptTemplate
from llama_index.core.tools import FunctionTool, QueryEngineTool, RetrieverTool
from llama_index.core.workflow import Event, StartEvent, StopEvent, Workflow, step
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from packaging import version

from rag_confidence import compute_confidence, semconv
from rag_confidence.otel import mark_answer
from rag_confidence.signals import extract_signals, find_answers
from rag_confidence.signals.records import SpanRecord

from .fake_llamaindex import WordEmbedding, words
from .instrumented import confidence_processor, records, scored, traced
from .test_gateway_support import (
    DownstreamReceiver,
    Recording,
    attributes_of,
    downstream,
    running_gateway,
    tracer_provider,
)

__all__ = ["downstream"]  # the fixture, imported for pytest

TEXTS = {
    "doc-paris": "Paris is the capital of France.",
    "doc-berlin": "Berlin is the capital of Germany.",
    "doc-loire": "The Loire is the longest river in France.",
    "doc-alps": "The Alps cross France, Italy and Switzerland.",
}
QUESTION = "What is the capital of France?"
CAPITAL = "capital of France"
RIVER = "longest river"

Traced = tuple[InMemorySpanExporter, TracerProvider]


@pytest.fixture
def tracer() -> Iterator[Traced]:
    yield from traced(LlamaIndexInstrumentor(), confidence_processor)


@pytest.fixture(scope="module")
def index() -> VectorStoreIndex:
    vocabulary = sorted({word for text in TEXTS.values() for word in words(text)})
    documents = [Document(text=text, doc_id=doc_id) for doc_id, text in TEXTS.items()]
    return VectorStoreIndex.from_documents(documents, embed_model=WordEmbedding(vocabulary=vocabulary))


def run(start: Callable[[], Any]) -> str:
    """The text a run returns: ``start`` begins the run, which needs a running event loop."""

    async def main() -> Any:
        return await start()

    return str(asyncio.run(main()))


def retrieved(index: VectorStoreIndex, query: str, top_k: int) -> list[tuple[str, float]]:
    """What the retriever returns for ``query``, run directly: (node id, score), best first."""
    return [
        (item.node.node_id, float(item.score or 0.0))
        for item in index.as_retriever(similarity_top_k=top_k).retrieve(query)
    ]


def tool_found(
    tool: QueryEngineTool | RetrieverTool, exporter: InMemorySpanExporter, query: str
) -> list[tuple[str, float]]:
    """What ``tool`` retrieves when called directly with ``query`` (the tool words the retriever's query itself:
    ``input is <query>``): (node id, score), best first. Its spans are cleared."""
    output = tool.call(input=query).raw_output
    nodes = output if isinstance(output, list) else output.source_nodes
    exporter.clear()
    return [(item.node.node_id, float(item.score or 0.0)) for item in nodes]


def candidates(documents: Sequence[tuple[str, float]]) -> list[dict[str, Any]]:
    """The candidates a vector retrieval of ``documents`` should give, in the order presented."""
    return [
        {
            "documentId": node_id,
            "rank": rank,
            "retrievalScores": {"vectorindex": score},
            "combinedScore": score,
        }
        for rank, (node_id, score) in enumerate(documents, start=1)
    ]


def cited_inputs(
    documents: Sequence[tuple[str, float]], *, cited: int = 1, invalid: int = 0, coverage: float = 1.0
) -> dict[str, Any]:
    """The inputs expected of an answer over ``documents`` whose citation inputs are derived and whose support
    level is assumed (``medium``): by default one valid citation covering every sentence."""
    return {
        "candidates": candidates(documents),
        "citationCount": cited,
        "invalidCitationCount": invalid,
        "citationCoverageScore": coverage,
        "supportLevel": "medium",
    }


def tool_calls(*calls: tuple[str, dict[str, Any]]) -> ChatMessage:
    return ChatMessage(
        role=MessageRole.ASSISTANT,
        blocks=[
            ToolCallBlock(tool_call_id=f"call-{number}", tool_name=name, tool_kwargs=arguments)
            for number, (name, arguments) in enumerate(calls, start=1)
        ],
    )


def scripted(turns: Sequence[ChatMessage]) -> MockFunctionCallingLLM:
    """A function-calling model answering the n-th call of a run with ``turns[n]`` (counted by the tool results
    the request holds: each turn after the first follows one round of tool calls)."""

    def respond(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        rounds = sum(
            1
            for position, message in enumerate(messages)
            if message.role == MessageRole.TOOL
            and (position + 1 == len(messages) or messages[position + 1].role != MessageRole.TOOL)
        )
        return turns[min(rounds, len(turns) - 1)]

    return MockFunctionCallingLLM(response_generator=respond)


def answer(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.ASSISTANT, content=text)


def kinds(spans: Sequence[SpanRecord]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for span in spans:
        kind = span.attributes.get(semconv.OPENINFERENCE_SPAN_KIND)
        found.setdefault(str(kind), []).append(span.name)
    return found


def the_scorecard(exporter: InMemorySpanExporter) -> ReadableSpan:
    (span,) = scored(exporter)
    return span


def assert_gateway_agrees(exporter: InMemorySpanExporter, expected: dict[str, Any]) -> None:
    """The gateway's path (records of the exported spans, ``find_answers``, ``extract_signals``) gives the
    expected inputs, and the processor's scorecard is ``compute_confidence`` of them."""
    (group,) = find_answers(records(exporter))
    signals = extract_signals(group.spans)
    assert signals.inputs == expected
    span = the_scorecard(exporter)
    assert span.context is not None and span.context.span_id == group.answer.span_id
    assert span.attributes is not None
    assert span.attributes[semconv.RAG_CONFIDENCE_TOTAL] == compute_confidence(expected).total


def test_function_agent_over_a_query_engine_tool_answers_on_the_run_span(
    tracer: Traced, index: VectorStoreIndex
) -> None:
    """The run's root ``FunctionAgent.run`` (a ``CHAIN``) is the answer by rule (c); the tool is a ``TOOL`` span
    with the query engine beneath it; the answer text is the agent's last turn, not the query engine's
    synthesis (``text text text text``, no marker) nor the tool-call turn; ``[1]`` is the first document the
    query engine retrieved."""
    exporter, _ = tracer
    engine = index.as_query_engine(similarity_top_k=2, llm=MockLLM(max_tokens=4))
    tool = QueryEngineTool.from_defaults(engine, name="atlas", description="Facts about Europe.")
    documents = tool_found(tool, exporter, CAPITAL)
    final = "Paris is the capital of France [1]."
    agent = FunctionAgent(
        tools=[tool], llm=scripted([tool_calls(("atlas", {"input": CAPITAL})), answer(final)])
    )

    assert run(lambda: agent.run(user_msg=QUESTION)) == final

    (group,) = find_answers(records(exporter))
    assert group.answer.name == "FunctionAgent.run" and group.rule == "root"
    assert group.answer.parent_span_id is None
    assert group.answer.attributes[semconv.OPENINFERENCE_SPAN_KIND] == "CHAIN"
    found = kinds(group.spans)
    assert found["TOOL"] == ["QueryEngineTool.acall"]
    # ``aretrieve`` wraps ``_aretrieve``, both RETRIEVER spans: one retrieval, read once.
    assert sorted(found["RETRIEVER"]) == ["VectorIndexRetriever._aretrieve", "VectorIndexRetriever.aretrieve"]
    signals = extract_signals(group.spans)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_SPANS] == 1
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 1
    expected = cited_inputs(documents)
    assert_gateway_agrees(exporter, expected)


def test_the_tool_call_turn_and_its_request_are_llm_spans_without_the_answer(
    tracer: Traced, index: VectorStoreIndex
) -> None:
    """Pinned: each agent turn is two ``LLM`` spans, ``_prepare_chat_with_tools`` (its ``output.value`` the
    request: messages and tools, as JSON) and ``astream_chat`` (its ``llm.output_messages``: the tool call, or
    the answer). The answer is read from the last turn's ``astream_chat``, which ends after its request."""
    exporter, _ = tracer
    tool = RetrieverTool.from_defaults(
        index.as_retriever(similarity_top_k=1), name="atlas", description="atlas"
    )
    final = "Paris [1]."
    agent = FunctionAgent(
        tools=[tool], llm=scripted([tool_calls(("atlas", {"input": CAPITAL})), answer(final)])
    )
    run(lambda: agent.run(user_msg=QUESTION))

    spans = records(exporter)
    llm = [span for span in spans if span.attributes.get(semconv.OPENINFERENCE_SPAN_KIND) == "LLM"]
    assert [span.name for span in llm] == [
        "MockFunctionCallingLLM._prepare_chat_with_tools",
        "MockFunctionCallingLLM.astream_chat",
    ] * 2
    request = json.loads(llm[0].attributes[semconv.OI_OUTPUT_VALUE])
    assert set(request) == {"messages", "tools"}
    call = llm[1].attributes
    assert call["llm.output_messages.0.message.tool_calls.0.tool_call.function.name"] == "atlas"
    assert "llm.output_messages.0.message.content" not in call
    assert llm[3].attributes["llm.output_messages.0.message.content"] == final
    (group,) = find_answers(spans)
    signals = extract_signals(group.spans)
    assert signals.inputs["citationCount"] == 1 and signals.inputs["citationCoverageScore"] == 1.0


def test_two_retrieval_rounds_number_their_documents_through_both(
    tracer: Traced, index: VectorStoreIndex
) -> None:
    """A ``RetrieverTool`` called in two turns: both rounds' documents are candidates, in the order the rounds
    ran, and ``[n]`` counts through both (``[2]`` is the second round's document, ``[3]`` none)."""
    exporter, _ = tracer
    tool = RetrieverTool.from_defaults(
        index.as_retriever(similarity_top_k=1), name="atlas", description="atlas"
    )
    first, second = tool_found(tool, exporter, CAPITAL), tool_found(tool, exporter, RIVER)
    assert first[0][0] != second[0][0]
    final = "Paris is the capital [1]. The Loire is the longest river [2]. Spain has Madrid [3]."
    llm = scripted(
        [tool_calls(("atlas", {"input": CAPITAL})), tool_calls(("atlas", {"input": RIVER})), answer(final)]
    )
    agent = FunctionAgent(tools=[tool], llm=llm)

    assert run(lambda: agent.run(user_msg="Capital and longest river of France?")) == final

    (group,) = find_answers(records(exporter))
    assert group.answer.name == "FunctionAgent.run"
    assert kinds(group.spans)["TOOL"] == ["RetrieverTool.acall"] * 2
    expected = cited_inputs(first + second, cited=2, invalid=1, coverage=2 / 3)
    assert_gateway_agrees(exporter, expected)


REACT_FINAL = "Paris is the capital of France [1]."
REACT_TURNS = (
    'Thought: I need to use a tool to help me answer the question.\nAction: atlas\nAction Input: {"input": '
    f'"{CAPITAL}"}}',
    "Thought: I can answer without using any more tools; source [2] is about Berlin, so not that one.\n"
    f"Answer: {REACT_FINAL}",
)


def react_model() -> MockFunctionCallingLLM:
    def respond(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        observed = any("Observation" in (message.content or "") for message in messages[1:])
        return answer(REACT_TURNS[1] if observed else REACT_TURNS[0])

    return MockFunctionCallingLLM(response_generator=respond)


def test_react_agent_answer_is_the_parsed_answer_not_the_thought(
    tracer: Traced, index: VectorStoreIndex
) -> None:
    """A ``ReActAgent``'s last model turn is ``Thought: ... [2] ...\\nAnswer: ... [1].``; the agent returns the
    answer only. The tracer records the turn whole on the ``LLM`` span and the parse as a ``CHAIN`` span
    ``ReActOutputParser.parse`` with ``{"thought", "response"}``: the citations are judged in the response (the
    thought's ``[2]`` and its sentence without a marker are no part of what the user read)."""
    exporter, _ = tracer
    tool = RetrieverTool.from_defaults(
        index.as_retriever(similarity_top_k=2), name="atlas", description="atlas"
    )
    documents = tool_found(tool, exporter, CAPITAL)
    agent = ReActAgent(tools=[tool], llm=react_model())

    assert run(lambda: agent.run(user_msg=QUESTION)) == REACT_FINAL

    spans = records(exporter)
    parsers = [span for span in spans if span.name == "ReActOutputParser.parse"]
    assert [span.attributes[semconv.OPENINFERENCE_SPAN_KIND] for span in parsers] == ["CHAIN", "CHAIN"]
    assert json.loads(parsers[0].attributes[semconv.OI_OUTPUT_VALUE]) == {
        "thought": "I need to use a tool to help me answer the question.",
        "action": "atlas",
        "action_input": {"input": CAPITAL},
    }
    parsed = json.loads(parsers[1].attributes[semconv.OI_OUTPUT_VALUE])
    assert parsed["response"] == REACT_FINAL and "[2]" in parsed["thought"]
    last_turn = [span for span in spans if span.name == "MockFunctionCallingLLM.astream_chat"][-1]
    assert last_turn.attributes["llm.output_messages.0.message.content"] == REACT_TURNS[1]

    (group,) = find_answers(spans)
    assert group.answer.name == "ReActAgent.run"
    signals = extract_signals(group.spans)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 1
    expected = cited_inputs(documents)
    assert_gateway_agrees(exporter, expected)


def test_a_return_direct_query_engine_tool_answers_with_its_synthesis(
    tracer: Traced, index: VectorStoreIndex
) -> None:
    """``return_direct=True``: the agent returns the tool's output, the query engine's synthesis, with no turn
    after it, so that synthesis is the answer text (its model call is the last to end)."""
    exporter, _ = tracer
    synthesis = "Paris is the capital of France [1]. Berlin is not [5]."
    # ``MockLLM`` answers with its prompt: a question-answer template without variables makes that the text.
    engine = index.as_query_engine(
        similarity_top_k=2, llm=MockLLM(), text_qa_template=PromptTemplate(synthesis)
    )
    tool = QueryEngineTool.from_defaults(engine, name="atlas", description="atlas", return_direct=True)
    documents = tool_found(tool, exporter, CAPITAL)
    agent = FunctionAgent(tools=[tool], llm=scripted([tool_calls(("atlas", {"input": CAPITAL}))]))

    assert run(lambda: agent.run(user_msg=QUESTION)) == synthesis

    expected = cited_inputs(documents, invalid=1, coverage=0.5)
    assert_gateway_agrees(exporter, expected)


def test_a_return_direct_function_tool_leaves_no_answer_text(tracer: Traced, index: VectorStoreIndex) -> None:
    """Pinned limit: a ``FunctionTool`` with ``return_direct=True`` that retrieves and numbers the documents
    itself: the agent returns the tool's text and no model call writes it. The tracer records that text only
    on the ``TOOL`` span and, summarized, on the run's span; the last ``LLM`` spans are the tool-call turn (no
    text) and its request (``_prepare_chat_with_tools``, the request as JSON, no answer field), so no marker is
    read and no citation input derived. The documents are still the candidates."""
    exporter, _ = tracer
    retriever = index.as_retriever(similarity_top_k=2)

    async def atlas(input: str) -> str:
        """Search the atlas."""
        found = await retriever.aretrieve(input)
        return "\n".join(f"[{n}] {item.node.get_content()}" for n, item in enumerate(found, 1))

    tool = FunctionTool.from_defaults(async_fn=atlas, name="atlas", return_direct=True)
    agent = FunctionAgent(tools=[tool], llm=scripted([tool_calls(("atlas", {"input": CAPITAL}))]))

    returned = run(lambda: agent.run(user_msg=QUESTION))
    assert returned.startswith("[1] ") and "\n[2] " in returned

    (group,) = find_answers(records(exporter))
    assert group.answer.name == "FunctionAgent.run"
    signals = extract_signals(group.spans)
    assert len(signals.inputs["candidates"]) == 2
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 0
    assert "citationCount" not in signals.inputs


def test_a_sync_function_tool_keeps_its_retrieval_in_the_run_from_llama_index_core_0_14_22(
    tracer: Traced, index: VectorStoreIndex
) -> None:
    """A ``FunctionTool`` over a plain ``def`` runs in the event loop's executor. ``llama-index-core`` 0.14.22 and
    later copy the context into it, so the retrieval is beneath the tool and the run is scored; before (0.14.19
    to 0.14.21) the retrieval was a trace of its own, a bare ``RETRIEVER`` root, and the run had no scorecard."""
    exporter, _ = tracer
    retriever = index.as_retriever(similarity_top_k=2)

    def atlas(input: str) -> str:
        """Search the atlas."""
        return "\n".join(item.node.get_content() for item in retriever.retrieve(input))

    tool = FunctionTool.from_defaults(fn=atlas, name="atlas")
    agent = FunctionAgent(
        tools=[tool], llm=scripted([tool_calls(("atlas", {"input": CAPITAL})), answer("Paris [1].")])
    )
    run(lambda: agent.run(user_msg=QUESTION))

    groups = find_answers(records(exporter))
    if version.parse(importlib.metadata.version("llama-index-core")) >= version.parse("0.14.22"):
        assert [group.answer.name for group in groups] == ["FunctionAgent.run"]
        assert "VectorIndexRetriever.retrieve" in {span.name for span in groups[0].spans}
    else:
        assert groups == []
        (retrieval,) = [span for span in records(exporter) if span.name == "VectorIndexRetriever.retrieve"]
        assert retrieval.parent_span_id is None


def test_a_multi_agent_workflow_answers_once_on_its_run_span(tracer: Traced, index: VectorStoreIndex) -> None:
    """``AgentWorkflow``: a router hands off (a ``TOOL`` span ``FunctionTool.acall``, no retrieval) to a
    researcher that retrieves; one answer, on ``AgentWorkflow.run``, with the researcher's final text."""
    exporter, _ = tracer
    tool = RetrieverTool.from_defaults(
        index.as_retriever(similarity_top_k=2), name="atlas", description="atlas"
    )
    documents = tool_found(tool, exporter, CAPITAL)
    final = "Paris is the capital of France [2]."
    handoff = tool_calls(("handoff", {"to_agent": "researcher", "reason": "needs the atlas"}))
    router = FunctionAgent(
        name="router", description="Routes.", tools=[], llm=scripted([handoff]), can_handoff_to=["researcher"]
    )
    # The researcher's request already holds the handoff's tool result: its first turn is the second of the run.
    researcher = FunctionAgent(
        name="researcher",
        description="Researches.",
        tools=[tool],
        llm=scripted([handoff, tool_calls(("atlas", {"input": CAPITAL})), answer(final)]),
    )
    workflow = AgentWorkflow(agents=[router, researcher], root_agent="router")

    assert run(lambda: workflow.run(user_msg=QUESTION)) == final

    (group,) = find_answers(records(exporter))
    assert group.answer.name == "AgentWorkflow.run" and group.answer.parent_span_id is None
    assert kinds(group.spans)["TOOL"] == ["FunctionTool.acall", "RetrieverTool.acall"]
    expected = cited_inputs(documents)
    assert_gateway_agrees(exporter, expected)


class Retrieved(Event):
    question: str
    nodes: list[Any]


def rag_workflow(index: VectorStoreIndex, text: str, suffix: str = "") -> Workflow:
    llm = MockFunctionCallingLLM(response_generator=lambda messages, **_: answer(text))

    class RAG(Workflow):
        @step
        async def retrieve(self, ev: StartEvent) -> Retrieved:
            nodes = await index.as_retriever(similarity_top_k=2).aretrieve(ev.query)
            return Retrieved(question=ev.query, nodes=nodes)

        @step
        async def synthesize(self, ev: Retrieved) -> StopEvent:
            context = "\n".join(
                f"[{n}] {item.node.get_content()}" for n, item in enumerate(ev.nodes, start=1)
            )
            reply = await llm.achat(
                [ChatMessage(role=MessageRole.USER, content=f"{context}\n\n{ev.question}")]
            )
            return StopEvent(result=(reply.message.content or "") + suffix)

    return RAG(timeout=10)


def test_a_custom_workflow_answers_on_its_run_span(tracer: Traced, index: VectorStoreIndex) -> None:
    """A ``Workflow`` with a retrieve and a synthesize step: ``RAG.run`` is the answer, each step a ``CHAIN``
    span beneath it, and the synthesize step's model call gives the text. The run span records only
    ``llama-index-workflows``' summary of its ``StopEvent`` (each value cut short, the whole to 200
    characters): no answer text to read there."""
    exporter, _ = tracer
    documents = retrieved(index, QUESTION, 2)
    text = "Paris is the capital of France [1]. " + "It has been so for centuries. " * 8

    assert run(lambda: rag_workflow(index, text).run(query=QUESTION)) == text

    (group,) = find_answers(records(exporter))
    assert group.answer.name == "RAG.run" and group.rule == "root"
    steps = {name.rpartition(".RAG.")[2] for name in kinds(group.spans)["CHAIN"] if ".RAG." in name}
    assert steps == {"retrieve", "synthesize"}
    assert group.answer.attributes[semconv.OI_OUTPUT_VALUE] == (
        "StopEvent(result='Paris is the capital of France [1]. It has been so...')"
    )
    expected = cited_inputs(documents, coverage=1 / 9)
    assert_gateway_agrees(exporter, expected)


def test_a_workflow_editing_the_text_after_its_model_is_scored_on_the_model_text(
    tracer: Traced, index: VectorStoreIndex
) -> None:
    """Pinned limit: a step that changes the model's text before returning it (here appending ``[1]``) is not
    seen: the tracer records no full output of the run, so the answer text is the model call's (no marker)."""
    exporter, _ = tracer
    assert run(lambda: rag_workflow(index, "Paris.", suffix=" [1]").run(query=QUESTION)) == "Paris. [1]"

    (group,) = find_answers(records(exporter))
    signals = extract_signals(group.spans)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 0
    assert "citationCount" not in signals.inputs


def two_runs(
    index: VectorStoreIndex, exporter: InMemorySpanExporter
) -> tuple[FunctionAgent, list[tuple[str, float]], list[tuple[str, float]]]:
    tool = RetrieverTool.from_defaults(
        index.as_retriever(similarity_top_k=1), name="atlas", description="atlas"
    )

    def respond(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        question = [message for message in messages if message.role == MessageRole.USER][-1].content or ""
        last = messages[-1]
        if last.role == MessageRole.TOOL:
            return answer("The Loire [1]." if "river" in question else "Paris [1].")
        return tool_calls(("atlas", {"input": RIVER if "river" in question else CAPITAL}))

    agent = FunctionAgent(tools=[tool], llm=MockFunctionCallingLLM(response_generator=respond))
    return agent, tool_found(tool, exporter, CAPITAL), tool_found(tool, exporter, RIVER)


def test_two_runs_without_a_parent_are_two_traces_and_two_scorecards(
    tracer: Traced, index: VectorStoreIndex
) -> None:
    """The default: each ``run`` outside any span of the application's is a trace of its own, its root the
    answer, with its own documents and text."""
    exporter, _ = tracer
    agent, first, second = two_runs(index, exporter)
    run(lambda: agent.run(user_msg=QUESTION))
    run(lambda: agent.run(user_msg="Which is the longest river?"))

    groups = find_answers(records(exporter))
    assert [group.answer.name for group in groups] == ["FunctionAgent.run"] * 2
    assert len({group.trace_id for group in groups}) == 2
    expected = [cited_inputs(documents) for documents in (first, second)]
    assert [extract_signals(group.spans).inputs for group in groups] == expected
    totals = [(span.attributes or {})[semconv.RAG_CONFIDENCE_TOTAL] for span in scored(exporter)]
    assert totals == [compute_confidence(inputs).total for inputs in expected]


def test_two_runs_under_one_parent_share_one_scorecard(tracer: Traced, index: VectorStoreIndex) -> None:
    """Pinned (rule (c), see *Agents* in docs/signals.md): two ``run`` calls under one span of the application
    are one answer on that span, mixing both runs' documents, with the last run's text. Nothing on a run span
    says it is a question of its own (a ``CHAIN`` named ``<Class>.run``, like any workflow's)."""
    exporter, provider = tracer
    agent, first, second = two_runs(index, exporter)

    async def session() -> None:
        with provider.get_tracer("app").start_as_current_span("session"):
            await agent.run(user_msg=QUESTION)
            await agent.run(user_msg="Which is the longest river?")

    asyncio.run(session())

    (group,) = find_answers(records(exporter))
    assert group.answer.name == "session"
    assert [span.name for span in group.spans if span.name == "FunctionAgent.run"] == [
        "FunctionAgent.run"
    ] * 2
    assert [c["documentId"] for c in extract_signals(group.spans).inputs["candidates"]] == [
        first[0][0],
        second[0][0],
    ]
    assert the_scorecard(exporter).name == "session"


def test_each_run_marked_gets_its_own_scorecard(tracer: Traced, index: VectorStoreIndex) -> None:
    """The workaround: a span of the application's around each run, marked the answer (``mark_answer()``, or
    ``@scored_answer`` on the function that awaits the run). The tracer parents the run to the current span, so
    each run's retrieval and text belong to its own marked span."""
    exporter, provider = tracer
    agent, first, second = two_runs(index, exporter)
    tracer_ = provider.get_tracer("app")

    async def session() -> None:
        with tracer_.start_as_current_span("session"):
            for name, question in (("capital", QUESTION), ("river", "Which is the longest river?")):
                with tracer_.start_as_current_span(name):
                    assert mark_answer()
                    await agent.run(user_msg=question)

    asyncio.run(session())

    groups = find_answers(records(exporter))
    assert [(group.answer.name, group.rule) for group in groups] == [
        ("capital", "marked"),
        ("river", "marked"),
    ]
    expected = [cited_inputs(documents) for documents in (first, second)]
    assert [extract_signals(group.spans).inputs for group in groups] == expected
    scorecards = {span.name: span.attributes or {} for span in scored(exporter)}
    assert set(scorecards) == {"capital", "river"}
    for name, inputs in zip(("capital", "river"), expected, strict=True):
        assert scorecards[name][semconv.RAG_CONFIDENCE_TOTAL] == compute_confidence(inputs).total


THOUGHT_TEXT = "Thought: Source [3] is about Spain.\nAnswer: Paris is the capital [1]."


def react_trace(
    parsed: Any = '{"thought": "Source [3] is about Spain.", "response": "Paris is the capital [1]."}',
    *,
    parser_end: int = 40,
    finish_reason: str | None = None,
) -> list[SpanRecord]:
    """A ReAct run as the tracer records it (see the test above), by hand: root, retriever, the last model turn
    (ending at 30) and the parser span (ending at ``parser_end``, its ``output.value`` ``parsed``)."""
    documents = {
        f"retrieval.documents.{n}.document.{key}": value
        for n, (doc_id, score) in enumerate((("doc-paris", 0.9), ("doc-berlin", 0.5)))
        for key, value in (("id", doc_id), ("score", score))
    }
    turn: dict[str, Any] = {
        semconv.OPENINFERENCE_SPAN_KIND: "LLM",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": THOUGHT_TEXT,
    }
    if finish_reason is not None:
        turn["llm.finish_reason"] = finish_reason
    parser: dict[str, Any] = {semconv.OPENINFERENCE_SPAN_KIND: "CHAIN"}
    if parsed is not None:
        parser[semconv.OI_OUTPUT_VALUE] = parsed
    return [
        SpanRecord(
            1,
            2,
            1,
            "VectorIndexRetriever.aretrieve",
            {semconv.OPENINFERENCE_SPAN_KIND: "RETRIEVER", **documents},
            end_time=10,
        ),
        SpanRecord(1, 3, 1, "MockFunctionCallingLLM.astream_chat", turn, end_time=30),
        SpanRecord(1, 4, 1, "ReActOutputParser.parse", parser, end_time=parser_end),
        SpanRecord(1, 1, None, "ReActAgent.run", {semconv.OPENINFERENCE_SPAN_KIND: "CHAIN"}, end_time=50),
    ]


def citation_inputs(spans: list[SpanRecord]) -> tuple[int, int, float]:
    signals = extract_signals(spans)
    return (
        signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS],
        signals.inputs["invalidCitationCount"],
        signals.inputs["citationCoverageScore"],
    )


def test_the_react_response_is_read_from_the_parser_span_that_parsed_the_last_turn() -> None:
    assert citation_inputs(react_trace()) == (1, 0, 1.0)
    # The whole turn, thought included, when the parser span does not give the answer of that turn: it ended
    # before it (an earlier turn's), its output is hidden, cut short or a tool call, or names another text.
    whole = (2, 1, 0.5)
    assert citation_inputs(react_trace(parser_end=20)) == whole
    assert citation_inputs(react_trace(semconv.OI_REDACTED_VALUE)) == whole
    assert citation_inputs(react_trace(None)) == whole
    assert citation_inputs(react_trace('{"thought": "x", "action": "atlas", "action_input": {}}')) == whole
    assert citation_inputs(react_trace('{"thought": "x", "response": "Berlin [2]."}')) == whole
    cut = react_trace('{"thought": "Source [3] is about Spain.", "response": "Paris is')
    assert citation_inputs(cut) == whole
    assert extract_signals(cut).skipped == 1


def test_the_react_turn_keeps_its_finish_reason() -> None:
    signals = extract_signals(react_trace(finish_reason="length"))
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_TRUNCATED] is True
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_GENERATION_FINISH_REASON] == "length"
    assert signals.inputs["citationCoverageScore"] == 1.0


def test_the_gateway_scores_the_exported_react_run_like_the_processor(
    downstream: DownstreamReceiver, index: VectorStoreIndex
) -> None:
    """The ReAct run exported with the real OTLP/gRPC exporter through a running gateway: the run's root arrives
    downstream with the scorecard of the tool's documents and the parsed answer (one valid marker, no thought)."""
    tool = RetrieverTool.from_defaults(
        index.as_retriever(similarity_top_k=2), name="atlas", description="atlas"
    )
    nodes = tool.call(input=CAPITAL).raw_output
    expected_inputs = cited_inputs([(item.node.node_id, float(item.score or 0.0)) for item in nodes])
    expected = compute_confidence(expected_inputs)
    with running_gateway() as running:
        exporter = Recording(
            OTLPSpanExporter(endpoint=f"http://127.0.0.1:{running.grpc_port}", insecure=True)
        )
        provider = tracer_provider(exporter)
        instrumentor = LlamaIndexInstrumentor()
        instrumentor.instrument(tracer_provider=provider)
        try:
            assert (
                run(lambda: ReActAgent(tools=[tool], llm=react_model()).run(user_msg=QUESTION)) == REACT_FINAL
            )
        finally:
            instrumentor.uninstrument()
        provider.shutdown()
        assert all(result is SpanExportResult.SUCCESS for result in exporter.results)
        spans = downstream.wait_for_spans(len(exporter.exported))
    (answer,) = [span for span in spans if semconv.RAG_CONFIDENCE_TOTAL in attributes_of(span)]
    assert answer.name == "ReActAgent.run" and not answer.parent_span_id
    attributes = attributes_of(answer)
    assert attributes[semconv.RAG_CONFIDENCE_TOTAL] == expected.total
    assert attributes[semconv.RAG_CONFIDENCE_ACTION] == expected.recommended_action
    assert attributes[semconv.RAG_CONFIDENCE_CANDIDATES] == 2
    assert attributes[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 1
