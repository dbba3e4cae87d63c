"""The task service's boundary is typed: one explicit method per command and read (no dispatch by
name, no `__getattr__`), every parameter and return annotated, so go-to-definition and mypy reach
the capability that serves each (issue: one home per rule)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from dovecote.tasks.service import TaskService

ROOT = Path(__file__).resolve().parents[2]


def _public_methods() -> dict[str, object]:
    return {
        name: member
        for name, member in vars(TaskService).items()
        if inspect.isfunction(member) and not name.startswith("_")
    }


def test_no_dispatch_by_name() -> None:
    assert "__getattr__" not in vars(TaskService)
    assert "SERVED_BY" not in vars(__import__("dovecote.tasks.service", fromlist=["x"]))


def test_every_method_is_typed() -> None:
    methods = _public_methods()
    assert len(methods) >= 30, sorted(methods)
    for name, method in methods.items():
        signature = inspect.signature(method)  # type: ignore[arg-type]
        assert signature.return_annotation is not inspect.Signature.empty, f"{name} has no return type"
        for param in list(signature.parameters.values())[1:]:
            assert param.annotation is not inspect.Parameter.empty, f"{name}({param.name}) has no type"
            assert "Any" != param.annotation, f"{name}({param.name}) is typed Any"


def test_every_route_and_worker_path_calls_a_named_method() -> None:
    """The handlers call `tasks.<method>` and `tasks.gate.<method>` by name in the source: no
    `getattr` on the service or its gate anywhere a request passes."""
    for path in ("functions/tasks_api/handler.py", "shared/dovecote/a2a/service.py"):
        tree = ast.parse((ROOT / path).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
                target = ast.unparse(node.args[0])
                assert "service" not in target and "gate" not in target and "tasks" not in target, (
                    f"{path}:{node.lineno} dispatches by name: {ast.unparse(node)}"
                )


def test_the_service_answers_every_gate_command() -> None:
    """Each gate method has the service method of the same name, so a route pairs them visibly."""
    from dovecote.tasks.commands import CommandGate

    gates = {n for n, m in vars(CommandGate).items() if inspect.isfunction(m) and not n.startswith("_")}
    assert gates <= set(_public_methods()), sorted(gates - set(_public_methods()))


def test_the_service_says_which_transitions_are_allowed() -> None:
    """An adapter asks the service (A2A does, for a reply and a cancel), never restates the rule."""
    from dovecote.platform.cursors import CursorSigner
    from dovecote.tasks import machine
    from dovecote.tasks.commands import Accept, Cancel, Reply
    from dovecote.tasks.memory import InMemoryTaskStore

    service = TaskService(InMemoryTaskStore(), CursorSigner(b"k" * 32))
    assert [s for s in machine.STATES if service.allows(Reply, s)] == ["input_required"]
    assert [s for s in machine.STATES if service.allows(Cancel, s)] == ["submitted", "working", "input_required"]
    assert [s for s in machine.STATES if service.allows(Accept, s)] == ["submitted"]


def test_the_a2a_adapter_builds_commands_not_request_bodies() -> None:
    """A2A builds the command dataclasses itself (no HTTP-shaped body through a gate) and asks the
    service which transitions are allowed (no `!= "input_required"` of its own)."""
    source = (ROOT / "shared/dovecote/a2a/service.py").read_text()
    assert ".gate." not in source
    assert '"input_required"' not in source


def test_roles_are_checked_once_in_one_place() -> None:
    """Who may run a command is checked once, by `commands.authorize` (the one table: each command's
    BY, or the machine's `by` for a transition), where the command is built: its gate, or the A2A
    binding that builds it itself. The capabilities that run commands check no role; reads check
    none either (every role of an authority reads its tasks), but for a worker's own leases."""
    checks = {"require", "authorize", "worker_id"}
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "shared/dovecote/tasks").glob("*.py")) + [ROOT / "shared/dovecote/a2a/service.py"]:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                calls = [
                    n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
                    for n in ast.walk(node)
                    if isinstance(n, ast.Call)
                ]
                if checks & set(calls):
                    found.setdefault(path.name, []).append(node.name)
    gates = {n for n, m in vars(__import__("dovecote.tasks.commands", fromlist=["x"]).CommandGate).items()}
    assert set(found) == {"commands.py", "leases.py", "service.py"}, found
    assert set(found["commands.py"]) - {"authorize", "worker_id"} <= gates
    assert found["leases.py"] == ["get_lease", "list_leases"]
    assert sorted(found["service.py"]) == ["_again", "_create", "_reply", "cancel_task"]


def test_every_role_of_the_authority_reads() -> None:
    from dovecote.platform.cursors import CursorSigner
    from dovecote.platform.principal import Principal
    from dovecote.tasks.memory import InMemoryTaskStore
    from dovecote.tasks.ports import TaskFilter
    from tests.support.tasks import CALLER, Edge, Flow

    service = Edge(TaskService(InMemoryTaskStore(), CursorSigner(b"k" * 32)))
    flow = Flow(service).to_state("working")
    for who in (CALLER, Principal("acme", "worker"), Principal("acme", "worker", "w9"), Principal("acme", "admin")):
        assert service.get(who, flow.task_id)["task"]["state"] == "working"
        assert service.events(who, flow.task_id, None, None)["items"]
        assert service.list_tasks(who, TaskFilter(), None, None)["total_size"] == 1
        assert next(service.follow(who, flow.task_id, None)) is not None
    # A worker's own leases are the workers' (and an admin's); and no principal has another role.
    from dovecote.platform.errors import Forbidden

    with pytest.raises(Forbidden):
        service.list_leases(CALLER, None, None)
    with pytest.raises(Forbidden):
        Principal("acme", "reader")  # type: ignore[arg-type]
