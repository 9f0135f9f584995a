"""``rag-confidence gateway``: build the gateway from flags and environment, serve until SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence
from typing import Any

from ..errors import RagConfidenceError
from .config import GatewayConfig, add_arguments, config_from_arguments
from .forward import check_exporter_seams, forwarder_from_environment
from .service import Gateway
from .telemetry import meter_provider_from_environment

_logger = logging.getLogger(__name__)

DESCRIPTION = (
    "Score RAG answers in OTLP traces between Collectors: receive OTLP (gRPC and HTTP), add rag.confidence.* "
    "attributes to answer spans, forward every span to the downstream named by OTEL_EXPORTER_OTLP_*."
)


def add_subparser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``gateway`` on an ``argparse`` sub-parser set; the handler is stored as ``func``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "gateway", help="run the OTLP scoring gateway", description=DESCRIPTION
    )
    add_arguments(parser)
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    parser.set_defaults(func=run_from_arguments)
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rag-confidence gateway", description=DESCRIPTION)
    add_arguments(parser)
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the gateway; returns the process exit status (0 after a clean SIGTERM/SIGINT shutdown)."""
    args = build_parser().parse_args(argv)
    return run_from_arguments(args)


def run_from_arguments(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=str(args.log_level).upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        config = config_from_arguments(args)
        check_exporter_seams()
        forwarder = forwarder_from_environment()
    except (RagConfidenceError, RuntimeError, OSError) as error:
        print(f"rag-confidence gateway: {error}", file=sys.stderr)
        return 2
    return asyncio.run(
        serve(config, Gateway(config, forwarder, meter_provider=meter_provider_from_environment()))
    )


async def serve(config: GatewayConfig, gateway: Gateway) -> int:
    """Start, wait for SIGTERM or SIGINT, stop gracefully; 0, or 1 when a listener cannot bind."""
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    try:
        await gateway.start()
    except OSError as error:
        print(f"rag-confidence gateway: cannot listen: {error}", file=sys.stderr)
        await gateway.stop()
        return 1
    await stopping.wait()
    _logger.info("shutting down: no new requests; draining those in flight")
    await gateway.stop()
    _logger.info("stopped")
    return 0
