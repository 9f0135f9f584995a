"""End to end over real OTLP: ``configure_from_env()`` and zero-code ``opentelemetry-instrument`` send scored
spans, the confidence metrics and the evaluation event to a loopback OTLP/gRPC receiver.

The receiver is grpcio serving the opentelemetry-proto collector services on 127.0.0.1; the applications run
in subprocesses because global providers can be set once per process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from rag_confidence import semconv
from rag_confidence.scoring import compute_confidence

BIN = Path(sys.executable).parent


class Receiver(
    trace_service_pb2_grpc.TraceServiceServicer,
    metrics_service_pb2_grpc.MetricsServiceServicer,
    logs_service_pb2_grpc.LogsServiceServicer,
):
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.traces: list[trace_service_pb2.ExportTraceServiceRequest] = []
        self.metrics: list[metrics_service_pb2.ExportMetricsServiceRequest] = []
        self.logs: list[logs_service_pb2.ExportLogsServiceRequest] = []

    def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 - the gRPC method name
        with self.lock:
            if isinstance(request, trace_service_pb2.ExportTraceServiceRequest):
                self.traces.append(request)
                return trace_service_pb2.ExportTraceServiceResponse()
            if isinstance(request, metrics_service_pb2.ExportMetricsServiceRequest):
                self.metrics.append(request)
                return metrics_service_pb2.ExportMetricsServiceResponse()
            self.logs.append(request)
            return logs_service_pb2.ExportLogsServiceResponse()

    def spans(self) -> dict[str, Any]:
        with self.lock:
            return {
                span.name: span
                for request in self.traces
                for resource in request.resource_spans
                for scope in resource.scope_spans
                for span in scope.spans
            }

    def last_sum(self, name: str, **attributes: str) -> int | None:
        """The last exported value of a sum metric's point with exactly ``attributes`` (cumulative)."""
        found = None
        with self.lock:
            for request in self.metrics:
                for resource in request.resource_metrics:
                    for scope in resource.scope_metrics:
                        for metric in scope.metrics:
                            if metric.name != name:
                                continue
                            for point in metric.sum.data_points:
                                if {a.key: a.value.string_value for a in point.attributes} == attributes:
                                    found = point.as_int
        return found

    def metric_names(self) -> set[str]:
        with self.lock:
            return {
                metric.name
                for request in self.metrics
                for resource in request.resource_metrics
                for scope in resource.scope_metrics
                for metric in scope.metrics
            }

    def log_records(self) -> list[Any]:
        with self.lock:
            return [
                record
                for request in self.logs
                for resource in request.resource_logs
                for scope in resource.scope_logs
                for record in scope.log_records
            ]


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, int]]:
    servicer = Receiver()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(servicer, server)
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(servicer, server)
    logs_service_pb2_grpc.add_LogsServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, port
    server.stop(grace=None)


@pytest.fixture
def http_receiver() -> Iterator[tuple[Receiver, int]]:
    """The same collector services over OTLP/HTTP (protobuf bodies on /v1/traces, /v1/metrics, /v1/logs)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    servicer = Receiver()
    requests = {
        "/v1/traces": trace_service_pb2.ExportTraceServiceRequest,
        "/v1/metrics": metrics_service_pb2.ExportMetricsServiceRequest,
        "/v1/logs": logs_service_pb2.ExportLogsServiceRequest,
    }

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server method name
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding") == "gzip":
                import gzip

                body = gzip.decompress(body)
            request = requests[self.path].FromString(body)
            response = servicer.Export(request, None)
            payload = response.SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the http.server signature
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield servicer, server.server_address[1]
    server.shutdown()
    server.server_close()


def attributes(proto_attributes: Any) -> dict[str, Any]:
    return {item.key: _value(item.value) for item in proto_attributes}


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    return getattr(value, kind) if kind else None


# A RAG answer traced with the plain OpenTelemetry API: no rag_confidence import, as in a zero-code setup.
APP = textwrap.dedent(
    f"""
    import json, sys
    from opentelemetry import trace

    tracer = trace.get_tracer("app")
    with tracer.start_as_current_span("answer") as answer:
        answer.set_attribute({semconv.RAG_SIGNAL_SUPPORT_LEVEL!r}, "high")
        answer.set_attribute({semconv.RAG_SIGNAL_HAS_CONFLICT!r}, False)
        with tracer.start_as_current_span("search", kind=trace.SpanKind.CLIENT) as search:
            search.set_attribute({semconv.GEN_AI_OPERATION_NAME!r}, "retrieval")
            search.set_attribute({semconv.RAG_RETRIEVAL_METHOD!r}, "vector")
            search.set_attribute(
                {semconv.GEN_AI_RETRIEVAL_DOCUMENTS!r},
                json.dumps([{{"id": "a", "score": 0.9}}, {{"id": "b", "score": 0.7}}]),
            )
        # An inline judge logs its verdict as the GenAI event, in the answer's context.
        from opentelemetry import _logs
        _logs.get_logger("judge").emit(
            event_name={semconv.GEN_AI_EVALUATION_RESULT!r},
            attributes={{
                {semconv.GEN_AI_EVALUATION_NAME!r}: "faithfulness",
                {semconv.GEN_AI_EVALUATION_SCORE_VALUE!r}: 0.93,
            }},
        )
    """
)
EXPECTED_INPUTS = {
    "supportLevel": "high",
    "hasConflict": False,
    "faithfulnessScore": 0.93,  # from the judge's log record (EvaluationLogProcessor, registered by the setup)
    "candidates": [
        {"retrievalScores": {"vector": 0.9}, "combinedScore": 0.9, "documentId": "a", "rank": 1},
        {"retrievalScores": {"vector": 0.7}, "combinedScore": 0.7, "documentId": "b", "rank": 2},
    ],
}


def otlp_env(port: int, **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    env.update(
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
        OTEL_EXPORTER_OTLP_INSECURE="true",
        OTEL_SERVICE_NAME="rag-app",
        OTEL_METRIC_EXPORT_INTERVAL="200",
        OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="*",
        **extra,
    )
    return env


def run_program(program: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``program`` in a fresh interpreter (global providers can be set once per process)."""
    return subprocess.run(
        [sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=120
    )


def exporters_off_env() -> dict[str, str]:
    """The environment without OTEL_* settings and with every exporter off: setup only, nothing sent."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    env.update(OTEL_TRACES_EXPORTER="none", OTEL_METRICS_EXPORTER="none", OTEL_LOGS_EXPORTER="none")
    return env


def run_instrumented(tmp_path: Path, source: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``source`` as an application under ``opentelemetry-instrument`` (zero-code), as a user would."""
    app = tmp_path / "app.py"
    app.write_text(source)
    return subprocess.run(
        [str(BIN / "opentelemetry-instrument"), sys.executable, str(app)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def wait_for(condition: Any, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for the receiver"
        time.sleep(0.05)


def assert_scored_over_otlp(servicer: Receiver) -> None:
    wait_for(lambda: "answer" in servicer.spans())
    wait_for(lambda: semconv.METRIC_SCORE in servicer.metric_names() and servicer.log_records())
    expected = compute_confidence(EXPECTED_INPUTS)
    answer = servicer.spans()["answer"]
    scored = attributes(answer.attributes)
    assert scored[semconv.RAG_CONFIDENCE_TOTAL] == expected.total
    assert scored[semconv.RAG_CONFIDENCE_ACTION] == expected.recommended_action
    assert scored[semconv.RAG_CONFIDENCE_WARNINGS] == [warning.code for warning in expected.meta.warnings]
    assert attributes(servicer.spans()["search"].attributes).keys().isdisjoint({semconv.RAG_CONFIDENCE_TOTAL})
    assert servicer.metric_names() >= {
        semconv.METRIC_SCORE,
        semconv.METRIC_TIER_SCORE,
        semconv.METRIC_DIMENSION_SCORE,
        semconv.METRIC_SCORING_DURATION,
    }
    (event,) = [
        r
        for r in servicer.log_records()
        if r.event_name == semconv.GEN_AI_EVALUATION_RESULT
        and attributes(r.attributes)[semconv.GEN_AI_EVALUATION_NAME] == semconv.RAG_CONFIDENCE_EVALUATION_NAME
    ]
    assert event.trace_id == answer.trace_id and event.span_id == answer.span_id
    assert attributes(event.attributes)[semconv.GEN_AI_EVALUATION_SCORE_VALUE] == expected.total
    # The processor's own pipeline metrics reach the global meter provider too (it was made before the SDK
    # set that provider; the API's proxy hands the instruments over). The last export is at shutdown.
    outcome = semconv.METRIC_ATTR_PROCESSOR_OUTCOME
    wait_for(lambda: servicer.last_sum(semconv.METRIC_PROCESSOR_SPANS_FORWARDED) == 2)
    assert servicer.last_sum(semconv.METRIC_PROCESSOR_SPANS_RECEIVED) == 2
    assert (
        servicer.last_sum(semconv.METRIC_PROCESSOR_ANSWERS, **{outcome: semconv.PIPELINE_OUTCOME_SCORED}) == 1
    )
    assert (
        servicer.last_sum(semconv.METRIC_PROCESSOR_ANSWERS, **{outcome: semconv.PIPELINE_OUTCOME_FAILED}) == 0
    )


def test_configure_from_env_sends_traces_metrics_and_events_over_otlp(receiver: tuple[Receiver, int]) -> None:
    servicer, port = receiver
    program = "from rag_confidence.otel import configure_from_env\ntelemetry = configure_from_env()\n"
    program += APP + "telemetry.shutdown()\n"
    result = run_program(program, otlp_env(port))
    assert result.returncode == 0, result.stderr
    assert_scored_over_otlp(servicer)


def test_configure_from_env_follows_the_otlp_protocol_variables(
    receiver: tuple[Receiver, int], http_receiver: tuple[Receiver, int]
) -> None:
    # OTEL_EXPORTER_OTLP_PROTOCOL picks HTTP for every signal; a per-signal variable overrides it for traces.
    # (The exporters chosen by default were always gRPC before.)
    grpc_servicer, grpc_port = receiver
    http_servicer, http_port = http_receiver
    program = "from rag_confidence.otel import configure_from_env\ntelemetry = configure_from_env()\n"
    program += APP + "telemetry.shutdown()\n"
    env = otlp_env(
        http_port,
        OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="grpc",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"http://127.0.0.1:{grpc_port}",
    )
    result = run_program(program, env)
    assert result.returncode == 0, result.stderr
    wait_for(lambda: "answer" in grpc_servicer.spans())
    assert semconv.RAG_CONFIDENCE_TOTAL in attributes(grpc_servicer.spans()["answer"].attributes)
    wait_for(lambda: semconv.METRIC_SCORE in http_servicer.metric_names() and http_servicer.log_records())
    assert http_servicer.spans() == {} and grpc_servicer.log_records() == []


def test_an_otlp_protocol_the_exporters_do_not_speak_is_a_setup_error() -> None:
    program = "from rag_confidence.otel import configure_from_env\nconfigure_from_env()\n"
    result = run_program(program, otlp_env(1, OTEL_EXPORTER_OTLP_PROTOCOL="http/json"))
    assert result.returncode == 1
    assert "TelemetrySetupError: OTEL_EXPORTER_OTLP_PROTOCOL='http/json'" in result.stderr


@pytest.mark.parametrize("background", ["false", "true"])
def test_opentelemetry_instrument_scores_with_zero_code_when_selected(
    receiver: tuple[Receiver, int], tmp_path: Path, background: str
) -> None:
    servicer, port = receiver
    result = run_instrumented(
        tmp_path,
        APP,
        otlp_env(
            port,
            OTEL_PYTHON_CONFIGURATOR=semconv.CONFIGURATOR_NAME,
            RAG_CONFIDENCE_BACKGROUND_SCORING=background,
        ),
    )
    assert result.returncode == 0, result.stderr
    assert_scored_over_otlp(servicer)


OWN_PROVIDER_APP = (
    textwrap.dedent(
        """
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    trace.set_tracer_provider(provider)  # the application's own set-up, as in the README's quick start
    """
    )
    + APP
    + textwrap.dedent(
        """
    print(trace.get_tracer_provider() is provider, sorted(span.name for span in memory.get_finished_spans()))
    """
    )
)


def test_installed_but_not_selected_and_alone_the_configurator_sets_nothing_up(
    receiver: tuple[Receiver, int], tmp_path: Path
) -> None:
    # No configurator named and none other installed: opentelemetry-instrument would set up no providers, so
    # ours must not either (it did, and the application's own TracerProvider was refused).
    servicer, port = receiver
    result = run_instrumented(tmp_path, OWN_PROVIDER_APP, otlp_env(port, OTEL_TRACES_EXPORTER="otlp"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[0] == "True ['answer', 'search']"
    assert "Overriding of current TracerProvider" not in result.stderr
    time.sleep(0.5)
    assert servicer.spans() == {} and servicer.log_records() == []


FAKE_DISTRO = """
from opentelemetry.sdk._configuration import _OTelSDKConfigurator


class FakeDistroConfigurator(_OTelSDKConfigurator):
    def _configure(self, **kwargs):
        print("fake distro configured")
        super()._configure(**kwargs)
"""


def test_installed_but_not_selected_it_runs_the_configurator_that_would_have_run(
    receiver: tuple[Receiver, int], tmp_path: Path
) -> None:
    # Another configurator installed (a distro's): opentelemetry-instrument may load ours first and skip that
    # one, so ours runs it. Our configurator is called directly here, as if loaded first.
    servicer, port = receiver
    (tmp_path / "fake_distro.py").write_text(FAKE_DISTRO)
    dist_info = tmp_path / "fake_distro-1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-distro\nVersion: 1.0\n")
    (dist_info / "entry_points.txt").write_text(
        "[opentelemetry_configurator]\nfake = fake_distro:FakeDistroConfigurator\n"
    )
    program = (
        "from rag_confidence.otel import RagConfidenceConfigurator\n"
        "RagConfidenceConfigurator().configure()\n" + APP + "trace.get_tracer_provider().shutdown()\n"
    )
    env = otlp_env(port, OTEL_TRACES_EXPORTER="otlp", OTEL_METRICS_EXPORTER="none", OTEL_LOGS_EXPORTER="none")
    env["PYTHONPATH"] = str(tmp_path)
    result = run_program(program, env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["fake distro configured"]
    wait_for(lambda: {"answer", "search"} <= set(servicer.spans()))
    assert semconv.RAG_CONFIDENCE_TOTAL not in attributes(servicer.spans()["answer"].attributes)


def test_configure_from_env_twice_keeps_the_first_setup_and_scores_once(
    receiver: tuple[Receiver, int],
) -> None:
    servicer, port = receiver
    program = (
        "from rag_confidence.otel import configure_from_env\n"
        "telemetry = configure_from_env()\n"
        "again = configure_from_env({'preset': 'production-v0.3'})\n"
        "assert again is telemetry, 'the second call returns the first setup'\n"
    )
    program += APP + "telemetry.shutdown()\n"
    result = run_program(program, otlp_env(port))
    assert result.returncode == 0, result.stderr
    assert "configure_from_env was called again" in result.stderr
    assert_scored_over_otlp(servicer)  # one event, one scored answer: not scored twice


def test_configure_from_env_after_another_tracer_provider_raises_a_clear_error() -> None:
    program = (
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from rag_confidence.errors import TelemetrySetupError\n"
        "from rag_confidence.otel import configure_from_env\n"
        "trace.set_tracer_provider(TracerProvider())\n"
        "try:\n"
        "    configure_from_env()\n"
        "except TelemetrySetupError as error:\n"
        "    print(error)\n"
        "else:\n"
        "    raise SystemExit('no error')\n"
    )
    env = exporters_off_env()
    result = run_program(program, env)
    assert result.returncode == 0, result.stderr
    assert "a global tracer provider is set already (TracerProvider)" in result.stdout
    assert "add_span_processor(ConfidenceSpanProcessor(" in result.stdout


def test_zero_code_with_a_bad_scoring_config_still_exports_telemetry_unscored(
    receiver: tuple[Receiver, int], tmp_path: Path
) -> None:
    servicer, port = receiver
    result = run_instrumented(
        tmp_path,
        APP,
        otlp_env(
            port,
            OTEL_PYTHON_CONFIGURATOR=semconv.CONFIGURATOR_NAME,
            RAG_CONFIDENCE_CONFIG=str(tmp_path / "missing.json"),
        ),
    )
    assert result.returncode == 0, result.stderr
    assert "missing.json" in result.stderr and "WITHOUT confidence scoring" in result.stderr
    wait_for(lambda: {"answer", "search"} <= set(servicer.spans()))
    assert semconv.RAG_CONFIDENCE_TOTAL not in attributes(servicer.spans()["answer"].attributes)


def test_configure_from_env_under_the_zero_code_configurator_returns_its_setup(
    receiver: tuple[Receiver, int], tmp_path: Path
) -> None:
    # The same application run locally with configure_from_env() and in production under
    # opentelemetry-instrument with our configurator selected: the call must not fail there.
    servicer, port = receiver
    result = run_instrumented(
        tmp_path,
        "from rag_confidence.otel import configure_from_env\n"
        "telemetry = configure_from_env()\n"
        "assert telemetry.processor is not None, 'the configurator installed scoring'\n" + APP,
        otlp_env(port, OTEL_PYTHON_CONFIGURATOR=semconv.CONFIGURATOR_NAME),
    )
    assert result.returncode == 0, result.stderr
    assert "called again" not in result.stderr  # not a mistake here: no warning
    assert_scored_over_otlp(servicer)


def test_configure_from_env_reads_the_scoring_config_file_as_the_zero_code_setup_does(
    receiver: tuple[Receiver, int], tmp_path: Path
) -> None:
    servicer, port = receiver
    config = tmp_path / "scoring.json"
    # An answerAt of 10 and no review-on-warnings: the app's answer is "answer", not the default "review".
    config.write_text(json.dumps({"actionPolicy": {"answerAt": 10, "reviewOnWarnings": []}}))
    program = "from rag_confidence.otel import configure_from_env\ntelemetry = configure_from_env()\n"
    program += APP + "telemetry.shutdown()\n"
    result = run_program(program, otlp_env(port, RAG_CONFIDENCE_CONFIG=str(config)))
    assert result.returncode == 0, result.stderr
    wait_for(lambda: "answer" in servicer.spans())
    expected = compute_confidence(EXPECTED_INPUTS, json.loads(config.read_text()))
    scored = attributes(servicer.spans()["answer"].attributes)
    assert scored[semconv.RAG_CONFIDENCE_ACTION] == expected.recommended_action == "answer"


def test_configure_from_env_refuses_an_invalid_config_file_before_installing_anything(tmp_path: Path) -> None:
    config = tmp_path / "scoring.json"
    config.write_text(json.dumps({"retrieval": {"topK": 0}}))
    program = (
        "from opentelemetry import trace\n"
        "from rag_confidence.errors import ConfigValidationError\n"
        "from rag_confidence.otel import configure_from_env\n"
        "try:\n"
        "    configure_from_env()\n"
        "except ConfigValidationError as error:\n"
        "    print('refused:', error.path)\n"
        "print(type(trace.get_tracer_provider()).__name__)\n"
    )
    env = exporters_off_env()
    env["RAG_CONFIDENCE_CONFIG"] = str(config)
    result = run_program(program, env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["refused:", "retrieval.topK", "ProxyTracerProvider"]


def test_a_misspelt_background_switch_is_logged_and_read_as_false(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from rag_confidence.otel.setup import ENV_BACKGROUND_SCORING, _flag

    monkeypatch.setenv(ENV_BACKGROUND_SCORING, "ture")
    with caplog.at_level("WARNING"):
        assert _flag(ENV_BACKGROUND_SCORING) is False
    assert "not true or false" in caplog.text
    monkeypatch.setenv(ENV_BACKGROUND_SCORING, " TRUE ")
    assert _flag(ENV_BACKGROUND_SCORING) is True


@pytest.mark.parametrize(
    ("option", "refusal"),
    [
        (
            'signal_options={"rerank_method": "x"}',
            "configure_from_env(signal_options=...) must be a SignalOptions, not dict",
        ),
        ('emit_events="no"', "configure_from_env(emit_events=...) must be True or False, not 'no'"),
        (
            'background_scoring="off"',
            "configure_from_env(background_scoring=...) must be True or False, not 'off'",
        ),
        (
            'meter_provider="otlp"',
            "configure_from_env(meter_provider=...) must be a MeterProvider or None, not str",
        ),
    ],
)
def test_configure_from_env_refuses_a_wrong_typed_option_before_installing_anything(
    option: str, refusal: str
) -> None:
    # Refused once the SDK had set its tracer provider, the application could not call it again corrected.
    program = (
        "from opentelemetry import trace\n"
        "from rag_confidence.errors import UsageError\n"
        "from rag_confidence.otel import configure_from_env\n"
        "try:\n"
        f"    configure_from_env({option})\n"
        "except UsageError as error:\n"
        "    print('refused:', error)\n"
        "print(type(trace.get_tracer_provider()).__name__)\n"
    )
    result = run_program(program, exporters_off_env())
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"refused: {refusal}", "ProxyTracerProvider"]
