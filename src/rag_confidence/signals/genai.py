"""OpenTelemetry GenAI semantic conventions (development status).

- Retrieval spans (``gen_ai.operation.name = retrieval``): ``gen_ai.retrieval.documents`` as a structured list
  of ``{id, score}`` (SDK 1.45+) or the same list as a JSON string. ``content``/``metadata`` are read when
  present. ``gen_ai.data_source.id`` names the method. The documents are opt-in: a span without them recorded
  nothing of what it found (markers cannot be judged against it), one with an empty list found nothing.
- ``gen_ai.evaluation.result`` span events (or log records the caller attaches as events): name, score, label.
- Generation spans: ``gen_ai.output.messages`` (structured or JSON; text parts of the model's messages: any role
  but user/system/tool, so ``assistant`` and also the ``unknown`` OpenLLMetry writes for a streamed LangChain
  answer) and ``gen_ai.response.finish_reasons`` / the messages' ``finish_reason``. With content capture off
  only the finish reasons are written: a generation without text, still read for truncation. Spring AI writes
  the finish reasons as a JSON array in a string, Semantic Kernel under the singular
  ``gen_ai.response.finish_reason`` (.NET: the same JSON string): both are read. Without output messages, the
  span's ``gen_ai.choice`` events (the conventions' earlier span-event form, which Semantic Kernel .NET and
  Azure AI Inference write) give the text and finish reasons.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .. import semconv
from ._values import (
    Evaluation,
    Generation,
    RawDocument,
    RawRetrieval,
    Reader,
    is_answer_role,
    is_thinking_role,
)
from .records import SpanRecord


def _list(value: Any, reader: Reader) -> list[Any] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = reader.json(value)
        if value is None:
            return None
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return list(value)
    reader.skip()
    return None


def read_retrievals(span: SpanRecord, reader: Reader) -> list[RawRetrieval]:
    attributes = span.attributes
    if attributes.get(semconv.GEN_AI_OPERATION_NAME) != semconv.GEN_AI_OPERATION_RETRIEVAL:
        return []
    reported = attributes.get(semconv.GEN_AI_RETRIEVAL_DOCUMENTS)
    listed = _list(reported, reader)
    if listed is None:
        if reported is not None:
            reader.unreadable_retrievals += 1
        # Absent: ``gen_ai.retrieval.documents`` is opt-in, so a span without it found something unknown.
        return []
    if not listed:
        reader.found_nothing += 1  # ``[]``: the retrieval ran and found nothing
        return []
    documents = []
    for entry in listed:
        if not isinstance(entry, Mapping):
            reader.skip()
            continue
        metadata = entry.get("metadata")
        documents.append(
            RawDocument(
                id=entry.get("id"),
                score=entry.get("score"),
                content=entry.get("content", entry.get("text")),
                metadata=reader.mapping(metadata) if metadata is not None else None,
            )
        )
    if not documents:
        return []
    source = attributes.get(semconv.GEN_AI_DATA_SOURCE_ID)
    return [
        RawRetrieval(span=span, documents=documents, method_hint=source if isinstance(source, str) else None)
    ]


def read_evaluations(span: SpanRecord, reader: Reader) -> list[Evaluation]:
    evaluations = []
    for event in span.events:
        if event.name != semconv.GEN_AI_EVALUATION_RESULT:
            continue
        name = reader.string(event.attributes.get(semconv.GEN_AI_EVALUATION_NAME))
        if name is None or name == semconv.RAG_CONFIDENCE_EVALUATION_NAME:
            continue  # our own scorecard event is an output, never an input
        label = event.attributes.get(semconv.GEN_AI_EVALUATION_SCORE_LABEL)
        evaluations.append(
            Evaluation(
                name=name,
                score=reader.number(event.attributes.get(semconv.GEN_AI_EVALUATION_SCORE_VALUE)),
                label=label if isinstance(label, str) else None,
            )
        )
    return evaluations


def read_generation(span: SpanRecord, reader: Reader) -> Generation | None:
    attributes = span.attributes
    raw_messages = attributes.get(semconv.GEN_AI_OUTPUT_MESSAGES)
    declared = attributes.get(semconv.GEN_AI_RESPONSE_FINISH_REASONS)
    if declared is None:
        declared = attributes.get(semconv.SK_RESPONSE_FINISH_REASON)
    choices = _choice_bodies(span, reader) if raw_messages is None and span.events else None
    if raw_messages is None and declared is None and choices is None:
        return None
    if isinstance(declared, str) and declared.startswith("["):
        # A JSON array in a string (Spring AI, Semantic Kernel .NET: ``["STOP"]``), not one reason.
        declared = reader.strings(declared)
    finish_reasons: list[str] = []
    if isinstance(declared, Sequence) and not isinstance(declared, str):
        finish_reasons.extend(reason.lower() for reason in declared if isinstance(reason, str) and reason)
    elif isinstance(declared, str) and declared:
        finish_reasons.append(declared.lower())
    if choices is not None:
        return _choices_generation(span, choices, finish_reasons, reader)
    if raw_messages is None:
        # Content capture off (the messages are opt-in, the finish reasons recommended): a generation still
        # happened, and whether it was cut short is known without its text (the first choice's reason).
        return (
            Generation(span=span, text=None, finish_reasons=tuple(finish_reasons[:1]))
            if finish_reasons
            else None
        )
    # Each message is one choice (candidate) of the call, alternatives an application picks one of, as
    # ``choices[0]``: the first of the model's messages is the answer, its finish reason the answer's (the
    # span's finish reasons list every choice's, in order).
    for message in _list(raw_messages, reader) or ():
        if not isinstance(message, Mapping):
            reader.skip()
            continue
        if not is_answer_role(message.get("role"), reader) or is_thinking_role(message.get("role")):
            continue
        texts = []
        parts = message.get("parts")
        if isinstance(parts, Sequence) and not isinstance(parts, str):
            for part in parts:
                if (
                    isinstance(part, Mapping)
                    and part.get("type") == "text"
                    and isinstance(part.get("content"), str)
                ):
                    texts.append(part["content"])
        elif isinstance(message.get("content"), str):
            texts.append(message["content"])
        reason = message.get("finish_reason")
        if isinstance(reason, str) and reason:
            finish_reasons = [reason.lower()]
        return Generation(
            span=span, text="\n".join(texts) if texts else None, finish_reasons=tuple(finish_reasons[:1])
        )
    return Generation(span=span, text=None, finish_reasons=tuple(finish_reasons[:1]))


def _choice_bodies(span: SpanRecord, reader: Reader) -> list[Mapping[str, Any]] | None:
    """The bodies of the span's ``gen_ai.choice`` events (see :data:`~rag_confidence.semconv.GEN_AI_CHOICE_EVENT`),
    in order; None when it has no such event. A body that is no JSON object is skipped and counted."""
    bodies: list[Mapping[str, Any]] | None = None
    for event in span.events:
        if event.name != semconv.GEN_AI_CHOICE_EVENT:
            continue
        if bodies is None:
            bodies = []
        body = reader.mapping(event.attributes.get(semconv.GEN_AI_EVENT_CONTENT))
        if body is not None:
            bodies.append(body)
    return bodies


def _choices_generation(
    span: SpanRecord, choices: list[Mapping[str, Any]], finish_reasons: list[str], reader: Reader
) -> Generation | None:
    """One generation from ``gen_ai.choice`` bodies: the model's messages' text (a choice recorded with content
    capture off has none: then a generation without text, still read for truncation; None without either)."""
    # One event per choice (``index``): alternatives, the first of which is the answer, as for output messages.
    for choice in choices:
        message = choice.get("message")
        if isinstance(message, str):  # a text completion's choice (Semantic Kernel's TextContent)
            content: Any = message
        elif isinstance(message, Mapping):
            if not is_answer_role(message.get("role"), reader):
                continue
            content = message.get("content")
        else:
            content = None  # a choice recorded with content capture off
        reason = choice.get("finish_reason")
        if isinstance(reason, str) and reason:
            finish_reasons = [reason.lower()]
        text = content if isinstance(content, str) and content else None
        if text is None and not finish_reasons:
            return None
        return Generation(span=span, text=text, finish_reasons=tuple(finish_reasons[:1]))
    if not finish_reasons:
        return None
    return Generation(span=span, text=None, finish_reasons=tuple(finish_reasons[:1]))
