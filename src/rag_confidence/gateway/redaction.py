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

from opentelemetry.environment_variables import OTEL_METRICS_EXPORTER
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
from .forward import DEFAULT_PROTOCOL, PROTOCOL_GRPC, split_userinfo

__all__ = ["RedactingFilter", "check_credentials", "install_redaction", "secrets_from_environment"]

_SIGNALS = (
    # (endpoint, protocol, headers) variables of each signal the gateway exports; the exporters use the
    # signal's own variable when it is set and not empty, else the general one.
    (
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
        OTEL_EXPORTER_OTLP_TRACES_HEADERS,
    ),
    (
        OTEL_EXPORTER_OTLP_METRICS_ENDPOINT,
        OTEL_EXPORTER_OTLP_METRICS_PROTOCOL,
        OTEL_EXPORTER_OTLP_METRICS_HEADERS,
    ),
)
_ENDPOINTS = (
    OTEL_EXPORTER_OTLP_ENDPOINT,
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
    OTEL_EXPORTER_OTLP_METRICS_ENDPOINT,
)
_HEADERS = (OTEL_EXPORTER_OTLP_HEADERS, OTEL_EXPORTER_OTLP_TRACES_HEADERS, OTEL_EXPORTER_OTLP_METRICS_HEADERS)

# The OTLP exporter specification's header grammar as the SDK reads it (``parse_env_headers``): each entry,
# stripped, is name=value with a URL-encoded value, or, read liberally, a value with spaces too; never '"',
# ',', ';' or '\'.
_HEADER_NAME = r"[\x21\x23-\x27\x2a\x2b\x2d\x2e\x30-\x39\x41-\x5a\x5e-\x7a\x7c\x7e]+"
_HEADER = re.compile(
    rf"[ \t]*{_HEADER_NAME}[ \t]*=[ \t]*[\x20\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]*[ \t]*"
)
_DELIMITER = re.compile(r"[ \t]*,[ \t]*")
# Headers whose values are credentials (Authorization, x-api-key, dd-api-key, x-honeycomb-team, an access
# token, a DSN, ...). Other header values (a tenant, a dataset: "prod", "traces") are no secret, and masked
# they would turn those words into "***" all over the log.
_CREDENTIAL_HEADER = re.compile(
    r"auth|key|token|secret|pass|cookie|session|signature|credential|dsn|team", re.I
)
# Shorter values would turn ordinary words of other log lines into "***"; they protect next to nothing.
_SHORTEST_SECRET = 3


def _used(env: Mapping[str, str], signal_variable: str, general_variable: str) -> str:
    return env.get(signal_variable) or env.get(general_variable) or ""


def _userinfo_secret(endpoint: str) -> str:
    """The password of ``endpoint``'s userinfo, or its user name when there is no password (a token given as
    the user, ``https://<token>@host``)."""
    user, _, password = split_userinfo(endpoint)[1].partition(":")
    return password or user


def check_credentials(environ: Mapping[str, str]) -> None:
    """Raise :class:`~rag_confidence.errors.ConfigValidationError` for credentials the exporters cannot use
    and would log: userinfo in a gRPC endpoint, a header entry the SDK would skip (each as the exporters read
    the variables: the signal's own, else the general one; metrics only when they are exported). The
    messages name the variable and the header, never a value."""
    metrics_on = (environ.get(OTEL_METRICS_EXPORTER) or "").strip().lower() != "none"
    for endpoint_variable, protocol_variable, headers_variable in _SIGNALS:
        if endpoint_variable == OTEL_EXPORTER_OTLP_METRICS_ENDPOINT and not metrics_on:
            continue
        variable = endpoint_variable if environ.get(endpoint_variable) else OTEL_EXPORTER_OTLP_ENDPOINT
        protocol = _used(environ, protocol_variable, OTEL_EXPORTER_OTLP_PROTOCOL).strip().lower()
        if (protocol or DEFAULT_PROTOCOL) == PROTOCOL_GRPC and split_userinfo(environ.get(variable) or "")[1]:
            raise ConfigValidationError(
                f"{variable}: a user and password in a gRPC endpoint are never sent (gRPC has no userinfo) "
                f"and would be logged; send them as a header, {OTEL_EXPORTER_OTLP_HEADERS}="
                "authorization=Basic%20<base64 of user:password>",
                path=variable,
            )
        variable = headers_variable if environ.get(headers_variable) else OTEL_EXPORTER_OTLP_HEADERS
        for number, entry in enumerate(_DELIMITER.split(environ.get(variable) or ""), start=1):
            if not entry or _HEADER.fullmatch(entry.strip()):
                continue
            name = re.match(rf"\s*({_HEADER_NAME})[ \t]*=", entry)
            which = f"the header {name.group(1)!r}" if name else f"entry {number}"
            raise ConfigValidationError(
                f"{variable}: {which} is not name=value with a URL-encoded value (percent-encode quotes, "
                "commas, semicolons and backslashes); the exporter would skip it and log it",
                path=variable,
            )


def secrets_from_environment(environ: Mapping[str, str], extra: Iterable[str | None] = ()) -> list[str]:
    """The values to keep out of the log: endpoint passwords (or a token given as the user name) and query
    strings, the values of credential headers (as written and decoded) and ``extra`` (the gateway's own bearer
    token). Longest first, so a secret that contains another is replaced whole."""
    found: set[str] = set()
    for variable in _ENDPOINTS:
        endpoint = environ.get(variable) or ""
        secret = _userinfo_secret(endpoint)
        query = endpoint.partition("?")[2]
        found.update((secret, unquote(secret), query, unquote(query)))
    for variable in _HEADERS:
        for entry in _DELIMITER.split(environ.get(variable) or ""):
            name, _, value = entry.partition("=")
            if _CREDENTIAL_HEADER.search(name):
                value = value.strip()
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
        except Exception:  # arguments that do not fit the format: the handler would print them as they are
            message = f"{record.msg} (arguments: {record.args!r})"
            record.msg, record.args = self._redact(message), ()
        else:
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
