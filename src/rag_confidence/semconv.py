"""Every span attribute, event and metric name that rag-confidence reads or writes.

This is the one place for names: ``signals/``, ``otel/`` and ``gateway/`` import from here and never spell a
name as a string literal. Foreign conventions (OpenInference, OTel GenAI, OpenLLMetry) are mirrored here rather
than imported from their packages so the core install does not depend on them, and so that a rename upstream
is one edit here.
"""

from __future__ import annotations

from typing import Final

# --------------------------------------------------------------------------------------------------------------
# Our own inputs: ``rag.signal.*`` (snake_case of the ScoringInputs fields)
# --------------------------------------------------------------------------------------------------------------
RAG_SIGNAL_PREFIX: Final = "rag.signal."
RAG_SIGNAL_SUPPORT_LEVEL: Final = "rag.signal.support_level"
RAG_SIGNAL_HAS_CONFLICT: Final = "rag.signal.has_conflict"
RAG_SIGNAL_CONFLICTING_CANDIDATE_COUNT: Final = "rag.signal.conflicting_candidate_count"
RAG_SIGNAL_FAITHFULNESS_SCORE: Final = "rag.signal.faithfulness_score"
RAG_SIGNAL_ANSWER_RELEVANCE_SCORE: Final = "rag.signal.answer_relevance_score"
RAG_SIGNAL_CITATION_COUNT: Final = "rag.signal.citation_count"
RAG_SIGNAL_CITATION_COVERAGE_SCORE: Final = "rag.signal.citation_coverage_score"
RAG_SIGNAL_INVALID_CITATION_COUNT: Final = "rag.signal.invalid_citation_count"
RAG_SIGNAL_QUERY_COMPLEXITY: Final = "rag.signal.query_complexity"
RAG_SIGNAL_DOCUMENTS_SILENT: Final = "rag.signal.documents_silent"
RAG_SIGNAL_REQUIRES_EXPERT_REVIEW: Final = "rag.signal.requires_expert_review"
RAG_SIGNAL_AMBIGUITY_NOTES: Final = "rag.signal.ambiguity_notes"
RAG_SIGNAL_EXTERNAL_CONSTRAINT_NOTE: Final = "rag.signal.external_constraint_note"
RAG_SIGNAL_CLAIMS_TOTAL: Final = "rag.signal.claims.total"
RAG_SIGNAL_CLAIMS_SUPPORTED: Final = "rag.signal.claims.supported"
RAG_SIGNAL_CLAIMS_UNSUPPORTED: Final = "rag.signal.claims.unsupported"
RAG_SIGNAL_CLAIMS_CONTRADICTED: Final = "rag.signal.claims.contradicted"
RAG_SIGNAL_CORPUS_TYPE_COUNT: Final = "rag.signal.corpus.type_count"
RAG_SIGNAL_CORPUS_PRESENT_TYPES: Final = "rag.signal.corpus.present_types"
RAG_SIGNAL_CORPUS_MISSING_RELEVANT_TYPE: Final = "rag.signal.corpus.missing_relevant_type"
RAG_SIGNAL_CORPUS_MISSING_TYPES: Final = "rag.signal.corpus.missing_types"
RAG_SIGNAL_INDEX_PREFIX: Final = "rag.signal.index."
RAG_SIGNAL_INDEX_EXPECTED_EMBEDDING_MODEL_VERSION: Final = "rag.signal.index.expected_embedding_model_version"
RAG_SIGNAL_INDEX_ACTUAL_EMBEDDING_MODEL_VERSION: Final = "rag.signal.index.actual_embedding_model_version"
RAG_SIGNAL_INDEX_SOURCE_VERSION_MATCH_RATIO: Final = "rag.signal.index.source_version_match_ratio"
RAG_SIGNAL_INDEX_STALE_INDEXED_DOCUMENT_RATIO: Final = "rag.signal.index.stale_indexed_document_ratio"
RAG_SIGNAL_INDEX_FAILED_INGESTION_COUNT: Final = "rag.signal.index.failed_ingestion_count"
RAG_SIGNAL_INDEX_ACL_FILTER_CONFIRMED: Final = "rag.signal.index.acl_filter_confirmed"
RAG_SIGNAL_INDEX_DELETED_SOURCE_LEAKAGE_COUNT: Final = "rag.signal.index.deleted_source_leakage_count"

# Marks a span as the answer span (``mark_answer()`` sets it).
RAG_ANSWER: Final = "rag.answer"

# --------------------------------------------------------------------------------------------------------------
# Our outputs on the answer span: ``rag.confidence.*``
# --------------------------------------------------------------------------------------------------------------
RAG_CONFIDENCE_TOTAL: Final = "rag.confidence.total"
RAG_CONFIDENCE_LABEL: Final = "rag.confidence.label"
RAG_CONFIDENCE_LABEL_COLOR: Final = "rag.confidence.label_color"
RAG_CONFIDENCE_ACTION: Final = "rag.confidence.action"
RAG_CONFIDENCE_ACTION_REASON: Final = "rag.confidence.action_reason"
RAG_CONFIDENCE_TIER1_SCORE: Final = "rag.confidence.tier1.score"
RAG_CONFIDENCE_TIER1_LABEL: Final = "rag.confidence.tier1.label"
RAG_CONFIDENCE_TIER2_SCORE: Final = "rag.confidence.tier2.score"
RAG_CONFIDENCE_TIER2_LABEL: Final = "rag.confidence.tier2.label"
RAG_CONFIDENCE_DIMENSION_PREFIX: Final = "rag.confidence.dimension."
RAG_CONFIDENCE_WARNINGS: Final = "rag.confidence.warnings"
RAG_CONFIDENCE_MISSING_SIGNALS: Final = "rag.confidence.missing_signals"
RAG_CONFIDENCE_ACTIVE_DIMENSIONS: Final = "rag.confidence.active_dimensions"
RAG_CONFIDENCE_CANDIDATES: Final = "rag.confidence.candidates"
RAG_CONFIDENCE_DERIVED_SIGNALS: Final = "rag.confidence.derived_signals"
RAG_CONFIDENCE_ALGORITHM_VERSION: Final = "rag.confidence.algorithm_version"
RAG_CONFIDENCE_SCHEMA_VERSION: Final = "rag.confidence.schema_version"


def dimension_score_attribute(name: str) -> str:
    """``rag.confidence.dimension.<name>.score``: the dimension's normalized 0-100 value."""
    return f"{RAG_CONFIDENCE_DIMENSION_PREFIX}{name}.score"


def dimension_raw_attribute(name: str) -> str:
    """``rag.confidence.dimension.<name>.raw``."""
    return f"{RAG_CONFIDENCE_DIMENSION_PREFIX}{name}.raw"


def dimension_max_attribute(name: str) -> str:
    """``rag.confidence.dimension.<name>.max``."""
    return f"{RAG_CONFIDENCE_DIMENSION_PREFIX}{name}.max"


# --------------------------------------------------------------------------------------------------------------
# Metrics (instrument names, units, and the bounded attribute keys recorded on them)
# --------------------------------------------------------------------------------------------------------------
#: Instrumentation scope of what the library records: the decorator's spans, the confidence instruments, the
#: processor's own metrics and the evaluation event's log records.
INSTRUMENTATION_SCOPE: Final = "rag_confidence"
#: Instrumentation scope of the gateway's own metrics.
GATEWAY_INSTRUMENTATION_SCOPE: Final = "rag_confidence.gateway"
METRIC_SCORE: Final = "rag.confidence.score"
METRIC_TIER_SCORE: Final = "rag.confidence.tier.score"
METRIC_DIMENSION_SCORE: Final = "rag.confidence.dimension.score"
METRIC_WARNINGS: Final = "rag.confidence.warnings"
METRIC_SCORING_DURATION: Final = "rag.confidence.scoring.duration"
UNIT_SCORE: Final = "{score}"
UNIT_WARNING: Final = "{warning}"
UNIT_SECONDS: Final = "s"
SCORE_BUCKETS: Final = (0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0)

METRIC_ATTR_LABEL: Final = "rag.confidence.label"
METRIC_ATTR_ACTION: Final = "rag.confidence.action"
METRIC_ATTR_TIER: Final = "rag.confidence.tier"
METRIC_ATTR_DIMENSION: Final = "rag.confidence.dimension"
METRIC_ATTR_WARNING_CODE: Final = "rag.confidence.warning.code"
METRIC_ATTR_WARNING_SEVERITY: Final = "rag.confidence.warning.severity"
TIER1: Final = "tier1"
TIER2: Final = "tier2"

# --------------------------------------------------------------------------------------------------------------
# OpenTelemetry GenAI semantic conventions (development status)
# --------------------------------------------------------------------------------------------------------------
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_OPERATION_RETRIEVAL: Final = "retrieval"
GEN_AI_OPERATION_EXECUTE_TOOL: Final = "execute_tool"
GEN_AI_OPERATION_TEXT_COMPLETION: Final = "text_completion"
GEN_AI_OPERATION_GENERATE_CONTENT: Final = "generate_content"
GEN_AI_OPERATION_EMBEDDINGS: Final = "embeddings"
GEN_AI_DATA_SOURCE_ID: Final = "gen_ai.data_source.id"
GEN_AI_RETRIEVAL_QUERY_TEXT: Final = "gen_ai.retrieval.query.text"
GEN_AI_RETRIEVAL_DOCUMENTS: Final = "gen_ai.retrieval.documents"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
#: The answer as a span event, the form the GenAI conventions gave it before ``gen_ai.output.messages``: one
#: ``gen_ai.choice`` event per choice, its body as JSON in the ``gen_ai.event.content`` attribute
#: (``{"index", "finish_reason", "message": {"role", "content"}}``; a bare string ``message`` for a text
#: completion). Semantic Kernel .NET (``ModelDiagnostics.cs``, sensitive diagnostics on) and Azure AI Inference
#: (``azure.ai.inference.tracing``, content recording on) still write it.
GEN_AI_CHOICE_EVENT: Final = "gen_ai.choice"
GEN_AI_EVENT_CONTENT: Final = "gen_ai.event.content"
#: Read from the answer's generation span and written on the evaluation event, which the GenAI conventions
#: recommend to correlate with the response it evaluates.
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
GEN_AI_EVALUATION_RESULT: Final = "gen_ai.evaluation.result"
GEN_AI_EVALUATION_NAME: Final = "gen_ai.evaluation.name"
GEN_AI_EVALUATION_SCORE_VALUE: Final = "gen_ai.evaluation.score.value"
GEN_AI_EVALUATION_SCORE_LABEL: Final = "gen_ai.evaluation.score.label"
GEN_AI_EVALUATION_EXPLANATION: Final = "gen_ai.evaluation.explanation"
# Value of ``gen_ai.evaluation.name`` on the evaluation event we emit.
RAG_CONFIDENCE_EVALUATION_NAME: Final = "rag.confidence"
# The name of an event sent as a log record, where the SDK's Events API (before 1.44) put it: an attribute.
# Newer producers set the log record's ``event_name`` field instead.
EVENT_NAME: Final = "event.name"

# --------------------------------------------------------------------------------------------------------------
# Signal extraction (``rag_confidence.signals``): names we read from other conventions, and our diagnostics
# --------------------------------------------------------------------------------------------------------------
# Our own: names a retrieval span's method (``vector``, ``bm25``) for hybrid retrieval; wins over every other rule.
RAG_RETRIEVAL_METHOD: Final = "rag.retrieval.method"
# Diagnostics written next to the scorecard on the answer span (all under ``rag.confidence.``).
RAG_CONFIDENCE_GENERATION_TRUNCATED: Final = "rag.confidence.generation.truncated"
RAG_CONFIDENCE_GENERATION_FINISH_REASON: Final = "rag.confidence.generation.finish_reason"
RAG_CONFIDENCE_SIGNALS_SKIPPED: Final = "rag.confidence.signals.skipped"
RAG_CONFIDENCE_RETRIEVAL_SPANS: Final = "rag.confidence.retrieval.spans"
RAG_CONFIDENCE_RETRIEVAL_SCORES_RESCALED: Final = "rag.confidence.retrieval.scores_rescaled"
RAG_CONFIDENCE_CITATION_MARKERS: Final = "rag.confidence.citation.markers"
#: Sources a response's own citations name (Anthropic's) that match no document the generator was shown: not
#: invalid (the API cites only what the request holds), but with any of them ``citationCount`` is not derived.
RAG_CONFIDENCE_CITATION_UNMATCHED_SOURCES: Final = "rag.confidence.citation.unmatched_sources"
#: Documents a retrieval reported without any score (left out of the candidates; they still count for citations).
RAG_CONFIDENCE_RETRIEVAL_UNSCORED_DOCUMENTS: Final = "rag.confidence.retrieval.unscored_documents"
#: Documents a retrieval span reported but lost to the SDK's attribute limit (the oldest attributes go first).
RAG_CONFIDENCE_RETRIEVAL_DROPPED_DOCUMENTS: Final = "rag.confidence.retrieval.dropped_documents"
#: Result events (one per hit) vector-DB retrieval spans lost to the SDK's event count limit (the oldest, so
#: the best hits, go first).
RAG_CONFIDENCE_RETRIEVAL_DROPPED_RESULT_EVENTS: Final = "rag.confidence.retrieval.dropped_result_events"
#: Retrieval spans whose document list could not be read at all (JSON cut by the SDK's value length limit).
RAG_CONFIDENCE_RETRIEVAL_UNREADABLE_SPANS: Final = "rag.confidence.retrieval.unreadable_spans"

# GenAI (more of it): generation spans, output messages and legacy completion attributes.
GEN_AI_OPERATION_CHAT: Final = "chat"
#: LiteLLM's own otel callback writes its call type as the operation of a model call other than a synchronous
#: ``completion`` (which it writes as ``chat``), unless the latest experimental GenAI conventions are opted in.
LITELLM_OPERATION_ACOMPLETION: Final = "acompletion"
LITELLM_OPERATION_ATEXT_COMPLETION: Final = "atext_completion"
#: ... and for its Responses API bridge (``litellm.responses`` / ``aresponses``) and its Anthropic Messages
#: pass-through (``litellm.anthropic.messages.acreate``, written as ``anthropic_messages`` in litellm 1.110),
#: which record the answer's text in ``gen_ai.output.messages`` as ``completion`` does.
LITELLM_OPERATION_RESPONSES: Final = "responses"
LITELLM_OPERATION_ARESPONSES: Final = "aresponses"
LITELLM_OPERATION_ANTHROPIC_MESSAGES: Final = "anthropic_messages"
GEN_AI_COMPLETION_PREFIX: Final = "gen_ai.completion."
GEN_AI_FINISH_REASON_LENGTH: Final = "length"
#: Other spellings of "stopped on length" that instrumentors pass through from providers: Anthropic's and Bedrock's
#: ``max_tokens``, Gemini's ``max_output_tokens``, and Anthropic's ``model_context_window_exceeded`` (the output
#: ran into the context window; anthropic ``types/stop_reason.py``, recorded as ``llm.finish_reason`` by
#: openinference-instrumentation-anthropic ``_content.py`` ``_get_output_message_attributes``).
FINISH_REASON_MAX_TOKENS: Final = "max_tokens"
FINISH_REASON_MAX_OUTPUT_TOKENS: Final = "max_output_tokens"
FINISH_REASON_CONTEXT_WINDOW_EXCEEDED: Final = "model_context_window_exceeded"
#: Finish reasons under the singular key Semantic Kernel writes on its chat spans (semantic-kernel
#: ``dotnet/src/InternalUtilities/src/Diagnostics/ModelDiagnostics.cs`` ``ModelDiagnosticsTags.FinishReason``,
#: ``python/.../model_diagnostics/gen_ai_attributes.py`` ``FINISH_REASON``), read where the conventions'
#: ``gen_ai.response.finish_reasons`` is absent. .NET writes a JSON array in a string (``["Stop"]``), as
#: Spring AI does under the plural key (``DefaultChatModelObservationConvention.responseFinishReasons``:
#: Micrometer key values are strings).
SK_RESPONSE_FINISH_REASON: Final = "gen_ai.response.finish_reason"
# Message roles that speak to a model, never for it (GenAI ``user``/``system``/``tool``, and OpenAI's ``developer``
# and legacy ``function``): an output message under one of them is no answer. Any other role is the model's
# own, whatever a producer calls it (``assistant``, Gemini's ``model``, OpenLLMetry's ``unknown`` for a streamed
# LangChain ``AIMessageChunk``).
GEN_AI_INPUT_ROLES: Final = frozenset({"user", "system", "tool", "developer", "function"})

# Vercel AI SDK telemetry before the GenAI conventions (``experimental_telemetry`` in ``ai`` 3-6, and
# ``LegacyOpenTelemetry`` in ``@ai-sdk/otel``: vercel/ai ``packages/otel/src/legacy-open-telemetry.ts``). Each
# model call is a ``ai.generateText.doGenerate`` / ``ai.streamText.doStream`` span with the text in
# ``ai.response.text`` and the reason in ``ai.response.finishReason``; ``gen_ai.response.finish_reasons`` is
# there too, but no ``gen_ai.operation.name`` and no ``gen_ai.output.messages``.
AI_SDK_OPERATION_ID: Final = "ai.operationId"
AI_SDK_MODEL_CALL_OPERATIONS: Final = frozenset({"ai.generateText.doGenerate", "ai.streamText.doStream"})
AI_SDK_RESPONSE_TEXT: Final = "ai.response.text"
AI_SDK_RESPONSE_FINISH_REASON: Final = "ai.response.finishReason"

# DSPy (``dspy`` 3.x) ``ChatAdapter``, DSPy's default adapter: a model's output text holds each output field of
# the signature under a header line ``[[ ## <field> ## ]]``, and ends with the header of an empty field
# ``completed`` (dspy ``adapters/chat_adapter.py``, ``field_header_pattern`` and ``format_field_structure``). Read
# from the answer text of any convention, since the format is in the text, not in a span attribute.
DSPY_FIELD_HEADER_OPEN: Final = "[[ ## "
DSPY_FIELD_HEADER_CLOSE: Final = " ## ]]"
DSPY_COMPLETED_FIELD: Final = "completed"

# OpenInference
OPENINFERENCE_SPAN_KIND: Final = "openinference.span.kind"
OPENINFERENCE_KIND_RETRIEVER: Final = "RETRIEVER"
OPENINFERENCE_KIND_RERANKER: Final = "RERANKER"
OPENINFERENCE_KIND_LLM: Final = "LLM"
OPENINFERENCE_KIND_EVALUATOR: Final = "EVALUATOR"
OPENINFERENCE_KIND_GUARDRAIL: Final = "GUARDRAIL"
OPENINFERENCE_KIND_TOOL: Final = "TOOL"
OPENINFERENCE_KIND_EMBEDDING: Final = "EMBEDDING"
OPENINFERENCE_KIND_CHAIN: Final = "CHAIN"
# The span the OpenInference LlamaIndex tracer records for the ReAct agent's parser of each model turn: its
# ``output.value`` is the parsed step as JSON (``{"thought", "response"}`` for a final answer).
LLAMAINDEX_REACT_PARSER_SPAN: Final = "ReActOutputParser.parse"
OI_RETRIEVAL_DOCUMENTS: Final = "retrieval.documents"
OI_RERANKER_OUTPUT_DOCUMENTS: Final = "reranker.output_documents"
OI_RERANKER_QUERY: Final = "reranker.query"
OI_INPUT_VALUE: Final = "input.value"
OI_LLM_MODEL_NAME: Final = "llm.model_name"
OI_LLM_FINISH_REASON: Final = "llm.finish_reason"
#: The template an ``LLM`` span filled (openinference-semantic-conventions ``SpanAttributes.
#: LLM_PROMPT_TEMPLATE``); openinference-instrumentation-haystack sets it on ``PromptBuilder`` spans, which it
#: also gives the ``LLM`` kind although no model is called there.
OI_LLM_PROMPT_TEMPLATE: Final = "llm.prompt_template.template"
#: Attributes only a model call writes on an OpenInference ``LLM`` span (a ``PromptBuilder`` span has none): the
#: request's parameters and prompts (every LangChain LLM span: ``invocation_params`` and, for a completion
#: model, ``llm.prompts``), its provider and system, its finish reason. The prompt template alone says nothing:
#: ``using_prompt_template(...)`` (openinference-instrumentation context attributes) sets it on every span
#: inside the block, model calls included.
OI_LLM_INVOCATION_PARAMETERS: Final = "llm.invocation_parameters"
OI_LLM_PROMPTS: Final = "llm.prompts"
OI_LLM_PROVIDER: Final = "llm.provider"
OI_LLM_SYSTEM: Final = "llm.system"
OI_LLM_CALL_KEYS: Final = frozenset(
    {
        OI_LLM_MODEL_NAME,
        OI_LLM_FINISH_REASON,
        OI_LLM_INVOCATION_PARAMETERS,
        OI_LLM_PROMPTS,
        OI_LLM_PROVIDER,
        OI_LLM_SYSTEM,
    }
)
# OpenInference ``metadata`` span attribute (JSON object; LangChain run metadata lands here).
OI_METADATA: Final = "metadata"
# LangChain's own retriever name in run metadata (``bm25`` for ``BM25Retriever``), seen by both tracers.
LANGCHAIN_LS_RETRIEVER_NAME: Final = "ls_retriever_name"
OI_DOCUMENT_ID: Final = "document.id"
OI_DOCUMENT_SCORE: Final = "document.score"
OI_DOCUMENT_CONTENT: Final = "document.content"
OI_DOCUMENT_METADATA: Final = "document.metadata"
OI_OUTPUT_VALUE: Final = "output.value"
OI_OUTPUT_MIME_TYPE: Final = "output.mime_type"
#: The tool a span called (OpenInference ``TOOL`` spans; the OpenAI Agents tracer keeps it on a function tool it
#: was told to record as a ``RETRIEVER``).
OI_TOOL_NAME: Final = "tool.name"
OI_LLM_OUTPUT_MESSAGES: Final = "llm.output_messages"
OI_MESSAGE_CONTENT: Final = "message.content"
OI_MESSAGE_ROLE: Final = "message.role"
#: Legacy Completions API choices (openinference-semantic-conventions ``SpanAttributes.LLM_CHOICES`` and
#: ``ChoiceAttributes.COMPLETION_TEXT``; openinference-instrumentation-openai
#: ``_response_attributes_extractor.py`` ``_get_attributes_from_completion``): ``llm.choices.{i}.completion.text``.
OI_LLM_CHOICES: Final = "llm.choices"
OI_COMPLETION_TEXT: Final = "completion.text"
OI_MESSAGE_CONTENTS: Final = "message.contents"
OI_MESSAGE_CONTENT_TEXT: Final = "message_content.text"
#: A message content part's type (openinference-semantic-conventions ``MessageContentAttributes.
#: MESSAGE_CONTENT_TYPE``): ``text``, ``image``, and ``reasoning`` for thinking blocks
#: (openinference-instrumentation-anthropic ``_content.py``).
OI_MESSAGE_CONTENT_TYPE: Final = "message_content.type"
OI_MESSAGE_CONTENT_TYPE_TEXT: Final = "text"
#: What an OpenInference ``TraceConfig`` writes in place of a hidden value (openinference-instrumentation
#: ``config.py`` ``REDACTED_VALUE``: ``hide_retrieval_documents`` for document content and metadata,
#: ``hide_output_text`` for message text, ``hide_outputs`` for ``output.value``, ``hide_choices``): no data.
OI_REDACTED_VALUE: Final = "__REDACTED__"
#: OpenAI Responses API objects as the OpenInference OpenAI instrumentor records them in an LLM span's
#: ``output.value`` (openai ``types/responses``: ``ResponseFileSearchToolCall``, ``AnnotationFileCitation``):
#: the output item of a hosted ``file_search`` and the annotation citing a file; the method name its results
#: are scored under.
#: A Response object's own items (``output``), each with a ``type``.
OPENAI_RESPONSE_OUTPUT: Final = "output"
OPENAI_ITEM_TYPE: Final = "type"
OPENAI_FILE_SEARCH_CALL: Final = "file_search_call"
OPENAI_FILE_CITATION: Final = "file_citation"
OPENAI_FILE_SEARCH_METHOD: Final = "file_search"
#: A Response object's ``object`` and the ``status`` of one the model stopped early (``max_output_tokens``,
#: ``content_filter``, given as ``incomplete_details.reason``): a Response has no finish reason of its own.
OPENAI_RESPONSE_OBJECT_KEY: Final = "object"
OPENAI_RESPONSE_OBJECT: Final = "response"
OPENAI_RESPONSE_STATUS: Final = "status"
OPENAI_RESPONSE_STATUS_INCOMPLETE: Final = "incomplete"
OPENAI_RESPONSE_INCOMPLETE_DETAILS: Final = "incomplete_details"
OPENAI_RESPONSE_INCOMPLETE_REASON: Final = "reason"
#: A Chat Completion's (or a streamed one's, as the OpenInference instrumentor accumulates it) list of choices in
#: ``output.value``: one per ``n``, alternatives of which an application shows the first.
OPENAI_CHAT_CHOICES: Final = "choices"
#: OpenAI's citations of web pages (hosted web search: a Responses ``web_search`` tool, a Chat Completions
#: search model), as the OpenInference OpenAI instrumentor records them in ``output.value`` (openai
#: ``types/chat/chat_completion_message.py`` ``Annotation``: ``{"type": "url_citation", "url_citation": {"url",
#: "title", "start_index", "end_index"}}`` in ``choices[i].message.annotations``; ``types/responses/
#: response_output_text.py`` ``AnnotationURLCitation``: the same keys flat, in an ``output_text`` part's
#: ``annotations``). The indices bound the cited span of the text (the inline Markdown link OpenAI writes).
OPENAI_ANNOTATIONS: Final = "annotations"
OPENAI_URL_CITATION: Final = "url_citation"
OPENAI_URL: Final = "url"
OPENAI_START_INDEX: Final = "start_index"
OPENAI_END_INDEX: Final = "end_index"
OPENAI_CHAT_MESSAGE: Final = "message"
OPENAI_CHAT_CONTENT: Final = "content"
OPENAI_MESSAGE_ITEM: Final = "message"
OPENAI_OUTPUT_TEXT: Final = "output_text"
OPENAI_OUTPUT_TEXT_TEXT: Final = "text"
#: Document metadata keys that hold the URL a document came from (LangChain's web loaders write ``source``),
#: matched against a ``url_citation``'s URL when no document id equals it.
URL_METADATA_KEYS: Final = ("url", "source", "link")
#: Gemini grounding as the OpenInference Google GenAI instrumentor records it in an LLM span's ``output.value``: the
#: ``GenerateContentResponse`` dumped by field name (google-genai ``types.py``: ``Candidate.grounding_metadata``,
#: ``GroundingMetadata.grounding_chunks`` / ``grounding_supports``, ``GroundingSupport.grounding_chunk_indices``
#: and ``segment``; the chunk kinds ``retrieved_context`` (Vertex AI Search, RAG Engine, file search stores),
#: ``web`` (Google Search), ``maps``, ``image``); the method name its chunks are scored under.
GEMINI_CANDIDATES: Final = "candidates"
GEMINI_GROUNDING_METADATA: Final = "grounding_metadata"
GEMINI_GROUNDING_CHUNKS: Final = "grounding_chunks"
GEMINI_GROUNDING_SUPPORTS: Final = "grounding_supports"
GEMINI_GROUNDING_CHUNK_INDICES: Final = "grounding_chunk_indices"
GEMINI_SEGMENT: Final = "segment"
GEMINI_RETRIEVED_CONTEXT: Final = "retrieved_context"
GEMINI_RAG_CHUNK: Final = "rag_chunk"
GEMINI_CUSTOM_METADATA: Final = "custom_metadata"
GEMINI_WEB: Final = "web"
GEMINI_MAPS: Final = "maps"
GEMINI_IMAGE: Final = "image"
GEMINI_GROUNDING_METHOD: Final = "grounding"
#: Anthropic citations as the OpenInference Anthropic instrumentor records them: the ``Message`` in an LLM span's
#: ``output.value`` (anthropic ``types``: ``TextBlock.citations``, ``CitationCharLocation``,
#: ``CitationPageLocation``, ``CitationContentBlockLocation``, ``CitationsSearchResultLocation``) and the
#: request's ``document`` blocks in its ``input.value``.
ANTHROPIC_MESSAGE: Final = "message"
ANTHROPIC_CITATIONS: Final = "citations"
ANTHROPIC_DOCUMENT: Final = "document"
ANTHROPIC_CHAR_LOCATION: Final = "char_location"
ANTHROPIC_PAGE_LOCATION: Final = "page_location"
ANTHROPIC_CONTENT_BLOCK_LOCATION: Final = "content_block_location"
ANTHROPIC_SEARCH_RESULT_LOCATION: Final = "search_result_location"
#: AWS Bedrock Knowledge Bases (``bedrock-agent-runtime``) as openinference-instrumentation-bedrock records them
#: (``_rag_wrappers.py``, ``_attribute_extractor.py``): ``retrieve`` and ``retrieve_and_generate`` are both
#: ``RETRIEVER`` spans under these names (the stream's under its own), each document's ``document.metadata`` the
#: JSON ``{"location", "metadata", "type"}`` of the reference (its location, the knowledge base's metadata map,
#: the content type), the request's parameters in ``llm.invocation_parameters`` (``knowledgeBaseId`` for
#: ``retrieve``; ``retrieveAndGenerateConfiguration`` for ``retrieve_and_generate``), and the generated text of
#: ``retrieve_and_generate`` in ``output.value``.
BEDROCK_RETRIEVE_AND_GENERATE_SPANS: Final = frozenset(
    {"bedrock.retrieve_and_generate", "bedrock_agent.retrieve_and_generate_stream"}
)
BEDROCK_KNOWLEDGE_BASE_SPANS: Final = BEDROCK_RETRIEVE_AND_GENERATE_SPANS | {"bedrock.retrieve"}
BEDROCK_RAG_CONFIGURATION: Final = "retrieveAndGenerateConfiguration"
BEDROCK_KB_CONFIGURATION: Final = "knowledgeBaseConfiguration"
BEDROCK_KNOWLEDGE_BASE_ID: Final = "knowledgeBaseId"
BEDROCK_DOCUMENT_LOCATION: Final = "location"
BEDROCK_DOCUMENT_METADATA: Final = "metadata"
BEDROCK_DOCUMENT_TYPE: Final = "type"
#: Keys Bedrock itself puts into every reference's metadata map (beside the attributes of the source's
#: ``.metadata.json``): the chunk's id, its source document's URI, the data source.
BEDROCK_KB_METADATA_PREFIX: Final = "x-amz-bedrock-kb-"
BEDROCK_KB_CHUNK_ID: Final = "x-amz-bedrock-kb-chunk-id"
BEDROCK_KB_SOURCE_URI: Final = "x-amz-bedrock-kb-source-uri"
#: ``RetrievalResultLocation``: one ``<kind>Location`` object per source type, naming the document by ``uri``
#: (S3, Kendra), ``url`` (web, Confluence, Salesforce, SharePoint, OneDrive, Google Drive) or ``id`` (custom).
BEDROCK_LOCATION_NAME_KEYS: Final = ("uri", "url", "id")
OI_EVALUATIONS: Final = "evaluations"
OI_EVALUATION_NAME: Final = "evaluation.name"
OI_EVALUATION_SCORE: Final = "evaluation.score"
OI_EVALUATION_LABEL: Final = "evaluation.label"
OI_ANNOTATIONS: Final = "annotations"
#: Trace-scoped feedback (OpenInference ``spec/annotations.md``, Scope): about the carrying span's trace, recorded
#: once, preferably on the root span; span-scoped ``evaluations.*``/``annotations.*`` describe the span carrying
#: them.
OI_TRACE_EVALUATIONS: Final = "trace.evaluations"
OI_TRACE_ANNOTATIONS: Final = "trace.annotations"
OI_ANNOTATION_NAME: Final = "annotation.name"
OI_ANNOTATION_SCORE: Final = "annotation.score"
OI_ANNOTATION_LABEL: Final = "annotation.label"

# Haystack's own tracer (``haystack.tracing``; the OpenTelemetry backend is ``opentelemetry-haystack`` since
# haystack-ai 3.0): one ``haystack.component.run`` span per component of a pipeline run.
#: The component's class name (``InMemoryBM25Retriever``): the only thing that tells a retriever's span.
HAYSTACK_COMPONENT_TYPE: Final = "haystack.component.type"
#: What the component returned, as JSON; written only with ``HAYSTACK_CONTENT_TRACING_ENABLED=true``.
HAYSTACK_COMPONENT_OUTPUT: Final = "haystack.component.output"

# OpenLLMetry (traceloop)
TRACELOOP_ASSOCIATION_PROPERTIES_PREFIX: Final = "traceloop.association.properties."
TRACELOOP_ENTITY_OUTPUT: Final = "traceloop.entity.output"
#: ``{Class}.task`` (``.workflow`` for a root) under opentelemetry-instrumentation-llamaindex's dispatcher.
TRACELOOP_ENTITY_NAME: Final = "traceloop.entity.name"
TRACELOOP_SPAN_KIND: Final = "traceloop.span.kind"
TRACELOOP_KIND_TOOL: Final = "tool"
GEN_AI_TASK_OUTPUT: Final = "gen_ai.task.output"
GEN_AI_OPERATION_VECTOR_DB_RETRIEVE: Final = "vector_db_retrieve"
DB_SYSTEM: Final = "db.system"
DB_QUERY_RESULT: Final = "db.query.result"
DB_QUERY_RESULT_ID: Final = "db.query.result.id"
DB_QUERY_RESULT_SCORE: Final = "db.query.result.score"
DB_QUERY_RESULT_DISTANCE: Final = "db.query.result.distance"
DB_QUERY_RESULT_METADATA: Final = "db.query.result.metadata"
DB_QUERY_RESULT_DOCUMENT: Final = "db.query.result.document"
DB_SEARCH_RESULT: Final = "db.search.result"
DB_SEARCH_RESULT_ID: Final = "db.search.result.id"
DB_SEARCH_RESULT_SCORE: Final = "db.search.result.score"
DB_SEARCH_RESULT_DISTANCE: Final = "db.search.result.distance"
DB_SEARCH_RESULT_ENTITY: Final = "db.search.result.entity"
#: The index of the query vector a ``db.search.result`` hit answers (opentelemetry-semantic-conventions-ai
#: ``EventAttributes.DB_SEARCH_RESULT_QUERY_ID``; Milvus wrapper.py ``_add_search_result_events``).
DB_SEARCH_QUERY_ID: Final = "db.search.query.id"
#: ``db.system`` values whose result events need reading of their own (opentelemetry-instrumentation-milvus and
#: -marqo wrapper.py).
DB_SYSTEM_MILVUS: Final = "milvus"
DB_SYSTEM_MARQO: Final = "marqo"
#: What opentelemetry-instrumentation-chromadb writes of a ``Collection.query`` call (semconv-ai
#: ``SpanAttributes.CHROMADB_QUERY_{EMBEDDINGS,TEXTS}_COUNT``, wrapper.py ``_set_query_attributes``), one of them
#: whenever the query vectors or texts are passed by keyword: no other Chroma span (``add``, ``get``, the
#: ``SegmentAPI._query`` beneath a query) carries them. Its hits are ``db.query.result`` events, and a query
#: that found nothing has none (wrapper.py ``_add_query_result_events``); ``error.type`` marks one that raised.
CHROMA_QUERY_EMBEDDINGS_COUNT: Final = "db.chroma.query.embeddings_count"
CHROMA_QUERY_TEXTS_COUNT: Final = "db.chroma.query.texts_count"
ERROR_TYPE: Final = "error.type"
#: ``str(search_params)`` of a Milvus ``search`` call (semconv-ai ``SpanAttributes.MILVUS_SEARCH_SEARCH_PARAMS``,
#: set by Milvus wrapper.py ``_set_search_attributes``); its ``metric_type`` key names the metric.
MILVUS_SEARCH_SEARCH_PARAMS: Final = "db.milvus.search.search_params"
MILVUS_METRIC_TYPE: Final = "metric_type"
#: Milvus metric types (pymilvus ``MetricType``, upper case) whose ``distance`` field is a similarity (larger is
#: closer) and those where it is a distance (smaller is closer).
MILVUS_SIMILARITY_METRICS: Final = frozenset({"COSINE", "IP", "BM25"})
MILVUS_DISTANCE_METRICS: Final = frozenset({"L2", "HAMMING", "JACCARD", "MHJACCARD"})
#: A Marqo search hit as Marqo returns it: opentelemetry-instrumentation-marqo wrapper.py
#: ``_set_search_result_attributes`` writes each hit dict as the attributes of a ``db.query.result`` event.
MARQO_HIT_ID: Final = "_id"
MARQO_HIT_SCORE: Final = "_score"
#: OpenLLMetry JS vector-DB instrumentations (``@traceloop/instrumentation-pinecone`` and ``-qdrant``,
#: openllmetry-js ``packages/instrumentation-{pinecone,qdrant}/src/instrumentation.ts``) write each hit as
#: ``db.vector.query.result.{i}.{id,score,metadata}`` "event attributes" through the value ``span.addEvent()``
#: returns, and in the JS SDK that is the span itself: the keys land on the span, next to
#: ``db.vector.query.result.matches_length`` (ai-semantic-conventions ``EventAttributes.VECTOR_DB_QUERY_RESULT_*``).
VECTOR_DB_QUERY_RESULT_MATCHES_LENGTH: Final = "db.vector.query.result.matches_length"
VECTOR_DB_QUERY_RESULT_PREFIX: Final = "db.vector.query.result."
VECTOR_DB_RESULT_ID: Final = "id"
VECTOR_DB_RESULT_SCORE: Final = "score"
VECTOR_DB_RESULT_METADATA: Final = "metadata"
#: The Pinecone JS instrumentation adds each hit's metadata as the attributes of a span event of this name
#: (``{i}`` the hit's position): ``pinecone.query.result.{i}.metadata``.
PINECONE_JS_RESULT_EVENT_PREFIX: Final = "pinecone.query.result."
PINECONE_JS_METADATA_EVENT_SUFFIX: Final = ".metadata"

# --------------------------------------------------------------------------------------------------------------
# In-process OpenTelemetry layer (``rag_confidence.otel``)
# --------------------------------------------------------------------------------------------------------------
# Every output attribute on the answer span starts with this (diagnostics from signal extraction included).
RAG_CONFIDENCE_PREFIX: Final = "rag.confidence."
# Set instead of the scorecard when scoring an answer failed: the exception's type name (the span is kept).
RAG_CONFIDENCE_ERROR: Final = "rag.confidence.error"
# Explicit buckets of ``rag.confidence.scoring.duration`` (seconds): scoring takes tens of microseconds to a
# few milliseconds, far below the SDK's default millisecond-scaled boundaries.
SCORING_DURATION_BUCKETS: Final = (
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    1.0,
)
# ``OTEL_PYTHON_CONFIGURATOR`` value (and entry point name) that turns on zero-code scoring under
# ``opentelemetry-instrument``.
CONFIGURATOR_NAME: Final = "rag_confidence"

# --------------------------------------------------------------------------------------------------------------
# Gateway (``rag_confidence.gateway``): its own metrics, exported over OTLP next to the confidence instruments
# --------------------------------------------------------------------------------------------------------------
METRIC_GATEWAY_SPANS_RECEIVED: Final = "rag.confidence.gateway.spans.received"
METRIC_GATEWAY_SPANS_FORWARDED: Final = "rag.confidence.gateway.spans.forwarded"
# Spans not forwarded: refused with the whole request (retryable or not) or dropped by partial success.
METRIC_GATEWAY_SPANS_REJECTED: Final = "rag.confidence.gateway.spans.rejected"
METRIC_GATEWAY_EXPORT_FAILURES: Final = "rag.confidence.gateway.export.failures"
METRIC_GATEWAY_ACTIVE_REQUESTS: Final = "rag.confidence.gateway.active_requests"
METRIC_GATEWAY_REQUEST_DURATION: Final = "rag.confidence.gateway.request.duration"
METRIC_GATEWAY_ANSWERS: Final = "rag.confidence.gateway.answers"
METRIC_GATEWAY_ASSEMBLY_EVICTIONS: Final = "rag.confidence.gateway.assembly.evictions"
METRIC_GATEWAY_ASSEMBLY_TRACES: Final = "rag.confidence.gateway.assembly.traces"
UNIT_SPAN: Final = "{span}"
UNIT_REQUEST: Final = "{request}"
UNIT_FAILURE: Final = "{failure}"
UNIT_ANSWER: Final = "{answer}"
UNIT_TRACE: Final = "{trace}"
# Bounded attribute keys on the gateway metrics and their values.
METRIC_ATTR_GATEWAY_TRANSPORT: Final = "rag.confidence.gateway.transport"
METRIC_ATTR_GATEWAY_OUTCOME: Final = "rag.confidence.gateway.outcome"
METRIC_ATTR_GATEWAY_REASON: Final = "rag.confidence.gateway.reason"
GATEWAY_TRANSPORT_GRPC: Final = "grpc"
GATEWAY_TRANSPORT_HTTP: Final = "http"
# How a request was answered (``rag.confidence.gateway.outcome`` on the request duration).
GATEWAY_OUTCOME_OK: Final = "ok"
GATEWAY_OUTCOME_PARTIAL: Final = "partial"
GATEWAY_OUTCOME_INVALID: Final = "invalid"
GATEWAY_OUTCOME_UNSUPPORTED_MEDIA_TYPE: Final = "unsupported_media_type"
GATEWAY_OUTCOME_TOO_LARGE: Final = "too_large"
GATEWAY_OUTCOME_BODY_TIMEOUT: Final = "body_timeout"
GATEWAY_OUTCOME_UNAUTHENTICATED: Final = "unauthenticated"
GATEWAY_OUTCOME_OVERLOADED: Final = "overloaded"
GATEWAY_OUTCOME_DOWNSTREAM_UNAVAILABLE: Final = "downstream_unavailable"
GATEWAY_OUTCOME_INTERNAL: Final = "internal"
# The caller gave up (deadline passed, call cancelled, connection closed mid-body) before its spans were
# forwarded: they were not.
GATEWAY_OUTCOME_ABANDONED: Final = "abandoned"
# Why spans were rejected (``rag.confidence.gateway.reason`` on spans.rejected): dropped by partial success, or
# refused with their request because the downstream failed (the same value as that request outcome).
GATEWAY_REASON_INVALID_SPAN: Final = "invalid_span"
GATEWAY_REASON_DOWNSTREAM_UNAVAILABLE: Final = GATEWAY_OUTCOME_DOWNSTREAM_UNAVAILABLE
# The assembly window's own eviction reasons, beside the shared max_age and max_traces.
GATEWAY_EVICTION_MEMORY: Final = "memory"
GATEWAY_EVICTION_MAX_SPANS: Final = "max_spans"  # a trace reached --assembly-max-spans: no longer added to

# --------------------------------------------------------------------------------------------------------------
# In-process span processor (``rag_confidence.otel.pipeline``): the gateway's counterparts, same suffixes, units
# and attribute values, so one panel or rule reads both (``rag_confidence_{gateway,processor}_*``)
# --------------------------------------------------------------------------------------------------------------
METRIC_PROCESSOR_SPANS_RECEIVED: Final = "rag.confidence.processor.spans.received"
METRIC_PROCESSOR_SPANS_FORWARDED: Final = "rag.confidence.processor.spans.forwarded"
# Forwarded without being buffered for scoring (their trace already held ``max_spans_per_trace``).
METRIC_PROCESSOR_SPANS_UNBUFFERED: Final = "rag.confidence.processor.spans.unbuffered"
METRIC_PROCESSOR_ANSWERS: Final = "rag.confidence.processor.answers"
METRIC_PROCESSOR_FAILURES: Final = "rag.confidence.processor.failures"
METRIC_PROCESSOR_BUFFER_EVICTIONS: Final = "rag.confidence.processor.buffer.evictions"
METRIC_PROCESSOR_BUFFER_TRACES: Final = "rag.confidence.processor.buffer.traces"
# Answer and local-root spans waiting for the background worker (``background_scoring=True``).
METRIC_PROCESSOR_QUEUE_SIZE: Final = "rag.confidence.processor.queue.size"
METRIC_ATTR_PROCESSOR_OUTCOME: Final = "rag.confidence.processor.outcome"
METRIC_ATTR_PROCESSOR_REASON: Final = "rag.confidence.processor.reason"
# Values shared by the processor's and the gateway's answer outcomes and eviction reasons.
PIPELINE_OUTCOME_SCORED: Final = "scored"
PIPELINE_OUTCOME_FAILED: Final = "failed"
PIPELINE_OUTCOME_ALREADY_SCORED: Final = "already_scored"
PIPELINE_OUTCOME_OVER_LIMIT: Final = "over_limit"
PIPELINE_EVICTION_MAX_AGE: Final = "max_age"
PIPELINE_EVICTION_MAX_TRACES: Final = "max_traces"
# Why the processor caught a failure: the scorer raised; recording metrics or the event raised; a bug on the
# span path; the downstream (exporting) processor raised.
PROCESSOR_FAILURE_SCORING: Final = "scoring"
PROCESSOR_FAILURE_RECORDING: Final = "recording"
PROCESSOR_FAILURE_PROCESSING: Final = "processing"
PROCESSOR_FAILURE_DOWNSTREAM: Final = "downstream"

# --------------------------------------------------------------------------------------------------------------
# The namespaces of every attribute signal extraction reads (the part of a key before its first dot)
# --------------------------------------------------------------------------------------------------------------
# A span with no attribute in these, no event and no link gives an enclosing answer nothing but its place in the
# tree: the span processor need not keep one that finished around an answer already scored. Wider than what is
# read (all of ``gen_ai``, not its few keys), so a key read later in a known namespace is covered already;
# tests/test_otel_buffer_limits.py checks every name ``signals/`` reads against it.
SIGNAL_NAMESPACES: Final = frozenset(
    {
        "ai",
        "annotation",
        "annotations",
        "completion",
        "db",
        "document",
        "embedding",
        "evaluation",
        "evaluations",
        "gen_ai",
        "haystack",
        "input",
        "llm",
        "message",
        "message_content",
        "metadata",
        "openinference",
        "output",
        "pinecone",
        "rag",
        "reranker",
        "retrieval",
        "tool",
        "tool_call",
        "trace",
        "traceloop",
    }
)
