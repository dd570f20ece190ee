"""Errors raised by the client: one class per API error code."""

from __future__ import annotations

from typing import Dict, Optional, Type


class GantryError(Exception):
    """A request gantry refused or could not serve.

    ``status`` is the HTTP status (0 when the server could not be reached),
    ``code`` the API's error code (``invalid_argument``, ``not_found``, ...),
    ``message`` its explanation and ``field`` the request field at fault, if
    any. ``retry_after`` is the server's Retry-After, in seconds, if it sent
    one.
    """

    def __init__(self, message: str, *, status: int = 0, code: str = "", field: Optional[str] = None,
                 retry_after: Optional[float] = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.field = field
        self.retry_after = retry_after

    def __str__(self) -> str:
        where = f" (field {self.field})" if self.field else ""
        return f"{self.code or 'error'}: {self.message}{where}"


class InvalidArgument(GantryError):
    """400: the request is malformed or breaks a limit; ``field`` names it."""


class Unauthenticated(GantryError):
    """401: the API key is missing, invalid or revoked."""


class NotFound(GantryError):
    """404: no such object for this tenant."""


class Conflict(GantryError):
    """409: e.g. an idempotency key reused for a different request."""


class RequestTimeout(GantryError):
    """408: the request body did not arrive in time."""


class PayloadTooLarge(GantryError):
    """413: the request body is larger than the server allows."""


class RateLimited(GantryError):
    """429: too many requests; retry after ``retry_after`` seconds."""


class Unavailable(GantryError):
    """503: a dependency (database, queue) is unavailable, or a feature is off."""


class UpstreamError(GantryError):
    """502/504: an upstream MCP server failed (code mode)."""


class InternalError(GantryError):
    """500: an unexpected failure on the server."""


class ConnectionFailed(GantryError):
    """The server could not be reached (refused, timed out, DNS)."""


class WebhookVerificationError(Exception):
    """A webhook message whose signature or timestamp does not check out."""


#: The error class for each API error code.
ERRORS_BY_CODE: Dict[str, Type[GantryError]] = {
    "invalid_argument": InvalidArgument,
    "unauthenticated": Unauthenticated,
    "not_found": NotFound,
    "conflict": Conflict,
    "request_timeout": RequestTimeout,
    "payload_too_large": PayloadTooLarge,
    "rate_limited": RateLimited,
    "unavailable": Unavailable,
    "upstream_error": UpstreamError,
    "internal": InternalError,
}

_BY_STATUS: Dict[int, Type[GantryError]] = {
    400: InvalidArgument, 401: Unauthenticated, 404: NotFound, 408: RequestTimeout, 409: Conflict,
    413: PayloadTooLarge, 429: RateLimited, 500: InternalError, 502: UpstreamError, 503: Unavailable,
    504: UpstreamError,
}


def error_for(status: int, code: str, message: str, field: Optional[str] = None,
              retry_after: Optional[float] = None) -> GantryError:
    """The exception for an API error body (or a bare status)."""
    cls = ERRORS_BY_CODE.get(code) or _BY_STATUS.get(status, GantryError)
    return cls(message, status=status, code=code, field=field, retry_after=retry_after)
