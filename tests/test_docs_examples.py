"""Python examples in the docs run as written.

Self-contained blocks print what their ``# comments`` say: a ``print(...)  # expected`` line must print
``expected``; an expectation with ``...`` must print its text before the ``...``. Blocks that use names the
reader's application supplies (``retriever``, ``llm_answer``, ``tracer``) run after a prelude that defines them
with offline fakes, and the test checks what the text around the block says they do.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rag_confidence import semconv

from .test_gateway_support import DownstreamReceiver

ROOT = Path(__file__).resolve().parents[1]

# (file, heading of the section holding the block)
EXAMPLES = [
    ("README.md", "## Quick start: Python"),
    ("docs/otel.md", "## Building blocks"),
]


def _first_python_block(path: Path, heading: str) -> str:
    text = path.read_text(encoding="utf-8")
    section = text[text.index(heading + "\n") :]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None, f"no python block under {heading}"
    return match.group(1)


def _expectations(code: str) -> list[str | None]:
    """One entry per print() line: its comment, or None when it has none."""
    expected: list[str | None] = []
    for line in code.splitlines():
        if line.startswith("print("):
            _, hash_, comment = line.partition(")  ")
            comment = comment.strip()
            expected.append(comment[1:].strip() if hash_ and comment.startswith("#") else None)
    return expected


@pytest.mark.parametrize(("file", "heading"), EXAMPLES, ids=[f"{f}:{h}" for f, h in EXAMPLES])
def test_example_runs_and_prints_what_it_says(file: str, heading: str) -> None:
    code = _first_python_block(ROOT / file, heading)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    printed = done.stdout.splitlines()
    expected = _expectations(code)
    assert len(printed) == len(expected)
    checked = 0
    for line, expectation in zip(printed, expected, strict=True):
        if expectation is None:
            continue
        checked += 1
        if "..." in expectation:
            assert line.startswith(expectation.split("...")[0]), (line, expectation)
        else:
            assert line == expectation
    assert checked, "the example states no result to check"


# --------------------------------------------------------------------------------------------------------------
# Blocks that use names the reader's application supplies (``retriever``, ``llm_answer``, ...): run as written,
# after a prelude that defines those names with offline fakes (an OpenInference-shaped retriever span, a canned
# answer), and before an epilogue that reports what happened.
# --------------------------------------------------------------------------------------------------------------
_APPLICATION = """
import asyncio, json
from dataclasses import dataclass
from typing import AsyncIterator
from opentelemetry import trace
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from rag_confidence import semconv
from rag_confidence.otel import ConfidenceSpanProcessor, last_scorecard, record_signals, scored_answer

@dataclass
class Answer:
    text: str
    faithfulness: float

DOCUMENTS = [("leave-policy", 0.91), ("leave-faq", 0.84), ("holidays", 0.62)]

def _retrieve(question):
    # What an OpenInference-instrumented retriever records.
    with trace.get_tracer("fake-retriever").start_as_current_span("retrieve") as span:
        span.set_attribute(semconv.OPENINFERENCE_SPAN_KIND, semconv.OPENINFERENCE_KIND_RETRIEVER)
        for index, (doc_id, score) in enumerate(DOCUMENTS):
            prefix = f"{semconv.OI_RETRIEVAL_DOCUMENTS}.{index}."
            span.set_attribute(prefix + semconv.OI_DOCUMENT_ID, doc_id)
            span.set_attribute(prefix + semconv.OI_DOCUMENT_SCORE, score)
    return [doc_id for doc_id, _ in DOCUMENTS]

class retriever:  # a LangChain-style retriever
    invoke = staticmethod(_retrieve)

retrieve = _retrieve

def llm_answer(question, docs):
    return Answer(f"25 days a year [{docs[0]}].", faithfulness=0.93)

generate = llm_answer

def report(card):
    print(json.dumps(None if card is None else {
        "total": card.total, "action": card.recommended_action, "warnings": [w.code for w in card.meta.warnings]
    }))
"""


def _block(path: Path, heading: str, index: int = 0) -> str:
    text = path.read_text(encoding="utf-8")
    section = text[text.index(heading + "\n") :]
    blocks = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    return blocks[index]


def _run(code: str, env: dict[str, str] | None = None) -> dict[str, Any] | None:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False, env=env
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("file", "heading"),
    [("README.md", "### A decorated answer function"), ("docs/otel.md", "## Decorator quick start")],
)
def test_decorator_quick_start_scores_and_exports_over_otlp(file: str, heading: str) -> None:
    # The block exports with the OTLP/gRPC exporter it imports: here to a receiver on loopback.
    receiver = DownstreamReceiver().start()
    try:
        env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.endpoint
        code = _block(ROOT / file, heading)
        card = _run(_APPLICATION + code + "\ntrace.get_tracer_provider().shutdown()\nreport(card)\n", env)
        spans = receiver.spans()
    finally:
        receiver.stop()
    assert card is not None
    # signals(result) gave the faithfulness, record_signals the conflict signal.
    assert not {"missing-faithfulness", "missing-conflict-signal"} & set(card["warnings"])
    (answer,) = [span for span in spans if span.name == "answer"]
    attributes = {item.key: item.value for item in answer.attributes}
    assert attributes[semconv.RAG_CONFIDENCE_TOTAL].int_value == card["total"]
    assert attributes[semconv.RAG_CONFIDENCE_ACTION].string_value == card["action"]
    assert {span.name for span in spans} == {"answer", "retrieve"}


def test_streamed_answer_block_is_scored_when_the_stream_ends() -> None:
    code = _block(
        ROOT / "docs/otel.md", "## Decorator quick start", 1
    )  # the next block: **Streamed answers.**
    setup = """
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(ConfidenceSpanProcessor(SimpleSpanProcessor(exporter)))
trace.set_tracer_provider(provider)
_sync_retrieve = retrieve
async def retrieve(question):
    return _sync_retrieve(question)
def prompt(question, docs):
    return question
class llm:
    @staticmethod
    async def astream(text):
        for token in ("25 ", "days ", "[leave-policy]."):
            yield token
"""
    epilogue = """
async def consume():
    tokens = [token async for token in stream_answer("How many days of leave?")]
    return tokens, last_scorecard()  # the card of the stream consumed in this task
tokens, card = asyncio.run(consume())
assert tokens == ["25 ", "days ", "[leave-policy]."]
(answer,) = [span for span in exporter.get_finished_spans() if span.name == "answer"]
assert answer.attributes[semconv.RAG_SIGNAL_SUPPORT_LEVEL] == "high"
assert answer.attributes[semconv.RAG_CONFIDENCE_TOTAL] == card.total
report(card)
"""
    card = _run(_APPLICATION + setup + code + epilogue)
    assert card is not None and "missing-candidates" not in card["warnings"]


def test_processor_registration_block_takes_the_options_it_shows() -> None:
    code = _block(ROOT / "docs/otel.md", "## Registering the processor, and what to beware of")
    setup = "provider = TracerProvider()\nexporter = InMemorySpanExporter()\ntrace.set_tracer_provider(provider)\n"
    epilogue = """
with trace.get_tracer("app").start_as_current_span("request"):
    record_signals(has_conflict=False)
    retriever.invoke("q")
provider.force_flush()
(request,) = [span for span in exporter.get_finished_spans() if span.name == "request"]
print(json.dumps({"action": request.attributes[semconv.RAG_CONFIDENCE_ACTION],
                  "missing": list(request.attributes[semconv.RAG_CONFIDENCE_MISSING_SIGNALS])}))
"""
    result = _run(_APPLICATION + setup + code + epilogue)
    # config={"preset": "production-v0.3"} applied: it requires a support evaluator, answer relevance.
    assert result is not None and "answerRelevanceScore" in result["missing"]


def test_signals_blocks_read_hand_made_retrieval_spans() -> None:
    signals_md = ROOT / "docs/signals.md"
    own_spans = _block(signals_md, "### Your own spans, without an instrumentor")
    pipeline = _block(signals_md, "# From spans to scoring inputs (`rag_confidence.signals`)")
    options = _block(signals_md, "## Key map defaults (`SignalOptions`)")
    setup = """
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
tracer = provider.get_tracer("app")
question = "How many days of leave?"
def retrieve(question):
    return [("leave-policy", 0.91), ("leave-faq", 0.84)]
with tracer.start_as_current_span("request"):
""" + "".join("    " + line + "\n" for line in own_spans.splitlines())
    epilogue = """
print(json.dumps({"candidates": [c["documentId"] for c in signals.inputs["candidates"]],
                  "method": sorted(signals.inputs["candidates"][0]["retrievalScores"]),
                  "options": options.citation_patterns[0]}))
"""
    result = _run(_APPLICATION + setup + pipeline + options + epilogue)
    assert result == {
        "candidates": ["leave-policy", "leave-faq"],
        "method": ["dense"],
        "options": r"【(\d+)】",
    }
