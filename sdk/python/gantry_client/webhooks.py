"""Checking the webhooks gantry sends (the Standard Webhooks scheme)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any, Mapping, Optional, Union

from .api_types import WebhookEvent
from .errors import WebhookVerificationError

#: How far a message's timestamp may be from now.
TOLERANCE_SECONDS = 300


def _header(headers: Any, name: str) -> str:
    getter = getattr(headers, "get", None)
    if getter is None:
        return ""
    for key in (name, name.title(), name.upper()):
        v = getter(key)
        if v:
            return str(v)
    if isinstance(headers, Mapping):
        for k, v in headers.items():
            if str(k).lower() == name:
                return str(v)
    return ""


def sign_webhook(secret: str, msg_id: str, timestamp: int, body: Union[bytes, str]) -> str:
    """The v1 signature of a message, as the webhook-signature header has it."""
    key = base64.b64decode(secret[len("whsec_"):] if secret.startswith("whsec_") else secret)
    if isinstance(body, str):
        body = body.encode("utf-8")
    mac = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def verify_webhook(secret: str, headers: Any, body: Union[bytes, str], *,
                   now: Optional[float] = None, tolerance: int = TOLERANCE_SECONDS) -> WebhookEvent:
    """Check a webhook message and return its event.

    ``secret`` is the tenant's ``whsec_...`` secret (``Gantry.webhook_secret()``),
    ``headers`` the request's headers (any mapping), ``body`` its raw bytes,
    exactly as received. Raises WebhookVerificationError when a header is
    missing, the timestamp is more than ``tolerance`` seconds from now, or no
    v1 signature matches.
    """
    msg_id = _header(headers, "webhook-id")
    ts = _header(headers, "webhook-timestamp")
    sigs = _header(headers, "webhook-signature")
    if not msg_id or not ts or not sigs:
        raise WebhookVerificationError("missing webhook-id, webhook-timestamp or webhook-signature")
    try:
        sent = int(ts)
    except ValueError:
        raise WebhookVerificationError("webhook-timestamp is not a number of seconds") from None
    if abs((time.time() if now is None else now) - sent) > tolerance:
        raise WebhookVerificationError("webhook-timestamp is too far from now")
    try:
        want = sign_webhook(secret, msg_id, sent, body)
    except (ValueError, TypeError):
        raise WebhookVerificationError("the secret is not whsec_ followed by base64") from None
    for sig in sigs.split():
        if sig.startswith("v1,") and hmac.compare_digest(sig, want):
            if isinstance(body, bytes):
                body = body.decode("utf-8")
            event: WebhookEvent = json.loads(body)
            return event
    raise WebhookVerificationError("no valid signature")
