"""``ConfidenceSpanProcessor`` over the life of a long-running service: work that outlives its request,
traces that stay active past the TTL, ``force_flush`` under a backlog, and pre-fork servers.

Found by a lifecycle review; each test fails on the code before its fix.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence

import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, SynchronousMultiSpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence import semconv
from rag_confidence.otel import ConfidenceSpanProcessor, mark_answer

from .test_otel_decorator import CANDIDATES, RETRIEVAL


def _setup(**options: object) -> tuple[TracerProvider, InMemorySpanExporter, ConfidenceSpanProcessor]:
    exporter = InMemorySpanExporter()
    processor = ConfidenceSpanProcessor(SimpleSpanProcessor(exporter), **options)  # type: ignore[arg-type]
    provider = TracerProvider()
    provider.add_span_processor(processor)
    return provider, exporter, processor


def _scored(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    return {
        span.name: span
        for span in exporter.get_finished_spans()
        if semconv.RAG_CONFIDENCE_TOTAL in (span.attributes or {})
    }


# -- work that ends after its request -------------------------------------------------------------------------


def _remote_parent(trace_id: int = 0xABC) -> Context:
    remote = trace.SpanContext(trace_id, 0x1, is_remote=True, trace_flags=trace.TraceFlags(1))
    return trace.set_span_in_context(trace.NonRecordingSpan(remote))


LIVE_QUERY = "live query"


def _live_query(tracer: trace.Tracer) -> trace.Span:
    """A RAG request in flight: its retrieval has ended (and is buffered), its answer is still to come."""
    live = tracer.start_span(LIVE_QUERY)
    with tracer.start_as_current_span(
        "retrieve", context=trace.set_span_in_context(live), attributes=RETRIEVAL
    ):
        pass
    return live


def _assert_live_query_survives(
    provider: TracerProvider,
    processor: ConfidenceSpanProcessor,
    exporter: InMemorySpanExporter,
    live: trace.Span,
) -> None:
    """Nothing but the live query is left buffered, nothing was evicted, and it is scored when it ends."""
    provider.force_flush()
    stats = processor.stats()
    assert stats.pending_traces == 1 and stats.traces_evicted == 0
    live.end()
    provider.force_flush()
    assert LIVE_QUERY in _scored(exporter)


BOTH_MODES = pytest.mark.parametrize("background", [False, True], ids=["inline", "background scoring"])


@BOTH_MODES
def test_children_that_outlive_their_request_leave_no_buffer_behind(background: bool) -> None:
    provider, exporter, processor = _setup(max_pending_traces=100, background_scoring=background)
    tracer = provider.get_tracer("test")
    live = _live_query(tracer)  # its LLM call is slow
    for index in range(500):  # meanwhile, requests whose background task ends after them (fire-and-forget)
        root = tracer.start_span(f"POST /events {index}")
        task = tracer.start_span("send-webhook", context=trace.set_span_in_context(root))
        with tracer.start_as_current_span("http POST", context=trace.set_span_in_context(task)):
            pass  # a span beneath the late task, buffered until the task ends
        root.end()
        task.end()
    # Before: each late task opened a buffer nothing released; 100 of them evicted the live query's retrieval.
    _assert_live_query_survives(provider, processor, exporter, live)
    assert len(exporter.get_finished_spans()) == 2 + 500 * 3  # every span forwarded once


@BOTH_MODES
def test_a_marked_answer_in_work_that_outlives_its_request_is_scored_with_its_retrieval(
    background: bool,
) -> None:
    provider, exporter, processor = _setup(background_scoring=background)
    tracer = provider.get_tracer("test")
    request = tracer.start_span("POST /ask")
    job = tracer.start_span("answer job", context=trace.set_span_in_context(request))
    request.end()  # the request returns 202 Accepted; the job answers afterwards
    with trace.use_span(job, end_on_exit=False), tracer.start_as_current_span("answer"):
        mark_answer()
        with tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
            pass
    job.end()
    provider.force_flush()
    scored = _scored(exporter)
    assert set(scored) == {"answer"}
    # Before the fix too; what changed is that this late work leaves no buffer behind.
    assert (scored["answer"].attributes or {})[semconv.RAG_CONFIDENCE_CANDIDATES] == len(CANDIDATES)
    assert processor.stats().pending_traces == 0


@BOTH_MODES
def test_late_work_of_one_local_root_releases_only_its_own_spans(background: bool) -> None:
    provider, exporter, processor = _setup(background_scoring=background)
    tracer = provider.get_tracer("test")
    parent = _remote_parent()
    first = tracer.start_span("request 1", context=parent)
    second = tracer.start_span("request 2", context=parent)  # the same remote trace, served concurrently
    late = tracer.start_span("late task", context=trace.set_span_in_context(first))
    with tracer.start_as_current_span(
        "retrieve", context=trace.set_span_in_context(second), attributes=RETRIEVAL
    ):
        pass
    first.end()
    late.end()  # late work of request 1 releases its own subtree only
    second.end()
    provider.force_flush()
    assert "request 2" in _scored(exporter)  # rule (c) still sees request 2's retrieval
    assert processor.stats().pending_traces == 0


@BOTH_MODES
@pytest.mark.parametrize("after_root", [False, True], ids=["before its root ends", "after its root ends"])
def test_a_child_that_outlives_its_marked_answer_leaves_no_buffer_behind(
    background: bool, after_root: bool
) -> None:
    provider, exporter, processor = _setup(max_pending_traces=50, background_scoring=background)
    tracer = provider.get_tracer("test")
    live = _live_query(tracer)
    for index in range(100):
        request = tracer.start_span(f"request {index}")
        answer = tracer.start_span("answer", context=trace.set_span_in_context(request))
        answer.set_attribute(semconv.RAG_ANSWER, True)
        cache_write = tracer.start_span("cache write", context=trace.set_span_in_context(answer))
        with tracer.start_as_current_span("redis SET", context=trace.set_span_in_context(cache_write)):
            pass
        answer.end()  # scored; its fire-and-forget cache write goes on
        if after_root:
            request.end()
            cache_write.end()
        else:
            cache_write.end()
            request.end()
        if background and index % 10 == 9:
            # Traces wait for the worker with their buffer: on a busy machine a worker 50 answers behind
            # would evict the live query without any leak. The leaked buffers would still add up.
            provider.force_flush()
    # Before: each cache write's buffer stayed (the ended answer hid it from its root), 50 evicted the live one.
    _assert_live_query_survives(provider, processor, exporter, live)


@BOTH_MODES
def test_a_stream_closed_early_leaves_no_buffer_for_spans_ending_after_it(background: bool) -> None:
    # An SSE client disconnects: @scored_answer declines the answer span; the framework's abandoned stream is
    # finalised later by the garbage collector, so its model span ends after the answer and the request.
    provider, exporter, processor = _setup(max_pending_traces=50, background_scoring=background)
    tracer = provider.get_tracer("test")
    live = _live_query(tracer)
    for index in range(100):
        request = tracer.start_span(f"GET /stream {index}")
        answer = tracer.start_span("answer", context=trace.set_span_in_context(request))
        with tracer.start_as_current_span(
            "retrieve", context=trace.set_span_in_context(answer), attributes=RETRIEVAL
        ):
            pass
        model = tracer.start_span("llm", context=trace.set_span_in_context(answer))
        answer.set_attribute(semconv.RAG_ANSWER, False)
        answer.end()
        request.end()
        if background:
            # The worker is done with the request before the model span ends (else its root would take the
            # model span along, and this test would not see a leak in this mode).
            provider.force_flush()
        model.end()
    # Before: each model span opened a buffer kept until the TTL; 50 of them evicted the live query.
    _assert_live_query_survives(provider, processor, exporter, live)
    assert set(_scored(exporter)) == {LIVE_QUERY}  # neither the declined answers nor their requests


@BOTH_MODES
def test_a_declined_span_passes_on_the_marks_of_answers_beneath_it(background: bool) -> None:
    provider, exporter, processor = _setup(background_scoring=background)
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("request"), tracer.start_as_current_span("attempt") as attempt:
        with (
            tracer.start_as_current_span("answer", attributes={semconv.RAG_ANSWER: True}),
            tracer.start_as_current_span("retrieve", attributes=RETRIEVAL),
        ):
            pass
        attempt.set_attribute(semconv.RAG_ANSWER, False)
    with tracer.start_as_current_span("other request"):
        with tracer.start_as_current_span("attempt") as attempt:
            with tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
                pass
            attempt.set_attribute(semconv.RAG_ANSWER, False)
        with tracer.start_as_current_span("retrieve again", attributes=RETRIEVAL):
            pass
    provider.force_flush()
    # As find_answers decides over the whole trace: the marked answer is scored and keeps its request from
    # being one; a declined subtree's retrieval makes no answer, another retrieval of its request does.
    assert set(_scored(exporter)) == {"answer", "other request"}
    other = _scored(exporter)["other request"]
    assert (other.attributes or {})[semconv.RAG_CONFIDENCE_CANDIDATES] == len(CANDIDATES)
    assert processor.stats().pending_traces == 0


@BOTH_MODES
def test_a_concurrent_root_keeps_the_answered_mark_of_its_trace(background: bool) -> None:
    provider, exporter, _ = _setup(background_scoring=background)
    tracer = provider.get_tracer("test")
    parent = _remote_parent()
    first = tracer.start_span("request 1", context=parent)
    second = tracer.start_span("request 2", context=parent)
    with (
        tracer.start_as_current_span(
            "answer 2", context=trace.set_span_in_context(second), attributes={semconv.RAG_ANSWER: True}
        ),
        tracer.start_as_current_span("retrieve", attributes=RETRIEVAL),
    ):
        pass
    first.end()  # before: released the trace's (empty) buffer and with it request 2's answered mark
    with tracer.start_as_current_span(
        "retrieve again", context=trace.set_span_in_context(second), attributes=RETRIEVAL
    ):
        pass
    second.end()
    provider.force_flush()
    assert set(_scored(exporter)) == {"answer 2"}  # request 2 is no second answer by rule (c)


@BOTH_MODES
def test_a_long_trace_of_nested_answers_keeps_a_bounded_answered_mark(background: bool) -> None:
    # An evaluation run (or a chat session) in one span, each item in a span of its own around its answer: each
    # answer left a mark on its item that stayed until the run ended, one per item, without bound.
    provider, exporter, processor = _setup(background_scoring=background)
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("run") as run:
        for _ in range(300):
            with (
                tracer.start_as_current_span("item"),
                tracer.start_as_current_span("answer", attributes={semconv.RAG_ANSWER: True}),
                tracer.start_as_current_span("retrieve", attributes=RETRIEVAL),
            ):
                pass
        provider.force_flush()
        pending = processor._buffers._pending[run.get_span_context().trace_id]
        assert len(pending.answered) <= 1  # the run's own: its items ended
    provider.force_flush()
    assert "run" not in _scored(exporter)  # it answered already: no answer by rule (c)
    assert len([s for s in exporter.get_finished_spans() if s.name == "answer"]) == 300
    assert processor.stats().pending_traces == 0


# -- the TTL runs from a trace's last activity ----------------------------------------------------------------


def test_a_trace_still_producing_spans_is_not_evicted_by_the_ttl() -> None:
    provider, exporter, processor = _setup(pending_ttl_s=0.3)
    tracer = provider.get_tracer("test")
    agent = tracer.start_span("agent run")
    context = trace.set_span_in_context(agent)
    with tracer.start_as_current_span("retrieve", context=context, attributes=RETRIEVAL):
        pass
    for step in range(6):  # 0.6 s of steps, each well within the TTL of the one before
        time.sleep(0.1)
        with tracer.start_as_current_span(f"step {step}", context=context):
            pass
        # A new trace's buffer runs the eviction check.
        with tracer.start_as_current_span(f"other request {step}"), tracer.start_as_current_span("db query"):
            pass
    agent.end()
    # Before: the TTL ran from the first buffered span, and the active run lost its retrieval.
    assert processor.stats().traces_evicted == 0
    assert "agent run" in _scored(exporter)


# -- force_flush with a backlog --------------------------------------------------------------------------------


class _Recording(SpanExporter):
    def __init__(self) -> None:
        self.names: list[str] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.names.extend(span.name for span in spans)
        return SpanExportResult.SUCCESS


def test_force_flush_flushes_the_downstream_even_when_the_worker_used_up_the_time() -> None:
    exporter = _Recording()
    batch = BatchSpanProcessor(exporter, schedule_delay_millis=60_000)
    fan_out = SynchronousMultiSpanProcessor()  # as configure_from_env builds the downstream
    fan_out.add_span_processor(batch)
    processor = ConfidenceSpanProcessor(fan_out, background_scoring=True)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("test")
    release = threading.Event()
    assert processor._worker is not None
    processor._worker.submit(lambda: release.wait(10))  # a backlog the flush cannot get through in time
    with tracer.start_as_current_span("request"), tracer.start_as_current_span("plain child"):
        pass
    assert processor.force_flush(100) is False
    # Before: the downstream got 0 ms and the SDK skipped it, so even the spans already forwarded stayed put.
    assert exporter.names == ["plain child"]
    release.set()
    assert processor.force_flush(10_000) is True
    assert exporter.names == ["plain child", "request"]
    provider.shutdown()


# -- pre-fork servers ------------------------------------------------------------------------------------------


class _PidExporter(SpanExporter):
    """Writes ``pid span_id`` lines, so the test counts exports across processes."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self.lock, open(self.path, "a") as out:
            for span in spans:
                assert span.context is not None
                out.write(f"{os.getpid()} {span.context.span_id:x}\n")
        return SpanExportResult.SUCCESS


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork (POSIX)")
def test_answers_queued_at_a_fork_are_exported_once_by_the_parent(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "exports.txt")
    processor = ConfidenceSpanProcessor(SimpleSpanProcessor(_PidExporter(path)), background_scoring=True)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("test")
    assert processor._worker is not None
    release, holding = threading.Event(), threading.Event()
    processor._worker.submit(lambda: (holding.set(), release.wait(10)))  # hold the worker: answers queue up
    assert holding.wait(10)
    for index in range(5):
        with (
            tracer.start_as_current_span(f"query {index}"),
            tracer.start_as_current_span("retrieve", attributes=RETRIEVAL),
        ):
            pass
    assert processor._worker.queued() == 5
    pid = os.fork()
    if pid == 0:
        status = 0
        try:
            # A child that traces a little and flushes: it must neither forward the parent's queued answers
            # again nor wait on the parent's lock.
            with (
                tracer.start_as_current_span("child query"),
                tracer.start_as_current_span("retrieve", attributes=RETRIEVAL),
            ):
                pass
            status = 0 if provider.force_flush(5_000) else 1
        finally:
            os._exit(status)
    release.set()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert provider.force_flush(10_000)
    with open(path) as exported:
        lines = exported.read().split()
    pids, span_ids = lines[0::2], lines[1::2]
    assert len(span_ids) == len(set(span_ids)) == 5 * 2 + 2  # before: the child exported the 5 queued again
    assert pids.count(str(pid)) == 2
    provider.shutdown()


# -- answered marks belong to the local root above the answer (found by a review of the above) ----------------


@BOTH_MODES
def test_a_root_that_reads_as_a_retrieval_is_not_scored_beside_its_marked_answer(background: bool) -> None:
    for _ in range(20 if background else 1):  # the background race showed in every run
        provider, exporter, _ = _setup(background_scoring=background)
        tracer = provider.get_tracer("test")
        # rag.retrieval.method on the root (LangChain run metadata inherited by the root chain) makes it a retrieval.
        root = tracer.start_span(
            "root", context=_remote_parent(), attributes={semconv.RAG_RETRIEVAL_METHOD: "dense"}
        )
        answer = tracer.start_span(
            "answer", context=trace.set_span_in_context(root), attributes={semconv.RAG_ANSWER: True}
        )
        with tracer.start_as_current_span(
            "retrieve", context=trace.set_span_in_context(answer), attributes=RETRIEVAL
        ):
            pass
        answer.end()
        root.end()
        provider.force_flush()
        assert set(_scored(exporter)) == {"answer"}


@BOTH_MODES
def test_a_root_whose_start_was_not_seen_keeps_the_mark_of_its_answer(background: bool) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    tracer = provider.get_tracer("test")
    root = tracer.start_span("root", context=_remote_parent())
    # Installed while the request runs: the processor never saw the root start.
    provider.add_span_processor(
        ConfidenceSpanProcessor(SimpleSpanProcessor(exporter), background_scoring=background)
    )
    answer = tracer.start_span(
        "answer", context=trace.set_span_in_context(root), attributes={semconv.RAG_ANSWER: True}
    )
    with tracer.start_as_current_span(
        "retrieve", context=trace.set_span_in_context(answer), attributes=RETRIEVAL
    ):
        pass
    answer.end()
    with tracer.start_as_current_span(
        "related", context=trace.set_span_in_context(root), attributes=RETRIEVAL
    ):
        pass  # a second retrieval after the answer, in the same request
    root.end()
    provider.force_flush()
    assert set(_scored(exporter)) == {"answer"}  # not the root a second time by rule (c)


@BOTH_MODES
def test_a_concurrent_root_without_a_marked_answer_is_still_scored(background: bool) -> None:
    provider, exporter, processor = _setup(background_scoring=background)
    tracer = provider.get_tracer("test")
    first = tracer.start_span("request 1", context=_remote_parent())
    second = tracer.start_span("request 2", context=_remote_parent())
    with (
        tracer.start_as_current_span(
            "answer 1", context=trace.set_span_in_context(first), attributes={semconv.RAG_ANSWER: True}
        ),
        tracer.start_as_current_span("retrieve 1", attributes=RETRIEVAL),
    ):
        pass
    with tracer.start_as_current_span(
        "retrieve 2", context=trace.set_span_in_context(second), attributes=RETRIEVAL
    ):
        pass
    first.end()
    second.end()
    provider.force_flush()
    # Request 1's answer mark is its own: request 2 is an answer by rule (c).
    assert set(_scored(exporter)) == {"answer 1", "request 2"}
    assert processor.stats().pending_traces == 0


@BOTH_MODES
def test_work_beneath_late_work_that_ended_first_leaves_no_buffer_behind(background: bool) -> None:
    # LiteLLM's otel callback with USE_OTEL_LITELLM_REQUEST_SPAN=true logs a call from a thread of its own once
    # the request may be over: it ends its ``litellm_request`` span (a child of the request), then starts and
    # ends a ``raw_gen_ai_request`` child of that ended span.
    provider, exporter, processor = _setup(max_pending_traces=50, background_scoring=background)
    tracer = provider.get_tracer("test")
    live = _live_query(tracer)
    for index in range(100):
        request = tracer.start_span(f"POST /ask {index}")
        request.end()
        if background:
            provider.force_flush()
        logged = tracer.start_span("litellm_request", context=trace.set_span_in_context(request))
        logged.end()
        raw = tracer.start_span("raw_gen_ai_request", context=trace.set_span_in_context(logged))
        raw.end()
    # Before: each raw span opened a buffer (its parent was no ended root or answer) kept until the TTL; 50 of
    # them evicted the live query.
    _assert_live_query_survives(provider, processor, exporter, live)
    assert len(exporter.get_finished_spans()) == 2 + 100 * 3  # every span forwarded once


@BOTH_MODES
def test_hundreds_of_late_calls_in_one_request_leave_no_buffer_behind(background: bool) -> None:
    # One request (a batch endpoint) whose LiteLLM callback logs 300 calls after it ended, each a
    # ``litellm_request`` span and a ``raw_gen_ai_request`` child opened beneath it once it ended. Before, each
    # late span took one of the trace's 256 anchor slots: from the 256th call on, the raw spans opened a buffer
    # kept until the TTL.
    provider, exporter, processor = _setup(max_pending_traces=50, background_scoring=background)
    tracer = provider.get_tracer("test")
    live = _live_query(tracer)
    request = tracer.start_span("POST /batch")
    request.end()
    if background:
        provider.force_flush()
    for _ in range(300):
        logged = tracer.start_span("litellm_request", context=trace.set_span_in_context(request))
        logged.end()
        raw = tracer.start_span("raw_gen_ai_request", context=trace.set_span_in_context(logged))
        raw.end()
    _assert_live_query_survives(provider, processor, exporter, live)
    assert len(exporter.get_finished_spans()) == 2 + 1 + 300 * 2  # every span forwarded once
