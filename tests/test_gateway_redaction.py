"""The downstream's credentials stay out of the gateway's log, whoever logs: the gateway, the SDK exporters
(failed exports, unparsable headers) or urllib3 (request lines at debug level). Real subprocesses, a real HTTP
downstream on loopback."""

from __future__ import annotations

import http.server
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence.errors import ConfigValidationError
from rag_confidence.gateway.redaction import RedactingFilter, check_credentials, secrets_from_environment

from .test_gateway_shutdown import _wait_ready
from .test_gateway_support import free_port, plain_trace, tracer_provider

_SOURCE = str(Path(__file__).resolve().parents[1] / "src")
SECRET = "SECRET-" + "TOKEN-123"  # built, so no traceback line of this file shows it


class _HttpDownstream(http.server.ThreadingHTTPServer):
    """An OTLP/HTTP receiver that accepts everything (an empty ExportTraceServiceResponse)."""

    def __init__(self) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


@pytest.fixture
def http_downstream() -> Iterator[_HttpDownstream]:
    server = _HttpDownstream()
    yield server
    server.shutdown()
    server.server_close()


def _env(**variables: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_EXPORTER_OTLP")}
    env.update(PYTHONPATH=_SOURCE + os.pathsep + os.environ.get("PYTHONPATH", ""), **variables)
    env.setdefault("OTEL_METRICS_EXPORTER", "none")
    return env


def _command(http_port: int) -> list[str]:
    return [
        sys.executable,
        "-c",
        "import sys; from rag_confidence.gateway import main; sys.exit(main(sys.argv[1:]))",
        "--grpc-listen",
        "off",
        "--http-listen",
        f"127.0.0.1:{http_port}",
        "--log-level",
        "DEBUG",
    ]


def _post_one_trace(http_port: int) -> int:
    import urllib.error
    import urllib.request

    memory = InMemorySpanExporter()
    plain_trace(tracer_provider(memory, batch=False), spans=2)
    request = urllib.request.Request(
        f"http://127.0.0.1:{http_port}/v1/traces",
        data=encode_spans(memory.get_finished_spans()).SerializeToString(),
        headers={"Content-Type": "application/x-protobuf"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def _run_and_log(env: dict[str, str], expected_status: int) -> str:
    """Start the gateway at DEBUG, send it one trace, stop it; its whole log."""
    http_port = free_port()
    process = subprocess.Popen(_command(http_port), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_ready(f"http://127.0.0.1:{http_port}/readyz", process)
        assert _post_one_trace(http_port) == expected_status
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return stderr.decode(errors="replace")


def test_a_query_token_of_the_http_downstream_is_masked_in_urllib3s_request_lines(
    http_downstream: _HttpDownstream,
) -> None:
    # urllib3 logs every request line at debug level, query string included.
    port = http_downstream.server_address[1]
    log = _run_and_log(
        _env(
            OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"http://127.0.0.1:{port}/v1/traces?api_key={SECRET}",
            OTEL_EXPORTER_OTLP_HEADERS=f"x-api-key={SECRET}-H",
        ),
        200,
    )
    assert '"POST /v1/traces?***' in log  # the line is there, its token masked
    assert "SECRET" not in log


def test_a_failing_http_downstream_is_logged_without_its_query_token() -> None:
    # The SDK logs each transient error with the URL it failed to reach.
    dead = free_port()
    log = _run_and_log(
        _env(
            OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{dead}?token={SECRET}",
            OTEL_EXPORTER_OTLP_TIMEOUT="2",
        ),
        503,
    )
    assert "***" in log and "SECRET" not in log


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://user:{SECRET}@127.0.0.1:4317",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            },
            "OTEL_EXPORTER_OTLP_ENDPOINT: a user and password in a gRPC endpoint are never sent",
        ),
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
                "OTEL_EXPORTER_OTLP_TRACES_HEADERS": f'authorization="Bearer {SECRET}"',
            },
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS: the header 'authorization' is not name=value with a URL-encoded",
        ),
    ],
    ids=["grpc-userinfo", "quoted-header"],
)
def test_credentials_the_exporters_would_only_log_stop_the_gateway(
    variables: dict[str, str], message: str
) -> None:
    result = subprocess.run(_command(free_port()), env=_env(**variables), capture_output=True, timeout=60)
    stderr = result.stderr.decode(errors="replace")
    assert result.returncode == 2, stderr
    assert message in stderr and "SECRET" not in stderr and "Traceback" not in stderr


def test_check_credentials_takes_what_the_exporters_accept() -> None:
    check_credentials(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "https://user:pw@collector:4318",  # HTTP sends userinfo (basic auth)
            "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer abc, x-tenant = acme ,api-key=a%22b",
        }
    )
    with pytest.raises(ConfigValidationError, match="entry 2 is not name=value"):
        check_credentials({"OTEL_EXPORTER_OTLP_HEADERS": "a=b,no-equals-sign"})
    with pytest.raises(ConfigValidationError, match="OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"):
        check_credentials(
            {
                "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "grpc://u:p@collector:4317",
                "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "grpc",
            }
        )


def test_secrets_are_taken_as_written_and_decoded_and_replaced_longest_first() -> None:
    secrets = secrets_from_environment(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "https://user:p%40ss@collector:4318/v1?token=abc%2Fdef",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "authorization=Bearer%20xyz,x=1",
        },
        ["gateway-token", None],
    )
    for value in ("p%40ss", "p@ss", "token=abc%2Fdef", "token=abc/def", "Bearer%20xyz", "Bearer xyz"):
        assert value in secrets
    assert "gateway-token" in secrets and "1" not in secrets  # too short to mask without mangling the log
    assert secrets == sorted(secrets, key=len, reverse=True)

    record = logging.LogRecord(
        "x", logging.ERROR, __file__, 1, "failed: %s", ("https://user:p@ss@collector?token=abc/def",), None
    )
    try:
        raise RuntimeError("auth Bearer xyz refused")
    except RuntimeError:
        record.exc_info = sys.exc_info()
    assert RedactingFilter(secrets).filter(record) is True
    assert record.getMessage() == "failed: https://user:***@collector?***"
    assert record.exc_text is not None and "RuntimeError: auth *** refused" in record.exc_text


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('ab=%" ,;\\\t\r\n\xa0\x01')), max_size=24))
def test_the_header_check_refuses_exactly_what_the_sdk_would_skip(headers: str) -> None:
    # What the exporters do with the variable: parse_env_headers(liberal=True) skips (and logs) an entry that,
    # stripped, matches neither its strict nor its liberal pattern.
    from opentelemetry.util import re as sdk_re

    skipped = any(
        entry
        and not (
            sdk_re._HEADER_PATTERN.fullmatch(entry.strip())
            or sdk_re._LIBERAL_HEADER_PATTERN.fullmatch(entry.strip())
        )
        for entry in sdk_re._DELIMITER_PATTERN.split(headers)
    )
    try:
        check_credentials({"OTEL_EXPORTER_OTLP_HEADERS": headers})
        refused = False
    except ConfigValidationError:
        refused = True
    assert refused == skipped


def test_only_the_variables_the_exporters_read_are_checked() -> None:
    bad = 'authorization="Bearer x"'
    # A trailing newline (a Kubernetes Secret made --from-file) is stripped by the SDK: no refusal.
    check_credentials(
        {"OTEL_EXPORTER_OTLP_HEADERS": "api-key=abc123\n", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "k=v\r\n"}
    )
    # Traces read their own variable; the general one only matters while metrics are exported.
    check_credentials(
        {
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "api-key=abc",
            "OTEL_EXPORTER_OTLP_HEADERS": bad,
            "OTEL_METRICS_EXPORTER": "none",
        }
    )
    with pytest.raises(
        ConfigValidationError, match="^OTEL_EXPORTER_OTLP_HEADERS: the header 'authorization'"
    ):
        check_credentials(
            {"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "api-key=abc", "OTEL_EXPORTER_OTLP_HEADERS": bad}
        )
    check_credentials({"OTEL_EXPORTER_OTLP_METRICS_HEADERS": bad, "OTEL_METRICS_EXPORTER": "none"})
    # The traces protocol applies to whichever endpoint the traces go to.
    with pytest.raises(ConfigValidationError, match="^OTEL_EXPORTER_OTLP_ENDPOINT: a user and password"):
        check_credentials(
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://user:pw@collector:4317",
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
                "OTEL_METRICS_EXPORTER": "none",
            }
        )


def test_only_credentials_are_masked_and_a_record_that_cannot_be_formatted_is_masked_too() -> None:
    secrets = secrets_from_environment(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "https://glc_token123@collector:4318",  # a token as the user name
            "OTEL_EXPORTER_OTLP_HEADERS": "x-scope-orgid=prod,x-honeycomb-dataset=traces,x-honeycomb-team=hc123",
        }
    )
    assert "glc_token123" in secrets and "hc123" in secrets
    assert "prod" not in secrets and "traces" not in secrets  # a tenant and a dataset are no credentials
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "%s %s", ("https://glc_token123@h",), None)
    assert RedactingFilter(secrets).filter(record) is True
    assert "glc_token123" not in record.getMessage() and "***@h" in record.getMessage()
