"""OpenInference (``openinference.span.kind``): RETRIEVER, RERANKER, LLM and evaluation attributes.

- RETRIEVER: ``retrieval.documents.{i}.document.{id,score,content,metadata}``; metadata is a JSON string. The
  LangChain tracer records no id or score outside the metadata; its span's ``output.value`` JSON holds each
  LangChain ``Document.id``, read as an extra id the document is known by.
- RERANKER: ``reranker.output_documents.{i}.document.*``; scores and order are final.
- LLM: the answer text from ``llm.output_messages.{i}.message.content`` (or the ``text`` parts of
  ``message.contents``, in index order; ``reasoning`` parts are the model's thinking, not its answer), else from
  the first of the legacy Completions ``llm.choices.{i}.completion.text``, else from
  ``output.value`` (LangChain completion LLMs put ``{"generations": [[{"text": ...}]]}`` JSON there);
  ``llm.finish_reason`` or LangChain's ``generation_info.finish_reason``; the OpenAI instrumentor's
  ``output.value`` Response JSON for the ``file_citation`` annotations of a call that ran ``file_search`` (its
  results are read in :mod:`.hosted`), and the Google GenAI instrumentor's ``GenerateContentResponse`` JSON for
  the grounding supports of a grounded Gemini call (its chunks are read in :mod:`.grounding`), and the
  Anthropic instrumentor's ``Message`` JSON for the citations of Claude's text blocks, with the request's
  documents from ``input.value`` (:mod:`.anthropic_citations`), and the OpenAI instrumentor's Chat Completion or
  Response JSON for the ``url_citation`` annotations of hosted web search (:mod:`.url_citations`).
- RETRIEVER spans of AWS Bedrock Knowledge Bases (openinference-instrumentation-bedrock): each reference's
  metadata one level down, the knowledge base as the method, and a ``retrieve_and_generate`` span read as a
  generation too, its ``output.value`` the answer and its references the answer's citations (:mod:`.bedrock`).
- The ``__REDACTED__`` an OpenInference ``TraceConfig`` writes for hidden text or metadata is read as absent; a
  retriever whose hidden metadata held its documents' only ids counts as unreadable.
- ``evaluations.{i}.evaluation.*`` and ``annotations.{i}.annotation.*`` on any span but a RETRIEVER or RERANKER
  (span feedback is about its span: there, about the retrieval); trace-scoped ``trace.evaluations.*`` and
  ``trace.annotations.*`` on any span of the answer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from .. import semconv
from . import bedrock
from ._values import (
    Evaluation,
    Generation,
    RawDocument,
    RawRetrieval,
    Reader,
    indexed,
    is_answer_role,
    is_thinking_role,
    loads_json,
    unredacted,
)
from .anthropic_citations import read_citations as read_anthropic_citations
from .grounding import read_supports
from .hosted import read_citations
from .records import SpanRecord
from .url_citations import read_url_citations

# Each document's own fields as OpenInference flattens them beneath ``{prefix}.{i}.``; the structured form
# holds a ``document`` object with the same keys without their ``document.`` prefix.
_ID, _SCORE, _CONTENT, _METADATA = (
    semconv.OI_DOCUMENT_ID,
    semconv.OI_DOCUMENT_SCORE,
    semconv.OI_DOCUMENT_CONTENT,
    semconv.OI_DOCUMENT_METADATA,
)
_DOCUMENT_OBJECT, _, _ = _ID.partition(".")
_DOCUMENT_PREFIX = _DOCUMENT_OBJECT + "."
_BARE_ID, _BARE_SCORE, _BARE_CONTENT, _BARE_METADATA = (
    name.removeprefix(_DOCUMENT_PREFIX) for name in (_ID, _SCORE, _CONTENT, _METADATA)
)


def span_kind(span: SpanRecord) -> Any:
    return span.attributes.get(semconv.OPENINFERENCE_SPAN_KIND)


def read_retrievals(span: SpanRecord, reader: Reader) -> list[RawRetrieval]:
    kind = span_kind(span)
    if kind == semconv.OPENINFERENCE_KIND_RETRIEVER:
        documents = _documents(span.attributes, semconv.OI_RETRIEVAL_DOCUMENTS, reader)
        # A Bedrock Knowledge Base reference nests the metadata one level down (see :mod:`.bedrock`); its
        # knowledge base names the method. Only a Knowledge Base span's: another retriever's documents may carry
        # metadata of the same keys, their own.
        hint = (
            bedrock.knowledge_base_id(span.attributes, reader)
            if documents and bedrock.knowledge_base_span(span) and bedrock.adapt_documents(documents)
            else None
        )
        if documents:
            _add_langchain_ids(span.attributes, documents, reader)
            if any(
                document.redacted and document.id is None and not document.aliases for document in documents
            ):
                # Hidden metadata took the ids with it (the LangChain tracer records none of its own): the
                # documents an answer's markers name are unknown, as for a list cut by a value length limit.
                reader.unreadable_retrievals += 1
        else:
            # The LangChain tracer writes an empty list found as ``retrieval.documents = []``.
            listed = span.attributes.get(semconv.OI_RETRIEVAL_DOCUMENTS)
            returned = (
                _FOUND_NOTHING
                if isinstance(listed, (list, tuple)) and not listed
                else _unlisted_output(span.attributes)
            )
            if returned == _FOUND_NOTHING:
                reader.found_nothing += 1
            elif returned == _RETURNED_RESULTS and semconv.OI_TOOL_NAME in span.attributes:
                # Only tool spans: a framework's retriever span may list its documents on another span
                # (LlamaIndex's ``_retrieve`` beneath ``retrieve``, its ``output.value`` the nodes) and is read
                # there; alone, it recorded nothing readable of what it found.
                reader.unreadable_retrievals += 1
        return [RawRetrieval(span=span, documents=documents, method_hint=hint)] if documents else []
    if kind == semconv.OPENINFERENCE_KIND_RERANKER:
        documents = _documents(span.attributes, semconv.OI_RERANKER_OUTPUT_DOCUMENTS, reader)
        return [RawRetrieval(span=span, documents=documents, rerank=True)] if documents else []
    return []


# Longer than this, a retriever tool's output is no "found nothing" (``{"documents": [], "query": ...}``), and is
# not parsed to tell: a sender's megabyte of JSON on each of many such spans cost a parse each (90 ms apiece).
_NOTHING_FOUND_CHARS = 4096


# What a retriever span that listed no document returned (:func:`_unlisted_output`).
_NOT_RECORDED: Final = 0
_FOUND_NOTHING: Final = 1
_RETURNED_RESULTS: Final = 2


def _unlisted_output(attributes: Mapping[str, Any]) -> int:
    """What a retriever span that listed no document returned, by its ``output.value``: nothing recorded (no
    output, or a hidden one), nothing found (blank, or JSON holding no list item and no text it was not given:
    ``[]``, ``{"documents": []}``), or results (text, or JSON holding a list item or a text).

    OpenInference writes ``retrieval.documents.*`` once per document, so an empty result and an unrecorded one
    both leave none: the output tells them apart. The OpenAI Agents tracer records a function tool named in its
    ``tool_span_kinds`` as a ``RETRIEVER`` (keeping ``tool.name``), and writes ``retrieval.documents`` only when
    the function returns a list of objects; one returning the results formatted for the model (``[1] kb-leave:
    ...``) leaves them in ``output.value`` alone. The answer's markers then name documents nobody can read:
    judged against none, every valid citation would be invalid. A tool that found nothing returns nothing, or
    empty JSON (``[]``, ``{"documents": []}``)."""
    output = unredacted(attributes.get(semconv.OI_OUTPUT_VALUE))
    if type(output) is not str:
        return _NOT_RECORDED
    if not output.strip():
        return _FOUND_NOTHING
    if len(output) > _NOTHING_FOUND_CHARS:
        return _RETURNED_RESULTS
    try:
        parsed = loads_json(output)
    except (ValueError, RecursionError):
        return _RETURNED_RESULTS  # text
    if isinstance(parsed, str):
        return _RETURNED_RESULTS if parsed.strip() else _FOUND_NOTHING
    # Iterative: the depth is whatever the producer nested. A text field is a result too (a tool returning
    # ``{"results": "[1] kb-leave: ..."}``), unless the tool was given it (``{"documents": [], "query": ...}``
    # echoes the query it found nothing for).
    given: set[str] | None = None
    pending: list[Any] = [parsed]
    while pending:
        value = pending.pop()
        if isinstance(value, list):
            if value:
                return _RETURNED_RESULTS
        elif isinstance(value, dict):
            pending.extend(value.values())
        elif isinstance(value, str) and value.strip():
            if given is None:
                given = _input_strings(attributes)
            if value not in given:
                return _RETURNED_RESULTS
    return _FOUND_NOTHING


def _input_strings(attributes: Mapping[str, Any]) -> set[str]:
    """The string values of a tool's arguments (``input.value``, a JSON object)."""
    text = attributes.get(semconv.OI_INPUT_VALUE)
    if type(text) is not str or len(text) > _NOTHING_FOUND_CHARS:
        return set()
    try:
        parsed = loads_json(text)
    except (ValueError, RecursionError):
        return {text}
    found: set[str] = set()
    pending: list[Any] = [parsed]
    while pending:
        value = pending.pop()
        if isinstance(value, str):
            found.add(value)
        elif isinstance(value, dict):
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
    return found


# Documents are read by probing ``<prefix>.{i}.document.<field>`` from 0 up; the first index with none of the
# fields ends the list. (A span over the SDK's attribute count limit has lost its *oldest* attributes, its
# first documents: see ``_documents_after_eviction``.)
_MAX_DOCUMENTS = 10_000
# The probed keys of the first documents, per prefix, built once: formatting four keys per document cost more
# than reading them. Documents past this many get their keys formatted as they are read.
_KEYED_DOCUMENTS = 256
_DOCUMENT_KEYS: dict[str, tuple[tuple[str, str, str, str], ...]] = {}


def _document_keys(prefix: str) -> tuple[tuple[str, str, str, str], ...]:
    keys = _DOCUMENT_KEYS.get(prefix)
    if keys is None:
        keys = _DOCUMENT_KEYS[prefix] = tuple(_keys_at(prefix, index) for index in range(_KEYED_DOCUMENTS))
    return keys


def _keys_at(prefix: str, index: int) -> tuple[str, str, str, str]:
    head = f"{prefix}.{index}."
    return (head + _ID, head + _SCORE, head + _CONTENT, head + _METADATA)


def _documents(attributes: Mapping[str, Any], prefix: str, reader: Reader) -> list[RawDocument]:
    if prefix in attributes:
        return _structured_documents(attributes, prefix, reader)
    keyed = _document_keys(prefix)
    # Records built from SDK spans or OTLP hold plain dicts: read those with dict lookups (compiled), anything
    # else through its own ``get``.
    plain: dict[str, Any] | None = attributes if isinstance(attributes, dict) else None
    documents: list[RawDocument] = []
    for index in range(_MAX_DOCUMENTS):
        keys = keyed[index] if index < _KEYED_DOCUMENTS else _keys_at(prefix, index)
        if plain is not None:
            document_id = plain.get(keys[0])
            score = plain.get(keys[1])
            content = plain.get(keys[2])
            metadata = plain.get(keys[3])
        else:
            document_id = attributes.get(keys[0])
            score = attributes.get(keys[1])
            content = attributes.get(keys[2])
            metadata = attributes.get(keys[3])
        if document_id is None and score is None and content is None and metadata is None:
            break
        documents.append(_raw_document(document_id, score, content, metadata, reader))
    if not documents:
        return _documents_after_eviction(attributes, prefix, reader)
    return documents


def _documents_after_eviction(
    attributes: Mapping[str, Any], prefix: str, reader: Reader
) -> list[RawDocument]:
    """The documents left when the first ones are missing, counted as dropped.

    A span at the SDK's attribute limit drops its oldest attributes for new ones: the first documents go, while
    the span kind survives (both OpenInference tracers set it again after the documents).
    """
    found = indexed(attributes, prefix, reader)
    if not found:
        return []
    # The first index left is what was dropped; bounded, since the index is whatever a producer wrote.
    reader.dropped_documents += min(_first_index(attributes, prefix), _MAX_DOCUMENTS)
    documents = []
    for item in found:
        documents.append(
            _raw_document(item.get(_ID), item.get(_SCORE), item.get(_CONTENT), item.get(_METADATA), reader)
        )
    return documents


def _raw_document(document_id: Any, score: Any, content: Any, metadata: Any, reader: Reader) -> RawDocument:
    shown_content = unredacted(content)
    shown_metadata = unredacted(metadata)
    return RawDocument(
        document_id,
        score,
        None,
        shown_content,
        reader.mapping(shown_metadata) if shown_metadata is not None else None,
        # Only hidden metadata can take an id with it: text is no id, so a document whose text alone was hidden
        # is still as citable as its metadata makes it.
        redacted=shown_metadata is not metadata,
    )


def _first_index(attributes: Mapping[str, Any], prefix: str) -> int:
    dotted = prefix + "."
    indices = [
        int(head)
        for key in attributes
        if key.startswith(dotted) and (head := key[len(dotted) :].partition(".")[0]).isdigit()
    ]
    return min(indices) if indices else 0


def _structured_documents(attributes: Mapping[str, Any], prefix: str, reader: Reader) -> list[RawDocument]:
    documents = []
    for item in indexed(attributes, prefix, reader):
        # Flattened keys read ``document.id``; the structured form may hold ``{"document": {...}}`` or plain
        # keys.
        nested = item.get(_DOCUMENT_OBJECT)
        fields: Mapping[str, Any] = (
            nested
            if isinstance(nested, Mapping)
            else {key.removeprefix(_DOCUMENT_PREFIX): value for key, value in item.items()}
        )
        documents.append(
            _raw_document(
                fields.get(_BARE_ID),
                fields.get(_BARE_SCORE),
                fields.get(_BARE_CONTENT),
                fields.get(_BARE_METADATA),
                reader,
            )
        )
    return documents


def _add_langchain_ids(attributes: Mapping[str, Any], documents: list[RawDocument], reader: Reader) -> None:
    output = attributes.get(semconv.OI_OUTPUT_VALUE)
    if not isinstance(output, str) or not output.startswith("{") or '"documents"' not in output:
        return
    parsed = reader.mapping(output)
    listed = parsed.get("documents") if parsed is not None else None
    if not isinstance(listed, list) or len(listed) != len(documents):
        return
    for document, entry in zip(documents, listed, strict=True):
        if isinstance(entry, Mapping) and isinstance(entry.get("id"), str) and entry["id"]:
            document.aliases = (*document.aliases, entry["id"])


# (prefix, name, score, label keys, the first item's name key: a span with neither that nor the structured
# prefix holds no evaluations, and most spans are told so by two lookups; and whether the form is span-scoped).
_EVALUATION_FORMS = tuple(
    (prefix, name_key, score_key, label_key, f"{prefix}.0.{name_key}", span_scoped)
    for prefix, name_key, score_key, label_key, span_scoped in (
        (
            semconv.OI_EVALUATIONS,
            semconv.OI_EVALUATION_NAME,
            semconv.OI_EVALUATION_SCORE,
            semconv.OI_EVALUATION_LABEL,
            True,
        ),
        (
            semconv.OI_ANNOTATIONS,
            semconv.OI_ANNOTATION_NAME,
            semconv.OI_ANNOTATION_SCORE,
            semconv.OI_ANNOTATION_LABEL,
            True,
        ),
        (
            semconv.OI_TRACE_EVALUATIONS,
            semconv.OI_EVALUATION_NAME,
            semconv.OI_EVALUATION_SCORE,
            semconv.OI_EVALUATION_LABEL,
            False,
        ),
        (
            semconv.OI_TRACE_ANNOTATIONS,
            semconv.OI_ANNOTATION_NAME,
            semconv.OI_ANNOTATION_SCORE,
            semconv.OI_ANNOTATION_LABEL,
            False,
        ),
    )
)


def read_evaluations(
    span: SpanRecord, reader: Reader, span_scoped: bool = True, trace_scoped: bool = True
) -> list[Evaluation]:
    """The span's feedback of the scopes that count (see ``extract._FeedbackTargets``): span feedback is about
    the span carrying it (on a retriever it grades the retrieval, Phoenix's document relevance) or the span a
    carrier links to; trace feedback about the whole trace."""
    attributes = span.attributes
    evaluations: list[Evaluation] = []
    for prefix, name_key, score_key, label_key, first_name_key, scoped_to_span in _EVALUATION_FORMS:
        if not (span_scoped if scoped_to_span else trace_scoped):
            continue
        if prefix not in attributes and first_name_key not in attributes:
            continue
        for item in indexed(attributes, prefix, reader):
            name = reader.string(item.get(name_key))
            if name is None:
                continue
            label = item.get(label_key)
            evaluations.append(
                Evaluation(
                    name=name,
                    score=reader.number(item.get(score_key)),
                    label=label if isinstance(label, str) else None,
                )
            )
    return evaluations


def _has_prefix(attributes: Mapping[str, Any], prefix: str) -> bool:
    if prefix in attributes:
        return True
    dotted = prefix + "."
    return any(key.startswith(dotted) for key in attributes)


def read_generation(span: SpanRecord, reader: Reader) -> Generation | None:
    kind = span_kind(span)
    if kind == semconv.OPENINFERENCE_KIND_RETRIEVER:
        return _retrieve_and_generate(span, reader)
    if kind != semconv.OPENINFERENCE_KIND_LLM:
        return None
    attributes = span.attributes
    finish_reasons: list[str] = []
    reason = attributes.get(semconv.OI_LLM_FINISH_REASON)
    if isinstance(reason, str) and reason:
        finish_reasons.append(reason.lower())
    else:
        reason = _incomplete_response_reason(attributes, reader)
        if reason is not None:
            finish_reasons.append(reason)
    text, textless = _output_messages_text(attributes, reader)
    if text is None and not textless:
        text = _choice_text(attributes, reader)
    if text is None and not textless:
        if _renders_a_prompt(attributes):
            return None
        text = _output_value_text(attributes, reader, finish_reasons)
    # The OpenAI instrumentor's output.value is the Response itself: its file citations are annotations, not
    # markers in the text; the Google GenAI instrumentor's is the GenerateContentResponse, whose grounding
    # supports cite chunks and name the segments they back; the Anthropic instrumentor's is the Message, whose
    # text blocks cite the request's documents and search results.
    cited, segments = read_supports(attributes, reader)
    sources, cited_blocks = read_anthropic_citations(attributes, reader)
    # Its url_citation annotations (hosted web search) name web pages as Anthropic's citations name documents.
    pages, linked = read_url_citations(attributes, reader)
    return Generation(
        span=span,
        text=text,
        finish_reasons=tuple(finish_reasons),
        citations=read_citations(attributes, reader) + cited,
        segments=segments + cited_blocks + linked,
        sources=sources + pages,
    )


_INCOMPLETE_TEXT = '"' + semconv.OPENAI_RESPONSE_STATUS_INCOMPLETE + '"'


def _incomplete_response_reason(attributes: Mapping[str, Any], reader: Reader) -> str | None:
    """Why a Responses API call stopped early (``max_output_tokens``, ``content_filter``), lower-cased, from the
    Response the OpenAI instrumentor records as ``output.value``: it writes no ``llm.finish_reason`` for one,
    and a Response cut at its token limit is ``status = incomplete``. None for anything else."""
    output = attributes.get(semconv.OI_OUTPUT_VALUE)
    if type(output) is not str or _INCOMPLETE_TEXT not in output:
        return None
    response = reader.maybe_mapping(output)
    if (
        response is None
        or response.get(semconv.OPENAI_RESPONSE_OBJECT_KEY) != semconv.OPENAI_RESPONSE_OBJECT
        or response.get(semconv.OPENAI_RESPONSE_STATUS) != semconv.OPENAI_RESPONSE_STATUS_INCOMPLETE
    ):
        return None
    details = response.get(semconv.OPENAI_RESPONSE_INCOMPLETE_DETAILS)
    reason = details.get(semconv.OPENAI_RESPONSE_INCOMPLETE_REASON) if isinstance(details, Mapping) else None
    # An incomplete Response without a reason stopped short all the same: as a token limit does.
    return reason.lower() if isinstance(reason, str) and reason else semconv.GEN_AI_FINISH_REASON_LENGTH


def _retrieve_and_generate(span: SpanRecord, reader: Reader) -> Generation | None:
    """A Bedrock ``retrieve_and_generate`` span (:func:`.bedrock.generates_answer`): the generated text is its
    ``output.value``, and every reference it lists is one the answer cites (Bedrock lists no other)."""
    if not bedrock.generates_answer(span):
        return None
    output = unredacted(span.attributes.get(semconv.OI_OUTPUT_VALUE))
    if output is not None and not isinstance(output, str):
        reader.skip()
        output = None
    # The documents were read (and their odd values counted) as the retrieval; read here for their ids only.
    documents = _documents(span.attributes, semconv.OI_RETRIEVAL_DOCUMENTS, Reader())
    bedrock.adapt_documents(documents)
    cited = tuple(document.id for document in documents if isinstance(document.id, str) and document.id)
    return Generation(span=span, text=output, citations=cited)


def _renders_a_prompt(attributes: Mapping[str, Any]) -> bool:
    """An ``LLM`` span that fills a prompt template and names no model: a prompt being built, not a generation.

    The OpenInference Haystack instrumentor gives a ``PromptBuilder`` component the ``LLM`` kind, with the
    template and the rendered prompt as ``output.value``. Read as a generation, the prompt (which numbers the
    documents ``[1]``, ``[2]``, ...) became the answer whenever no later generation had text: a generator
    component the instrumentor did not recognise as one (a class without ``Generator`` in its name whose
    ``replies`` are typed ``list[str]``, not ``List[str]``), so every document the prompt lists counted as
    validly cited. A model's own call names its model (LlamaIndex's ``predict``, which also fills a template,
    records ``llm.model_name``) or reports output messages or choices. A model call that names no model (a
    custom LangChain LLM, ``LlamaCpp``) still reports its request (:data:`~rag_confidence.semconv.
    OI_LLM_CALL_KEYS`), and it carries the template too when it runs inside ``using_prompt_template(...)``:
    it stays a generation.
    """
    return semconv.OI_LLM_PROMPT_TEMPLATE in attributes and semconv.OI_LLM_CALL_KEYS.isdisjoint(attributes)


def _output_messages_text(attributes: Mapping[str, Any], reader: Reader) -> tuple[str | None, bool]:
    """The answer text of the output messages, and whether they hold no text at all (not even hidden): a model
    call that answered with tool calls only, whose ``output.value`` is no answer text.

    Messages are alternatives only when the call asked for several (its invocation parameters say so, or, with
    those hidden, its recorded response holds several choices or candidates): the OpenAI instrumentor writes one
    per choice of a Chat Completions call with ``n`` > 1 (the Google GenAI one per candidate, LangChain's per
    generation), and an application answers with the first, as ``choices[0]``. Otherwise they are parts of one
    answer: a Responses call's messages are its output items (a ``file_search_call``, a reasoning item, one
    ``message`` or several), and the answer an application shows, ``output_text``, is every message item's
    text in order. A thinking message is never the answer.
    """
    if not _has_prefix(attributes, semconv.OI_LLM_OUTPUT_MESSAGES):
        return None, False
    textless = True
    texts: list[str] = []
    for message in indexed(attributes, semconv.OI_LLM_OUTPUT_MESSAGES, reader):
        role = message.get(semconv.OI_MESSAGE_ROLE)
        # A tool's result recorded among the outputs (Gemini's Interactions API under OpenInference writes the
        # function results it ran before the model's message) is what the model read, not what it answered.
        if not is_answer_role(role, reader) or is_thinking_role(role):
            continue
        raw = message.get(semconv.OI_MESSAGE_CONTENT)
        content = unredacted(raw)
        if isinstance(content, str):
            texts.append(content)
            continue
        parts = _text_parts(message, reader)
        if parts:
            texts.append(_join_parts(parts))
            continue
        if raw is not None or any(key.startswith(_CONTENTS_PREFIX) for key in message):
            textless = False  # text there but hidden (or not text): the next source may say it
    if not texts:
        return None, textless
    if len(texts) == 1 or _asks_for_choices(attributes, reader):
        return texts[0], False
    return _join_parts(texts), False


# ``n`` (OpenAI, LangChain's ChatOpenAI), ``candidate_count`` / ``candidateCount`` (Gemini) asking for more than
# one choice, anywhere in the recorded invocation parameters (Gemini's sit in a nested config).
_CHOICE_COUNT = re.compile(r'"(?:n|candidate_count|candidateCount)"\s*:\s*0*([2-9]|[1-9][0-9]+)\b')


_CHOICE_LISTS = (semconv.OPENAI_CHAT_CHOICES, semconv.GEMINI_CANDIDATES)


def _asks_for_choices(attributes: Mapping[str, Any], reader: Reader) -> bool:
    # Read only for a span with two or more output messages of text: rare, so the search costs nothing elsewhere.
    parameters = attributes.get(semconv.OI_LLM_INVOCATION_PARAMETERS)
    if isinstance(parameters, str):
        return _CHOICE_COUNT.search(parameters) is not None
    # Parameters hidden (``TraceConfig(hide_llm_invocation_parameters=True)``): the response the instrumentor
    # recorded says how many alternatives it holds, a Chat Completion's ``choices`` or Gemini's ``candidates``
    # (a Responses call's items are ``output``, parts of one answer).
    output = attributes.get(semconv.OI_OUTPUT_VALUE)
    response = reader.maybe_mapping(output) if type(output) is str else None
    if response is None:
        return False
    for key in _CHOICE_LISTS:
        listed = response.get(key)
        if isinstance(listed, list) and len(listed) > 1:
            return True
    return False


_FIRST_CHOICE_TEXT = f"{semconv.OI_LLM_CHOICES}.0.{semconv.OI_COMPLETION_TEXT}"


def _choice_text(attributes: Mapping[str, Any], reader: Reader) -> str | None:
    # Choices are alternatives (``n`` > 1), not parts: the first is the answer, as ``choices[0]`` is in an app.
    if _FIRST_CHOICE_TEXT not in attributes and not _has_prefix(attributes, semconv.OI_LLM_CHOICES):
        return None
    for choice in indexed(attributes, semconv.OI_LLM_CHOICES, reader):
        text = unredacted(choice.get(semconv.OI_COMPLETION_TEXT))
        if isinstance(text, str):
            return text
    return None


_CONTENTS_PREFIX = semconv.OI_MESSAGE_CONTENTS + "."


def _text_parts(message: Mapping[str, Any], reader: Reader) -> list[str]:
    """The texts of a message's ``text`` parts, in index order. A part without a type is text; any other type
    (Anthropic's thinking blocks are ``reasoning``) is no part of the answer."""
    texts: dict[int, Any] = {}
    types: dict[int, Any] = {}
    for key, value in message.items():
        if not key.startswith(_CONTENTS_PREFIX):
            continue
        index_text, _, rest = key[len(_CONTENTS_PREFIX) :].partition(".")
        if rest == semconv.OI_MESSAGE_CONTENT_TEXT:
            target = texts
        elif rest == semconv.OI_MESSAGE_CONTENT_TYPE:
            target = types
        else:
            continue
        if not index_text.isdigit():
            reader.skip()
            continue
        target[int(index_text)] = value
    parts = []
    for index in sorted(texts):
        text = unredacted(texts[index])
        if isinstance(text, str) and types.get(index, semconv.OI_MESSAGE_CONTENT_TYPE_TEXT) == (
            semconv.OI_MESSAGE_CONTENT_TYPE_TEXT
        ):
            parts.append(text)
    return parts


_SENTENCE_ENDS = (".", "!", "?")


def _join_parts(parts: list[str]) -> str:
    # Parts are pieces of one text (Anthropic splits an answer at each cited passage, mid-sentence): joined as
    # they are, except that a part ending a sentence gets the space citation counting splits sentences on
    # (``citations._SENTENCE_BREAK``) when the next part does not bring one.
    joined = parts[0]
    for part in parts[1:]:
        if joined.endswith(_SENTENCE_ENDS) and part and not part[0].isspace():
            joined += " "
        joined += part
    return joined


def _output_value_text(
    attributes: Mapping[str, Any], reader: Reader, finish_reasons: list[str]
) -> str | None:
    output = unredacted(attributes.get(semconv.OI_OUTPUT_VALUE))
    if not isinstance(output, str):
        if output is not None:
            reader.skip()
        return None
    if attributes.get(semconv.OI_OUTPUT_MIME_TYPE) != "application/json":
        return output
    parsed = reader.json(output)
    generations = parsed.get("generations") if isinstance(parsed, Mapping) else None
    if not isinstance(generations, Sequence) or isinstance(generations, str):
        # JSON that is not LangChain's LLMResult: it may be a structured answer, read as text further on.
        return output
    texts = []
    for batch in generations:
        for generation in batch if isinstance(batch, Sequence) and not isinstance(batch, str) else ():
            if not isinstance(generation, Mapping):
                continue
            if isinstance(generation.get("text"), str):
                texts.append(generation["text"])
            info = generation.get("generation_info")
            if isinstance(info, Mapping) and isinstance(info.get("finish_reason"), str):
                finish_reasons.append(info["finish_reason"].lower())
    return "\n".join(texts) if texts else None
