"""The gateway: both listeners, one processing path, and an orderly start and stop.

A request's life: listener checks (auth, content type, size) -> a processing slot (:mod:`.admission`) ->
on a worker thread: decompress, decode, score (:mod:`.pipeline`), forward (:mod:`.forward`) -> answer.
The answer is a success only when the downstream accepted the spans; confidence metrics are recorded then too,
so a request the client retries is counted once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from google.rpc import code_pb2  # type: ignore[import-untyped,unused-ignore]
from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
from opentelemetry.trace import SpanContext, TraceFlags

from .. import semconv
from ..errors import GatewayRequestError
from ..otel.answer_scoring import AnswerScorer
from ..otel.metrics import ConfidenceInstruments, span_context_as_parent
from ..scoring.models import ConfidenceScorecard
from .admission import Admission
from .assembly import AssemblyWindow
from .config import GatewayConfig
from .decode import CONTENT_TYPE_PROTOBUF, decompress, parse, too_large
from .forward import Forwarder
from .pipeline import Prepared, TracePipeline
from .security import BearerAuth
from .split import GROWTH_PER_ANSWER, split_request
from .telemetry import GatewayMetrics

_logger = logging.getLogger(__name__)


@dataclass(slots=True)
class Outcome:
    """What to answer: a response (possibly with partial success) or an error with its status."""

    response: ExportTraceServiceResponse = field(default_factory=ExportTraceServiceResponse)
    error: GatewayRequestError | None = None
    label: str = semconv.GATEWAY_OUTCOME_OK


def outcome_of_error(error: GatewayRequestError) -> str:
    if error.retryable:
        return semconv.GATEWAY_OUTCOME_DOWNSTREAM_UNAVAILABLE
    return {
        400: semconv.GATEWAY_OUTCOME_INVALID,
        413: semconv.GATEWAY_OUTCOME_TOO_LARGE,
        415: semconv.GATEWAY_OUTCOME_UNSUPPORTED_MEDIA_TYPE,
    }.get(error.http_status, semconv.GATEWAY_OUTCOME_INVALID)


class Gateway:
    """Receives OTLP traces, scores answer spans in place and forwards every valid span downstream.

    Use :func:`rag_confidence.gateway.main` (or ``rag-confidence gateway``) to run it as a service, or
    :func:`rag_confidence.gateway.serve` to run one you built until SIGTERM; in code::

        gateway = Gateway(config, forwarder_from_environment(), meter_provider=provider)
        await gateway.start()          # binds; gateway.grpc_port / gateway.http_port tell the ports
        ...
        await gateway.stop()           # stop accepting, drain in-flight requests, flush
    """

    def __init__(
        self,
        config: GatewayConfig,
        forwarder: Forwarder,
        *,
        meter_provider: MeterProvider | None = None,
    ) -> None:
        self.config = config
        self.forwarder = forwarder
        self.meter_provider = meter_provider if meter_provider is not None else SdkMeterProvider()
        self.metrics = GatewayMetrics(self.meter_provider)
        self.instruments = ConfidenceInstruments(self.meter_provider)
        self.auth = BearerAuth(config.auth_token)
        self.window: AssemblyWindow[bytes] | None = None
        if config.assembly.enabled:
            self.window = AssemblyWindow(
                config.assembly.max_traces,
                config.assembly.max_age,
                config.assembly.max_bytes,
                max_spans=config.assembly.max_spans,
                on_evict=self.metrics.evicted,
            )
            self.metrics.watch_window(self.window.expire)
        scorer = AnswerScorer(config.scoring_config) if config.scoring_enabled else None
        self.pipeline = TracePipeline(scorer, self.window, config.max_answers_per_request)
        self.executor = ThreadPoolExecutor(
            config.max_concurrent_requests, thread_name_prefix="rag-confidence-gateway"
        )
        self.admission: Admission | None = None
        self.ready = False
        self.grpc_port: int | None = None
        self.http_port: int | None = None
        self._grpc: object | None = None
        self._http: object | None = None

    # ---------------------------------------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        from .grpc_listener import GrpcListener
        from .http_listener import HttpListener

        self.admission = Admission(
            self.config.max_concurrent_requests, self.config.max_queued_requests, self.config.queue_timeout
        )
        try:
            if self.config.grpc_listen is not None:
                grpc_listener = GrpcListener(self, self.config.grpc_listen)
                self.grpc_port = await grpc_listener.start()
                self._grpc = grpc_listener
            if self.config.http_listen is not None:
                http_listener = HttpListener(self, self.config.http_listen)
                self.http_port = await http_listener.start()
                self._http = http_listener
        except BaseException:
            await self._close_listeners(0.0)
            raise
        self.ready = True
        _logger.info(
            "rag-confidence gateway: gRPC %s, HTTP %s -> %s",
            self.grpc_port if self.grpc_port is not None else "off",
            self.http_port if self.http_port is not None else "off",
            self.forwarder.description,
        )

    async def stop(self) -> None:
        """Stop accepting, let in-flight requests finish (``shutdown_timeout``), then flush and close."""
        self.ready = False
        await self._close_listeners(self.config.shutdown_timeout)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._close_downstream)

    async def _close_listeners(self, grace: float) -> None:
        from .grpc_listener import GrpcListener
        from .http_listener import HttpListener

        closing = []
        if isinstance(self._grpc, GrpcListener):
            closing.append(self._grpc.stop(grace))
        if isinstance(self._http, HttpListener):
            closing.append(self._http.stop())
        await asyncio.gather(*closing)
        self._grpc = self._http = None

    def _close_downstream(self) -> None:
        # In-flight requests had their grace. An export still waiting on the downstream now is cut short
        # (gRPC: its channel closes; HTTP: no more retries) before waiting for the workers, so a downstream
        # that hangs cannot hold the exit past the grace plus one export attempt.
        self.forwarder.shutdown()
        self.executor.shutdown(wait=True)
        if isinstance(self.meter_provider, SdkMeterProvider):
            self.meter_provider.shutdown()  # exports the last metrics

    # ------------------------------------------------------------------------------------------ processing

    def process(
        self,
        transport: str,
        body: bytes,
        content_type: str,
        content_encoding: str | None,
        abandoned: Callable[[], bool] | None = None,
    ) -> Outcome:
        """Decode, score and forward one request (on a worker thread). Never raises.

        ``abandoned`` says whether the caller has given up (its deadline passed, its call was cancelled): then
        the spans are not forwarded, since the caller will send them again and a late delivery would store
        them twice."""
        try:
            payload = decompress(body, content_encoding, self.config.max_request_bytes)
            if len(payload) > self.config.max_request_bytes:
                raise too_large(f"request body exceeds the limit of {self.config.max_request_bytes} bytes")
            request = parse(payload, content_type)
        except GatewayRequestError as error:
            return Outcome(error=error, label=outcome_of_error(error))
        try:
            prepared = self.pipeline.prepare(
                request, payload if content_type == CONTENT_TYPE_PROTOBUF else None
            )
        except Exception as error:  # a bug must not cost spans: forward them as received, unscored
            _logger.error(
                "scoring a request failed unexpectedly (%s); forwarding it unscored", type(error).__name__
            )
            prepared = Prepared(parse(payload, content_type))
            prepared.received = sum(
                len(s.spans) for r in prepared.request.resource_spans for s in r.scope_spans
            )
        prepared.payload_size = len(payload)
        if abandoned is not None and abandoned():
            return Outcome(
                error=GatewayRequestError(
                    "the caller gave up before the spans were forwarded; they were not",
                    http_status=503,
                    grpc_code=code_pb2.DEADLINE_EXCEEDED,
                    retryable=True,
                ),
                label=semconv.GATEWAY_OUTCOME_ABANDONED,
            )
        return self._forward(transport, prepared)

    def _outgoing(self, prepared: Prepared) -> list[ExportTraceServiceRequest]:
        """The request as it goes downstream: split when scoring grew it past the size limit."""
        limit = self.config.max_request_bytes
        growth = GROWTH_PER_ANSWER * (len(prepared.scored) + prepared.failed_answers)
        if not growth or prepared.payload_size + growth <= limit:  # cannot be over: no need to measure
            return [prepared.request]
        if prepared.request.ByteSize() <= limit:
            return [prepared.request]
        return split_request(prepared.request, limit)

    def _forward(self, transport: str, prepared: Prepared) -> Outcome:
        self.metrics.received(transport, prepared.received)
        self.metrics.rejected(transport, prepared.rejected, semconv.GATEWAY_REASON_INVALID_SPAN)
        if prepared.forwarded:
            # Parts go one after the other; a failed part fails the request, which the upstream retries
            # whole (parts already delivered then arrive twice: at least once, never lost).
            for part in self._outgoing(prepared):
                result = self.forwarder.forward(part)
                if not result.ok:
                    break
            if not result.ok:
                self.metrics.export_failed()
                self.metrics.rejected(
                    transport, prepared.forwarded, semconv.GATEWAY_REASON_DOWNSTREAM_UNAVAILABLE
                )
                _logger.warning("downstream export failed: %s", result.detail)
                error = GatewayRequestError(
                    f"downstream unavailable ({result.detail}); retry later",
                    http_status=503,
                    grpc_code=code_pb2.UNAVAILABLE,
                    retryable=True,
                )
                return Outcome(error=error, label=semconv.GATEWAY_OUTCOME_DOWNSTREAM_UNAVAILABLE)
            self.metrics.forwarded(transport, prepared.forwarded)
            self._record_scorecards(prepared)
        outcome = Outcome()
        if prepared.rejected:
            outcome.response.partial_success.rejected_spans = prepared.rejected
            outcome.response.partial_success.error_message = prepared.rejection_message
            outcome.label = semconv.GATEWAY_OUTCOME_PARTIAL
        return outcome

    def _record_scorecards(self, prepared: Prepared) -> None:
        recorded: list[tuple[ConfidenceScorecard, Context]] = []
        for scored in prepared.scored:
            context = span_context_as_parent(
                SpanContext(
                    scored.trace_id,
                    scored.span_id,
                    is_remote=True,
                    trace_flags=TraceFlags(TraceFlags.SAMPLED),
                )
            )
            self.instruments.record(scored.scorecard, scored.duration_s, context=context, warnings=False)
            recorded.append((scored.scorecard, context))
        # The answers of one request share most warning codes: one measurement per code, not per answer.
        self.instruments.count_warnings(recorded)
        self.metrics.answer(semconv.PIPELINE_OUTCOME_SCORED, len(prepared.scored))
        self.metrics.answer(semconv.PIPELINE_OUTCOME_FAILED, prepared.failed_answers)
        self.metrics.answer(semconv.PIPELINE_OUTCOME_ALREADY_SCORED, prepared.already_scored)
        self.metrics.answer(semconv.PIPELINE_OUTCOME_OVER_LIMIT, prepared.over_limit)

    def finished(self, transport: str, outcome: str, started: float) -> None:
        self.metrics.request_done(transport, outcome, time.perf_counter() - started)
