"""The gateway's settings: command-line flags, each with an environment variable, and their defaults.

Downstream settings are not here: the SDK's OTLP exporters read the standard
``OTEL_EXPORTER_OTLP_*`` variables themselves (see :mod:`rag_confidence.gateway.forward`).
"""

from __future__ import annotations

import argparse
import math
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigValidationError
from ..scoring import create_scorer

MIB = 1024 * 1024

ENV_PREFIX = "RAG_CONFIDENCE_GATEWAY_"
ENV_GRPC_LISTEN = ENV_PREFIX + "GRPC_LISTEN"
ENV_HTTP_LISTEN = ENV_PREFIX + "HTTP_LISTEN"
ENV_MAX_REQUEST_BYTES = ENV_PREFIX + "MAX_REQUEST_BYTES"
ENV_MAX_CONCURRENT = ENV_PREFIX + "MAX_CONCURRENT_REQUESTS"
ENV_MAX_QUEUED = ENV_PREFIX + "MAX_QUEUED_REQUESTS"
ENV_QUEUE_TIMEOUT = ENV_PREFIX + "QUEUE_TIMEOUT"
ENV_BODY_TIMEOUT = ENV_PREFIX + "BODY_TIMEOUT"
ENV_RETRY_AFTER = ENV_PREFIX + "RETRY_AFTER"
ENV_AUTH_TOKEN = ENV_PREFIX + "AUTH_TOKEN"
ENV_AUTH_TOKEN_FILE = ENV_PREFIX + "AUTH_TOKEN_FILE"
ENV_TLS_CERT = ENV_PREFIX + "TLS_CERT"
ENV_TLS_KEY = ENV_PREFIX + "TLS_KEY"
ENV_TLS_CLIENT_CA = ENV_PREFIX + "TLS_CLIENT_CA"
ENV_ASSEMBLY_MAX_AGE = ENV_PREFIX + "ASSEMBLY_MAX_AGE"
ENV_ASSEMBLY_MAX_TRACES = ENV_PREFIX + "ASSEMBLY_MAX_TRACES"
ENV_ASSEMBLY_MAX_BYTES = ENV_PREFIX + "ASSEMBLY_MAX_BYTES"
ENV_ASSEMBLY_MAX_SPANS = ENV_PREFIX + "ASSEMBLY_MAX_SPANS"
ENV_MAX_ANSWERS = ENV_PREFIX + "MAX_ANSWERS_PER_REQUEST"
ENV_SHUTDOWN_TIMEOUT = ENV_PREFIX + "SHUTDOWN_TIMEOUT"
ENV_SCORING_CONFIG = ENV_PREFIX + "SCORING_CONFIG"
ENV_NO_SCORING = ENV_PREFIX + "NO_SCORING"
ENV_GRPC_BDP_PROBE = ENV_PREFIX + "GRPC_BDP_PROBE"
# The flag each numeric variable stands for, to name what the user actually wrote in an error.
_FLAG_OF_ENV = {
    ENV_MAX_REQUEST_BYTES: "--max-request-bytes",
    ENV_MAX_CONCURRENT: "--max-concurrent-requests",
    ENV_MAX_QUEUED: "--max-queued-requests",
    ENV_QUEUE_TIMEOUT: "--queue-timeout",
    ENV_BODY_TIMEOUT: "--body-timeout",
    ENV_RETRY_AFTER: "--retry-after",
    ENV_ASSEMBLY_MAX_AGE: "--assembly-max-age",
    ENV_ASSEMBLY_MAX_TRACES: "--assembly-max-traces",
    ENV_ASSEMBLY_MAX_BYTES: "--assembly-max-bytes",
    ENV_ASSEMBLY_MAX_SPANS: "--assembly-max-spans",
    ENV_MAX_ANSWERS: "--max-answers-per-request",
    ENV_SHUTDOWN_TIMEOUT: "--shutdown-timeout",
}

DEFAULT_GRPC_LISTEN = "0.0.0.0:4317"
DEFAULT_HTTP_LISTEN = "0.0.0.0:4318"
# Same as the Collector's OTLP receiver (gRPC's default max receive message size is 4 MiB too).
DEFAULT_MAX_REQUEST_BYTES = 4 * MIB
# Shorter than the Collector's default exporter timeout (5 s), so the gateway answers before its upstream
# gives up; a late success after the upstream gave up would deliver the retried spans twice.
DEFAULT_DOWNSTREAM_TIMEOUT = 4.0
# Answers scored per request. A BatchSpanProcessor sends at most 512 spans, a few per answer; past this, a
# request of thousands of tiny marked answers (4 MiB holds 80,000) would cost minutes and gigabytes.
DEFAULT_MAX_ANSWERS_PER_REQUEST = 1000
_DISABLED = frozenset({"", "off", "none", "disabled"})


@dataclass(frozen=True, slots=True)
class ListenAddress:
    """A ``HOST:PORT`` to bind (``[::1]:4317`` for IPv6); port 0 picks a free port (tests)."""

    host: str
    port: int

    @classmethod
    def parse(cls, text: str, *, option: str) -> ListenAddress:
        host, sep, port_text = text.strip().rpartition(":")
        if not sep or not port_text.isdigit() or not host:
            raise ConfigValidationError(f"{option}: expected HOST:PORT, got {text!r}", path=option)
        port = int(port_text)
        if port > 65535:
            raise ConfigValidationError(f"{option}: port {port} is out of range", path=option)
        return cls(host.strip("[]"), port)

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """Server certificate and key (PEM files); with ``client_ca`` set, clients must present a certificate."""

    cert_file: Path
    key_file: Path
    client_ca_file: Path | None = None


@dataclass(frozen=True, slots=True)
class AssemblySettings:
    """The optional assembly window for traces split across requests (off when ``max_age`` is 0)."""

    max_age: float = 0.0
    max_traces: int = 10_000
    max_bytes: int = 64 * MIB
    # Each request of a trace is scored with all its kept spans: the cap bounds that work per request (a
    # trace of 14,000 spans over 2,000 requests cost 150 ms a request without it).
    max_spans: int = 1_000

    @property
    def enabled(self) -> bool:
        return self.max_age > 0 and self.max_traces > 0 and self.max_bytes > 0 and self.max_spans > 0


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """Everything the gateway needs besides the downstream (read from ``OTEL_EXPORTER_OTLP_*``).

    >>> config = GatewayConfig(grpc_listen=ListenAddress("127.0.0.1", 0), http_listen=None)
    >>> config.max_request_bytes == 4 * 1024 * 1024
    True
    """

    grpc_listen: ListenAddress | None = ListenAddress.parse(DEFAULT_GRPC_LISTEN, option="--grpc-listen")
    http_listen: ListenAddress | None = ListenAddress.parse(DEFAULT_HTTP_LISTEN, option="--http-listen")
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    max_concurrent_requests: int = 4
    max_queued_requests: int = 32
    max_answers_per_request: int = DEFAULT_MAX_ANSWERS_PER_REQUEST
    queue_timeout: float = 5.0
    body_timeout: float = 10.0
    retry_after: int = 1
    auth_token: str | None = None
    tls: TlsSettings | None = None
    assembly: AssemblySettings = AssemblySettings()
    shutdown_timeout: float = 30.0
    scoring_enabled: bool = True
    scoring_config: Mapping[str, object] | None = None
    # Off: grpcio's BDP probing grows every connection's HTTP/2 windows, so what it buffers of messages the
    # gateway has not read yet (calls waiting for a slot) grows with the number of connections (docs/gateway.md).
    grpc_bdp_probe: bool = False

    def __post_init__(self) -> None:
        if self.grpc_listen is None and self.http_listen is None:
            raise ConfigValidationError("both listeners are disabled; enable --grpc-listen or --http-listen")
        for option, value in (
            ("--max-request-bytes", self.max_request_bytes),
            ("--max-concurrent-requests", self.max_concurrent_requests),
            ("--max-answers-per-request", self.max_answers_per_request),
        ):
            if value <= 0:
                raise ConfigValidationError(f"{option} must be positive", path=option)
        # grpcio takes the message size limit and the per-connection stream limit as 32-bit ints.
        if self.max_request_bytes > _GRPC_INT_MAX:
            raise ConfigValidationError(
                f"--max-request-bytes must be at most {_GRPC_INT_MAX} (2 GiB - 1)", path="--max-request-bytes"
            )
        if self.max_concurrent_requests + max(self.max_queued_requests, 0) > _GRPC_INT_MAX:
            raise ConfigValidationError(
                f"--max-concurrent-requests plus --max-queued-requests must be at most {_GRPC_INT_MAX}",
                path="--max-concurrent-requests",
            )
        for option, value in (
            ("--max-queued-requests", self.max_queued_requests),
            ("--retry-after", self.retry_after),
            ("--assembly-max-traces", self.assembly.max_traces),
            ("--assembly-max-bytes", self.assembly.max_bytes),
            ("--assembly-max-spans", self.assembly.max_spans),
        ):
            if value < 0:
                raise ConfigValidationError(f"{option} must not be negative", path=option)
        for option, seconds in (
            ("--queue-timeout", self.queue_timeout),
            ("--shutdown-timeout", self.shutdown_timeout),
            ("--assembly-max-age", self.assembly.max_age),
        ):
            if not (math.isfinite(seconds) and seconds >= 0):
                raise ConfigValidationError(f"{option} must be a finite number of seconds >= 0", path=option)
        if not (math.isfinite(self.body_timeout) and self.body_timeout > 0):
            raise ConfigValidationError(
                "--body-timeout must be a finite number of seconds > 0", path="--body-timeout"
            )
        if self.scoring_config is not None:
            create_scorer(dict(self.scoring_config))  # a bad scoring config fails at start, not per answer
        if self.auth_token is not None and not self.auth_token.strip():
            raise ConfigValidationError("the bearer token is empty", path="auth_token")


_GRPC_INT_MAX = 2**31 - 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the gateway's flags; each defaults to its ``RAG_CONFIDENCE_GATEWAY_*`` variable."""
    listen = parser.add_argument_group("listeners")
    listen.add_argument(
        "--grpc-listen",
        metavar="HOST:PORT",
        help=f"OTLP/gRPC address, 'off' to disable (env {ENV_GRPC_LISTEN}; default {DEFAULT_GRPC_LISTEN})",
    )
    listen.add_argument(
        "--http-listen",
        metavar="HOST:PORT",
        help=f"OTLP/HTTP address, 'off' to disable (env {ENV_HTTP_LISTEN}; default {DEFAULT_HTTP_LISTEN})",
    )
    limits = parser.add_argument_group("limits and backpressure")
    limits.add_argument(
        "--max-request-bytes",
        type=int,
        metavar="N",
        help=f"largest request body, before and after decompression (env {ENV_MAX_REQUEST_BYTES}; "
        f"default {DEFAULT_MAX_REQUEST_BYTES})",
    )
    limits.add_argument(
        "--max-answers-per-request",
        type=int,
        metavar="N",
        help="answers scored per request; the rest are forwarded unscored and counted "
        f"(env {ENV_MAX_ANSWERS}; default {DEFAULT_MAX_ANSWERS_PER_REQUEST})",
    )
    limits.add_argument(
        "--max-concurrent-requests",
        type=int,
        metavar="N",
        help=f"requests processed at once (env {ENV_MAX_CONCURRENT}; default 4)",
    )
    limits.add_argument(
        "--max-queued-requests",
        type=int,
        metavar="N",
        help=f"requests waiting for a slot before new ones get 503/UNAVAILABLE "
        f"(env {ENV_MAX_QUEUED}; default 32)",
    )
    limits.add_argument(
        "--queue-timeout",
        type=float,
        metavar="SECONDS",
        help=f"longest wait for a slot (env {ENV_QUEUE_TIMEOUT}; default 5)",
    )
    limits.add_argument(
        "--body-timeout",
        type=float,
        metavar="SECONDS",
        help=f"longest time to receive an OTLP/HTTP body or gRPC message while holding a slot; a slower one "
        f"gets 503/UNAVAILABLE (env {ENV_BODY_TIMEOUT}; default 10)",
    )
    limits.add_argument(
        "--retry-after",
        type=int,
        metavar="SECONDS",
        help=f"Retry-After / RetryInfo delay on retryable errors (env {ENV_RETRY_AFTER}; default 1)",
    )
    limits.add_argument(
        "--shutdown-timeout",
        type=float,
        metavar="SECONDS",
        help=f"longest drain of in-flight requests on SIGTERM (env {ENV_SHUTDOWN_TIMEOUT}; default 30)",
    )
    limits.add_argument(
        "--grpc-bdp-probe",
        action="store_true",
        default=None,
        help=f"let grpcio grow each connection's HTTP/2 flow-control windows (BDP probing): more memory per "
        f"connection for calls not yet read, for long-RTT links (env {ENV_GRPC_BDP_PROBE}; default off)",
    )
    limits.add_argument(
        "--no-grpc-bdp-probe",
        dest="grpc_bdp_probe",
        action="store_false",
        help=f"keep BDP probing off (the default), also when {ENV_GRPC_BDP_PROBE} says otherwise",
    )
    security = parser.add_argument_group("security")
    security.add_argument(
        "--auth-token-file",
        metavar="PATH",
        help=f"require 'Authorization: Bearer <token>' with the token in PATH "
        f"(env {ENV_AUTH_TOKEN_FILE}, or the token itself in {ENV_AUTH_TOKEN})",
    )
    security.add_argument("--tls-cert", metavar="PEM", help=f"server certificate (env {ENV_TLS_CERT})")
    security.add_argument("--tls-key", metavar="PEM", help=f"server private key (env {ENV_TLS_KEY})")
    security.add_argument(
        "--tls-client-ca",
        metavar="PEM",
        help=f"require client certificates signed by this CA (env {ENV_TLS_CLIENT_CA})",
    )
    assembly = parser.add_argument_group("assembly window (traces split across requests; off by default)")
    assembly.add_argument(
        "--assembly-max-age",
        type=float,
        metavar="SECONDS",
        help=f"keep earlier spans of a trace this long; 0 disables (env {ENV_ASSEMBLY_MAX_AGE})",
    )
    assembly.add_argument(
        "--assembly-max-traces",
        type=int,
        metavar="N",
        help=f"traces kept at most (env {ENV_ASSEMBLY_MAX_TRACES}; default 10000)",
    )
    assembly.add_argument(
        "--assembly-max-bytes",
        type=int,
        metavar="N",
        help=f"encoded size of kept spans at most (env {ENV_ASSEMBLY_MAX_BYTES}; default 64 MiB)",
    )
    assembly.add_argument(
        "--assembly-max-spans",
        type=int,
        metavar="N",
        help=f"spans kept per trace at most; later ones are scored but not kept (env {ENV_ASSEMBLY_MAX_SPANS}; "
        "default 1000)",
    )
    scoring = parser.add_argument_group("scoring")
    scoring.add_argument(
        "--scoring-config", metavar="PATH", help=f"ScoringConfig as a JSON file (env {ENV_SCORING_CONFIG})"
    )
    scoring.add_argument(
        "--no-scoring",
        action="store_true",
        default=None,
        help=f"forward without scoring: a kill switch and the benchmark's baseline (env {ENV_NO_SCORING})",
    )
    scoring.add_argument(
        "--scoring",
        dest="no_scoring",
        action="store_false",
        help=f"score (the default), also when {ENV_NO_SCORING} says otherwise",
    )


def config_from_arguments(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> GatewayConfig:
    """Build the config: a flag wins over its environment variable, which wins over the default."""
    env = os.environ if environ is None else environ

    def pick(flag: object, env_name: str) -> str | None:
        if flag is not None:
            return str(flag)
        return env.get(env_name)

    def number(flag: object, env_name: str, default: float, kind: type[int] | type[float]) -> float:
        text = pick(flag, env_name)
        if text is None or not text.strip():
            return default
        source = _FLAG_OF_ENV.get(env_name, env_name) if flag is not None else env_name
        try:
            value = kind(text)
        except ValueError:
            # int("1.5") fails too: "expected a number" would refuse a number without saying why.
            expected = "a whole number" if kind is int else "a number"
            raise ConfigValidationError(f"{source}: expected {expected}, got {text!r}", path=source) from None
        if not math.isfinite(value):
            raise ConfigValidationError(f"{source}: expected a finite number, got {text!r}", path=source)
        return value

    def address(flag: object, env_name: str, default: str, option: str) -> ListenAddress | None:
        text = pick(flag, env_name)
        if text is None or (flag is None and not text.strip()):
            # A blank variable is unset, as every other one here (a manifest templating an empty value sets
            # it): "off" turns a listener off, never an empty string an upstream would find no port behind.
            text = default
        return None if text.strip().lower() in _DISABLED else ListenAddress.parse(text, option=option)

    token = _load_token(pick(args.auth_token_file, ENV_AUTH_TOKEN_FILE), env.get(ENV_AUTH_TOKEN))
    cert, key, client_ca = (
        pick(args.tls_cert, ENV_TLS_CERT),
        pick(args.tls_key, ENV_TLS_KEY),
        pick(args.tls_client_ca, ENV_TLS_CLIENT_CA),
    )
    if bool(cert) != bool(key):
        raise ConfigValidationError("TLS needs both --tls-cert and --tls-key", path="--tls-cert")
    if client_ca and not cert:
        raise ConfigValidationError("--tls-client-ca needs --tls-cert and --tls-key", path="--tls-client-ca")
    tls = TlsSettings(Path(cert), Path(key), Path(client_ca) if client_ca else None) if cert and key else None
    if tls is not None:
        _check_tls(tls)

    no_scoring = args.no_scoring if args.no_scoring is not None else _truthy(env.get(ENV_NO_SCORING))
    bdp_probe = args.grpc_bdp_probe
    if bdp_probe is None:
        bdp_probe = _truthy(env.get(ENV_GRPC_BDP_PROBE), ENV_GRPC_BDP_PROBE)
    scoring_config_path = pick(args.scoring_config, ENV_SCORING_CONFIG)
    try:
        return GatewayConfig(
            grpc_listen=address(args.grpc_listen, ENV_GRPC_LISTEN, DEFAULT_GRPC_LISTEN, "--grpc-listen"),
            http_listen=address(args.http_listen, ENV_HTTP_LISTEN, DEFAULT_HTTP_LISTEN, "--http-listen"),
            max_request_bytes=int(
                number(args.max_request_bytes, ENV_MAX_REQUEST_BYTES, DEFAULT_MAX_REQUEST_BYTES, int)
            ),
            max_concurrent_requests=int(number(args.max_concurrent_requests, ENV_MAX_CONCURRENT, 4, int)),
            max_queued_requests=int(number(args.max_queued_requests, ENV_MAX_QUEUED, 32, int)),
            max_answers_per_request=int(
                number(args.max_answers_per_request, ENV_MAX_ANSWERS, DEFAULT_MAX_ANSWERS_PER_REQUEST, int)
            ),
            queue_timeout=number(args.queue_timeout, ENV_QUEUE_TIMEOUT, 5.0, float),
            body_timeout=number(args.body_timeout, ENV_BODY_TIMEOUT, 10.0, float),
            retry_after=int(number(args.retry_after, ENV_RETRY_AFTER, 1, int)),
            auth_token=token,
            tls=tls,
            assembly=AssemblySettings(
                max_age=number(args.assembly_max_age, ENV_ASSEMBLY_MAX_AGE, 0.0, float),
                max_traces=int(number(args.assembly_max_traces, ENV_ASSEMBLY_MAX_TRACES, 10_000, int)),
                max_bytes=int(number(args.assembly_max_bytes, ENV_ASSEMBLY_MAX_BYTES, 64 * MIB, int)),
                max_spans=int(number(args.assembly_max_spans, ENV_ASSEMBLY_MAX_SPANS, 1_000, int)),
            ),
            shutdown_timeout=number(args.shutdown_timeout, ENV_SHUTDOWN_TIMEOUT, 30.0, float),
            scoring_enabled=not no_scoring,
            scoring_config=_load_scoring_config(scoring_config_path) if scoring_config_path else None,
            grpc_bdp_probe=bdp_probe,
        )
    except ConfigValidationError as error:
        # The checks name flags; say the variable instead when that is what the user set.
        flag = error.path or ""
        variable = next((name for name, option in _FLAG_OF_ENV.items() if option == flag), None)
        if variable is not None and getattr(args, flag.lstrip("-").replace("-", "_"), None) is None:
            raise ConfigValidationError(str(error).replace(flag, variable, 1), path=variable) from None
        raise


def _check_tls(tls: TlsSettings) -> None:
    """Load the PEM files as a server would, so a wrong path or a key that does not match its certificate is
    named at start-up (grpc would report either as "failed to bind")."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(tls.cert_file, tls.key_file)
    except (OSError, ssl.SSLError) as error:
        raise ConfigValidationError(
            f"cannot use the TLS certificate {tls.cert_file} with the key {tls.key_file}: {error}",
            path="--tls-cert",
        ) from None
    if tls.client_ca_file is not None:
        try:
            context.load_verify_locations(tls.client_ca_file)
        except (OSError, ssl.SSLError) as error:
            raise ConfigValidationError(
                f"cannot use the client CA {tls.client_ca_file}: {error}", path="--tls-client-ca"
            ) from None


def _truthy(text: str | None, variable: str = ENV_NO_SCORING) -> bool:
    """A boolean variable; anything but the usual spellings stops the gateway (a kill switch must not be
    misread as off)."""
    value = (text or "").strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"", "0", "false", "no", "off"}:
        return False
    raise ConfigValidationError(f"{variable}={text!r}: expected true or false", path=variable)


def _load_token(path: str | None, value: str | None) -> str | None:
    if path:
        try:
            token = Path(path).read_text(encoding="utf-8").strip()
        except OSError as error:
            raise ConfigValidationError(
                f"cannot read the bearer token file: {error}", path="--auth-token-file"
            ) from None
        if not token:
            raise ConfigValidationError(f"the bearer token file {path} is empty", path="--auth-token-file")
        return token
    if value is not None:
        token = value.strip()
        if not token:
            raise ConfigValidationError(f"{ENV_AUTH_TOKEN} is set but empty", path=ENV_AUTH_TOKEN)
        return token
    return None


def _load_scoring_config(path: str) -> Mapping[str, object]:
    import json

    try:
        loaded = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ConfigValidationError(
            f"cannot read the scoring config {path}: {error}", path="--scoring-config"
        ) from None
    if not isinstance(loaded, dict):
        raise ConfigValidationError("the scoring config must be a JSON object", path="--scoring-config")
    return loaded
