"""Command-line values converted without pydantic, for the parameters that need nothing more.

typer 0.29 converts every parameter's value through a pydantic `TypeAdapter` built when the command
runs, so every `dovecote` command imported pydantic and built adapters: about half of a `notes get`'s
start-up on this machine (`make bench`, section cli). Our parameters are strings, numbers, flags, paths
and lists of those; for exactly these (no parser, no choices, no range, no file) `str()`, `int()`,
`float()` and typer's own path checks give the same values, and a bad number is the same usage error
(`Invalid value for '--limit': 'x' is not a valid integer`). Everything else (the enum of
`dovecote mcp --worker-tools`, the bounded `--interval`) still goes through typer's pydantic path.

Installed once, when `dovecote.cli.groups` is imported: it concerns this command line's process only.
typer is pinned (pyproject.toml); tests/unit/test_cli_start.py checks that a command runs without
pydantic and that the values are the ones typer's own path gives.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args, get_origin

from typer._click.exceptions import BadParameter
from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
from typer._param_types import coerce_cli_path
from typer.core import _TyperParameter

NAMES = {int: "integer", float: "number", bool: "boolean"}
TRUE = frozenset({"1", "true", "t", "yes", "y", "on"})
FALSE = frozenset({"", "0", "false", "f", "no", "n", "off"})


def _leaf(annotation: Any, descriptor: TypeDescriptor) -> bool:
    info = descriptor.parameter_info
    if annotation in (str, bool):
        return True
    if annotation in (int, float):
        return info.min is None and info.max is None and not info.clamp
    return annotation is Path


def direct(descriptor: TypeDescriptor) -> bool:
    """True when the value needs only a plain conversion (the module docstring)."""
    info = descriptor.parameter_info
    if descriptor.file_annotation is not None or info.parser is not None or descriptor.is_choice:
        return False
    annotation = descriptor.annotation
    if get_origin(annotation) is list:
        (annotation,) = get_args(annotation)
    return _leaf(annotation, descriptor)


@dataclass(frozen=True)
class DirectRuntimeParam(RuntimeParam):
    def _one(self, leaf: Any, value: Any, param: Any, ctx: Any) -> Any:
        if leaf is str:
            return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
        if leaf is Path:
            path = value if isinstance(value, Path) else Path(value)
            return coerce_cli_path(path, self.parameter_info, path_type=Path, param=param, ctx=ctx)
        if leaf is bool:
            return self._bool(value, param, ctx)
        if isinstance(value, bool):
            raise BadParameter(f"{value!r} is not a valid {NAMES[leaf]}.", ctx=ctx, param=param)
        try:
            return leaf(value)
        except (TypeError, ValueError):
            raise BadParameter(f"{value!r} is not a valid {NAMES[leaf]}.", ctx=ctx, param=param) from None

    @staticmethod
    def _bool(value: Any, param: Any, ctx: Any) -> bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in TRUE or text in FALSE:
            return text in TRUE
        raise BadParameter(f"{value!r} is not a valid boolean.", ctx=ctx, param=param)

    def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
        annotation = self.annotation
        if get_origin(annotation) is list:
            (leaf,) = get_args(annotation)
            items = value if isinstance(value, list | tuple) else [value]
            return [self._one(leaf, item, param, ctx) for item in items]
        return self._one(annotation, value, param, ctx)


def _runtime_param(self: Any) -> RuntimeParam:
    if self._runtime_param is None:
        descriptor = self.type_descriptor
        if direct(descriptor):
            self._runtime_param = DirectRuntimeParam(
                annotation=descriptor.annotation, parameter_info=descriptor.parameter_info
            )
        else:
            self._runtime_param = build_runtime_param(descriptor)
    return self._runtime_param  # type: ignore[no-any-return]


def install() -> None:
    _TyperParameter.get_runtime_param = _runtime_param  # type: ignore[method-assign]


__all__ = ["DirectRuntimeParam", "direct", "install"]
