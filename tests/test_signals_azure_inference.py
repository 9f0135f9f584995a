"""Azure AI Inference (``azure-ai-inference``) under its own tracer, ``AIInferenceInstrumentor``.

The instrumentor writes the chat span with GenAI attributes, but the answer as a ``gen_ai.choice`` *span event*
whose body is JSON in ``gen_ai.event.content`` (the conventions' earlier form), and only with content recording
on (``AZURE_TRACING_GEN_AI_CONTENT_RECORDING_ENABLED``). The client is the real one; its model endpoint is a
real HTTP server on loopback that answers like the service (no network here). The instrumentor traces through
azure-core's OpenTelemetry plugin, which uses the *global* tracer provider, so each run is a fresh interpreter
(a global provider can be set once per process). Expected scorecards come from ``compute_confidence`` on the
inputs the spans state, written out by hand.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from rag_confidence import compute_confidence, semconv
from rag_confidence.otel.attributes import scorecard_attributes

TEXT = "Refunds take 30 days [kb-1]. Shipping is free [3]."

PROGRAM = r'''
import json, os, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TEXT = sys.argv[2]


class Service(BaseHTTPRequestHandler):
    """Answers /chat/completions as the Azure AI model inference API does."""

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        body = json.dumps({
            "id": "cmpl-1", "created": 1700000000, "model": "gpt-4o", "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": TEXT}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Service)
threading.Thread(target=server.serve_forever, daemon=True).start()

os.environ["AZURE_TRACING_GEN_AI_CONTENT_RECORDING_ENABLED"] = sys.argv[1]
from azure.core.settings import settings

settings.tracing_implementation = "opentelemetry"
from azure.ai.inference import ChatCompletionsClient
from azure.ai.inference.models import UserMessage
from azure.ai.inference.tracing import AIInferenceInstrumentor
from azure.core.credentials import AzureKeyCredential
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence.otel import ConfidenceSpanProcessor

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(ConfidenceSpanProcessor(SimpleSpanProcessor(exporter)))
trace.set_tracer_provider(provider)
AIInferenceInstrumentor().instrument()
client = ChatCompletionsClient(
    endpoint=f"http://127.0.0.1:{server.server_port}/models", credential=AzureKeyCredential("key")
)
tracer = trace.get_tracer("rag-app")
# The application's answer span and its own GenAI retrieval span (docs/signals.md, *Your own spans*).
with tracer.start_as_current_span("answer") as answer:
    answer.set_attribute("rag.answer", True)
    with tracer.start_as_current_span("retrieval kb") as span:
        span.set_attribute("gen_ai.operation.name", "retrieval")
        span.set_attribute("gen_ai.data_source.id", "kb")
        span.set_attribute(
            "gen_ai.retrieval.documents", json.dumps([{"id": "kb-1", "score": 0.9}, {"id": "kb-2", "score": 0.75}])
        )
    client.complete(messages=[UserMessage("How long do refunds take?")], model="gpt-4o")
provider.shutdown()
spans = {}
for span in exporter.get_finished_spans():
    events = [[event.name, dict(event.attributes)] for event in span.events]
    spans[span.name] = {"attributes": dict(span.attributes), "events": events}
print(json.dumps(spans, default=list))
'''


def run(content_recording: bool) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, "true" if content_recording else "false", TEXT],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    spans: dict[str, Any] = json.loads(done.stdout)
    return spans


CANDIDATES = [
    {"documentId": "kb-1", "retrievalScores": {"kb": 0.9}, "combinedScore": 0.9, "rank": 1},
    {"documentId": "kb-2", "retrievalScores": {"kb": 0.75}, "combinedScore": 0.75, "rank": 2},
]


def assert_scored(answer: dict[str, Any], inputs: dict[str, Any]) -> None:
    expected = scorecard_attributes(compute_confidence(dict(inputs)), inputs=inputs)
    for key, value in expected.items():
        if key == semconv.RAG_CONFIDENCE_DERIVED_SIGNALS:
            continue
        got = answer.get(key)
        assert (list(got) if isinstance(got, (list, tuple)) else got) == (
            list(value) if isinstance(value, (list, tuple)) else value
        ), key


@pytest.fixture(scope="module")
def recorded() -> dict[str, Any]:
    return run(content_recording=True)


def test_the_instrumentor_puts_the_answer_in_a_choice_event(recorded: dict[str, Any]) -> None:
    chat = recorded["chat gpt-4o"]
    assert chat["attributes"][semconv.GEN_AI_OPERATION_NAME] == "chat"
    assert semconv.GEN_AI_OUTPUT_MESSAGES not in chat["attributes"]
    choices = [attributes for name, attributes in chat["events"] if name == semconv.GEN_AI_CHOICE_EVENT]
    assert json.loads(choices[0][semconv.GEN_AI_EVENT_CONTENT])["message"] == {"content": TEXT}


def test_the_choice_event_is_the_answer_text(recorded: dict[str, Any]) -> None:
    answer = recorded["answer"]["attributes"]
    # One marker matches a retrieved document, [3] none (two documents): one of two sentences cited validly.
    assert_scored(
        answer,
        {
            "candidates": CANDIDATES,
            "supportLevel": "medium",
            "citationCount": 1,
            "invalidCitationCount": 1,
            "citationCoverageScore": 0.5,
        },
    )
    assert answer[semconv.RAG_CONFIDENCE_CITATION_MARKERS] == 2
    assert answer[semconv.RAG_CONFIDENCE_GENERATION_FINISH_REASON] == "stop"


def test_content_recording_off_leaves_the_finish_reason_only() -> None:
    spans = run(content_recording=False)
    choice = next(
        attrs for name, attrs in spans["chat gpt-4o"]["events"] if name == semconv.GEN_AI_CHOICE_EVENT
    )
    assert "message" not in json.loads(choice[semconv.GEN_AI_EVENT_CONTENT])
    answer = spans["answer"]["attributes"]
    assert_scored(answer, {"candidates": CANDIDATES, "supportLevel": "medium"})
    # No text, so no citation input is derived (none of citationCount, ...), only the assumed support level.
    assert answer[semconv.RAG_CONFIDENCE_DERIVED_SIGNALS] == ["supportLevel"]
    assert answer[semconv.RAG_CONFIDENCE_GENERATION_FINISH_REASON] == "stop"
