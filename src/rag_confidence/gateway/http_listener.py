"""OTLP/HTTP: ``POST /v1/traces`` (protobuf or JSON, optional gzip), plus open ``/healthz`` and ``/readyz``.

aiohttp, because it streams request bodies (so the size limit is enforced while reading, not after), speaks
TLS from an ``ssl.SSLContext``, and drains in-flight handlers on shutdown; it is already a dependency of the
ecosystem we plug into. Errors carry a ``google.rpc.Status`` in the request's content type, as OTLP/HTTP says.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import threading
import time
from typing import TYPE_CHECKING

from aiohttp import hdrs, web
from aiohttp.http import HttpVersion11
from aiohttp.http_exceptions import HttpProcessingError
from google.rpc import code_pb2, status_pb2  # type: ignore[import-untyped,unused-ignore]

from .. import semconv
from ..errors import GatewayOverloadedError, GatewayRequestError
from .config import ListenAddress
from .decode import (
    CONTENT_TYPE_JSON,
    CONTENT_TYPE_PROTOBUF,
    encode_message,
    media_type,
    unsupported_media_type,
)
from .security import server_ssl_context

if TYPE_CHECKING:
    from .service import Gateway, Outcome

TRACES_PATH = "/v1/traces"
HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"
_TRANSPORT = semconv.GATEWAY_TRANSPORT_HTTP
_log = logging.getLogger(__name__)
_CHUNK = 64 * 1024
_OTLP_TYPES = (CONTENT_TYPE_PROTOBUF, CONTENT_TYPE_JSON)


class QuietMalformedRequests(logging.Filter):
    """Rewrites aiohttp's log record of a malformed request (400 before any handler runs) as one line.

    aiohttp logs each at ERROR with a traceback whose message quotes the offending line, which may be an
    ``Authorization`` header (a token file saved with CRLF gives a token ending in ``\\r``), and a client without
    a token can make it log without end. The line names the error type only, at most once per ``interval``
    seconds, with the number left out since.
    """

    def __init__(self, interval: float = 60.0) -> None:
        super().__init__()
        self._interval = interval
        self._next = 0.0
        self._left_out = 0
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if not isinstance(error, HttpProcessingError):
            return True
        now = time.monotonic()
        with self._lock:
            if now < self._next:
                self._left_out += 1
                return False
            self._next = now + self._interval
            left_out, self._left_out = self._left_out, 0
        record.msg = "refused a malformed HTTP request with %d (%s); %d more since the last such line"
        record.args = (error.code, type(error).__name__, left_out)
        record.exc_info = None
        record.exc_text = None
        record.levelno = logging.WARNING
        record.levelname = logging.getLevelName(logging.WARNING)
        return True


_QUIET = QuietMalformedRequests()


class HttpListener:
    def __init__(self, gateway: Gateway, address: ListenAddress) -> None:
        server_logger = logging.getLogger("aiohttp.server")
        if _QUIET not in server_logger.filters:
            server_logger.addFilter(_QUIET)
        self._gateway = gateway
        self._address = address
        # The body limit is ours (streamed below); aiohttp's must not cut in first with another message.
        app = web.Application(client_max_size=gateway.config.max_request_bytes + 1)
        app.router.add_post(TRACES_PATH, self._traces, expect_handler=self._expect)
        app.router.add_get(HEALTH_PATH, self._health)
        app.router.add_get(READY_PATH, self._ready)
        # auto_decompress off: aiohttp would inflate gzip without our limit; decode.decompress enforces it.
        self._runner = web.AppRunner(
            app,
            handle_signals=False,
            access_log=None,
            shutdown_timeout=gateway.config.shutdown_timeout,
            auto_decompress=False,
        )

    async def start(self) -> int:
        await self._runner.setup()
        host = self._address.host
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.create_server(
            (host, self._address.port), family=family, backlog=256, dualstack_ipv6=_is_ipv6_wildcard(host)
        )
        tls = self._gateway.config.tls
        site = web.SockSite(
            self._runner, sock, ssl_context=server_ssl_context(tls) if tls is not None else None
        )
        await site.start()
        port: int = sock.getsockname()[1]
        return port

    async def stop(self) -> None:
        # Closes the listening socket first, then waits (up to shutdown_timeout) for handlers in progress.
        await self._runner.cleanup()

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _ready(self, request: web.Request) -> web.Response:
        if self._gateway.ready:
            return web.Response(text="ready\n")
        return web.Response(status=503, text="not ready\n")

    async def _traces(self, request: web.Request) -> web.StreamResponse:
        gateway = self._gateway
        started = time.perf_counter()
        gateway.metrics.active(_TRANSPORT, 1)
        label = semconv.GATEWAY_OUTCOME_INTERNAL
        try:
            response, label = await self._handle(request)
            return response
        finally:
            gateway.metrics.active(_TRANSPORT, -1)
            gateway.finished(_TRANSPORT, label, started)

    async def _expect(self, request: web.Request) -> web.StreamResponse | None:
        """``Expect: 100-continue``: a request its headers already refuse (token, content type, length) gets its
        final status instead, before the client uploads a body of up to the size limit for nothing."""
        refusal = self._refusal(request, media_type(request.headers.get(hdrs.CONTENT_TYPE)))
        if refusal is not None:
            response, label = refusal
            self._gateway.finished(_TRANSPORT, label, time.perf_counter())
            return response
        # What aiohttp's default handler does.
        if request.version != HttpVersion11:
            return None
        if request.headers.get(hdrs.EXPECT, "").lower() != "100-continue":
            raise web.HTTPExpectationFailed(text="unknown Expect header")
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0
        return None

    def _refusal(self, request: web.Request, content_type: str) -> tuple[web.Response, str] | None:
        """The response to a request its headers alone refuse, with its outcome label; None when they pass."""
        gateway = self._gateway
        reply_type = content_type if content_type in _OTLP_TYPES else CONTENT_TYPE_JSON
        if not gateway.auth.allows(request.headers.get(hdrs.AUTHORIZATION)):
            response = _status_response(
                401, code_pb2.UNAUTHENTICATED, "missing or invalid bearer token", reply_type
            )
            response.headers[hdrs.WWW_AUTHENTICATE] = "Bearer"
            return response, semconv.GATEWAY_OUTCOME_UNAUTHENTICATED
        if content_type not in _OTLP_TYPES:
            return _error_response(
                unsupported_media_type(content_type), reply_type
            ), semconv.GATEWAY_OUTCOME_UNSUPPORTED_MEDIA_TYPE
        limit = gateway.config.max_request_bytes
        if request.content_length is not None and request.content_length > limit:
            return _status_response(
                413,
                code_pb2.RESOURCE_EXHAUSTED,
                f"request body exceeds the limit of {limit} bytes",
                reply_type,
            ), semconv.GATEWAY_OUTCOME_TOO_LARGE
        return None

    async def _handle(self, request: web.Request) -> tuple[web.Response, str]:
        gateway = self._gateway
        content_type = media_type(request.headers.get(hdrs.CONTENT_TYPE))
        refusal = self._refusal(request, content_type)
        if refusal is not None:
            return refusal
        # Past the refusals the content type is an OTLP one: replies go in it.
        limit = gateway.config.max_request_bytes
        assert gateway.admission is not None
        try:
            async with gateway.admission.slot():
                try:
                    # A body trickling in holds a processing slot: a deadline frees it (a few such clients
                    # would otherwise starve both listeners for as long as they keep their connections).
                    body = await asyncio.wait_for(_read_limited(request, limit), gateway.config.body_timeout)
                except asyncio.TimeoutError:  # not yet the builtin TimeoutError on Python 3.10
                    # 503, not 408: OTLP clients retry only 429/502/503/504, and a batch a slow link cut
                    # short is worth a retry, not a drop.
                    message = (
                        f"request body not received within {gateway.config.body_timeout:g} s; retry later"
                    )
                    response = _status_response(503, code_pb2.UNAVAILABLE, message, content_type)
                    response.headers[hdrs.RETRY_AFTER] = str(gateway.config.retry_after)
                    return response, semconv.GATEWAY_OUTCOME_BODY_TIMEOUT
                except ConnectionError:
                    # The client hung up before its body was in (its own timeout, a reset): it gave up on this
                    # request and will send it again, as after any failure. No one is left to answer, and an
                    # upstream that times out often must not fill the log with a traceback per request.
                    _log.debug("an HTTP client hung up before sending its whole request body")
                    response = _status_response(
                        400,
                        code_pb2.CANCELLED,
                        "the connection closed before the body was received",
                        content_type,
                    )
                    return response, semconv.GATEWAY_OUTCOME_ABANDONED
                if body is None:
                    message = f"request body exceeds the limit of {limit} bytes"
                    return _status_response(
                        413, code_pb2.RESOURCE_EXHAUSTED, message, content_type
                    ), semconv.GATEWAY_OUTCOME_TOO_LARGE
                loop = asyncio.get_running_loop()
                outcome: Outcome = await loop.run_in_executor(
                    gateway.executor,
                    gateway.process,
                    _TRANSPORT,
                    body,
                    content_type,
                    request.headers.get(hdrs.CONTENT_ENCODING),
                )
        except GatewayOverloadedError as overloaded:
            response = _status_response(
                503, code_pb2.UNAVAILABLE, f"gateway overloaded ({overloaded}); retry later", content_type
            )
            response.headers[hdrs.RETRY_AFTER] = str(gateway.config.retry_after)
            return response, semconv.GATEWAY_OUTCOME_OVERLOADED
        if outcome.error is not None:
            response = _error_response(outcome.error, content_type)
            if outcome.error.retryable:
                response.headers[hdrs.RETRY_AFTER] = str(gateway.config.retry_after)
            return response, outcome.label
        return web.Response(
            body=encode_message(outcome.response, content_type), content_type=content_type
        ), outcome.label


def _is_ipv6_wildcard(host: str) -> bool:
    """``::``, which takes IPv4 clients too on the gRPC listener (and in Go, the Collector's language):
    ``create_server`` alone makes it IPv6-only, and an IPv4 upstream would reach one listener of the two."""
    try:
        unspecified = ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False
    return unspecified and ":" in host and socket.has_dualstack_ipv6()


async def _read_limited(request: web.Request, limit: int) -> bytes | None:
    """The body, or None as soon as it grows past ``limit`` (Content-Length may be absent: chunked)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.content.iter_chunked(_CHUNK):
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _status_response(http_status: int, code: int, message: str, content_type: str) -> web.Response:
    status = status_pb2.Status(code=code, message=message)
    return web.Response(
        status=http_status, body=encode_message(status, content_type), content_type=content_type
    )


def _error_response(error: GatewayRequestError, content_type: str) -> web.Response:
    return _status_response(error.http_status, error.grpc_code, error.message, content_type)
