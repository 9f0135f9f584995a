"""The answer text: which generation is the answer, whether it was cut short, and structured (JSON) answers.

The answer is the text of the generation span that ended last in the answer's subtree (OpenInference LLM,
GenAI ``gen_ai.output.messages``, OpenLLMetry completions); with none, the answer span's own ``output.value``.
A generation whose finish reason is ``length`` (also ``max_tokens``/``max_output_tokens``, as other providers
spell it, and Anthropic's ``model_context_window_exceeded``) anywhere in the answer marks the answer truncated.
A generation inside an OpenInference ``EVALUATOR`` span is a judge's, neither the answer nor part of it
(:func:`without_judges`).

A text that is a JSON object (optionally in a fenced block, which a short line of prose may lead in to) is a
structured answer: its fields are read through ``SignalOptions.answer_keys`` (support level, faithfulness,
citations, ...), and its ``answer`` field is the text searched for citation markers. So is the text of DSPy's
default ``ChatAdapter``, whose fields stand under ``[[ ## name ## ]]`` headers (:mod:`.dspy_format`): a
``ChainOfThought``'s reasoning is no part of the answer searched for markers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .. import semconv
from ._values import MAX_JSON_CHARS, Generation, Reader, first_key, loads_json, unredacted
from .dspy_format import adapter_fields
from .native import _support_level
from .options import SignalOptions
from .records import SpanRecord

TRUNCATION_REASONS = frozenset(
    {
        semconv.GEN_AI_FINISH_REASON_LENGTH,
        semconv.FINISH_REASON_MAX_TOKENS,
        semconv.FINISH_REASON_MAX_OUTPUT_TOKENS,
        semconv.FINISH_REASON_CONTEXT_WINDOW_EXCEEDED,
    }
)


# Finish reasons as the providers and conventions spell them (lower-cased): OTel GenAI, OpenAI, Anthropic,
# Gemini, Bedrock (Claude and Titan), Cohere, Mistral, Ollama, vLLM, TGI, watsonx, Together, DeepSeek. The
# diagnostic attribute takes one of these or "unrecognized": the value comes from inside the model's output
# (generation_info, output messages), where a broken or hostile instrumentation could put text that a Collector
# redacting output.value by key would not catch here.
KNOWN_FINISH_REASONS = TRUNCATION_REASONS | frozenset(
    {
        "stop",
        "content_filter",
        "tool_call",
        "tool_calls",
        "function_call",
        "error",
        "end_turn",
        "stop_sequence",
        "tool_use",
        "pause_turn",
        "refusal",
        "finish_reason_unspecified",
        "safety",
        "recitation",
        "language",
        "other",
        "blocklist",
        "prohibited_content",
        "spii",
        "malformed_function_call",
        "image_safety",
        "unexpected_tool_call",
        "guardrail_intervened",
        "content_filtered",
        "complete",
        "error_toxic",
        "error_limit",
        "user_cancel",
        "timeout",
        "model_length",
        "load",
        "unload",
        "eos",
        "eos_token",
        "finish",
        "stop_criteria_met",
        "abort",
        "insufficient_system_resource",
        "not_finished",
        "time_limit",
        "cancelled",
        "token_limit",
        "image_prohibited_content",
        "image_recitation",
        "image_other",
        "no_image",
        "too_many_tool_calls",
    }
)
#: The diagnostic's value for a finish reason not in :data:`KNOWN_FINISH_REASONS` (Gemini's own ``OTHER`` stays
#: ``other``).
UNRECOGNIZED_FINISH_REASON = "unrecognized"


def reported_finish_reason(reason: str) -> str:
    """``reason`` for the diagnostic attribute: a known finish reason as it is, anything else
    ``unrecognized``.

    >>> reported_finish_reason("end_turn"), reported_finish_reason("patient notes: ...")
    ('end_turn', 'unrecognized')
    """
    return reason if reason in KNOWN_FINISH_REASONS else UNRECOGNIZED_FINISH_REASON


class Answer:
    __slots__ = (
        "text",
        "finish_reason",
        "truncated",
        "stated",
        "citations",
        "segments",
        "sources",
        "structured",
        "response_id",
    )

    def __init__(self) -> None:
        self.text: str | None = None
        self.finish_reason: str | None = None
        self.truncated: bool | None = None
        # ScoringInputs values a structured answer stated, and the references it listed as citations.
        self.stated: dict[str, Any] = {}
        self.citations: list[str] = []
        # Pieces of the text the response says its sources back (Gemini grounding segments, Anthropic cited
        # text blocks), for coverage.
        self.segments: tuple[str, ...] = ()
        # Sources the response's citations name by what the request gave (Anthropic), each by its names.
        self.sources: tuple[tuple[str, ...], ...] = ()
        self.structured = False
        # The provider's id of the response whose text is the answer (GenAI ``gen_ai.response.id``).
        self.response_id: str | None = None


def without_judges(
    generations: Sequence[Generation], spans: Sequence[SpanRecord], answer_span: SpanRecord
) -> list[Generation]:
    """The generations not made inside an OpenInference ``EVALUATOR`` span of the answer (the span itself or an
    ancestor below the answer span: a harness that runs the whole answer inside an evaluator is no judge of
    it), and, when any generation is left outside them, not inside a ``GUARDRAIL`` span either.

    An inline LLM judge, or an output guardrail's LLM check, runs after the answer's generation and ends last,
    so it would be read as the answer (a verdict such as "SAFE"). Nothing in its own span tells it apart (its
    input holding the answer text is also what a refining step's holds), and an evaluation logged in a
    generation's context marks that generation as the one *evaluated* (the GenAI conventions parent
    ``gen_ai.evaluation.result`` to the evaluated span): only a span declaring itself an evaluator or a
    guardrail says so. A guardrail may also *make* the answer (Guardrails AI's ``Runner.step`` calls the model
    and validates what it says), so generations inside guardrails are the answer when there is no other.
    """
    top = answer_span.span_id
    evaluators: set[int] = set()
    guards: set[int] = set()
    for span in spans:
        if span.span_id == top:
            continue
        kind = span.attributes.get(semconv.OPENINFERENCE_SPAN_KIND)
        if kind == semconv.OPENINFERENCE_KIND_EVALUATOR:
            evaluators.add(span.span_id)
        elif kind == semconv.OPENINFERENCE_KIND_GUARDRAIL:
            guards.add(span.span_id)
    if not evaluators and not guards:
        return list(generations)
    parents = {span.span_id: span.parent_span_id for span in spans}
    kept = [g for g in generations if not _under(g.span.span_id, evaluators, parents, top)]
    if guards:
        unguarded = [g for g in kept if not _under(g.span.span_id, guards, parents, top)]
        if unguarded:
            return unguarded
    return kept


def _under(span_id: int, ancestors: set[int], parents: Mapping[int, int | None], top: int) -> bool:
    seen: set[int] = set()
    current: int | None = span_id
    while current is not None and current != top and current not in seen:
        if current in ancestors:
            return True
        seen.add(current)
        current = parents.get(current)
    return False


def final_answer(
    generations: Sequence[Generation], answer_span: SpanRecord, options: SignalOptions, reader: Reader
) -> Answer:
    answer = Answer()
    with_text = [generation for generation in generations if generation.text is not None]
    if with_text:
        answer.text = with_text[-1].text
        # References the response gives beside its text (OpenAI file citations); a structured answer's own
        # citation list replaces them below.
        answer.citations = list(with_text[-1].citations)
        answer.segments = with_text[-1].segments
        answer.sources = with_text[-1].sources
        response_id = with_text[-1].span.attributes.get(semconv.GEN_AI_RESPONSE_ID)
        if isinstance(response_id, str) and response_id:
            answer.response_id = response_id
    else:
        output = unredacted(answer_span.attributes.get(semconv.OI_OUTPUT_VALUE))
        answer.text = output if isinstance(output, str) else None
    # A wrapping call (LlamaIndex ``predict`` around ``complete``) may lack the reason its inner one gave.
    with_reason = [generation for generation in generations if generation.finish_reasons]
    if with_reason:
        answer.finish_reason = reported_finish_reason(with_reason[-1].finish_reasons[0])
    reasons = [reason for generation in generations for reason in generation.finish_reasons]
    if reasons:
        answer.truncated = any(reason in TRUNCATION_REASONS for reason in reasons)
    if answer.text is not None:
        _read_structured(answer, options, reader)
    return answer


def _read_structured(answer: Answer, options: SignalOptions, reader: Reader) -> None:
    assert answer.text is not None
    keys = options.answer_keys
    parsed = json_fields(answer.text)
    if parsed is None:
        parsed = _led_json_fields(answer.text, keys)
    if parsed is None:
        parsed = _dspy_fields(answer.text, keys, reader)
    if parsed is None:
        return
    answer.structured = True
    body = first_key(parsed, keys.get("answer", ()))
    answer.text = body if isinstance(body, str) else None
    stated = answer.stated
    level = first_key(parsed, keys.get("supportLevel", ()))
    if level is not None:
        parsed_level = _support_level(reader, level)
        if parsed_level is not None:
            stated["supportLevel"] = parsed_level
    for name, read in (
        ("faithfulnessScore", reader.unit),
        ("answerRelevanceScore", reader.unit),
        ("hasConflict", reader.boolean),
        ("documentsSilent", reader.boolean),
        ("requiresExpertReview", reader.boolean),
    ):
        value = first_key(parsed, keys.get(name, ()))
        if value is not None:
            result = read(value)
            if result is not None:
                stated[name] = result
    citations = first_key(parsed, keys.get("citations", ()))
    if citations is not None:
        answer.citations = _citation_references(citations, options, reader)


def json_fields(text: str) -> Mapping[str, Any] | None:
    """The object of a JSON answer (optionally in a fenced block), else None."""
    text = text.strip()
    if text.startswith("```"):
        text = text.strip("`")
        if text[:4].lower() == "json":  # the info string, as a model writes it: ``json``, ``JSON``
            text = text[4:]
        text = text.strip()
    if not text.startswith("{") or len(text) > MAX_JSON_CHARS:
        return None
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return None  # prose that happens to start with a brace is still an answer, not a bad value
    return parsed if isinstance(parsed, Mapping) else None


# A model asked for JSON may lead in with a line of prose before the fenced object (``Here is the answer:``).
# At most this many characters may stand before the fence, and nothing after it: JSON inside a longer answer
# (an example a prose answer shows) is code of that answer, not the answer.
_LEAD_IN_CHARS = 200


def _led_json_fields(text: str, keys: Mapping[str, Sequence[str]]) -> Mapping[str, Any] | None:
    """The object of a fenced JSON answer (:func:`json_fields`) after a short lead-in, when it holds one of the
    answer ``keys`` (an object naming none is some other JSON the answer quotes), else None."""
    # Substring tests first: every answer text comes here, and nearly none holds a fence near its start.
    fence = text.find("\n```", 0, _LEAD_IN_CHARS + 4)
    if fence < 0 or "```" in text[:fence] or not text.rstrip().endswith("```") or not text[:fence].strip():
        return None
    parsed = json_fields(text[fence + 1 :])
    if parsed is None or all(first_key(parsed, names) is None for names in keys.values()):
        return None
    return parsed


def _dspy_fields(text: str, keys: Mapping[str, Sequence[str]], reader: Reader) -> Mapping[str, Any] | None:
    """The output fields of a DSPy ``ChatAdapter`` text (:mod:`.dspy_format`), else None.

    The answer fields stay text (an answer of ``42`` is not the number 42), and so do the fields no key of
    ``keys`` reads (a ``ChainOfThought``'s ``reasoning``, which may well start ``[1] ...``). The fields read are
    taken as DSPy wrote them: a signature field of a type other than ``str`` (``citations: list[int]``,
    ``faithfulness: float``) is the JSON of its value; a ``str`` field is its text. A value that looks like JSON
    but is none (a Python literal such as ``['a']``) is skipped and counted, rather than read as one citation
    named ``['a']``.
    """
    if len(text) > MAX_JSON_CHARS:
        return None
    fields = adapter_fields(text)
    if fields is None:
        return None
    answer_keys = keys.get("answer", ())
    read = {name for field, names in keys.items() if field != "answer" for name in names}
    parsed: dict[str, Any] = {}
    for name, value in fields.items():
        if name in answer_keys or name not in read:
            parsed[name] = value
            continue
        try:
            parsed[name] = loads_json(value)
        except (ValueError, RecursionError):
            if value.startswith(("[", "{")):
                reader.skip()
            else:
                parsed[name] = value
    return parsed


def _citation_references(value: Any, options: SignalOptions, reader: Reader) -> list[str]:
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
        reader.skip()
        return []
    id_keys = options.document_keys.get("id", ())
    references = []
    for item in value:
        if isinstance(item, Mapping):
            item = first_key(item, id_keys)
        if isinstance(item, bool) or not isinstance(item, (str, int)):
            reader.skip()
            continue
        references.append(str(item))
    return references
