"""gantry_client: a client of gantry's HTTP API (standard library only).

    from gantry_client import Gantry

    g = Gantry()  # GANTRY_URL, GANTRY_API_KEY
    job = g.execute(language="python", code="print(6*7)")
    print(job["status"], job["stdout"])

Types of the API's bodies (TypedDicts) are in gantry_client.api_types,
generated from its OpenAPI document.
"""

from . import api_types
from .client import DEFAULT_URL, Gantry, LogEvent
from .errors import (
    ERRORS_BY_CODE,
    ConnectionFailed,
    Conflict,
    GantryError,
    InternalError,
    InvalidArgument,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    RequestTimeout,
    Unauthenticated,
    Unavailable,
    UpstreamError,
    WebhookVerificationError,
)
from .webhooks import sign_webhook, verify_webhook

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_URL", "ERRORS_BY_CODE", "ConnectionFailed", "Conflict", "Gantry", "GantryError", "InternalError",
    "InvalidArgument", "LogEvent", "NotFound", "PayloadTooLarge", "RateLimited", "RequestTimeout",
    "Unauthenticated", "Unavailable", "UpstreamError", "WebhookVerificationError", "api_types", "sign_webhook",
    "verify_webhook",
]
