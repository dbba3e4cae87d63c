"""HTTP shapes of the webhook routes (docs/guides/webhooks.md). Types only: dovecote.push holds the
rules (the one gate per input is dovecote.push.model.gate_config; the address check is
dovecote.push.addresses); these models refuse wrong JSON types first."""

from __future__ import annotations

from typing import Any

from pydantic import Field, StrictStr

from dovecote.platform.http import ApiModel
from dovecote.platform.schema import ID, RedriveIn, RequestModel
from dovecote.push.model import HEADER_TEXT, MAX_CREDENTIALS, MAX_TOKEN, MAX_URL, SCHEME

URL: dict[str, Any] = {"maxLength": MAX_URL, "pattern": r"^[\x21-\x7e]+$", "format": "uri"}
TOKEN: dict[str, Any] = {"maxLength": MAX_TOKEN, "pattern": f"^{HEADER_TEXT.pattern}$"}
CREDENTIALS: dict[str, Any] = {"maxLength": MAX_CREDENTIALS, "pattern": f"^{HEADER_TEXT.pattern}$"}


class WebhookAuthenticationIn(RequestModel):
    scheme: StrictStr = Field(json_schema_extra={"pattern": f"^{SCHEME.pattern}$"})
    credentials: StrictStr | None = Field(default=None, json_schema_extra=CREDENTIALS)


class WebhookIn(RequestModel):
    """A webhook of the task: notified of every event from now on (docs/guides/webhooks.md)."""

    id: StrictStr | None = Field(default=None, description="absent: the server names it", json_schema_extra=ID)
    url: StrictStr = Field(description="https (the address is checked: no private network)", json_schema_extra=URL)
    token: StrictStr | None = Field(
        default=None, description="sent as X-A2A-Notification-Token; never answered back", json_schema_extra=TOKEN
    )
    authentication: WebhookAuthenticationIn | None = Field(
        default=None, description="sent as `Authorization: <scheme> <credentials>`; the credentials never answered back"
    )


class WebhookAuthenticationOut(ApiModel):
    scheme: str
    has_credentials: bool


class WebhookFailureOut(ApiModel):
    at: str
    webhook_id: str
    sequence: int
    status: int = Field(description="the receiver's status; 0: no answer (timeout, refused connection)")
    attempt: int
    reason: str
    retry_in_s: int | None = None
    dead_lettered: bool | None = None


class WebhookOut(ApiModel):
    id: str
    task_id: str
    url: str
    has_token: bool
    authentication: WebhookAuthenticationOut | None = None
    created_at: str
    delivered: int = Field(description="the last task event sequence delivered (or given up on)")
    last_failure: WebhookFailureOut | None = None


class WebhookEnvelope(ApiModel):
    webhook: WebhookOut


class WebhookList(ApiModel):
    items: list[WebhookOut]


# The webhook route's name for a redrive (platform/schema.RedriveIn) in the API document.
class WebhookRedriveIn(RedriveIn):
    pass


class WebhookRedrivenOut(ApiModel):
    task_id: str
    webhook_id: str
    sequence: int


class WebhookRedriveOut(ApiModel):
    moved: int
    notifications: list[WebhookRedrivenOut]


class JwkOut(ApiModel):
    kty: str
    crv: str
    x: str
    kid: str
    use: str
    alg: str


class JwksOut(ApiModel):
    keys: list[JwkOut]
