"""``rag-confidence gateway``: build the gateway from flags and environment, serve until SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from ..errors import RagConfidenceError
from .config import ENV_AUTH_TOKEN, ENV_AUTH_TOKEN_FILE, GatewayConfig, add_arguments, config_from_arguments
from .forward import check_exporter_seams, forwarder_from_environment
from .redaction import check_credentials, install_redaction, secrets_from_environment
from .service import Gateway
from .telemetry import meter_provider_from_environment

_logger = logging.getLogger(__name__)

DESCRIPTION = (
    "Score RAG answers in OTLP traces between Collectors: receive OTLP (gRPC and HTTP), add rag.confidence.* "
    "attributes to answer spans, forward every span to the downstream named by OTEL_EXPORTER_OTLP_*."
)
EPILOG = """downstream (standard OpenTelemetry variables, read as the OpenTelemetry Python SDK reads them):
  OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT   required (no default: the exporter's
                                      default is this gateway's own port)
  OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL    grpc or http/protobuf (default http/protobuf)
  OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT     SECONDS, as the Python SDK reads it (the specification says
                                      milliseconds); default 4, at most 600
  OTEL_EXPORTER_OTLP_[TRACES_]HEADERS, _COMPRESSION (gzip or none; deflate too over HTTP), _CERTIFICATE,
  _CLIENT_KEY, _CLIENT_CERTIFICATE, _INSECURE; the _METRICS_ forms for the gateway's own metrics
  OTEL_METRICS_EXPORTER                   otlp (default) or none
"""
_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def add_subparser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``gateway`` on an ``argparse`` sub-parser set; the handler is stored as ``func``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "gateway",
        help="run the OTLP scoring gateway",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_all(parser)
    parser.set_defaults(func=run_from_arguments)
    return parser


def _add_all(parser: argparse.ArgumentParser) -> None:
    add_arguments(parser)
    parser.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=_LOG_LEVELS,
        help="logging level (default INFO)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rag-confidence gateway",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_all(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the gateway; returns the process exit status (0 after a clean SIGTERM/SIGINT shutdown, 1 when a
    listener cannot bind, 2 for bad arguments or settings, as argparse exits for the command line)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit:  # --help, or arguments argparse refused (it printed why)
        return exit.code if isinstance(exit.code, int) else 2
    return run_from_arguments(args)


def run_from_arguments(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=str(args.log_level).upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        config = config_from_arguments(args)
        # Before any exporter exists: they log what they cannot parse, and what they fail to reach, verbatim.
        check_credentials(os.environ)
        install_redaction(secrets_from_environment(os.environ, [config.auth_token]))
        forwarder = forwarder_from_environment()  # our checks of the variables first: one clear line
        check_exporter_seams()
        meter_provider = meter_provider_from_environment()
        gateway = Gateway(config, forwarder, meter_provider=meter_provider)
        _warn_if_open(config)
    except (RagConfidenceError, RuntimeError, OSError, ValueError) as error:
        # Settings the SDK exporters refuse (an unknown compression, a malformed timeout) raise their own
        # ValueError subclasses: one line either way, never a traceback.
        print(f"rag-confidence gateway: {error}", file=sys.stderr)
        return 2
    return asyncio.run(serve(gateway))


def _warn_if_open(config: GatewayConfig) -> None:
    """One line at start when a listener is reachable beyond this host and takes spans from anyone: the
    defaults (0.0.0.0, no token) suit a pod whose network is closed, not an open host."""
    if config.auth_token is not None:
        return
    exposed = [
        f"{name} {address}"
        for name, address in (("gRPC", config.grpc_listen), ("HTTP", config.http_listen))
        if address is not None and not _is_loopback(address.host)
    ]
    if exposed:
        _logger.warning(
            "%s: listening beyond loopback without a bearer token, so anyone who reaches the port can send "
            "spans; set %s (or %s), or keep the port on a closed network",
            ", ".join(exposed),
            ENV_AUTH_TOKEN_FILE,
            ENV_AUTH_TOKEN,
        )


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


async def serve(gateway: Gateway) -> int:
    """Start ``gateway``, wait for SIGTERM or SIGINT, stop it gracefully (stop accepting, drain, flush).

    Returns the exit status: 0 after a clean stop, 1 when a listener cannot bind. Run it in the main thread
    (signal handlers)::

        gateway = Gateway(GatewayConfig(), forwarder_from_environment())
        raise SystemExit(asyncio.run(serve(gateway)))
    """
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    try:
        await gateway.start()
    except (OSError, RuntimeError) as error:  # grpc reports a port it cannot bind as RuntimeError
        print(f"rag-confidence gateway: cannot listen: {error}", file=sys.stderr)
        await gateway.stop()
        return 1
    await stopping.wait()
    _logger.info("shutting down: no new requests; draining those in flight")
    await gateway.stop()
    _logger.info("stopped")
    return 0
