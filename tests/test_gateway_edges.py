"""Gateway edges a real-use review found: multi-member gzip, error messages that must not quote payload
content, a zero queue timeout, settings refused with one clear line, snake_case OTLP/JSON ids, and a SIGTERM
while the downstream hangs."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence.errors import ConfigValidationError, GatewayOverloadedError, GatewayRequestError
from rag_confidence.gateway.admission import Admission
from rag_confidence.gateway.decode import decompress, parse_json
from rag_confidence.gateway.forward import downstream_timeout, grpc_compression

from .test_gateway_e2e import _otlp_json, _post
from .test_gateway_support import (
    LOOPBACK,
    DownstreamReceiver,
    downstream,
    free_port,
    plain_trace,
    rag_trace,
    running_gateway,
    test_config,
    tracer_provider,
)

BIN = Path(sys.executable).parent
__all__ = ["downstream"]  # the fixture, imported for pytest


def _request_bytes(spans: int) -> bytes:
    memory = InMemorySpanExporter()
    plain_trace(tracer_provider(memory, batch=False), spans=spans)
    return encode_spans(memory.get_finished_spans()).SerializeToString()


# -- bodies --------------------------------------------------------------------------------------------------


def test_a_gzip_body_of_several_members_forwards_every_span(downstream: DownstreamReceiver) -> None:
    first, second = _request_bytes(3), _request_bytes(4)
    # Protobuf messages concatenate: the two members decompress to one request of 7 spans.
    body = gzip.compress(first) + gzip.compress(second)
    with running_gateway() as running:
        status, _, payload = _post(
            f"{running.http_url}/v1/traces",
            body,
            {"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"},
        )
        assert status == 200, payload
        assert len(downstream.wait_for_spans(7)) == 7


@pytest.mark.parametrize(
    ("encoding", "body"),
    [
        ("gzip", gzip.compress(b"\x0a\x00") + b"trailing junk"),
        ("gzip", gzip.compress(b"\x0a\x00") + b"\x00\x00\x00\x00"),
        ("deflate", __import__("zlib").compress(b"\x0a\x00") + b"more"),
    ],
    ids=["gzip + junk", "gzip + zero padding", "deflate + trailing data"],
)
def test_data_after_the_compressed_stream_is_refused_not_ignored(encoding: str, body: bytes) -> None:
    with pytest.raises(GatewayRequestError) as caught:
        decompress(body, encoding, 1024)
    assert caught.value.http_status == 400


def test_several_gzip_members_count_against_one_size_limit() -> None:
    member = gzip.compress(b"x" * 600)
    assert decompress(member + member, "gzip", 1200) == b"x" * 1200
    with pytest.raises(GatewayRequestError) as caught:
        decompress(member + member, "gzip", 1199)
    assert caught.value.http_status == 413


def test_many_tiny_gzip_members_are_refused_quickly_and_many_members_read_in_linear_time() -> None:
    empty = gzip.compress(b"")
    started = time.process_time()
    with pytest.raises(GatewayRequestError) as caught:
        decompress(empty * 200_000, "gzip", 4 * 1024 * 1024)  # a 4 MiB body of empty members
    assert caught.value.http_status == 400 and "members" in caught.value.message
    member = gzip.compress(b"a" * 4000)
    assert decompress(member * 1000, "gzip", 4 * 1024 * 1024) == b"a" * 4_000_000
    # Not a speed target: a generous bound that the quadratic reading (seconds) exceeds by far.
    assert time.process_time() - started < 2.0


SECRET = "TOPSECRET-DOCUMENT-CONTENT"


@pytest.mark.parametrize(
    "span",
    [
        {"spanId": SECRET},
        {"startTimeUnixNano": SECRET},
        {"attributes": [{"key": "k", "value": {"intValue": SECRET}}]},
        {"attributes": [{"key": "k", "value": {"doubleValue": SECRET}}]},
        {"attributes": SECRET},
        {"name": 5},
        {"startTimeUnixNano": f"x at ExportTraceServiceRequest.leaked_{SECRET.replace('-', '_')}"},
        {"startTimeUnixNano": f"Failed to parse {SECRET.replace('-', '_')} field: x"},
        {
            "attributes": [
                {"key": "k", "value": {"intValue": f"{SECRET} at ExportTraceServiceRequest.resourceSpans"}}
            ]
        },
    ],
    ids=[
        "spanId",
        "startTimeUnixNano",
        "intValue",
        "doubleValue",
        "attributes",
        "name",
        "value shaped as a path",
        "value shaped as a field",
        "path in a nested value",
    ],
)
def test_json_errors_name_the_field_and_never_quote_its_value(span: dict[str, object]) -> None:
    document = {
        "resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "ab" * 16, "spanId": "cd" * 8, **span}]}]}]
    }
    with pytest.raises(GatewayRequestError) as caught:
        parse_json(json.dumps(document).encode())
    message = caught.value.message
    assert caught.value.http_status == 400
    assert "SECRET" not in message and "leaked" not in message
    field = next(iter(span))
    assert field in message  # says where


def test_snake_case_json_ids_are_read_as_hex_like_camel_case(downstream: DownstreamReceiver) -> None:
    memory = InMemorySpanExporter()
    rag_trace(tracer_provider(memory, batch=False))
    finished = memory.get_finished_spans()
    document = _otlp_json(encode_spans(finished))
    for scope in document["resourceSpans"][0]["scopeSpans"]:
        for span in scope["spans"]:
            for camel, snake in (
                ("traceId", "trace_id"),
                ("spanId", "span_id"),
                ("parentSpanId", "parent_span_id"),
            ):
                if camel in span:
                    span[snake] = span.pop(camel)
    request = parse_json(json.dumps(document).encode())
    ids = {span.span_id for r in request.resource_spans for s in r.scope_spans for span in s.spans}
    assert ids == {s.context.span_id.to_bytes(8, "big") for s in finished}


# -- admission -----------------------------------------------------------------------------------------------


def test_a_zero_queue_timeout_admits_while_a_slot_is_free_and_refuses_at_once_when_none_is() -> None:
    async def scenario() -> tuple[bool, bool]:
        admission = Admission(max_active=1, max_waiting=4, timeout=0.0)
        async with admission.slot():
            admitted = True
            try:
                async with admission.slot():
                    refused = False
            except GatewayOverloadedError:
                refused = True
        async with admission.slot():  # free again
            pass
        return admitted, refused

    assert asyncio.run(scenario()) == (True, True)


def test_a_gateway_with_queue_timeout_zero_serves_requests(downstream: DownstreamReceiver) -> None:
    with running_gateway(test_config(queue_timeout=0.0)) as running:
        status, _, payload = _post(
            f"{running.http_url}/v1/traces", _request_bytes(2), {"Content-Type": "application/x-protobuf"}
        )
        assert status == 200, payload
        assert len(downstream.wait_for_spans(2)) == 2


# -- settings ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "3000"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "3s"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "nan"),
    ],
)
def test_a_downstream_timeout_no_exporter_should_run_with_is_refused(variable: str, value: str) -> None:
    with pytest.raises(ConfigValidationError, match="seconds"):
        downstream_timeout({variable: value})


def test_downstream_timeout_reads_seconds_signal_variable_first() -> None:
    assert downstream_timeout({}) == 4.0
    assert downstream_timeout({"OTEL_EXPORTER_OTLP_TIMEOUT": "7"}) == 7.0
    assert (
        downstream_timeout({"OTEL_EXPORTER_OTLP_TIMEOUT": "7", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "2.5"})
        == 2.5
    )


def test_a_blank_signal_compression_the_sdk_would_prefer_is_refused() -> None:
    from rag_confidence.gateway.forward import check_http_compression

    with pytest.raises(ConfigValidationError, match="gzip, deflate or none"):
        check_http_compression(
            "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
            {"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": " ", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"},
        )
    check_http_compression(
        "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", {"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"}
    )


def test_grpc_compression_none_is_accepted_and_unknown_values_refused() -> None:
    import grpc

    assert grpc_compression(
        "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", {"OTEL_EXPORTER_OTLP_COMPRESSION": "none"}
    ) is (grpc.Compression.NoCompression)
    assert grpc_compression("X", {"X": "GZIP"}) is grpc.Compression.Gzip
    with pytest.raises(ConfigValidationError, match="gzip or none"):
        grpc_compression("X", {"X": "brotli"})


def _gateway_command(*flags: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(BIN / "rag-confidence"),
            "gateway",
            "--grpc-listen",
            f"{LOOPBACK}:0",
            "--http-listen",
            f"{LOOPBACK}:0",
            *flags,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _base_env(**extra: str) -> dict[str, str]:
    env = {
        key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "RAG_CONFIDENCE_"))
    }
    env.update(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://{LOOPBACK}:{free_port()}", OTEL_METRICS_EXPORTER="none")
    env.update(extra)
    return env


@pytest.mark.parametrize(
    ("flags", "extra", "expected"),
    [
        ((), {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TIMEOUT": "5s"}, "expected seconds"),
        (
            (),
            {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_COMPRESSION": "brotli"},
            "gzip or none",
        ),
        ((), {"OTEL_EXPORTER_OTLP_COMPRESSION": "bogus"}, "gzip, deflate or none"),
        # The message names the variable the user set, not its per-signal form.
        ((), {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "OTEL_EXPORTER_OTLP_PROTOCOL=http/json: the"),
        ((), {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "Thrift"}, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL='thrift'"),
        ((), {"OTEL_METRICS_EXPORTER": "prometheus"}, "over OTLP only"),
        (
            (),
            {"OTEL_METRICS_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/json"},
            "metrics protocol",
        ),
        (("--queue-timeout", "nan"), {}, "--queue-timeout: expected a finite number"),
        (
            (),
            {"RAG_CONFIDENCE_GATEWAY_QUEUE_TIMEOUT": "nan"},
            "RAG_CONFIDENCE_GATEWAY_QUEUE_TIMEOUT: expected",
        ),
        (("--shutdown-timeout", "-1"), {}, "--shutdown-timeout must be"),
        (("--max-request-bytes", "-5"), {}, "--max-request-bytes must be positive"),
        (
            (),
            {"RAG_CONFIDENCE_GATEWAY_MAX_REQUEST_BYTES": "0"},
            "RAG_CONFIDENCE_GATEWAY_MAX_REQUEST_BYTES must be",
        ),
        (
            (),
            {"RAG_CONFIDENCE_GATEWAY_MAX_REQUEST_BYTES": "2147483648"},
            "RAG_CONFIDENCE_GATEWAY_MAX_REQUEST_BYTES must be at most 2147483647",
        ),
        (("--max-concurrent-requests", "2147483647"), {}, "plus --max-queued-requests must be at most"),
        ((), {"RAG_CONFIDENCE_GATEWAY_NO_SCORING": "maybe"}, "expected true or false"),
        # Retry-After is whole seconds (HTTP delta-seconds): 1.5 is refused as what it is not.
        (
            (),
            {"RAG_CONFIDENCE_GATEWAY_RETRY_AFTER": "1.5"},
            "RAG_CONFIDENCE_GATEWAY_RETRY_AFTER: expected a whole number, got '1.5'",
        ),
        (("--assembly-max-age", "inf"), {}, "finite"),
        (("--log-level", "verbose"), {}, "invalid choice"),
        (
            ("--tls-cert", "/nonexistent/cert.pem", "--tls-key", "/nonexistent/key.pem"),
            {},
            "cannot use the TLS",
        ),
    ],
    ids=[
        "timeout 5s",
        "compression brotli",
        "http compression bogus",
        "protocol http/json",
        "traces protocol thrift",
        "metrics prometheus",
        "metrics http/json",
        "queue nan",
        "queue nan in the environment",
        "shutdown -1",
        "request bytes -5",
        "request bytes 0 in the environment",
        "request bytes past grpc's int in the environment",
        "streams past grpc's int",
        "kill switch maybe",
        "retry-after 1.5 in the environment",
        "window inf",
        "log level",
        "tls files",
    ],
)
def test_bad_settings_exit_with_one_clear_line_not_a_traceback(
    flags: tuple[str, ...], extra: dict[str, str], expected: str
) -> None:
    result = _gateway_command(*flags, env=_base_env(**extra))
    assert result.returncode == 2, result.stderr
    assert expected in result.stderr
    assert "Traceback" not in result.stderr


def test_a_bad_scoring_config_file_is_one_clear_line(tmp_path: Path) -> None:
    config = tmp_path / "scoring.json"
    config.write_text(json.dumps({"retrieval": {"topK": 0}}))
    result = _gateway_command("--scoring-config", str(config), env=_base_env())
    assert result.returncode == 2 and "retrieval.topK" in result.stderr and "Traceback" not in result.stderr


def test_grpc_compression_none_starts_and_forwards(
    downstream: DownstreamReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "none")
    with running_gateway() as running:
        status, _, payload = _post(
            f"{running.http_url}/v1/traces", _request_bytes(3), {"Content-Type": "application/x-protobuf"}
        )
        assert status == 200, payload
        assert len(downstream.wait_for_spans(3)) == 3


def _gateway_on_grpc_port(port: int) -> subprocess.CompletedProcess[str]:
    command = [
        str(BIN / "rag-confidence"),
        "gateway",
        "--grpc-listen",
        f"{LOOPBACK}:{port}",
        "--http-listen",
        "off",
    ]
    return subprocess.run(command, env=_base_env(), capture_output=True, text=True, timeout=60)


def test_a_busy_grpc_port_is_a_clear_error() -> None:
    with socket.socket() as busy:
        busy.bind((LOOPBACK, 0))
        busy.listen()
        result = _gateway_on_grpc_port(busy.getsockname()[1])
    assert result.returncode == 1 and "cannot listen" in result.stderr and "Traceback" not in result.stderr


def test_a_grpc_port_held_by_another_grpc_server_is_a_clear_error() -> None:
    # grpcio sets SO_REUSEPORT by default: a second gateway started, logged its start-up line and took part of
    # the traffic of the first. A gRPC server on the port stands for that first gateway.
    import grpc

    holder = grpc.server(ThreadPoolExecutor(max_workers=1), options=[("grpc.so_reuseport", 1)])
    port = holder.add_insecure_port(f"{LOOPBACK}:0")
    holder.start()
    try:
        result = _gateway_on_grpc_port(port)
    finally:
        holder.stop(None)
    assert result.returncode == 1 and "cannot listen" in result.stderr and "Traceback" not in result.stderr


def test_main_returns_the_exit_status_for_arguments_argparse_refuses(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from rag_confidence.gateway import main

    assert main(["--no-such-flag"]) == 2
    assert "unrecognized arguments" in capsys.readouterr().err


def test_the_scoring_flag_wins_over_the_no_scoring_variable() -> None:
    from rag_confidence.gateway.command import build_parser
    from rag_confidence.gateway.config import config_from_arguments

    args = build_parser().parse_args(["--scoring"])
    assert config_from_arguments(args, {"RAG_CONFIDENCE_GATEWAY_NO_SCORING": "true"}).scoring_enabled
    args = build_parser().parse_args([])
    assert not config_from_arguments(args, {"RAG_CONFIDENCE_GATEWAY_NO_SCORING": "true"}).scoring_enabled


# -- shutdown ------------------------------------------------------------------------------------------------


@pytest.fixture
def hanging_downstream() -> Iterator[int]:
    """A TCP server that accepts and never answers: a downstream hung mid-request."""
    server = socket.socket()
    server.bind((LOOPBACK, 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(5)
    for connection in held:
        connection.close()
    server.close()


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_sigterm_exits_within_the_grace_while_the_downstream_hangs(
    hanging_downstream: int, protocol: str
) -> None:
    http_port = free_port()
    env = _base_env(
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://{LOOPBACK}:{hanging_downstream}",
        OTEL_EXPORTER_OTLP_PROTOCOL=protocol,
        OTEL_EXPORTER_OTLP_TIMEOUT="20",
    )
    process = subprocess.Popen(
        [
            str(BIN / "rag-confidence"),
            "gateway",
            "--grpc-listen",
            "off",
            "--http-listen",
            f"{LOOPBACK}:{http_port}",
            "--shutdown-timeout",
            "1",
        ],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://{LOOPBACK}:{http_port}/readyz", timeout=1):
                    break
            except OSError:
                assert time.monotonic() < deadline, "the gateway did not start"
                time.sleep(0.1)

        def post(*args: object) -> None:
            # Cut off by the shutdown: what is tested is how long the gateway takes to exit.
            with contextlib.suppress(OSError):
                _post(*args)  # type: ignore[arg-type]

        client = threading.Thread(
            target=post,
            args=(
                f"http://{LOOPBACK}:{http_port}/v1/traces",
                _request_bytes(2),
                {"Content-Type": "application/x-protobuf"},
            ),
            daemon=True,
        )
        client.start()
        time.sleep(1.0)  # the request is now waiting on the hung downstream
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=60)
        elapsed = time.monotonic() - started
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert code == 0
    if protocol == "grpc":
        # Grace (1 s), then the export is cut short (its channel closes), far below the downstream timeout (20 s).
        assert elapsed < 12, elapsed
    else:
        # The HTTP exporter stops retrying but cannot interrupt the attempt in flight: grace plus that attempt,
        # bounded by the downstream timeout (the documented limit), never by retries after it.
        assert elapsed < 1 + 20 + 5, elapsed


# -- a request scoring grows past the limit ------------------------------------------------------------------


def test_a_request_scoring_grows_past_the_downstream_limit_is_split_and_fully_delivered(
    downstream: DownstreamReceiver,
) -> None:
    """The downstream is a grpcio server with its default 4 MiB receive limit, as the Collector's receiver."""
    limit = 4 * 1024 * 1024
    memory = InMemorySpanExporter()
    provider = tracer_provider(memory, batch=False)
    for _ in range(5):
        rag_trace(provider)
    tracer = provider.get_tracer("plain-app")
    for index in range(8):
        with tracer.start_as_current_span(f"bulk {index}") as span:
            span.set_attribute("payload", "x" * 100)
    request = encode_spans(memory.get_finished_spans())
    # Pad the bulk spans so the request sits just under the limit: accepted, then grown by scoring.
    bulk = [
        s
        for r in request.resource_spans
        for sc in r.scope_spans
        for s in sc.spans
        if s.name.startswith("bulk")
    ]
    missing = limit - 300 - request.ByteSize()
    for span in bulk:
        span.attributes[0].value.string_value = "x" * (100 + missing // len(bulk))
    body = request.SerializeToString()
    assert limit - 400 < len(body) <= limit
    total = sum(len(sc.spans) for r in request.resource_spans for sc in r.scope_spans)
    with running_gateway(test_config(max_request_bytes=limit)) as running:
        status, _, payload = _post(
            f"{running.http_url}/v1/traces", body, {"Content-Type": "application/x-protobuf"}
        )
        assert status == 200, payload
        spans = downstream.wait_for_spans(total)
    assert len(spans) == total  # every span, once
    assert len(downstream.requests) >= 2 and all(part.ByteSize() <= limit for part in downstream.requests)
    answers = [s for s in spans if s.name == "answer"]
    assert len(answers) == 5
    assert all(any(kv.key == "rag.confidence.total" for kv in s.attributes) for s in answers)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(st.lists(st.integers(0, 400), min_size=0, max_size=6), min_size=1, max_size=3),
        min_size=1,
        max_size=3,
    ),
    st.integers(120, 2000),
)
def test_split_parts_keep_every_span_in_order_under_its_scope_and_within_the_limit(
    shape: list[list[list[int]]], limit: int
) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from rag_confidence.gateway.split import split_request

    request = ExportTraceServiceRequest()
    for r_index, scopes in enumerate(shape):
        resource_spans = request.resource_spans.add()
        resource_spans.resource.attributes.add(key="service.name").value.string_value = f"svc{r_index}"
        for s_index, sizes in enumerate(scopes):
            scope_spans = resource_spans.scope_spans.add()
            scope_spans.scope.name = f"scope{r_index}.{s_index}"
            for size in sizes:
                scope_spans.spans.add(name="n" * size, trace_id=bytes(16), span_id=bytes(8))

    def flat(message: ExportTraceServiceRequest) -> list[tuple[str, str, str]]:
        return [
            (r.resource.attributes[0].value.string_value, sc.scope.name, s.name)
            for r in message.resource_spans
            for sc in r.scope_spans
            for s in sc.spans
        ]

    parts = split_request(request, limit)
    assert [item for part in parts for item in flat(part)] == flat(request)
    for part in parts:
        spans = [s for r in part.resource_spans for sc in r.scope_spans for s in sc.spans]
        assert part.ByteSize() <= limit or len(spans) == 1  # only a span too large on its own may exceed it


def test_an_answer_whose_attributes_cannot_be_written_costs_no_other_answer_its_score() -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from rag_confidence import semconv
    from rag_confidence.gateway.pipeline import TracePipeline
    from rag_confidence.otel.answer_scoring import AnswerScorer

    memory = InMemorySpanExporter()
    provider = tracer_provider(memory, batch=False)
    rag_trace(provider)
    rag_trace(provider)
    request: ExportTraceServiceRequest = encode_spans(memory.get_finished_spans())
    spans = [span for r in request.resource_spans for sc in r.scope_spans for span in sc.spans]
    first_trace = next(span.trace_id for span in spans if span.name == "retrieve")
    retrieve = next(span for span in spans if span.name == "retrieve" and span.trace_id == first_trace)
    # Only a document at an index no int64 holds: its dropped-documents count must not break the request.
    kept = [kv for kv in retrieve.attributes if not kv.key.startswith(semconv.OI_RETRIEVAL_DOCUMENTS)]
    del retrieve.attributes[:]
    retrieve.attributes.extend(kept)
    retrieve.attributes.add(
        key=f"{semconv.OI_RETRIEVAL_DOCUMENTS}.{2**63}.document.id"
    ).value.string_value = "x"
    prepared = TracePipeline(AnswerScorer()).prepare(request)
    answers = [
        span
        for r in request.resource_spans
        for sc in r.scope_spans
        for span in sc.spans
        if span.name == "answer"
    ]
    assert len(prepared.scored) + prepared.failed_answers == 2 and len(prepared.scored) >= 1
    assert all(
        any(kv.key in (semconv.RAG_CONFIDENCE_TOTAL, semconv.RAG_CONFIDENCE_ERROR) for kv in span.attributes)
        for span in answers
    )


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_the_downstream_named_in_the_start_up_log_hides_its_password(
    monkeypatch: pytest.MonkeyPatch, protocol: str
) -> None:
    from rag_confidence.gateway.forward import forwarder_from_environment

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector-user:hunt/er2@127.0.0.1:9")
    forwarder = forwarder_from_environment()
    try:
        assert "hunt" not in forwarder.description  # a raw "/" in the password included
        assert "collector-user:***@127.0.0.1:9" in forwarder.description
    finally:
        forwarder.shutdown()
