"""Agentic RAG with LangGraph under both LangChain tracers, offline.

The graphs are real ``langgraph`` graphs (the prebuilt ReAct agent; the agentic RAG tutorial's retrieve, grade,
rewrite, generate graph; a Self-RAG-style grader after the generation) over real ``langchain-core`` objects (an
``InMemoryVectorStore`` behind a ``BaseRetriever``, ``create_retriever_tool``, ``ToolNode``), traced by the
real ``openinference-instrumentation-langchain`` and ``opentelemetry-instrumentation-langchain``. Only the chat
model is faked, as there is no model to call here: a ``GenericFakeChatModel`` that replays scripted
``AIMessage``s (tool calls included, and streamed chunk by chunk) and accepts ``bind_tools``. Expected ids and
scores come from querying the vector store directly, and expected scorecards from ``compute_confidence`` on
inputs written out here, never from the code under test.
"""

from __future__ import annotations

import asyncio
import json
import re
import warnings
from collections.abc import Iterator, Sequence
from typing import Any, Literal

import pytest
import wrapt
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.prompts import PromptTemplate
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, create_retriever_tool
from langchain_core.vectorstores import InMemoryVectorStore
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.langchain import LangchainInstrumentor as OpenLLMetryLangchainInstrumentor
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence import compute_confidence, semconv
from rag_confidence.signals import (
    AnswerGroup,
    ExtractedSignals,
    SignalOptions,
    SpanRecord,
    extract_signals,
    find_answers,
    is_retrieval_span,
)
from rag_confidence.signals import langgraph as langgraph_signals
from rag_confidence.signals._values import Reader
from tests.instrumented import confidence_processor, records, scored, traced
from tests.test_gateway_support import (
    DownstreamReceiver,
    Recording,
    attributes_of,
    downstream,
    running_gateway,
    tracer_provider,
)
from tests.test_signals_langchain import CORPUS, ScoredVectorRetriever, make_store

__all__ = ["downstream"]  # the fixture, imported for pytest

QUESTION = "What is the capital of France?"
# The root span of a graph run, as each tracer names it.
GRAPH_ROOT = {"openinference": "LangGraph", "openllmetry": "invoke_agent LangGraph"}
# LangChain names a retriever's method after its class (see docs/signals.md, Hybrid retrieval).
METHOD = "scoredvector"
# The candidate fields the corpus metadata gives through the default key map.
_KEY_MAP = {"document_type": "documentType", "last_updated": "lastUpdated", "authority_rank": "authorityRank"}


class ToolCallingChatModel(GenericFakeChatModel):
    """Replays scripted messages; ``bind_tools`` returns the model itself (the script decides the calls). A
    streamed tool call comes as one chunk with ``tool_call_chunks``, as provider integrations send them (the
    base class streams the text only and would lose it)."""

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: str | None = None, **kwargs: Any) -> Any:
        return self

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        message = next(self.messages)
        message = AIMessage(content=message) if isinstance(message, str) else message
        assert isinstance(message.content, str)
        if message.tool_calls:
            calls = [
                {"name": call["name"], "args": json.dumps(call["args"]), "id": call["id"], "index": index}
                for index, call in enumerate(message.tool_calls)
            ]
            chunks = [AIMessageChunk(content=message.content, tool_call_chunks=calls, chunk_position="last")]  # type: ignore[arg-type]
        else:
            tokens = re.split(r"(\s)", message.content)
            chunks = [
                AIMessageChunk(content=token, chunk_position="last" if i == len(tokens) - 1 else None)
                for i, token in enumerate(tokens)
            ]
        for chunk in chunks:
            generation = ChatGenerationChunk(message=chunk)
            if run_manager:
                run_manager.on_llm_new_token(chunk.content, chunk=generation)
            yield generation


def model(*messages: AIMessage | str) -> ToolCallingChatModel:
    return ToolCallingChatModel(messages=iter(messages))


def search(query: str, call_id: str, tool: str = "search_atlas", text: str = "") -> AIMessage:
    return AIMessage(content=text, tool_calls=[{"name": tool, "args": {"query": query}, "id": call_id}])


def atlas_tool(store: InMemoryVectorStore, k: int = 3, name: str = "search_atlas") -> BaseTool:
    """The retriever as an agent's tool; the tool output labels each document with its id for the model."""
    return create_retriever_tool(
        ScoredVectorRetriever(store=store, k=k),
        name,
        "Search the atlas.",
        document_prompt=PromptTemplate.from_template("[{id}] {page_content}"),
    )


def react_agent(chat: ToolCallingChatModel, tools: list[BaseTool], **kwargs: Any) -> Any:
    from langgraph.prebuilt import create_react_agent

    with warnings.catch_warnings():  # moved to langchain.agents.create_agent; still shipped by langgraph 1.x
        warnings.simplefilter("ignore")
        return create_react_agent(chat, tools, **kwargs)


def hits(store: InMemoryVectorStore, query: str, k: int) -> list[tuple[str, float]]:
    return [(str(doc.id), score) for doc, score in store.similarity_search_with_score(query, k=k)]


def candidates(*retrievals: list[tuple[str, float]]) -> list[dict[str, Any]]:
    """One candidate per document over all retrievals of the one retriever (one method, best score kept),
    best first."""
    best: dict[str, float] = {}
    for retrieval in retrievals:
        for doc_id, score in retrieval:
            best[doc_id] = max(score, best.get(doc_id, score))
    ordered = sorted(best.items(), key=lambda item: -item[1])
    found = []
    for rank, (doc_id, score) in enumerate(ordered, start=1):
        candidate: dict[str, Any] = {
            "documentId": doc_id,
            "retrievalScores": {METHOD: score},
            "combinedScore": score,
        }
        candidate.update({_KEY_MAP[key]: value for key, value in CORPUS[doc_id][1].items()})
        candidate["rank"] = rank
        found.append(candidate)
    return found


def expected(found: list[dict[str, Any]], *, cited: int, invalid: int, coverage: float) -> dict[str, Any]:
    return {
        "candidates": found,
        "citationCount": cited,
        "invalidCitationCount": invalid,
        "citationCoverageScore": coverage,
        "supportLevel": "medium",  # nothing says otherwise: the default, listed as derived
    }


def unwrap_openllmetry() -> None:
    """Undo what ``opentelemetry-instrumentation-langchain`` wraps around LangChain and LangGraph. Its
    ``uninstrument()`` (checked: 0.62.4) unwraps nothing: it passes ``unwrap`` a module and a dotted
    ``Class.method``, which ``unwrap`` cannot resolve. Its wrappers stay bound to the provider it was instrumented
    with (another test module's too), and its ``Pregel.stream`` wrapper opens an ``invoke_agent`` span of that
    provider around every later graph run: the root span of the tracer under test becomes its child, and the
    processor, which never sees that parent end, never scores the answer."""
    import langgraph.prebuilt
    import langgraph.prebuilt.chat_agent_executor
    from langchain_core.callbacks import BaseCallbackManager
    from langgraph.pregel import Pregel
    from langgraph.types import Command

    proxy = getattr(
        wrapt, "BaseObjectProxy", wrapt.ObjectProxy
    )  # wrapt 2's FunctionWrapper is no ObjectProxy
    owners: list[tuple[Any, str]] = [
        (BaseCallbackManager, "__init__"),
        (Pregel, "stream"),
        (Pregel, "astream"),
        (Command, "__init__"),
        (langgraph.prebuilt.chat_agent_executor, "create_react_agent"),
        (langgraph.prebuilt, "create_react_agent"),
    ]
    for owner, name in owners:
        wrapped = vars(owner).get(name)
        while isinstance(wrapped, proxy) and hasattr(wrapped, "__wrapped__"):
            wrapped = wrapped.__wrapped__
            setattr(owner, name, wrapped)


@pytest.fixture(scope="module", params=["openinference", "openllmetry"])
def instrumented(
    request: pytest.FixtureRequest,
) -> Iterator[tuple[str, InMemorySpanExporter, TracerProvider]]:
    """Each tracer once for the module, on a clean slate (see :func:`unwrap_openllmetry`), and leaving one."""
    unwrap_openllmetry()
    instrumentor = (
        LangChainInstrumentor() if request.param == "openinference" else OpenLLMetryLangchainInstrumentor()
    )
    try:
        for exporter, provider in traced(instrumentor, confidence_processor):
            yield request.param, exporter, provider
    finally:
        unwrap_openllmetry()


@pytest.fixture
def tracing(
    instrumented: tuple[str, InMemorySpanExporter, TracerProvider],
) -> tuple[str, InMemorySpanExporter, TracerProvider]:
    """The tracer's name, and its spans exported through ``ConfidenceSpanProcessor`` as an application would."""
    instrumented[1].clear()
    return instrumented


def only_answer(exporter: InMemorySpanExporter) -> tuple[AnswerGroup, ExtractedSignals]:
    groups = find_answers(records(exporter))
    assert len(groups) == 1, [group.answer.name for group in groups]
    return groups[0], extract_signals(groups[0].spans)


def assert_inputs(signals: ExtractedSignals, want: dict[str, Any]) -> None:
    got = dict(signals.inputs)
    assert got["candidates"] == [
        {**c, "retrievalScores": {METHOD: pytest.approx(c["retrievalScores"][METHOD])}}
        for c in want["candidates"]
    ]
    for name in ("citationCount", "invalidCitationCount", "supportLevel"):
        assert got[name] == want[name], name
    assert got["citationCoverageScore"] == pytest.approx(want["citationCoverageScore"])
    assert set(got) == set(want)


def assert_scored_in_process(
    exporter: InMemorySpanExporter, answer: str, want: dict[str, Any]
) -> ReadableSpan:
    """The processor put the scorecard of ``want`` on the graph's root span, and on no other span."""
    spans = scored(exporter)
    assert [span.name for span in spans] == [answer]
    card = compute_confidence(want)
    attributes = spans[0].attributes or {}
    assert attributes[semconv.RAG_CONFIDENCE_TOTAL] == card.total
    assert attributes[semconv.RAG_CONFIDENCE_ACTION] == card.recommended_action
    assert list(attributes[semconv.RAG_CONFIDENCE_WARNINGS]) == [w.code for w in card.meta.warnings]  # type: ignore[arg-type]
    return spans[0]


# ------------------------------------------------------------------------------------- 1. the prebuilt ReAct agent

# The first turn says something and calls the tool; the tool's output carries a marker for every document it
# returned. Neither is the answer: the final turn cites one document and one nobody retrieved.
FIRST_TURN = "Let me look that up in the atlas [doc-2]."
REACT_ANSWER = "Paris is the capital of France [doc-1]. Rome is the capital of Italy [doc-9]."


def test_react_agent_answer_is_the_final_model_turn(
    tracing: tuple[str, InMemorySpanExporter, TracerProvider],
) -> None:
    name, exporter, _ = tracing
    store = make_store()
    retrieved = hits(store, "capital of France", k=3)
    agent = react_agent(
        model(search("capital of France", "call_1", text=FIRST_TURN), AIMessage(content=REACT_ANSWER)),
        [atlas_tool(store)],
    )

    result = agent.invoke({"messages": [("user", QUESTION)]})
    assert result["messages"][-1].content == REACT_ANSWER

    spans = exporter.get_finished_spans()
    by_name = {span.name: span for span in spans}
    # What each tracer records of an agent run: the graph, its nodes, the tool, the retriever beneath the tool,
    # and both model turns, all in one trace under the graph's root.
    if name == "openinference":
        kinds = [(span.name, (span.attributes or {})["openinference.span.kind"]) for span in spans]
        assert ("LangGraph", "CHAIN") in kinds and ("agent", "AGENT") in kinds and ("tools", "CHAIN") in kinds
        assert ("search_atlas", "TOOL") in kinds and ("ScoredVectorRetriever", "RETRIEVER") in kinds
        assert kinds.count(("ToolCallingChatModel", "LLM")) == 2
    else:
        assert {
            "invoke_agent LangGraph",
            "LangGraph.workflow",
            "execute_task agent",
            "execute_task tools",
        } <= set(by_name)
        assert (by_name["execute_tool search_atlas"].attributes or {})[
            "gen_ai.operation.name"
        ] == "execute_tool"
        retriever = by_name["vector_db_retrieve ScoredVectorRetriever"].attributes or {}
        assert retriever["gen_ai.operation.name"] == "vector_db_retrieve"
        assert [span.name for span in spans].count("ToolCallingChatModel.chat") == 2
        # It also wraps create_react_agent itself: building the agent is a trace of its own, and no answer.
        built = by_name["create_agent react_agent"]
        assert (built.attributes or {})["gen_ai.operation.name"] == "create_agent" and built.parent is None
        spans = tuple(span for span in spans if span is not built)
    assert len({span.context.trace_id for span in spans}) == 1

    group, signals = only_answer(exporter)
    assert (
        group.rule == "root" and group.answer.name == GRAPH_ROOT[name] and group.answer.parent_span_id is None
    )
    # One valid and one invalid marker of the final turn; the first turn's [doc-2] and the tool output's three
    # markers are not counted.
    want = expected(candidates(retrieved), cited=1, invalid=1, coverage=0.5)
    assert_inputs(signals, want)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_SPANS] == 1
    assert_scored_in_process(exporter, GRAPH_ROOT[name], want)


# ------------------------------------------------------------- 2. retrieve, grade, rewrite, retrieve, generate

GradeRoute = Literal["generate_answer", "rewrite_question"]
GENERATED = "Paris is the capital of France [doc-1]."


def query_or_respond(response_model: ToolCallingChatModel, tool: BaseTool) -> StateGraph[Any]:
    """The start both RAG tutorials' graphs share: ``generate_query_or_respond`` (the model, bound to the
    retriever tool, calls it or answers) routes a tool call to ``retrieve`` (a ``ToolNode``), an answer to the
    end. The caller adds the nodes after ``retrieve``."""

    def generate_query_or_respond(state: MessagesState) -> dict[str, Any]:
        bound: Runnable[Any, Any] = response_model.bind_tools([tool])
        return {"messages": [bound.invoke(state["messages"])]}

    workflow = StateGraph(MessagesState)
    workflow.add_node(generate_query_or_respond)
    workflow.add_node("retrieve", ToolNode([tool]))
    workflow.add_edge(START, "generate_query_or_respond")
    workflow.add_conditional_edges(
        "generate_query_or_respond", tools_condition, {"tools": "retrieve", END: END}
    )
    return workflow


def agentic_rag_graph(
    response_model: ToolCallingChatModel, grader_model: ToolCallingChatModel, tool: BaseTool
) -> Any:
    """The LangGraph agentic RAG tutorial's graph: a grader (JSON mode, as ``with_structured_output`` asks
    OpenAI models by default) routes a retrieval to the answer or to a rewrite of the question."""

    def grade_documents(state: MessagesState) -> GradeRoute:
        question, context = state["messages"][0].content, state["messages"][-1].content
        verdict = grader_model.invoke([("user", f"Question: {question}\nDocuments: {context}\nRelevant?")])
        return (
            "generate_answer"
            if json.loads(str(verdict.content))["binary_score"] == "yes"
            else "rewrite_question"
        )

    def rewrite_question(state: MessagesState) -> dict[str, Any]:
        rewritten = response_model.invoke(
            [("user", f"Improve this question: {state['messages'][0].content}")]
        )
        return {"messages": [("user", rewritten.content)]}

    def generate_answer(state: MessagesState) -> dict[str, Any]:
        question, context = state["messages"][0].content, state["messages"][-1].content
        return {"messages": [response_model.invoke([("user", f"Question: {question}\nContext: {context}")])]}

    workflow = query_or_respond(response_model, tool)
    workflow.add_node(rewrite_question)
    workflow.add_node(generate_answer)
    workflow.add_conditional_edges("retrieve", grade_documents)
    workflow.add_edge("generate_answer", END)
    workflow.add_edge("rewrite_question", "generate_query_or_respond")
    return workflow.compile()


def test_agentic_rag_two_retrievals_are_one_method_and_the_grader_is_no_answer(
    tracing: tuple[str, InMemorySpanExporter, TracerProvider],
) -> None:
    name, exporter, _ = tracing
    store = make_store()
    first, second = hits(store, "Loire river", k=2), hits(store, "capital city of France", k=2)
    assert {doc for doc, _ in first}.isdisjoint(doc for doc, _ in second)  # the rewrite found other documents
    response_model = model(
        search("Loire river", "c1", tool="retrieve_atlas"),
        "What city is the capital of France?",
        search("capital city of France", "c2", tool="retrieve_atlas"),
        GENERATED,
    )
    grader = model('{"binary_score": "no"}', '{"binary_score": "yes"}')
    graph = agentic_rag_graph(response_model, grader, atlas_tool(store, k=2, name="retrieve_atlas"))

    assert graph.invoke({"messages": [("user", QUESTION)]})["messages"][-1].content == GENERATED

    group, signals = only_answer(exporter)
    assert group.answer.name == GRAPH_ROOT[name]
    # Both retrievals of the one retriever are one method: four documents, each at its own score (documented
    # under "Rewrites are one method"; the rejected round's documents stay candidates, see LangGraph).
    want = expected(candidates(first, second), cited=1, invalid=0, coverage=1.0)
    assert_inputs(signals, want)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_SPANS] == 2
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 1
    assert_scored_in_process(exporter, GRAPH_ROOT[name], want)


# ----------------------------------------------------------------------- a grader after the generation (Self-RAG)


def self_rag_graph(
    response_model: ToolCallingChatModel,
    grader_model: ToolCallingChatModel,
    tool: BaseTool,
    tracer: Any = None,
) -> Any:
    """Retrieve, generate, then a conditional edge grades the generation (the Self-RAG and adaptive RAG
    tutorials' ``grade_generation_v_documents_and_question``): the grader's call ends after the answer's.
    With ``tracer``, the grader runs inside an ``EVALUATOR`` span of the application's, as docs/signals.md
    advises for an inline judge."""

    def generate_answer(state: MessagesState) -> dict[str, Any]:
        context = state["messages"][-1].content
        return {"messages": [response_model.invoke([("user", f"Context: {context}\nQuestion: {QUESTION}")])]}

    def grade_generation(state: MessagesState) -> Literal["useful", "not useful"]:
        prompt = [("user", f"Is this answer grounded? {state['messages'][-1].content}")]
        if tracer is None:
            verdict = grader_model.invoke(prompt)
        else:
            with tracer.start_as_current_span("grounding judge") as span:
                span.set_attribute(semconv.OPENINFERENCE_SPAN_KIND, "EVALUATOR")
                verdict = grader_model.invoke(prompt)
        return "useful" if json.loads(str(verdict.content))["binary_score"] == "yes" else "not useful"

    workflow = query_or_respond(response_model, tool)
    workflow.add_node(generate_answer)
    workflow.add_edge("retrieve", "generate_answer")
    workflow.add_conditional_edges(
        "generate_answer", grade_generation, {"useful": END, "not useful": "generate_query_or_respond"}
    )
    return workflow.compile()


def useful_self_rag(store: InMemoryVectorStore, tracer: Any = None) -> Any:
    """:func:`self_rag_graph` scripted to retrieve once (``capital city of France``, two documents), answer
    ``GENERATED`` and grade that answer useful (the fake chat models replay the script)."""
    return self_rag_graph(
        model(search("capital city of France", "c1", tool="retrieve_atlas"), GENERATED),
        model('{"binary_score": "yes"}'),
        atlas_tool(store, k=2, name="retrieve_atlas"),
        tracer,
    )


def test_a_grader_after_the_generation_is_not_read_as_the_answer(
    tracing: tuple[str, InMemorySpanExporter, TracerProvider],
) -> None:
    name, exporter, _ = tracing
    store = make_store()
    retrieved = hits(store, "capital city of France", k=2)
    graph = useful_self_rag(store)

    assert graph.invoke({"messages": [("user", QUESTION)]})["messages"][-1].content == GENERATED

    # The grader's call is the generation that ended last.
    chats = [
        span
        for span in exporter.get_finished_spans()
        if span.name in ("ToolCallingChatModel", "ToolCallingChatModel.chat")
    ]
    assert any("binary_score" in str(value) for value in (chats[-1].attributes or {}).values())
    group, signals = only_answer(exporter)
    assert group.answer.name == GRAPH_ROOT[name]
    # Read as the answer, the verdict (a JSON object without an answer field) would leave no text to search:
    # no marker, no citation input.
    want = expected(candidates(retrieved), cited=1, invalid=0, coverage=1.0)
    assert_inputs(signals, want)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 1
    assert_scored_in_process(exporter, GRAPH_ROOT[name], want)


def test_an_evaluator_span_in_a_graph_node_does_not_hold_the_graders_model_call(
    tracing: tuple[str, InMemorySpanExporter, TracerProvider],
) -> None:
    """Pins why docs/signals.md's inline-judge workaround cannot work inside LangChain runnables: both tracers
    parent a model call to the LangChain run that made it, not to the span current when it was made."""
    name, exporter, provider = tracing
    store = make_store()
    graph = useful_self_rag(store, tracer=provider.get_tracer("app"))
    graph.invoke({"messages": [("user", QUESTION)]})

    spans = exporter.get_finished_spans()
    judge = next(span for span in spans if span.name == "grounding judge")
    children = [
        span for span in spans if span.parent is not None and span.parent.span_id == judge.context.span_id
    ]
    assert children == []
    if name == "openinference":  # its spans are never current inside runnables: the judge starts a trace
        assert judge.parent is None
    else:  # OpenLLMetry's are: the judge is a child of the grading step, beside the grader's model call
        assert judge.parent is not None
    # The graph's own output still says which generation answered.
    _, signals = only_answer(exporter)
    assert signals.inputs["citationCount"] == 1


def test_a_model_call_after_the_graph_is_still_the_answer(
    tracing: tuple[str, InMemorySpanExporter, TracerProvider],
) -> None:
    """The graph's output names its own answer only: an application that translates it after the graph ran
    answers with the translation, which is what is read."""
    name, exporter, provider = tracing
    store = make_store()
    retrieved = hits(store, "capital city of France", k=2)
    graph = useful_self_rag(store)
    translator = model("Paris est la capitale de la France [doc-1]. Rome est en Italie [doc-9].")
    with provider.get_tracer("app").start_as_current_span("ask"):
        answer = graph.invoke({"messages": [("user", QUESTION)]})["messages"][-1].content
        translator.invoke([("user", f"Translate into French: {answer}")])

    group, signals = only_answer(exporter)
    assert group.answer.name == "ask"
    assert_inputs(signals, expected(candidates(retrieved), cited=1, invalid=1, coverage=0.5))


# --------------------------------------------------------------- 3. turns, threads, streaming, async


TURNS = [
    (QUESTION, "capital of France", "Paris is the capital of France [doc-1]."),
    ("And of Germany?", "capital of Germany", "Berlin is the capital of Germany [doc-2]."),
]


def two_turn_agent(store: InMemoryVectorStore) -> Any:
    script: list[AIMessage | str] = []
    for index, (_, query, answer) in enumerate(TURNS):
        script += [search(query, f"call_{index}"), answer]
    return react_agent(model(*script), [atlas_tool(store, k=2)], checkpointer=InMemorySaver())


def run_turns(agent: Any, mode: str) -> list[str]:
    config = {"configurable": {"thread_id": "thread-1"}}
    said = []
    for question, _, _ in TURNS:
        state = {"messages": [("user", question)]}
        if mode == "invoke":
            said.append(agent.invoke(state, config)["messages"][-1].content)
        elif mode == "stream":
            said.append(
                "".join(
                    str(message.content)
                    for message, _ in agent.stream(state, config, stream_mode="messages")
                    if isinstance(message, AIMessageChunk)
                )
            )
        elif mode == "ainvoke":
            said.append(asyncio.run(agent.ainvoke(state, config))["messages"][-1].content)
        else:

            async def consume(state: dict[str, Any] = state) -> str:
                return "".join(
                    [
                        str(message.content)
                        async for message, _ in agent.astream(state, config, stream_mode="messages")
                        if isinstance(message, AIMessageChunk)
                    ]
                )

            said.append(asyncio.run(consume()))
    return said


@pytest.mark.parametrize("mode", ["invoke", "stream", "ainvoke", "astream"])
def test_two_turns_on_one_thread_are_two_answers(
    tracing: tuple[str, InMemorySpanExporter, TracerProvider], mode: str
) -> None:
    name, exporter, _ = tracing
    store = make_store()

    assert run_turns(two_turn_agent(store), mode) == [answer for _, _, answer in TURNS]

    groups = find_answers(records(exporter))
    assert [group.answer.name for group in groups] == [GRAPH_ROOT[name]] * 2
    assert len({group.trace_id for group in groups}) == 2
    wants = [
        expected(candidates(hits(store, query, k=2)), cited=1, invalid=0, coverage=1.0)
        for _, query, _ in TURNS
    ]
    for group, want in zip(groups, wants, strict=True):
        assert_inputs(extract_signals(group.spans), want)
    cards = [compute_confidence(want).total for want in wants]
    assert [(span.attributes or {})[semconv.RAG_CONFIDENCE_TOTAL] for span in scored(exporter)] == cards


def test_two_turns_in_one_application_span_are_one_answer(
    tracing: tuple[str, InMemorySpanExporter, TracerProvider],
) -> None:
    """Nothing marks either turn, so the trace's root answers for both (docs/signals.md, Agents): the last
    turn's text, both turns' documents."""
    _, exporter, provider = tracing
    store = make_store()
    with provider.get_tracer("app").start_as_current_span("session"):
        run_turns(two_turn_agent(store), "invoke")

    group, signals = only_answer(exporter)
    assert group.answer.name == "session"
    retrievals = [hits(store, query, k=2) for _, query, _ in TURNS]
    assert_inputs(signals, expected(candidates(*retrievals), cited=1, invalid=0, coverage=1.0))
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_RETRIEVAL_SPANS] == 2


# ------------------------------------------------------------------------------------ the gateway's path


def test_gateway_scores_an_exported_self_rag_trace_like_the_processor(downstream: DownstreamReceiver) -> None:
    """The Self-RAG graph under OpenInference, exported by the real OTLP/gRPC exporter to a real gateway: the
    same answer span, the same scorecard as in-process."""
    store = make_store()
    retrieved = hits(store, "capital city of France", k=2)
    want = expected(candidates(retrieved), cited=1, invalid=0, coverage=1.0)
    unwrap_openllmetry()
    instrumentor = LangChainInstrumentor()
    with running_gateway() as running:
        exporter = Recording(
            OTLPSpanExporter(endpoint=f"http://127.0.0.1:{running.grpc_port}", insecure=True)
        )
        provider = tracer_provider(exporter)
        instrumentor.instrument(tracer_provider=provider)
        try:
            useful_self_rag(store).invoke({"messages": [("user", QUESTION)]})
        finally:
            instrumentor.uninstrument()
        provider.shutdown()
        spans = downstream.wait_for_spans(len(exporter.exported))
    forwarded = [attributes_of(span) for span in spans]
    answers = [
        (span.name, a) for span, a in zip(spans, forwarded, strict=True) if semconv.RAG_CONFIDENCE_TOTAL in a
    ]
    assert [answer for answer, _ in answers] == ["LangGraph"]
    card = compute_confidence(want)
    attributes = answers[0][1]
    assert attributes[semconv.RAG_CONFIDENCE_TOTAL] == card.total
    assert list(attributes[semconv.RAG_CONFIDENCE_WARNINGS]) == [w.code for w in card.meta.warnings]
    assert attributes[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 1


# ------------------------------------------------------------- the graph-output rule on its own, edge by edge


def _graph_trace(graph_output: str, *, node_metadata: bool = False) -> list[SpanRecord]:
    """An OpenInference graph trace written out by hand: a retrieval, the answering call, a grader ending after
    it, and the graph's span (metadata as LangGraph sets it; ``node_metadata`` makes it a subgraph's run)."""
    documents = {
        "openinference.span.kind": "RETRIEVER",
        "retrieval.documents.0.document.id": "doc-1",
        "retrieval.documents.0.document.score": 0.9,
    }
    metadata: dict[str, Any] = {"ls_integration": "langgraph"}
    if node_metadata:
        metadata["langgraph_node"] = "research"
    return [
        SpanRecord(1, 2, 1, "retriever", documents, end_time=10),
        SpanRecord(1, 3, 1, "answer", _llm("Paris [doc-1]."), end_time=20),
        SpanRecord(1, 4, 1, "grader", _llm('{"binary_score": "yes"}'), end_time=30),
        SpanRecord(
            1,
            1,
            None,
            "LangGraph",
            {
                "openinference.span.kind": "CHAIN",
                "metadata": json.dumps(metadata),
                "output.value": graph_output,
            },
            end_time=40,
        ),
    ]


def _llm(text: str) -> dict[str, Any]:
    return {
        "openinference.span.kind": "LLM",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": text,
    }


@pytest.mark.parametrize(
    "state",
    [
        {
            "messages": [
                {"type": "human", "data": {"content": "Q"}},
                {"type": "ai", "data": {"content": "Paris [doc-1]."}},
            ]
        },
        {"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "Paris [doc-1]."}]},
        {"question": "Q", "generation": "Paris [doc-1].", "documents": ["Paris is the capital of France."]},
        {"question": "Q", "answer": "Paris [doc-1]."},
    ],
    ids=["messages_to_dict", "openai-style", "self-rag-state", "answer-key"],
)
def test_the_graph_output_names_the_answer_in_each_state_shape(state: dict[str, Any]) -> None:
    spans = _graph_trace(json.dumps(state))
    signals = extract_signals(spans)
    assert signals.inputs["citationCount"] == 1
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 1
    # The search that skips parsing the state (for an answer long enough to be told apart) agrees with parsing
    # it: the state, parsed, names the answer the search finds quoted in it.
    answer = "Paris is the capital of France, and has been for more than a thousand years [doc-1]."
    assert len(answer) >= langgraph_signals._DISTINCT_CHARS
    output = json.dumps(state).replace("Paris [doc-1].", answer)
    assert langgraph_signals._quoted_in(answer, (output, False))
    assert langgraph_signals._answer_text((output, False), SignalOptions(), Reader()) == answer


def test_a_short_verdict_found_elsewhere_in_the_state_is_not_taken_for_the_answer() -> None:
    """A grader answering a plain ``yes`` after the answer, in a conversation where the user once said ``yes``:
    the verdict is a string of the final state, but not its last AI message, which is the answer."""
    state = {
        "messages": [
            {"type": "human", "data": {"content": "Is Paris in France?"}},
            {"type": "ai", "data": {"content": "It is. Want to know more?"}},
            {"type": "human", "data": {"content": "yes"}},
            {"type": "ai", "data": {"content": "Paris [doc-1]."}},
        ]
    }
    spans = _graph_trace(json.dumps(state))
    spans[2] = SpanRecord(1, 4, 1, "grader", _llm("yes"), end_time=30)
    signals = extract_signals(spans)
    assert signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 1
    assert signals.inputs["citationCount"] == 1


@pytest.mark.parametrize("fence", ["", "```json\n"], ids=["json", "fenced"])
def test_a_structured_answer_after_a_draft_of_the_same_text_stays_the_answer(fence: str) -> None:
    """A node drafts the answer, the next one restates it as JSON with what it says of it; the graph keeps the
    fields in its state. The JSON call wrote the graph's ``answer`` (its ``support_level`` is stated), not the
    draft that ended before it."""
    structured = {"answer": "Paris [doc-1].", "support_level": "high"}
    spans = _graph_trace(json.dumps({"question": "Q", **structured}))
    spans[1] = SpanRecord(1, 3, 1, "draft", _llm("Paris [doc-1]."), end_time=20)
    spans[2] = SpanRecord(
        1, 4, 1, "structure", _llm(fence + json.dumps(structured) + ("\n```" if fence else "")), end_time=30
    )
    signals = extract_signals(spans)
    assert signals.inputs["supportLevel"] == "high"
    assert signals.sources["supportLevel"] == "structured answer"
    assert signals.inputs["citationCount"] == 1


def test_long_json_generations_are_not_parsed_in_search_of_the_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The gateway reads sender-shaped spans: thousands of model calls writing a megabyte of JSON each, and a
    graph output naming none of them, cost one parse each (about 50 ms apiece) before the answer rule skipped
    what cannot be a structured answer quoting the graph's answer."""
    # A spy on ``json.loads``, which the structured-answer parse calls: module attributes of the standard library
    # are looked up at each call even from mypyc-compiled code, where a patch of the signals modules' own
    # functions would never be called.
    parsed: list[int] = []
    real = json.loads

    def counting(text: str, *args: Any, **kwargs: Any) -> Any:
        parsed.append(len(text))
        return real(text, *args, **kwargs)

    monkeypatch.setattr(json, "loads", counting)
    payload = json.dumps({f"k{n}": {"v": n} for n in range(40_000)})
    state = {"messages": [{"type": "ai", "data": {"content": "Paris [doc-1]."}}]}
    spans = _graph_trace(json.dumps(state))
    # Ending between the answer (20) and the grader (30); end times are integer nanoseconds (the compiled
    # SpanRecord refuses a float).
    calls = [SpanRecord(1, 100 + n, 1, "call", _llm(payload), end_time=21 + n) for n in range(9)]
    extract_signals([*spans[:2], *calls, *spans[2:]])
    assert all(length < len(payload) for length in parsed)


def test_without_a_readable_graph_output_the_last_generation_is_read_as_before() -> None:
    state = {"messages": [{"type": "ai", "data": {"content": "Paris [doc-1]."}}]}
    cut = json.dumps(state)[:30]  # a value length limit
    for spans in (
        _graph_trace(cut),
        _graph_trace(json.dumps(state), node_metadata=True),  # a subgraph's run is no graph's answer
        _graph_trace(json.dumps({"messages": [{"type": "ai", "data": {"content": "Something else."}}]})),
    ):
        signals = extract_signals(spans)
        assert (
            signals.diagnostics[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 0
        )  # the grader's JSON, as before
        assert "citationCount" not in signals.inputs


def test_openinference_calls_a_retriever_named_like_an_agent_an_agent() -> None:
    """Pins a limit (docs/signals.md, LangGraph): the OpenInference tracer gives any run whose name holds
    ``agent`` the ``AGENT`` kind, a retriever's too, so its documents are no retrieval's; a ``run_name`` without
    it keeps the ``RETRIEVER`` kind."""

    class AgentNotesRetriever(ScoredVectorRetriever):
        pass

    store = make_store()
    unwrap_openllmetry()
    for exporter, _ in traced(LangChainInstrumentor(), confidence_processor):
        AgentNotesRetriever(store=store).invoke(QUESTION)
        AgentNotesRetriever(store=store).with_config(run_name="notes").invoke(QUESTION)
        spans = records(exporter)
        kinds = [(span.name, span.attributes["openinference.span.kind"]) for span in spans]
        assert kinds == [("AgentNotesRetriever", "AGENT"), ("notes", "RETRIEVER")]
        assert "retrieval.documents.0.document.content" in spans[0].attributes
        assert [is_retrieval_span(span) for span in spans] == [False, True]
