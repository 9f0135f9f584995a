"""Bearer token on both listeners (on and off), TLS and client certificates with generated certificates."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rag_confidence.gateway import TlsSettings
from tests.test_gateway_support import (
    DownstreamReceiver,
    Recording,
    downstream,
    plain_trace,
    running_gateway,
    test_config,
    tracer_provider,
)

__all__ = ["downstream"]
TOKEN = "s3cret-token-0123456789"


def _body() -> bytes:
    memory = InMemorySpanExporter()
    plain_trace(tracer_provider(memory, batch=False), spans=2)
    return encode_spans(memory.get_finished_spans()).SerializeToString()


def _http_status(
    url: str, body: bytes, headers: dict[str, str], context: ssl.SSLContext | None = None
) -> int:
    request = urllib.request.Request(
        url, data=body, headers={"Content-Type": "application/x-protobuf", **headers}
    )
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def _grpc_code(target: str, body: bytes, metadata: tuple[tuple[str, str], ...] = ()) -> grpc.StatusCode:
    with grpc.insecure_channel(target) as channel:
        export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
        try:
            export(body, metadata=metadata, timeout=10)
        except grpc.RpcError as error:
            return error.code()
    return grpc.StatusCode.OK


def test_bearer_token_required_on_both_listeners_health_stays_open(downstream: DownstreamReceiver) -> None:
    body = _body()
    with running_gateway(test_config(auth_token=TOKEN)) as running:
        url = f"{running.http_url}/v1/traces"
        assert _http_status(url, body, {}) == 401
        assert _http_status(url, body, {"Authorization": "Bearer wrong"}) == 401
        assert _http_status(url, body, {"Authorization": f"Basic {TOKEN}"}) == 401
        assert _http_status(url, body, {"Authorization": f"Bearer {TOKEN}"}) == 200
        target = f"127.0.0.1:{running.grpc_port}"
        assert _grpc_code(target, body) == grpc.StatusCode.UNAUTHENTICATED
        assert (
            _grpc_code(target, body, (("authorization", "Bearer nope"),)) == grpc.StatusCode.UNAUTHENTICATED
        )
        assert _grpc_code(target, body, (("authorization", f"Bearer {TOKEN}"),)) == grpc.StatusCode.OK
        # The SDK exporters authenticate with OTEL_EXPORTER_OTLP_HEADERS-style headers.
        exporter = Recording(HttpSpanExporter(endpoint=url, headers={"Authorization": f"Bearer {TOKEN}"}))
        provider = tracer_provider(exporter)
        plain_trace(provider, spans=2)
        provider.shutdown()
        assert exporter.results == [SpanExportResult.SUCCESS]
        assert urllib.request.urlopen(f"{running.http_url}/healthz", timeout=5).status == 200
        assert urllib.request.urlopen(f"{running.http_url}/readyz", timeout=5).status == 200
        assert (
            len(downstream.wait_for_spans(6)) == 6
        )  # 2 (HTTP) + 2 (gRPC) + 2 (exporter); refused ones never


def test_without_a_token_requests_need_no_authorization(downstream: DownstreamReceiver) -> None:
    body = _body()
    with running_gateway() as running:
        assert _http_status(f"{running.http_url}/v1/traces", body, {}) == 200
        assert _grpc_code(f"127.0.0.1:{running.grpc_port}", body) == grpc.StatusCode.OK


# ---------------------------------------------------------------------------------------------------- TLS


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Certificate | None,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool = False,
    server: bool = False,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer.subject if issuer is not None else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        # Python 3.13's default context sets VERIFY_X509_STRICT: issued certificates need an AKI.
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False
        )
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        ).add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    elif not ca:
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
    return builder.sign(issuer_key, hashes.SHA256())


def _pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("pki")
    ca_key = _key()
    ca = _certificate("test-ca", ca_key, None, ca_key, ca=True)
    server_key, client_key = _key(), _key()
    server = _certificate("localhost", server_key, ca, ca_key, server=True)
    client = _certificate("gateway-client", client_key, ca, ca_key)
    return {
        "ca": _write(directory / "ca.pem", _pem(ca)),
        "server_cert": _write(directory / "server.pem", _pem(server)),
        "server_key": _write(directory / "server-key.pem", _key_pem(server_key)),
        "client_cert": _write(directory / "client.pem", _pem(client)),
        "client_key": _write(directory / "client-key.pem", _key_pem(client_key)),
    }


def test_tls_on_both_listeners_with_sdk_exporters(
    downstream: DownstreamReceiver, pki: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # requests lets REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE override a session's CA file (psf/requests#3829), so
    # the HTTP exporter's certificate_file is only honoured without them (docs/gateway.md says so too).
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    tls = TlsSettings(pki["server_cert"], pki["server_key"])
    with running_gateway(test_config(tls=tls)) as running:
        grpc_exporter = Recording(
            GrpcSpanExporter(
                endpoint=f"https://localhost:{running.grpc_port}",
                credentials=grpc.ssl_channel_credentials(root_certificates=pki["ca"].read_bytes()),
            )
        )
        http_exporter = Recording(
            HttpSpanExporter(
                endpoint=f"https://localhost:{running.http_port}/v1/traces", certificate_file=str(pki["ca"])
            )
        )
        for exporter in (grpc_exporter, http_exporter):
            provider = tracer_provider(exporter)
            plain_trace(provider, spans=3)
            provider.shutdown()
            assert exporter.results == [SpanExportResult.SUCCESS]
        assert len(downstream.wait_for_spans(6)) == 6
        # Plain text is refused on the TLS port.
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            urllib.request.urlopen(f"http://127.0.0.1:{running.http_port}/healthz", timeout=5)


def test_client_certificates_required_when_a_client_ca_is_set(
    downstream: DownstreamReceiver, pki: dict[str, Path]
) -> None:
    tls = TlsSettings(pki["server_cert"], pki["server_key"], client_ca_file=pki["ca"])
    body = _body()
    with running_gateway(test_config(tls=tls)) as running:
        url = f"https://localhost:{running.http_port}/v1/traces"
        anonymous = ssl.create_default_context(cafile=str(pki["ca"]))
        with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
            _http_status(url, body, {}, anonymous)
        with_cert = ssl.create_default_context(cafile=str(pki["ca"]))
        with_cert.load_cert_chain(str(pki["client_cert"]), str(pki["client_key"]))
        assert _http_status(url, body, {}, with_cert) == 200

        ca = pki["ca"].read_bytes()
        target = f"localhost:{running.grpc_port}"
        for credentials, expected in (
            (grpc.ssl_channel_credentials(root_certificates=ca), False),
            (
                grpc.ssl_channel_credentials(
                    root_certificates=ca,
                    private_key=pki["client_key"].read_bytes(),
                    certificate_chain=pki["client_cert"].read_bytes(),
                ),
                True,
            ),
        ):
            with grpc.secure_channel(target, credentials) as channel:
                export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
                try:
                    export(body, timeout=5)
                    accepted = True
                except grpc.RpcError as error:
                    assert error.code() == grpc.StatusCode.UNAVAILABLE  # handshake refused
                    accepted = False
            assert accepted is expected
        assert len(downstream.wait_for_spans(4)) == 4


def test_a_malformed_request_never_writes_its_header_lines_to_the_log(
    downstream: DownstreamReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    """aiohttp refuses a header line with a control character (a token file saved with CRLF) with 400 and
    logged the line, token included, with a traceback, once per request: one short line now, rate-limited."""
    import logging
    import socket

    from rag_confidence.gateway.http_listener import _QUIET

    _QUIET._next = 0.0  # a line may be due from an earlier test
    body = _body()
    caplog.set_level(logging.DEBUG)
    with running_gateway(test_config(auth_token=TOKEN)) as running:
        port = int(running.http_url.rsplit(":", 1)[1])
        for tail in ("\r", "\x7f", "\x00"):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                head = (
                    "POST /v1/traces HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/x-protobuf\r\n"
                    f"Authorization: Bearer {TOKEN}{tail}\r\nContent-Length: {len(body)}\r\n\r\n"
                )
                sock.sendall(head.encode() + body)
                assert sock.recv(64).split(b"\r\n")[0].split()[1] == b"400"
        assert (
            _http_status(f"{running.http_url}/v1/traces", body, {"Authorization": f"Bearer {TOKEN}"}) == 200
        )
    logged = [record for record in caplog.records if record.name.startswith("aiohttp")]
    assert all(TOKEN not in record.getMessage() and not record.exc_info for record in logged)
    assert TOKEN not in caplog.text
    assert len(logged) == 1 and "malformed HTTP request" in logged[0].getMessage()


def test_expect_100_continue_gets_the_final_status_when_the_headers_already_refuse(
    downstream: DownstreamReceiver,
) -> None:
    """A client sending ``Expect: 100-continue`` waits for the go-ahead before uploading: a request its token,
    content type or length refuses gets that answer at once, not a 100 that makes it send the body for nothing."""
    import socket

    body = _body()

    def first_status(port: int, headers: str, send_body: bool = False) -> list[bytes]:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(
                f"POST /v1/traces HTTP/1.1\r\nHost: gateway\r\nExpect: 100-continue\r\n{headers}\r\n".encode()
            )
            answer = sock.recv(4096)
            statuses = [line.split()[1] for line in answer.split(b"\r\n") if line.startswith(b"HTTP/1.1 ")]
            if send_body:
                sock.sendall(body)
                statuses += [
                    line.split()[1]
                    for line in sock.recv(4096).split(b"\r\n")
                    if line.startswith(b"HTTP/1.1 ")
                ]
            return statuses

    with running_gateway(test_config(auth_token=TOKEN)) as running:
        port = int(running.http_url.rsplit(":", 1)[1])
        protobuf = f"Content-Type: application/x-protobuf\r\nContent-Length: {len(body)}\r\n"
        authorized = f"Authorization: Bearer {TOKEN}\r\n"
        assert first_status(port, protobuf) == [b"401"]
        assert first_status(
            port, authorized + f"Content-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
        ) == [b"415"]
        too_long = f"Content-Type: application/x-protobuf\r\nContent-Length: {8 * 1024 * 1024}\r\n"
        assert first_status(port, authorized + too_long) == [b"413"]
        assert first_status(port, authorized + protobuf, send_body=True) == [b"100", b"200"]
    assert len(downstream.wait_for_spans(2)) == 2


@pytest.mark.parametrize(
    ("grpc_host", "http_host", "token", "warned"),
    [
        ("0.0.0.0", "0.0.0.0", None, "gRPC 0.0.0.0:4317, HTTP 0.0.0.0:4318"),  # the defaults
        ("127.0.0.1", "0.0.0.0", None, "HTTP 0.0.0.0:4318"),  # tier2.yaml: probes on the pod IP
        ("127.0.0.1", "::1", None, None),
        ("localhost", "127.0.0.2", None, None),
        ("0.0.0.0", "0.0.0.0", "a-token", None),
    ],
)
def test_a_listener_open_beyond_loopback_without_a_token_is_warned_about_once(
    caplog: pytest.LogCaptureFixture, grpc_host: str, http_host: str, token: str | None, warned: str | None
) -> None:
    from rag_confidence.gateway import GatewayConfig
    from rag_confidence.gateway.command import _warn_if_open
    from rag_confidence.gateway.config import ListenAddress

    config = GatewayConfig(
        grpc_listen=ListenAddress(grpc_host, 4317),
        http_listen=ListenAddress(http_host, 4318),
        auth_token=token,
    )
    caplog.set_level("WARNING", logger="rag_confidence.gateway.command")
    _warn_if_open(config)
    messages = [record.getMessage() for record in caplog.records]
    if warned is None:
        assert messages == []
    else:
        (message,) = messages
        assert message.startswith(f"{warned}: listening beyond loopback without a bearer token")
        assert "RAG_CONFIDENCE_GATEWAY_AUTH_TOKEN_FILE" in message
