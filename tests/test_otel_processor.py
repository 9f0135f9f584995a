"""ConfidenceSpanProcessor with real SDK providers: scored attributes, metrics with exemplars, the evaluation
event, answer rules, bounded state and pass-through, under both SimpleSpanProcessor and BatchSpanProcessor.

Expected scorecards come from ``compute_confidence`` on inputs written out by hand from the spans each test
builds (OTel GenAI retrieval spans as the semantic conventions describe them), never from the processor.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader, Metric
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from rag_confidence import semconv
from rag_confidence.otel import ConfidenceSpanProcessor, record_signals, scored_answer
from rag_confidence.scoring import compute_confidence


@dataclass
class Pipeline:
    tracer_provider: TracerProvider
    exporter: InMemorySpanExporter
    metric_reader: InMemoryMetricReader
    log_exporter: InMemoryLogRecordExporter
    processor: ConfidenceSpanProcessor
    meter_provider: MeterProvider
    logger_provider: LoggerProvider

    @property
    def tracer(self) -> trace.Tracer:
        return self.tracer_provider.get_tracer("test")

    def spans(self) -> dict[str, ReadableSpan]:
        self.tracer_provider.force_flush()
        return {span.name: span for span in self.exporter.get_finished_spans()}

    def metrics(self) -> dict[str, Metric]:
        data = self.metric_reader.get_metrics_data()
        assert data is not None
        return {
            metric.name: metric
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
        }

    def logs(self) -> tuple[ReadableLogRecord, ...]:
        self.logger_provider.force_flush()
        return self.log_exporter.get_finished_logs()


def make_pipeline(kind: str, **options: Any) -> Pipeline:
    exporter = InMemorySpanExporter()
    reader = InMemoryMetricReader()
    log_exporter = InMemoryLogRecordExporter()
    meter_provider = MeterProvider(metric_readers=[reader])
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(log_exporter))
    downstream = SimpleSpanProcessor(exporter) if kind.startswith("simple") else BatchSpanProcessor(exporter)
    if kind.endswith("background"):
        options.setdefault("background_scoring", True)
    processor = ConfidenceSpanProcessor(
        downstream, meter_provider=meter_provider, logger_provider=logger_provider, **options
    )
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(processor)
    return Pipeline(
        tracer_provider, exporter, reader, log_exporter, processor, meter_provider, logger_provider
    )


@pytest.fixture(params=["simple", "batch", "batch-background"])
def pipeline(request: pytest.FixtureRequest) -> Iterator[Pipeline]:
    built = make_pipeline(request.param)
    yield built
    built.tracer_provider.shutdown()


DOCS = [{"id": "contract-7", "score": 0.91}, {"id": "faq-2", "score": 0.64}, {"id": "memo-1", "score": 0.40}]


def retrieval_attributes(docs: Sequence[Mapping[str, Any]], method: str = "vector") -> dict[str, Any]:
    """A GenAI retrieval span (``gen_ai.operation.name = retrieval``, documents as a JSON string)."""
    return {
        semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OPERATION_RETRIEVAL,
        semconv.GEN_AI_RETRIEVAL_DOCUMENTS: json.dumps(list(docs)),
        semconv.RAG_RETRIEVAL_METHOD: method,
    }


def expected_candidates(docs: Sequence[Mapping[str, Any]], method: str = "vector") -> list[dict[str, Any]]:
    return [
        {
            "retrievalScores": {method: doc["score"]},
            "combinedScore": doc["score"],
            "documentId": doc["id"],
            "rank": i,
        }
        for i, doc in enumerate(docs, start=1)
    ]


def run_rag_trace(pipeline: Pipeline, docs: Sequence[Mapping[str, Any]] = DOCS) -> None:
    tracer = pipeline.tracer
    with tracer.start_as_current_span("rag.pipeline"):
        with tracer.start_as_current_span(
            "retrieve", kind=trace.SpanKind.CLIENT, attributes=retrieval_attributes(docs)
        ):
            pass
        with tracer.start_as_current_span("generate"):
            pass
        record_signals(support_level="high", has_conflict=False, faithfulness_score=0.88)


def confidence_attributes(span: ReadableSpan) -> dict[str, Any]:
    return {k: v for k, v in (span.attributes or {}).items() if k.startswith(semconv.RAG_CONFIDENCE_PREFIX)}


def test_root_of_a_retrieval_trace_is_scored_like_compute_confidence(pipeline: Pipeline) -> None:
    run_rag_trace(pipeline)
    spans = pipeline.spans()
    assert set(spans) == {"rag.pipeline", "retrieve", "generate"}

    expected = compute_confidence(
        {
            "supportLevel": "high",
            "hasConflict": False,
            "faithfulnessScore": 0.88,
            "candidates": expected_candidates(DOCS),
        }
    )
    attributes = spans["rag.pipeline"].attributes or {}
    assert attributes[semconv.RAG_CONFIDENCE_TOTAL] == expected.total
    assert attributes[semconv.RAG_CONFIDENCE_LABEL] == expected.label
    assert attributes[semconv.RAG_CONFIDENCE_LABEL_COLOR] == expected.label_color
    assert attributes[semconv.RAG_CONFIDENCE_ACTION] == expected.recommended_action
    assert attributes[semconv.RAG_CONFIDENCE_ACTION_REASON] == expected.action_reason
    assert expected.tier1 is not None
    assert attributes[semconv.RAG_CONFIDENCE_TIER1_SCORE] == expected.tier1.score
    assert attributes[semconv.RAG_CONFIDENCE_TIER1_LABEL] == expected.tier1.label
    assert semconv.RAG_CONFIDENCE_TIER2_SCORE not in attributes  # no extension dimension is active
    assert list(attributes[semconv.RAG_CONFIDENCE_WARNINGS]) == [w.code for w in expected.meta.warnings]
    assert list(attributes[semconv.RAG_CONFIDENCE_MISSING_SIGNALS]) == expected.meta.missing_signals
    assert list(attributes[semconv.RAG_CONFIDENCE_ACTIVE_DIMENSIONS]) == expected.meta.active_dimensions
    assert attributes[semconv.RAG_CONFIDENCE_CANDIDATES] == len(DOCS)
    assert list(attributes[semconv.RAG_CONFIDENCE_DERIVED_SIGNALS]) == []
    assert attributes[semconv.RAG_CONFIDENCE_ALGORITHM_VERSION] == expected.meta.algorithm_version
    assert attributes[semconv.RAG_CONFIDENCE_SCHEMA_VERSION] == expected.meta.schema_version
    for name in ("grounding", "retrieval", "consistency"):
        dimension = getattr(expected.dimensions, name)
        assert attributes[semconv.dimension_score_attribute(name)] == round(dimension.normalized)
        assert attributes[semconv.dimension_raw_attribute(name)] == dimension.raw
        assert attributes[semconv.dimension_max_attribute(name)] == dimension.max
    # The application's own attributes are kept on the copy; children are forwarded untouched.
    assert attributes[semconv.RAG_SIGNAL_SUPPORT_LEVEL] == "high"
    assert confidence_attributes(spans["retrieve"]) == {}
    assert confidence_attributes(spans["generate"]) == {}
    assert pipeline.processor.stats().answers_scored == 1
    assert pipeline.processor.stats().pending_traces == 0


def test_metrics_carry_bounded_attributes_and_exemplars_pointing_at_the_answer(pipeline: Pipeline) -> None:
    run_rag_trace(pipeline)
    answer = pipeline.spans()["rag.pipeline"]
    total = (answer.attributes or {})[semconv.RAG_CONFIDENCE_TOTAL]
    metrics = pipeline.metrics()
    confidence = {
        semconv.METRIC_SCORE,
        semconv.METRIC_TIER_SCORE,
        semconv.METRIC_DIMENSION_SCORE,
        semconv.METRIC_WARNINGS,
        semconv.METRIC_SCORING_DURATION,
    }
    # The rest are the processor's own pipeline metrics (tests/test_otel_processor_metrics.py).
    assert confidence <= set(metrics)
    assert all(name.startswith("rag.confidence.processor.") for name in set(metrics) - confidence)
    score = metrics[semconv.METRIC_SCORE]
    assert score.unit == semconv.UNIT_SCORE
    (point,) = score.data.data_points
    assert isinstance(point, HistogramDataPoint)
    assert point.count == 1 and point.sum == total
    assert tuple(point.explicit_bounds) == semconv.SCORE_BUCKETS
    assert dict(point.attributes or {}) == {
        semconv.METRIC_ATTR_LABEL: (answer.attributes or {})[semconv.RAG_CONFIDENCE_LABEL],
        semconv.METRIC_ATTR_ACTION: (answer.attributes or {})[semconv.RAG_CONFIDENCE_ACTION],
    }
    assert answer.context is not None
    (exemplar,) = point.exemplars
    assert exemplar.trace_id == answer.context.trace_id
    assert exemplar.span_id == answer.context.span_id

    dimension_points = {
        (p.attributes or {})[semconv.METRIC_ATTR_DIMENSION]: p
        for p in metrics[semconv.METRIC_DIMENSION_SCORE].data.data_points
    }
    assert set(dimension_points) == {"grounding", "retrieval", "consistency"}
    for name, dimension_point in dimension_points.items():
        assert dimension_point.sum == (answer.attributes or {})[semconv.dimension_score_attribute(name)]
    (tier_point,) = metrics[semconv.METRIC_TIER_SCORE].data.data_points
    assert dict(tier_point.attributes or {}) == {semconv.METRIC_ATTR_TIER: semconv.TIER1}

    warning_codes = list((answer.attributes or {})[semconv.RAG_CONFIDENCE_WARNINGS])
    warning_points = metrics[semconv.METRIC_WARNINGS].data.data_points
    assert sorted((p.attributes or {})[semconv.METRIC_ATTR_WARNING_CODE] for p in warning_points) == sorted(
        warning_codes
    )
    for warning_point in warning_points:
        assert set(warning_point.attributes or {}) == {
            semconv.METRIC_ATTR_WARNING_CODE,
            semconv.METRIC_ATTR_WARNING_SEVERITY,
        }
    duration = metrics[semconv.METRIC_SCORING_DURATION]
    assert duration.unit == semconv.UNIT_SECONDS
    (duration_point,) = duration.data.data_points
    assert duration_point.count == 1 and 0 < duration_point.sum < 5
    assert tuple(duration_point.explicit_bounds) == semconv.SCORING_DURATION_BUCKETS


def test_evaluation_event_is_a_log_record_parented_to_the_answer(pipeline: Pipeline) -> None:
    run_rag_trace(pipeline)
    answer = pipeline.spans()["rag.pipeline"]
    (record,) = pipeline.logs()
    log = record.log_record
    assert log.event_name == semconv.GEN_AI_EVALUATION_RESULT
    assert answer.context is not None
    assert log.trace_id == answer.context.trace_id and log.span_id == answer.context.span_id
    attributes = answer.attributes or {}
    assert dict(log.attributes or {}) == {
        semconv.GEN_AI_EVALUATION_NAME: semconv.RAG_CONFIDENCE_EVALUATION_NAME,
        semconv.GEN_AI_EVALUATION_SCORE_VALUE: attributes[semconv.RAG_CONFIDENCE_TOTAL],
        semconv.GEN_AI_EVALUATION_SCORE_LABEL: attributes[semconv.RAG_CONFIDENCE_LABEL],
        semconv.GEN_AI_EVALUATION_EXPLANATION: attributes[semconv.RAG_CONFIDENCE_ACTION_REASON],
        semconv.RAG_CONFIDENCE_ACTION: attributes[semconv.RAG_CONFIDENCE_ACTION],
    }
    # The GenAI conventions type the score as a double (the span's total stays an int).
    assert type((log.attributes or {})[semconv.GEN_AI_EVALUATION_SCORE_VALUE]) is float


@pytest.mark.parametrize("entry", ["processor", "decorator"])
def test_the_evaluation_event_names_the_response_it_evaluates(pipeline: Pipeline, entry: str) -> None:
    """The GenAI conventions recommend ``gen_ai.response.id`` on the event, to correlate it with the response:
    the id of the generation whose text is the answer (the last one), not of an earlier call such as a query
    rewrite. Both entry points write it."""
    tracer = pipeline.tracer

    def chat(name: str, text: str, response_id: str) -> None:
        messages = [{"role": "assistant", "parts": [{"type": "text", "content": text}]}]
        attributes = {
            semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OPERATION_CHAT,
            semconv.GEN_AI_OUTPUT_MESSAGES: json.dumps(messages),
            semconv.GEN_AI_RESPONSE_ID: response_id,
        }
        with tracer.start_as_current_span(name, attributes=attributes):
            pass

    def steps() -> None:
        chat("rewrite", "late delivery penalty", "chatcmpl-rewrite")
        with tracer.start_as_current_span("retrieve", attributes=retrieval_attributes(DOCS)):
            pass
        chat("answer", "The penalty is capped [1].", "chatcmpl-answer")

    if entry == "decorator":
        scored_answer(
            name="rag.pipeline",
            tracer_provider=pipeline.tracer_provider,
            meter_provider=pipeline.meter_provider,
            logger_provider=pipeline.logger_provider,
        )(steps)()
    else:
        with tracer.start_as_current_span("rag.pipeline"):
            steps()
    assert semconv.RAG_CONFIDENCE_TOTAL in (
        pipeline.spans()["rag.pipeline"].attributes or {}
    )  # flushes scoring
    (record,) = pipeline.logs()
    assert (record.log_record.attributes or {})[semconv.GEN_AI_RESPONSE_ID] == "chatcmpl-answer"


def test_two_marked_answers_in_one_trace_get_one_scorecard_each(pipeline: Pipeline) -> None:
    tracer = pipeline.tracer
    strong = [{"id": "a", "score": 0.95}, {"id": "b", "score": 0.9}]
    weak = [{"id": "c", "score": 0.2}]
    with tracer.start_as_current_span("agent"):
        for name, docs, support in (("answer.1", strong, "high"), ("answer.2", weak, "low")):
            with tracer.start_as_current_span(name, attributes={semconv.RAG_ANSWER: True}):
                with tracer.start_as_current_span(f"{name}.retrieve", attributes=retrieval_attributes(docs)):
                    pass
                record_signals(support_level=support, has_conflict=False)
    spans = pipeline.spans()
    for name, docs, support in (("answer.1", strong, "high"), ("answer.2", weak, "low")):
        expected = compute_confidence(
            {"supportLevel": support, "hasConflict": False, "candidates": expected_candidates(docs)}
        )
        attributes = spans[name].attributes or {}
        assert attributes[semconv.RAG_CONFIDENCE_TOTAL] == expected.total, name
        assert attributes[semconv.RAG_CONFIDENCE_CANDIDATES] == len(docs)
    # The trace held marked answers, so its root is no answer by the root rule.
    assert confidence_attributes(spans["agent"]) == {}
    assert pipeline.processor.stats().answers_scored == 2
    assert pipeline.processor.stats().pending_traces == 0
    (score,) = pipeline.metrics()[semconv.METRIC_SCORE].data.data_points[:1]
    assert sum(p.count for p in pipeline.metrics()[semconv.METRIC_SCORE].data.data_points) == 2
    assert len(pipeline.logs()) == 2


def test_trace_without_retrieval_is_forwarded_untouched_and_leaves_no_state(pipeline: Pipeline) -> None:
    tracer = pipeline.tracer
    with tracer.start_as_current_span("GET /health"), tracer.start_as_current_span("db.query"):
        pass
    spans = pipeline.spans()
    assert set(spans) == {"GET /health", "db.query"}
    assert all(confidence_attributes(span) == {} for span in spans.values())
    stats = pipeline.processor.stats()
    assert stats.answers_scored == 0 and stats.pending_traces == 0 and stats.spans_forwarded == 2
    assert pipeline.metric_reader.get_metrics_data() is None or semconv.METRIC_SCORE not in pipeline.metrics()


def test_enriched_copy_keeps_everything_else_of_the_span() -> None:
    pipeline = make_pipeline("simple")
    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=3))
    provider.add_span_processor(pipeline.processor)
    tracer = provider.get_tracer("limits", "1.2.3")
    with tracer.start_as_current_span("answer", kind=trace.SpanKind.SERVER) as root:
        root.set_attributes({"a": 1, "b": 2, "c": 3, "d": 4})  # one over the limit: dropped, and counted
        root.add_event("checkpoint", {"step": 1})
        root.set_status(Status(StatusCode.OK))
        with tracer.start_as_current_span("retrieve", attributes=retrieval_attributes(DOCS[:1])):
            pass
    answer = {span.name: span for span in pipeline.exporter.get_finished_spans()}["answer"]
    assert answer.dropped_attributes == 1
    assert [event.name for event in answer.events] == ["checkpoint"]
    assert answer.status.status_code is StatusCode.OK
    assert answer.kind is trace.SpanKind.SERVER
    assert answer.instrumentation_scope is not None and answer.instrumentation_scope.version == "1.2.3"
    assert answer.resource is provider.resource
    own = {key for key in answer.attributes or {} if not key.startswith(semconv.RAG_CONFIDENCE_PREFIX)}
    assert len(own) == 3 and own <= {"a", "b", "c", "d"}
    # Our attributes are added beyond the application's limit: they are bounded and the point of the span.
    assert semconv.RAG_CONFIDENCE_TOTAL in (answer.attributes or {})


def test_pending_traces_are_bounded_by_count_and_by_ttl() -> None:
    pipeline = make_pipeline("simple", max_pending_traces=3, pending_ttl_s=60.0)
    tracer = pipeline.tracer
    open_roots: list[Span] = []
    for index in range(5):
        root = tracer.start_span(f"root.{index}")
        open_roots.append(root)  # type: ignore[arg-type]
        with tracer.start_as_current_span(
            "retrieve", context=trace.set_span_in_context(root), attributes=retrieval_attributes(DOCS)
        ):
            pass
    stats = pipeline.processor.stats()
    assert stats.pending_traces == 3 and stats.traces_evicted == 2
    assert stats.spans_forwarded == 5  # evicted spans were forwarded all the same

    ttl_pipeline = make_pipeline("simple", pending_ttl_s=0.01)
    ttl_tracer = ttl_pipeline.tracer
    first = ttl_tracer.start_span("first")
    with ttl_tracer.start_as_current_span("child", context=trace.set_span_in_context(first)):
        pass
    time.sleep(0.05)
    second = ttl_tracer.start_span("second")
    with ttl_tracer.start_as_current_span("child", context=trace.set_span_in_context(second)):
        pass  # a new trace triggers the TTL check: the first trace's buffer goes
    assert ttl_pipeline.processor.stats().traces_evicted == 1
    assert ttl_pipeline.processor.stats().pending_traces == 1
    for root in [*open_roots, first, second]:
        root.end()
    # The evicted trace's root still reaches the exporter, unscored.
    assert "first" in {span.name for span in ttl_pipeline.exporter.get_finished_spans()}


def test_spans_per_trace_are_capped_but_all_forwarded() -> None:
    pipeline = make_pipeline("simple", max_spans_per_trace=4)
    tracer = pipeline.tracer
    with tracer.start_as_current_span("root"):
        for index in range(10):
            with tracer.start_as_current_span(f"child.{index}"):
                pass
    assert len(pipeline.exporter.get_finished_spans()) == 11
    assert pipeline.processor.stats().spans_not_buffered == 6


class RecordingProcessor(SpanProcessor):
    """A downstream that records what it is asked to do (a real SpanProcessor, only without export)."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.fail = fail

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        self.calls.append(("on_start", span.name))

    def on_end(self, span: ReadableSpan) -> None:
        self.calls.append(("on_end", span.name))
        if self.fail:
            raise RuntimeError("downstream exploded")

    def shutdown(self) -> None:
        self.calls.append(("shutdown", None))

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self.calls.append(("force_flush", timeout_millis))
        return False


def test_shutdown_and_force_flush_pass_through_with_the_result() -> None:
    downstream = RecordingProcessor()
    processor = ConfidenceSpanProcessor(downstream)
    assert processor.force_flush(1234) is False
    processor.shutdown()
    assert downstream.calls == [("force_flush", 1234), ("shutdown", None)]


def test_a_failing_downstream_never_reaches_the_application() -> None:
    downstream = RecordingProcessor(fail=True)
    provider = TracerProvider()
    provider.add_span_processor(ConfidenceSpanProcessor(downstream))
    tracer = provider.get_tracer("test")
    with (
        tracer.start_as_current_span("root"),
        tracer.start_as_current_span("retrieve", attributes=retrieval_attributes(DOCS)),
    ):
        pass
    assert [call for call in downstream.calls if call[0] == "on_end"] == [
        ("on_end", "retrieve"),
        ("on_end", "root"),
    ]


def test_a_duck_typed_downstream_without_on_ending_is_no_failure(caplog: pytest.LogCaptureFixture) -> None:
    # The processor accepts any object with the four public methods; the SDK's private _on_ending hook is
    # passed on to a downstream that has it, and is no failure for one that has not.
    class Exporting:
        def __init__(self) -> None:
            self.exporter = InMemorySpanExporter()

        def on_start(self, span: Span, parent_context: Any = None) -> None:
            pass

        def on_end(self, span: ReadableSpan) -> None:
            self.exporter.export([span])

        def shutdown(self) -> None:
            pass

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return True

    downstream = Exporting()
    processor = ConfidenceSpanProcessor(downstream)  # type: ignore[arg-type]
    provider = TracerProvider()
    provider.add_span_processor(processor)
    caplog.set_level(logging.WARNING, logger="rag_confidence")
    with provider.get_tracer("t").start_as_current_span("request"):
        pass
    assert [span.name for span in downstream.exporter.get_finished_spans()] == ["request"]
    assert processor.stats().scoring_failures == 0
    assert "failed" not in caplog.text
    provider.shutdown()


def test_a_scoring_error_marks_the_answer_and_keeps_the_span() -> None:
    # Strict validation turns the input warning "no candidates" into an InputValidationError.
    pipeline = make_pipeline("simple", config={"validation": "strict"})
    tracer = pipeline.tracer
    with tracer.start_as_current_span("answer", attributes={semconv.RAG_ANSWER: True}):
        with tracer.start_as_current_span("generate"):
            pass
        record_signals(support_level="high")
    spans = pipeline.spans()
    assert set(spans) == {"answer", "generate"}
    attributes = spans["answer"].attributes or {}
    assert attributes[semconv.RAG_CONFIDENCE_ERROR] == "InputValidationError"
    assert semconv.RAG_CONFIDENCE_TOTAL not in attributes
    assert pipeline.processor.stats().scoring_failures == 1


def test_an_answer_scored_by_the_decorator_passes_through_once(pipeline: Pipeline) -> None:
    @scored_answer(
        tracer_provider=pipeline.tracer_provider,
        meter_provider=pipeline.meter_provider,
        logger_provider=pipeline.logger_provider,
    )
    def answer(question: str) -> str:
        with pipeline.tracer.start_as_current_span("retrieve", attributes=retrieval_attributes(DOCS)):
            pass
        record_signals(support_level="high", has_conflict=False, faithfulness_score=0.88)
        return "Notice is 30 days."

    answer("notice period?")
    spans = pipeline.spans()
    expected = compute_confidence(
        {
            "supportLevel": "high",
            "hasConflict": False,
            "faithfulnessScore": 0.88,
            "candidates": expected_candidates(DOCS),
        }
    )
    assert (spans["answer"].attributes or {})[semconv.RAG_CONFIDENCE_TOTAL] == expected.total
    assert sum(p.count for p in pipeline.metrics()[semconv.METRIC_SCORE].data.data_points) == 1
    assert len(pipeline.logs()) == 1
    assert pipeline.processor.stats().answers_scored == 0  # the decorator scored it, the processor did not
    assert pipeline.processor.stats().pending_traces == 0


def test_config_is_validated_when_the_processor_is_made() -> None:
    from rag_confidence.errors import ConfigValidationError

    with pytest.raises(ConfigValidationError):
        ConfidenceSpanProcessor(SpanProcessor(), config={"retrieval": {"topK": -1}})
    with pytest.raises(ValueError):
        ConfidenceSpanProcessor(SpanProcessor(), max_pending_traces=0)


def test_an_exporter_or_wrong_typed_options_are_refused_when_the_processor_is_made() -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from rag_confidence.errors import UsageError

    # The easy slip: accepted, every span failed in the downstream and none was exported.
    with pytest.raises(UsageError, match=r"BatchSpanProcessor\(InMemorySpanExporter\(\.\.\.\)\)"):
        ConfidenceSpanProcessor(InMemorySpanExporter())  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="background_scoring=...\\) must be True or False, not 'no'"):
        ConfidenceSpanProcessor(SpanProcessor(), background_scoring="no")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="emit_events"):
        ConfidenceSpanProcessor(SpanProcessor(), emit_events="false")  # type: ignore[arg-type]
    ConfidenceSpanProcessor(SpanProcessor(), emit_events=0).shutdown()  # type: ignore[arg-type]  # falsy, as in Python
    with pytest.raises(UsageError, match="meter_provider=...\\) must be a MeterProvider or None, not str"):
        ConfidenceSpanProcessor(SpanProcessor(), meter_provider="otlp")  # type: ignore[arg-type]
    # Accepted, every answer's extraction failed on it: each span forwarded with rag.confidence.error only.
    with pytest.raises(UsageError, match="signal_options=...\\) must be a SignalOptions, not dict"):
        ConfidenceSpanProcessor(SpanProcessor(), signal_options={"rerank_method": "x"})  # type: ignore[arg-type]
    # Duck-typed: the API's own providers pass.
    from opentelemetry._logs import NoOpLoggerProvider
    from opentelemetry.metrics import NoOpMeterProvider

    ConfidenceSpanProcessor(
        SpanProcessor(), meter_provider=NoOpMeterProvider(), logger_provider=NoOpLoggerProvider()
    ).shutdown()


def test_a_failing_downstream_is_logged_without_its_message(caplog: pytest.LogCaptureFixture) -> None:
    # An exporter's error may carry its endpoint's credentials or the payload it choked on.
    message = "export to https://user:" + "SECRET-PASSWORD@collector failed"  # the raise line shows no secret

    class Failing(SpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            raise RuntimeError(message)

    provider = TracerProvider()
    processor = ConfidenceSpanProcessor(Failing())
    provider.add_span_processor(processor)
    caplog.set_level(logging.WARNING, logger="rag_confidence")
    with provider.get_tracer("t").start_as_current_span("request"):
        pass
    assert "the downstream span processor failed in on_end (logged 1 of at most 5 times)" in caplog.text
    assert "RuntimeError (message withheld" in caplog.text and "in on_end" in caplog.text  # the frames stay
    assert "SECRET" not in caplog.text
    provider.shutdown()


def test_background_scoring_forwards_every_span_and_drains_on_flush_and_shutdown() -> None:
    pipeline = make_pipeline("simple-background", max_scoring_queue=4)
    for _ in range(50):
        run_rag_trace(pipeline)
    assert pipeline.processor.force_flush(30_000) is True
    spans = pipeline.exporter.get_finished_spans()
    assert len(spans) == 150
    answers = [span for span in spans if span.name == "rag.pipeline"]
    expected = compute_confidence(
        {
            "supportLevel": "high",
            "hasConflict": False,
            "faithfulnessScore": 0.88,
            "candidates": expected_candidates(DOCS),
        }
    )
    # With a queue of 4, some answers were scored inline by the application thread: all of them are scored.
    assert all((span.attributes or {})[semconv.RAG_CONFIDENCE_TOTAL] == expected.total for span in answers)
    stats = pipeline.processor.stats()
    assert stats.answers_scored == 50 and stats.spans_forwarded == 150

    run_rag_trace(pipeline)
    pipeline.tracer_provider.shutdown()  # drains the worker before the downstream shuts down
    assert len(pipeline.exporter.get_finished_spans()) == 153
