"""Bearer-token checks (constant time) and TLS material for both listeners."""

from __future__ import annotations

import hmac
import ssl
from typing import Any

import grpc  # type: ignore[import-untyped,unused-ignore]

from .config import TlsSettings

_SCHEME = b"bearer"


class BearerAuth:
    """Checks ``Authorization: Bearer <token>`` in constant time; ``token`` None lets every request through.

    >>> auth = BearerAuth("s3cret")
    >>> auth.allows("Bearer s3cret"), auth.allows("bearer s3cret"), auth.allows("Bearer x"), auth.allows(None)
    (True, True, False, False)
    """

    def __init__(self, token: str | None) -> None:
        self._token = token.encode("utf-8") if token is not None else None

    @property
    def enabled(self) -> bool:
        return self._token is not None

    def allows(self, header: str | bytes | None) -> bool:
        if self._token is None:
            return True
        if header is None:
            return False
        raw = header.encode("utf-8", "replace") if isinstance(header, str) else header
        scheme, _, credentials = raw.strip().partition(b" ")
        # compare_digest's time depends only on the lengths, never on where the first difference is.
        scheme_ok = hmac.compare_digest(scheme.lower(), _SCHEME)
        token_ok = hmac.compare_digest(credentials.strip(), self._token)
        return scheme_ok and token_ok


def server_ssl_context(tls: TlsSettings) -> ssl.SSLContext:
    """TLS 1.2+ server context; with a client CA, a client certificate signed by it is required."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(str(tls.cert_file), str(tls.key_file))
    if tls.client_ca_file is not None:
        context.load_verify_locations(cafile=str(tls.client_ca_file))
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def grpc_server_credentials(tls: TlsSettings) -> Any:
    client_ca = tls.client_ca_file.read_bytes() if tls.client_ca_file is not None else None
    return grpc.ssl_server_credentials(
        [(tls.key_file.read_bytes(), tls.cert_file.read_bytes())],
        root_certificates=client_ca,
        require_client_auth=client_ca is not None,
    )
