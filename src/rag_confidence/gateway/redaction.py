"""Credentials out of the gateway's log, including what the SDK exporters and urllib3 log on their own.

The downstream's credentials travel in ``OTEL_EXPORTER_OTLP_*``: a password in the endpoint URL, a token in its
query string (``?api_key=``), header values. The gateway's own lines mask them, but the SDK exporters log the
endpoint on every failed export (a gRPC target keeps its userinfo), urllib3 logs each request line at debug
level (query included), and the SDK's header parser logs a malformed header whole. So the gateway:

- refuses what cannot work and would only be logged: a user and password in a gRPC endpoint (gRPC sends no
  userinfo) and header entries the SDK would skip with a warning quoting them;
- rewrites every log record passing its handlers so that none of those values appears (``***`` instead).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from urllib.parse import unquote

from opentelemetry.sdk.environment_variables import (
    OTEL_EXPORTER_OTLP_ENDPOINT,
    OTEL_EXPORTER_OTLP_HEADERS,
    OTEL_EXPORTER_OTLP_METRICS_ENDPOINT,
    OTEL_EXPORTER_OTLP_METRICS_HEADERS,
    OTEL_EXPORTER_OTLP_METRICS_PROTOCOL,
    OTEL_EXPORTER_OTLP_PROTOCOL,
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
    OTEL_EXPORTER_OTLP_TRACES_HEADERS,
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
)

from ..errors import ConfigValidationError

__all__ = ["RedactingFilter", "check_credentials", "install_redaction", "secrets_from_environment"]

_ENDPOINTS = (
    (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL),
    (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL),
    (OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, OTEL_EXPORTER_OTLP_METRICS_PROTOCOL),
)
_HEADERS = (OTEL_EXPORTER_OTLP_HEADERS, OTEL_EXPORTER_OTLP_TRACES_HEADERS, OTEL_EXPORTER_OTLP_METRICS_HEADERS)

# What the SDK exporters accept (the OTLP exporter specification's grammar, with the SDK's liberal reading:
# spaces allowed in values): a token name, "=", a value without '"', ',', ';' or '\'.
_HEADER_NAME = r"[\x21\x23-\x27\x2a\x2b\x2d\x2e\x30-\x39\x41-\x5a\x5e-\x7a\x7c\x7e]+"
_HEADER = re.compile(
    rf"[ \t]*({_HEADER_NAME})[ \t]*=[ \t]*[\x20\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]*[ \t]*"
)
_DELIMITER = re.compile(r"[ \t]*,[ \t]*")
# Shorter values would turn ordinary words of other log lines into "***"; they protect next to nothing.
_SHORTEST_SECRET = 3


def _protocol(env: Mapping[str, str], variable: str) -> str:
    return (env.get(variable) or env.get(OTEL_EXPORTER_OTLP_PROTOCOL) or "").strip().lower()


def _userinfo(endpoint: str) -> str:
    """The ``user:password`` part of ``endpoint`` ("" without one), up to the last "@" before the path."""
    _, separator, rest = endpoint.partition("://")
    if not separator:
        rest = endpoint
    userinfo, at, _ = rest.rpartition("@")
    return userinfo if at else ""


def check_credentials(environ: Mapping[str, str]) -> None:
    """Raise :class:`~rag_confidence.errors.ConfigValidationError` for credentials the exporters cannot use
    and would log: userinfo in a gRPC endpoint, a header entry the SDK would skip. The messages name the
    variable and the header, never a value."""
    for variable, protocol_variable in _ENDPOINTS:
        endpoint = environ.get(variable) or ""
        if endpoint and _protocol(environ, protocol_variable) == "grpc" and _userinfo(endpoint):
            raise ConfigValidationError(
                f"{variable}: a user and password in a gRPC endpoint are never sent (gRPC has no userinfo) "
                f"and would be logged; send them as a header, {OTEL_EXPORTER_OTLP_HEADERS}="
                "authorization=Basic%20<base64 of user:password>",
                path=variable,
            )
    for variable in _HEADERS:
        for number, entry in enumerate(_DELIMITER.split(environ.get(variable) or ""), start=1):
            if not entry or _HEADER.fullmatch(entry):
                continue
            name = re.match(rf"[ \t]*({_HEADER_NAME})[ \t]*=", entry)
            which = f"the header {name.group(1)!r}" if name else f"entry {number}"
            raise ConfigValidationError(
                f"{variable}: {which} is not name=value with a URL-encoded value (percent-encode quotes, "
                "commas, semicolons and backslashes); the exporter would skip it and log it",
                path=variable,
            )


def secrets_from_environment(environ: Mapping[str, str], extra: Iterable[str | None] = ()) -> list[str]:
    """The values to keep out of the log: endpoint passwords and query strings, header values (as written and
    decoded) and ``extra`` (the gateway's own bearer token). Longest first, so a secret that contains another
    is replaced whole."""
    found: set[str] = set()
    for variable, _ in _ENDPOINTS:
        endpoint = environ.get(variable) or ""
        password = _userinfo(endpoint).partition(":")[2]
        query = endpoint.partition("?")[2]
        found.update((password, unquote(password), query, unquote(query)))
    for variable in _HEADERS:
        for entry in _DELIMITER.split(environ.get(variable) or ""):
            value = entry.partition("=")[2].strip()
            found.update((value, unquote(value)))
    found.update(value.strip() for value in extra if value)
    return sorted((value for value in found if len(value) >= _SHORTEST_SECRET), key=len, reverse=True)


class RedactingFilter(logging.Filter):
    """Replaces each secret in a record's message and traceback with ``***``; never drops a record.

    >>> record = logging.LogRecord("x", logging.WARNING, __file__, 1, "exporting to %s", ("h?key=s3cret",), None)
    >>> RedactingFilter(["key=s3cret"]).filter(record), record.getMessage()
    (True, 'exporting to h?***')
    """

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self._secrets = [secret for secret in secrets if secret]

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, "***")
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        if not self._secrets:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a record whose arguments do not fit its format: leave it to the handler's report
            return True
        redacted = self._redact(message)
        if redacted != message:
            record.msg, record.args = redacted, ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self._redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self._redact(record.stack_info)
        return True


def install_redaction(secrets: Iterable[str]) -> RedactingFilter:
    """Put a :class:`RedactingFilter` on every handler of the root logger (where the gateway's, the SDK's and
    urllib3's records end up), and return it."""
    redacting = RedactingFilter(secrets)
    for handler in logging.getLogger().handlers:
        handler.addFilter(redacting)
    return redacting
