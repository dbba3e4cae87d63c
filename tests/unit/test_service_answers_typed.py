"""The services answer typed values, never dicts: a record, a frozen dataclass or a page of them, which
the HTTP handler turns into its response model (the one serializer, at the edge). A dict answer would
spell the wire's shape inside the service, a second home for it. Every public method's return type
is declared, and no parameter is `Any` (a raw body the service would have to validate again).

The task service's two lease-dispatcher jobs report counters for its log line, not an answer any
route serves; they are named here, so the list only shrinks."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Mapping
from typing import Any

import pytest

from dovecote.admin.service import TokenService
from dovecote.memory.service import MemoryService
from dovecote.notes.service import NotesService
from dovecote.tasks.service import TaskService

# Methods whose answer is a dict on purpose (see the module docstring).
DICT_ANSWERS: dict[type, set[str]] = {TaskService: {"expire_silent_leases", "reshard_claimable"}}


def _public_methods(cls: type) -> dict[str, Any]:
    return {n: m for n, m in vars(cls).items() if inspect.isfunction(m) and not n.startswith("_")}


# The head of each member of a union, read from the annotation's text (the services' modules defer
# their annotations; the task service imports some names for the type checker only).
LOOSE = {"dict", "Dict", "Mapping", "MutableMapping", "Any"}


def _members(annotation: str) -> list[str]:
    members, depth, start = [], 0, 0
    for i, char in enumerate(annotation):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "|" and depth == 0:
            members.append(annotation[start:i])
            start = i + 1
    return [*members, annotation[start:]]


def _is_dict(annotation: str) -> bool:
    return any(m.split("[", 1)[0].strip().rsplit(".", 1)[-1] in LOOSE for m in _members(annotation))


def untyped_answers(cls: type) -> list[str]:
    """The public methods of `cls` that answer a dict (or Any), or declare no return type."""
    found = []
    for name, method in sorted(_public_methods(cls).items()):
        annotation = method.__annotations__.get("return")
        if not isinstance(annotation, str | None):
            annotation = inspect.formatannotation(annotation)
        if annotation is None or _is_dict(annotation):
            found.append(name)
    return found


def test_the_check_sees_a_dict_answer() -> None:
    """The check must be able to fail: a dict, a dict in a union, Any, a Mapping and no annotation."""

    class Loose:
        def a(self) -> dict[str, Any]:
            return {}

        def b(self) -> None | dict[str, int]:
            return None

        def c(self) -> Any:
            return None

        def d(self) -> Mapping[str, str]:
            return {}

        def e(self):  # type: ignore[no-untyped-def]
            return None

        def f(self) -> tuple[int, str]:
            return (1, "")

    assert untyped_answers(Loose) == ["a", "b", "c", "d", "e"]


@pytest.mark.parametrize("service", [MemoryService, TokenService, NotesService, TaskService], ids=lambda c: c.__name__)
def test_every_service_method_answers_a_typed_value(service: type) -> None:
    assert _public_methods(service), service
    assert set(untyped_answers(service)) == DICT_ANSWERS.get(service, set())


@pytest.mark.parametrize("service", [MemoryService, TokenService], ids=lambda c: c.__name__)
def test_no_parameter_is_a_raw_body(service: type) -> None:
    """The handler's body model hands the service a typed input; the service's gate checks its
    rules, once (memory: `SubmitIn.input()` → `gate_write`, `JudgmentIn.input()` → `gate_judgment`)."""
    for name, method in _public_methods(service).items():
        hints = typing.get_type_hints(method)
        for param in list(inspect.signature(method).parameters)[1:]:
            assert param in hints, f"{service.__name__}.{name}({param}) has no type"
            assert hints[param] is not Any, f"{service.__name__}.{name}({param}) is typed Any"


def test_the_memory_answers_are_the_records_and_frozen_answers() -> None:
    """What each memory command answers, by name: the edge's response models read these."""
    from dovecote.memory import model
    from dovecote.platform.paging import Page

    hints = {name: typing.get_type_hints(m)["return"] for name, m in _public_methods(MemoryService).items()}
    assert hints == {
        "submit": model.Submitted,
        "status": model.Write,
        "cancel": model.Cancellation,
        "list_memories": Page[model.Memory],
        "list_relations": Page[model.Relation],
        "judge": model.Relation,
        "redrive": model.Redriven,
    }
    for record in (model.Write, model.Memory, model.Relation, Page):
        assert record.__dataclass_params__.frozen, record  # type: ignore[attr-defined]
    for answer in (model.Submitted, model.Cancellation, model.Redriven):
        assert issubclass(answer, tuple) and answer._fields, answer  # a NamedTuple: immutable
