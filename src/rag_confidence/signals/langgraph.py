"""LangGraph: the answer is the message the graph returned, not the model call that ended last.

A LangGraph graph may call a model after the one that wrote its answer: a conditional edge that grades the
generation (the Self-RAG and adaptive RAG tutorials' ``grade_generation_v_documents_and_question``, a
hallucination grader) runs as part of the node that answered, and its verdict (``{"binary_score": "yes"}``)
goes to the router, never into the graph's state. Read as the last generation, that verdict would be the
answer. Neither LangChain tracer lets the application declare such a call a judge: the OpenInference tracer
parents a model call to the LangChain run that made it and never makes its spans current, and OpenLLMetry's
likewise parents it by run, so an ``EVALUATOR`` span the application opens around the grader holds nothing.

What does say which call answered is the graph's own output, which both tracers record on the graph's span:
the final state, whose last AI message (or ``answer``/``generation`` string, for a state of its own) is the
answer. :func:`graph_answer` keeps the generations up to the one that produced that text, so the answer,
its finish reason and its truncation are that call's; later generations are routing decisions. When no
generation produced the text (an output cut by a value length limit, a parser that changed it), or a
generation outside the graph ended after it (the application post-processing the answer), nothing changes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .. import semconv
from ._values import MAX_JSON_CHARS, Generation, Reader, first_key, loads_json, unredacted
from .generation import json_fields
from .options import SignalOptions
from .records import SpanRecord

# LangChain run metadata LangGraph sets on every run of a graph: ``ls_integration`` on the graph's run and all
# beneath it, ``langgraph_node`` on the runs inside a node (a subgraph included), so the top graph's run is the
# one with the first and without the second.
_INTEGRATION = "ls_integration"
_LANGGRAPH = "langgraph"
_NODE = "langgraph_node"
_OL_INTEGRATION = semconv.TRACELOOP_ASSOCIATION_PROPERTIES_PREFIX + _INTEGRATION
_OL_NODE = semconv.TRACELOOP_ASSOCIATION_PROPERTIES_PREFIX + _NODE
# Message classes as LangChain serializes them: ``messages_to_dict`` (OpenInference) writes ``type``,
# ``dumpd`` (OpenLLMetry) the class path in ``id``.
_AI_TYPES = frozenset({"ai", "AIMessageChunk"})
_AI_CLASSES = frozenset({"AIMessage", "AIMessageChunk"})
# A text this long found in the graph's output is taken for its answer unparsed; a shorter one (a verdict, a
# word) may be any other string of the state, a user's turn included.
_DISTINCT_CHARS = 64
# A structured answer longer than this is not looked into for the graph's answer.
_STRUCTURED_MAX_CHARS = 65_536
# The self-RAG tutorials keep the answer in a ``generation`` field of their own state.
_STATE_ANSWER_KEYS = ("generation",)


def graph_answer(
    generations: list[Generation], spans: Sequence[SpanRecord], options: SignalOptions, reader: Reader
) -> list[Generation]:
    """``generations`` (in end order) up to the one whose text the last LangGraph graph among ``spans``
    (in end order) returned as its answer; all of them when there is no such graph or generation."""
    with_text = 0
    for generation in generations:
        if generation.text is not None:
            with_text += 1
    if with_text < 2:  # one text to read: nothing to choose, and no graph output is parsed
        return generations
    graph = _last_graph(spans, reader)
    if graph is None:
        return generations
    output = _output(graph.attributes)
    if output is None:
        return generations
    last = _last_text(generations)
    # The common case, an answer with no call after it: the last text is a string of the graph's output, which
    # a search tells without parsing a state that may hold a whole conversation (200 KB take about 3 ms). Not
    # for a short text: a grader's ``yes`` is found in a state where the user once said ``yes``.
    if last is not None and len(last) >= _DISTINCT_CHARS and _quoted_in(last, output):
        return generations
    text = _answer_text(output, options, reader)
    if text is None:
        return generations
    ended_after = _ended_after(graph, spans)
    chosen = -1
    for index in range(len(generations) - 1, -1, -1):
        generation = generations[index]
        if generation.text is None:
            continue
        if generation.span.span_id in ended_after:  # the application's own call after the graph: its text
            return generations
        if generation.text == text or _states(generation.text, text, options):
            chosen = index
            break
    if chosen < 0:
        return generations
    return generations[: chosen + 1]


def _states(generation_text: str, text: str, options: SignalOptions) -> bool:
    """Whether a generation is a structured answer (JSON) whose answer field is ``text``: a call that wrote the
    answer with what it says of it (``support_level``, ``citations``), which the graph kept as fields of its
    state, after a draft of the same text."""
    # Parsed only when it may be one: an object (fenced or not), of a structured answer's size, quoting the text
    # (a sender's thousands of megabyte JSON texts would cost a parse each).
    if (
        len(generation_text) > _STRUCTURED_MAX_CHARS
        or generation_text.lstrip(" \t\r\n`json")[:1] != "{"
        or not _quoted_in(text, (generation_text, False))
    ):
        return False
    fields = json_fields(generation_text)
    return fields is not None and first_key(fields, options.answer_keys.get("answer", ())) == text


def _ended_after(graph: SpanRecord, spans: Sequence[SpanRecord]) -> set[int]:
    found: set[int] = set()
    after = False
    for span in spans:
        if after:
            found.add(span.span_id)
        elif span is graph:
            after = True
    return found


def _last_graph(spans: Sequence[SpanRecord], reader: Reader) -> SpanRecord | None:
    for index in range(len(spans) - 1, -1, -1):
        span = spans[index]
        if _is_graph(span.attributes, reader):
            return span
    return None


def _is_graph(attributes: Mapping[str, Any], reader: Reader) -> bool:
    """The run of a whole graph (not a node's, not a subgraph's), by its LangChain run metadata."""
    if attributes.get(_OL_INTEGRATION) == _LANGGRAPH:
        return _OL_NODE not in attributes
    metadata = attributes.get(semconv.OI_METADATA)
    # Every OpenInference LangChain span has metadata: parse only those that can name LangGraph.
    if not isinstance(metadata, str) or _LANGGRAPH not in metadata:
        return False
    parsed = reader.mapping(metadata)
    return parsed is not None and parsed.get(_INTEGRATION) == _LANGGRAPH and _NODE not in parsed


def _output(attributes: Mapping[str, Any]) -> tuple[str, bool] | None:
    """The graph span's output JSON, and whether it is OpenLLMetry's (``{"outputs": <state>, ...}``)."""
    output = unredacted(attributes.get(semconv.OI_OUTPUT_VALUE))
    if isinstance(output, str):
        return output, False
    for key in (semconv.TRACELOOP_ENTITY_OUTPUT, semconv.GEN_AI_TASK_OUTPUT):
        output = attributes.get(key)
        if isinstance(output, str):
            return output, True
    return None


def _last_text(generations: list[Generation]) -> str | None:
    for index in range(len(generations) - 1, -1, -1):
        text = generations[index].text
        if text is not None:
            return text
    return None


def _quoted_in(text: str, output: tuple[str, bool]) -> bool:
    """``text`` occurs as a JSON string in the output (as either tracer escapes it: ASCII-only, or not).
    Searched from the end, where the final state's last message is: found there, it costs nothing measurable
    even for a long conversation (a plain ``in`` scans 200 KB in about 140 µs)."""
    found = output[0].rfind(json.dumps(text)) >= 0
    if not found and not text.isascii():
        found = output[0].rfind(json.dumps(text, ensure_ascii=False)) >= 0
    return found


def _answer_text(output: tuple[str, bool], options: SignalOptions, reader: Reader) -> str | None:
    text, wrapped = output
    if not text.startswith("{") or len(text) > MAX_JSON_CHARS:
        return None
    try:
        state = loads_json(text)
    except (ValueError, RecursionError):
        reader.skip()
        return None
    if wrapped and isinstance(state, Mapping):
        state = state.get("outputs")
    if not isinstance(state, Mapping):
        return None
    messages = state.get("messages")
    if isinstance(messages, list):
        for message in reversed(messages):
            content, is_ai = _message(message)
            if is_ai:
                return content
        return None
    for key in (*options.answer_keys.get("answer", ()), *_STATE_ANSWER_KEYS):
        value = state.get(key)
        if isinstance(value, str):
            return value
    return None


def _message(message: Any) -> tuple[str | None, bool]:
    """A serialized message's text content (None unless a string) and whether the model wrote it."""
    if not isinstance(message, Mapping):
        return None, False
    data = message.get("data")
    if isinstance(data, Mapping) and message.get("type") in _AI_TYPES:  # messages_to_dict
        content = data.get("content")
        return (content if isinstance(content, str) else None), True
    path = message.get("id")
    kwargs = message.get("kwargs")
    if isinstance(path, list) and path and path[-1] in _AI_CLASSES and isinstance(kwargs, Mapping):  # dumpd
        content = kwargs.get("content")
        return (content if isinstance(content, str) else None), True
    if message.get("role") == "assistant":  # the OpenAI-style dicts a graph may be given or return
        content = message.get("content")
        return (content if isinstance(content, str) else None), True
    return None, False
