"""OTLP/gRPC: ``opentelemetry.proto.collector.trace.v1.TraceService/Export`` on grpcio's asyncio server.

The method is registered with a bytes-in handler rather than the generated servicer: grpcio answers a
request its generated deserializer cannot parse with ``INTERNAL``, and a client must see ``INVALID_ARGUMENT``.
The handler is a stream-unary one (a unary client sees no difference on the wire), so that the token and a
processing slot are checked before the message is read: a call the gateway cannot take now is refused
retryably without holding its message, as on the HTTP listener. Message size (after decompression) is
limited by grpcio itself (``grpc.max_receive_message_length``), which answers ``RESOURCE_EXHAUSTED`` on the
message's length prefix, before reading it: raising grpcio's limit to check the size here would mean holding
each oversize message (or inflating a gzip bomb) first. The call is counted ``too_large``, as on HTTP.
Retryable errors carry ``RetryInfo`` both where the Python SDK looks (``google.rpc.retryinfo-bin``) and where
gRPC's rich status lives (``grpc-status-details-bin``, read by Go).
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from typing import TYPE_CHECKING, Any

import grpc  # type: ignore[import-untyped,unused-ignore]
from google.protobuf import any_pb2, duration_pb2  # type: ignore[import-untyped,unused-ignore]
from google.rpc import code_pb2, error_details_pb2, status_pb2  # type: ignore[import-untyped,unused-ignore]
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from .. import semconv
from ..errors import GatewayOverloadedError, GatewayRequestError
from .config import ListenAddress
from .decode import CONTENT_TYPE_PROTOBUF
from .security import grpc_server_credentials

if TYPE_CHECKING:
    from .service import Gateway, Outcome

_SERVICE = trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"]
_TRANSPORT = semconv.GATEWAY_TRANSPORT_GRPC
_STATUS_CODES = {status.value[0]: status for status in grpc.StatusCode}
_AUTHORIZATION = "authorization"


def _refused_by_grpcio(context: Any, deadline: float) -> bool:
    """Whether a call whose read came to EOF was ended by grpcio itself, before its deadline: by refusing its
    message as too large (the size limit is grpcio's, checked on the message's length prefix before it is
    read, so the gateway never sees the message).

    grpcio gives the handler no status for it, but a call ended on the server's side has lost its peer by the
    time the read ends, while one cancelled by its client still has it (seen with grpcio 1.85; pinned by
    tests/test_gateway_listeners.py). Its deadline passing also ends a call on the server's side: that one is
    abandoned, as is a client's cancel.
    """
    if time.monotonic() >= deadline:
        return False
    peer: str = context.peer() or ""
    return not peer


class GrpcListener:
    def __init__(self, gateway: Gateway, address: ListenAddress) -> None:
        self._gateway = gateway
        self._address = address
        config = gateway.config
        # No maximum_concurrent_rpcs: grpcio refuses calls past it with RESOURCE_EXHAUSTED and no RetryInfo,
        # which the Collector's exporter drops for good (a few upstreams on slow links, their calls open with
        # messages not in yet, were enough). A message is read only once its call holds a processing slot
        # (see _export), so calls past admission are refused retryably at once and hold no message.
        self._server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", config.max_request_bytes),
                # Per connection, streams beyond this wait in the client (HTTP/2 flow control): backpressure
                # before a request reaches memory here.
                ("grpc.max_concurrent_streams", config.max_concurrent_requests + config.max_queued_requests),
                # BDP probing grows each connection's flow-control windows past what a waiting call needs;
                # a read in progress still opens the window to its whole message (one round trip).
                ("grpc.http2.bdp_probe", 1 if config.grpc_bdp_probe else 0),
                # grpcio sets SO_REUSEPORT by default: a second gateway (or any gRPC server) on the same port
                # would start and take part of the traffic instead of failing to listen.
                ("grpc.so_reuseport", 0),
            ],
        )
        handler = grpc.stream_unary_rpc_method_handler(self._export)
        self._server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(_SERVICE.full_name, {_SERVICE.methods[0].name: handler}),)
        )

    async def start(self) -> int:
        target = str(self._address)
        tls = self._gateway.config.tls
        if tls is not None:
            port: int = self._server.add_secure_port(target, grpc_server_credentials(tls))
        else:
            port = self._server.add_insecure_port(target)
        await self._server.start()
        return port

    async def stop(self, grace: float) -> None:
        # New RPCs are refused at once; RPCs in progress get up to ``grace`` seconds.
        await self._server.stop(grace)

    async def _export(self, requests: Any, context: Any) -> bytes:
        gateway = self._gateway
        started = time.perf_counter()
        gateway.metrics.active(_TRANSPORT, 1)
        label = semconv.GATEWAY_OUTCOME_INTERNAL
        try:
            metadata = {key.lower(): value for key, value in (context.invocation_metadata() or ())}
            if not gateway.auth.allows(metadata.get(_AUTHORIZATION)):
                label = semconv.GATEWAY_OUTCOME_UNAUTHENTICATED
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or invalid bearer token")
            assert gateway.admission is not None
            remaining = context.time_remaining()
            deadline = time.monotonic() + remaining if remaining is not None else math.inf
            cancelled = threading.Event()

            def abandoned() -> bool:
                # Read on the worker thread, just before forwarding: past its deadline the caller has given up
                # and will send the spans again.
                return cancelled.is_set() or time.monotonic() >= deadline

            # Until its message is in, a call that ends (deadline, cancelled by its client, while it waits
            # for a slot or while its message is read) is one its caller gave up on, as an HTTP client
            # hanging up mid-body: it sends the spans again.
            label = semconv.GATEWAY_OUTCOME_ABANDONED
            try:
                async with gateway.admission.slot(remaining):
                    body = await self._receive(context)
                    if body is None:
                        label = semconv.GATEWAY_OUTCOME_BODY_TIMEOUT
                        timeout = gateway.config.body_timeout
                        message = f"request message not received within {timeout:g} s; retry later"
                        await self._abort_retryable(context, message)
                    if body is grpc.aio.EOF:
                        # EOF also comes when the call itself has ended: its deadline passed, its client
                        # cancelled it, or grpcio refused a message past the size limit (answering
                        # RESOURCE_EXHAUSTED itself). Then no status can be sent any more and grpcio raises
                        # its own error instead of AbortError.
                        refused = _refused_by_grpcio(context, deadline)
                        try:
                            await context.abort(
                                grpc.StatusCode.INVALID_ARGUMENT, "the call carried no request message"
                            )
                        except grpc.aio.AbortError:
                            label = semconv.GATEWAY_OUTCOME_INVALID
                            raise
                        except Exception:
                            if refused:
                                label = semconv.GATEWAY_OUTCOME_TOO_LARGE
                            raise
                    label = semconv.GATEWAY_OUTCOME_INTERNAL
                    work = asyncio.get_running_loop().run_in_executor(
                        gateway.executor,
                        gateway.process,
                        _TRANSPORT,
                        body,
                        CONTENT_TYPE_PROTOBUF,
                        None,
                        abandoned,
                    )
                    try:
                        outcome: Outcome = await asyncio.shield(work)
                    except asyncio.CancelledError:
                        # The call is gone (deadline, client cancelled), but its worker still runs: the slot
                        # stays taken until it ends, so backpressure counts the work really in progress.
                        cancelled.set()
                        await asyncio.wait([work])
                        if not work.cancelled() and work.exception() is None:
                            label = work.result().label  # abandoned, or what its forwarding came to
                        raise
            except GatewayOverloadedError as overloaded:
                label = semconv.GATEWAY_OUTCOME_OVERLOADED
                await self._abort_retryable(context, f"gateway overloaded ({overloaded}); retry later")
            label = outcome.label
            if outcome.error is not None:
                await self._abort(context, outcome.error)
            response: bytes = outcome.response.SerializeToString()
            return response
        finally:
            gateway.metrics.active(_TRANSPORT, -1)
            gateway.finished(_TRANSPORT, label, started)

    async def _receive(self, context: Any) -> Any:
        """The call's message (bytes), ``grpc.aio.EOF`` when it carried none, None when it did not arrive within
        the body timeout: a message trickling in holds a processing slot, as an HTTP body does."""
        try:
            return await asyncio.wait_for(context.read(), self._gateway.config.body_timeout)
        except asyncio.TimeoutError:  # not yet the builtin TimeoutError on Python 3.10
            return None

    async def _abort(self, context: Any, error: GatewayRequestError) -> None:
        if error.retryable:
            await self._abort_retryable(context, error.message)
        await context.abort(
            _STATUS_CODES.get(error.grpc_code, grpc.StatusCode.INVALID_ARGUMENT), error.message
        )

    async def _abort_retryable(self, context: Any, message: str) -> None:
        retry_info = error_details_pb2.RetryInfo(
            retry_delay=duration_pb2.Duration(seconds=self._gateway.config.retry_after)
        )
        detail = any_pb2.Any()
        detail.Pack(retry_info)
        status = status_pb2.Status(code=code_pb2.UNAVAILABLE, message=message, details=[detail])
        await context.abort(
            grpc.StatusCode.UNAVAILABLE,
            message,
            trailing_metadata=(
                ("google.rpc.retryinfo-bin", retry_info.SerializeToString()),
                ("grpc-status-details-bin", status.SerializeToString()),
            ),
        )
