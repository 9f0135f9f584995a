"""LlamaIndex's ``ReActAgent``: the answer is the turn's ``Answer:``, not its ``Thought:``.

A ReAct agent's model writes its reasoning and its answer in one text (``Thought: ...\\nAnswer: ...``) and the
agent returns only what follows ``Answer:``. Read whole, the model call's text makes the thought part of the
answer: a marker in the thought (``Thought: source [2] settles it``) counts as a citation the user never saw,
and the thought's sentences, which carry none, lower the coverage.

The OpenInference LlamaIndex tracer records the agent's parse of each turn as a ``CHAIN`` span
``ReActOutputParser.parse`` whose ``output.value`` is the parsed step as JSON: ``{"thought", "response",
"is_streaming"}`` for a final answer (``{"thought", "action", "action_input"}`` for a tool call). When that span
parsed the model call that ended last (it ended after it, and the response is part of its text),
:func:`react_answer` keeps the call (its finish reason and truncation stand) with the response as its text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .. import semconv
from ._values import MAX_JSON_CHARS, Generation, Reader, loads_json, unredacted
from .records import SpanRecord

# The parser splits at this label; a text without it is returned whole, so there is nothing to replace.
_ANSWER_LABEL = "Answer:"
_RESPONSE_KEY = "response"


def react_answer(
    generations: list[Generation], spans: Sequence[SpanRecord], reader: Reader
) -> list[Generation]:
    """``generations`` (in end order), the last one with text holding only the response the ReAct parser
    among ``spans`` (in end order) took from it; unchanged when no parser span read that generation."""
    last = len(generations) - 1
    while last >= 0 and generations[last].text is None:
        last -= 1
    if last < 0:
        return generations
    generation = generations[last]
    text = generation.text
    if text is None or _ANSWER_LABEL not in text:
        return generations
    parser: SpanRecord | None = None
    for span in reversed(spans):
        if (
            span.name == semconv.LLAMAINDEX_REACT_PARSER_SPAN
            and span.attributes.get(semconv.OPENINFERENCE_SPAN_KIND) == semconv.OPENINFERENCE_KIND_CHAIN
        ):
            parser = span
            break
    if parser is None:
        return generations
    # A parser that ended before the call parsed an earlier turn (the call is a later one: the application's
    # own model call after the agent, say).
    parsed_end, generated_end = parser.end_time, generation.span.end_time
    if parsed_end is not None and generated_end is not None and parsed_end < generated_end:
        return generations
    response = _response(parser, reader)
    if response is None or response not in text:
        return generations
    replaced = Generation(
        span=generation.span,
        text=response,
        finish_reasons=generation.finish_reasons,
        citations=generation.citations,
        segments=generation.segments,
        sources=generation.sources,
    )
    return [*generations[:last], replaced, *generations[last + 1 :]]


def _response(parser: SpanRecord, reader: Reader) -> str | None:
    """The final answer the parser span recorded, or None for a tool-call step or an output not recorded."""
    output = unredacted(parser.attributes.get(semconv.OI_OUTPUT_VALUE))
    if not isinstance(output, str) or not output.startswith("{") or len(output) > MAX_JSON_CHARS:
        return None
    try:
        parsed = loads_json(output)
    except (ValueError, RecursionError):
        reader.skip()  # cut by a value length limit: the answer stays the model's whole text
        return None
    if not isinstance(parsed, Mapping):
        return None
    response = parsed.get(_RESPONSE_KEY)
    return response if isinstance(response, str) and response else None
