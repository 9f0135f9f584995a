"""Vercel AI SDK telemetry before the GenAI conventions (``ai.*`` attributes).

``experimental_telemetry`` in ``ai`` 3 to 6, and ``LegacyOpenTelemetry`` in ``@ai-sdk/otel`` (vercel/ai
``packages/otel/src/legacy-open-telemetry.ts``), trace a ``generateText``/``streamText`` call as an
``ai.generateText`` (``ai.streamText``) span over one ``ai.generateText.doGenerate`` (``ai.streamText.doStream``)
span per model call. The model call's text is ``ai.response.text`` and its reason ``ai.response.finishReason``
(``stop``, ``length``, ``tool-calls``, ...). The span also carries ``gen_ai.response.finish_reasons`` but neither
``gen_ai.operation.name`` nor ``gen_ai.output.messages``, so the GenAI reader alone would read a generation
without text: no citation could be derived from the answer. The outer span repeats the last call's text and
is not read (one generation per model call). The SDK records no retrieval (see docs/signals.md).
"""

from __future__ import annotations

from .. import semconv
from ._values import Generation, Reader
from .records import SpanRecord


def read_generation(span: SpanRecord, reader: Reader) -> Generation | None:
    """The text and finish reason of an AI SDK model call span; None for any other span."""
    attributes = span.attributes
    # Values can be anything a producer sent (a kvlist arrives as a dict, which no set can be asked about):
    # compare strings only.
    operation = attributes.get(semconv.AI_SDK_OPERATION_ID)
    if type(operation) is not str or operation not in semconv.AI_SDK_MODEL_CALL_OPERATIONS:
        return None
    text = attributes.get(semconv.AI_SDK_RESPONSE_TEXT)
    if text is not None and not isinstance(text, str):
        reader.skip()
        text = None
    reason = attributes.get(semconv.AI_SDK_RESPONSE_FINISH_REASON)
    finish_reasons = (reason.lower(),) if isinstance(reason, str) and reason else ()
    if not text and not finish_reasons:
        return None  # recordOutputs off and no reason: let the GenAI reader see what the span says
    return Generation(span=span, text=text or None, finish_reasons=finish_reasons)
