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

from collections.abc import Iterator
from contextlib import contextmanager
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


def _config_id(value: str) -> str:
    if not value:
        raise error("INVALID_PARAMS", "id is required: the config's id")
    return value


@contextmanager
def _a2a_errors(task_id: str) -> Iterator[None]:
    """The push service's errors on the A2A wire: a task that is not the caller's (or not an id), or a
    config the task does not have, is TaskNotFound; the rest as every A2A error maps."""
    try:
        yield
    except DomainError as exc:
        if isinstance(exc, NotFound) and exc.details.get("id"):
            found = str(exc.details["id"])[:128]
            raise error("TASK_NOT_FOUND", "push notification config not found", taskId=task_id, id=found) from None
        if isinstance(exc, NotFound) or (isinstance(exc, InvalidArgument) and exc.details.get("field") == "task_id"):
            raise error("TASK_NOT_FOUND", "task not found", taskId=task_id[:128]) from None
        raise from_domain(exc, taskId=task_id[:128]) from None


def create(push: PushService, principal: Principal, request: TaskPushNotificationConfig) -> TaskPushNotificationConfig:
    task_id = _task_id(request.task_id)
    with _a2a_errors(task_id):
        return answer(push.create(principal, task_id, given(request)))


def get(
    push: PushService, principal: Principal, request: GetTaskPushNotificationConfigRequest
) -> TaskPushNotificationConfig:
    task_id, config_id = _task_id(request.task_id), _config_id(request.id)
    with _a2a_errors(task_id):
        return answer(push.get(principal, task_id, config_id))


def list_configs(
    push: PushService, principal: Principal, request: ListTaskPushNotificationConfigsRequest
) -> ListTaskPushNotificationConfigsResponse:
    task_id = _task_id(request.task_id)
    with _a2a_errors(task_id):
        found = push.list(principal, task_id)
    return ListTaskPushNotificationConfigsResponse(configs=[answer(c) for c in found])


def delete(push: PushService, principal: Principal, request: DeleteTaskPushNotificationConfigRequest) -> None:
    task_id, config_id = _task_id(request.task_id), _config_id(request.id)
    with _a2a_errors(task_id):
        push.delete(principal, task_id, config_id)


def register(
    push: PushService, principal: Principal, config: TaskPushNotificationConfig, task_id: str, *, new_task: bool
) -> str:
    """SendMessage's config, stored before the commit; its id (to take back if the send fails)."""
    with _a2a_errors(task_id):
        return push.create(principal, task_id, given(config), pending=new_task).id
