"""The task service's boundary is typed: one explicit method per command and read (no dispatch by
name, no `__getattr__`), every parameter and return annotated, so go-to-definition and mypy reach
the capability that serves each (issue: one home per rule)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

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
