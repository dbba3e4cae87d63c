"""A2A's push notification config methods (A2A v1.0 §3.1.7-10) over the push service
(dovecote/push/service.py), on both bindings, and SendMessage's `configuration.taskPushNotificationConfig`.

- CreateTaskPushNotificationConfig: a TaskPushNotificationConfig (taskId, optional id, url, token,
  authentication); the URL checked (SSRF) and refused as InvalidParams with the reason; an id
  already on the task replaces that config's settings. The answer, and Get's and List's, carry the
  config *without* its token and credentials: they are write-only secrets here (sealed at rest, sent
  only to the receiver), so an answer, a log or a trace never holds them.
- Get / Delete: TaskNotFound for a task that is not the caller's, or a config the task does not
  have (Get); Delete of a config that is not there succeeds (idempotent).
- List: every live config of the task, one page (a task holds at most 10).
- SendMessage with a config: stored before the task's commit (new task: from its first event), so
  the first notification cannot be missed; a send that then fails takes it back.
"""

from __future__ import annotations

from typing import Any

from a2a.types import (
    AuthenticationInfo,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    TaskPushNotificationConfig,
)

from dovecote.a2a.errors import error, from_domain
from dovecote.platform.errors import DomainError, InvalidArgument, NotFound
from dovecote.platform.principal import Principal
from dovecote.push.model import ConfigInput, PushConfig, gate_config
from dovecote.push.service import PushService


def given(config: TaskPushNotificationConfig) -> ConfigInput:
    """The A2A config as the push context's one validator reads it."""
    raw: dict[str, Any] = {"id": config.id, "url": config.url, "token": config.token}
    if config.HasField("authentication"):
        raw["authentication"] = {
            "scheme": config.authentication.scheme,
            "credentials": config.authentication.credentials,
        }
    return gate_config(raw)


def answer(config: PushConfig) -> TaskPushNotificationConfig:
    out = TaskPushNotificationConfig(id=config.id, task_id=config.task, url=config.url)
    if config.scheme:
        out.authentication.CopyFrom(AuthenticationInfo(scheme=config.scheme))
    return out


def _task_id(value: str) -> str:
    if not value:
        raise error("INVALID_PARAMS", "taskId is required: the task's id")
    return value


def _mapped(exc: DomainError, task_id: str) -> Exception:
    if isinstance(exc, NotFound) or (isinstance(exc, InvalidArgument) and exc.details.get("field") == "task_id"):
        return error("TASK_NOT_FOUND", "task not found", taskId=task_id[:128])
    return from_domain(exc, taskId=task_id[:128])


def create(push: PushService, principal: Principal, request: TaskPushNotificationConfig) -> TaskPushNotificationConfig:
    task_id = _task_id(request.task_id)
    try:
        return answer(push.create(principal, task_id, given(request)))
    except DomainError as exc:
        raise _mapped(exc, task_id) from None


def get(
    push: PushService, principal: Principal, request: GetTaskPushNotificationConfigRequest
) -> TaskPushNotificationConfig:
    task_id = _task_id(request.task_id)
    if not request.id:
        raise error("INVALID_PARAMS", "id is required: the config's id")
    try:
        return answer(push.get(principal, task_id, request.id))
    except NotFound as exc:
        if exc.details.get("id"):
            raise error(
                "TASK_NOT_FOUND", "push notification config not found", taskId=task_id, id=request.id[:128]
            ) from None
        raise _mapped(exc, task_id) from None
    except DomainError as exc:
        raise _mapped(exc, task_id) from None


def list_configs(
    push: PushService, principal: Principal, request: ListTaskPushNotificationConfigsRequest
) -> ListTaskPushNotificationConfigsResponse:
    task_id = _task_id(request.task_id)
    try:
        found = push.list(principal, task_id)
    except DomainError as exc:
        raise _mapped(exc, task_id) from None
    return ListTaskPushNotificationConfigsResponse(configs=[answer(c) for c in found])


def delete(push: PushService, principal: Principal, request: DeleteTaskPushNotificationConfigRequest) -> None:
    task_id = _task_id(request.task_id)
    if not request.id:
        raise error("INVALID_PARAMS", "id is required: the config's id")
    try:
        push.delete(principal, task_id, request.id)
    except DomainError as exc:
        raise _mapped(exc, task_id) from None


def register(
    push: PushService, principal: Principal, config: TaskPushNotificationConfig, task_id: str, *, new_task: bool
) -> str:
    """SendMessage's config, stored before the commit; its id (to take back if the send fails)."""
    try:
        return push.create(principal, task_id, given(config), pending=new_task).id
    except DomainError as exc:
        raise _mapped(exc, task_id) from None
