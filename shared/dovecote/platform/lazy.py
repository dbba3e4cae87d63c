"""A package registered without running its `__init__`, for a cold start that needs one of its modules.

Powertools' `aws_lambda_powertools.event_handler/__init__.py` imports every resolver it ships (AppSync
and asyncio, Bedrock agents, VPC Lattice, Lambda function URLs, ...) to re-export their names. A
function here uses one resolver (API Gateway HTTP), but any import of a submodule runs the package's
`__init__` first. `lazy_package` puts the package in `sys.modules` unexecuted: its submodules import
as usual, and a name read from the package itself (`from aws_lambda_powertools.event_handler import
Response`) is imported from the module its `__init__` takes it from, found by reading that
`__init__`'s `from X import name` (or `from .x import name`) lines. A name not found that way runs
the real `__init__`, so nothing the package offers is lost. The standard library's `importlib.util.LazyLoader` cannot do
this: it executes the whole module on the first attribute the import system reads (`__path__`,
to find a submodule).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from typing import Any


def lazy_package(name: str) -> None:
    """Register package `name` without executing its `__init__` (no-op once it is imported)."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.origin is None or spec.submodule_search_locations is None:
        return  # not a package on disk: import it the ordinary way
    package = importlib.util.module_from_spec(spec)
    origin, loader = spec.origin, spec.loader
    sources: dict[str, str] = {}

    def exports() -> dict[str, str]:
        if not sources:
            with open(origin, encoding="utf-8") as file:
                tree = ast.parse(file.read(), origin)
            for node in tree.body:
                if isinstance(node, ast.ImportFrom) and node.module and node.level <= 1:
                    # `from .x import y` in the package's own __init__ is `from <name>.x import y`.
                    module = node.module if node.level == 0 else f"{name}.{node.module}"
                    sources.update({alias.asname or alias.name: module for alias in node.names})
        return sources

    def __getattr__(attr: str) -> Any:  # noqa: N807 - PEP 562 module __getattr__
        module = exports().get(attr)
        if module is not None:
            if module == name:  # `from <package> import <submodule>` in the package's own __init__
                value = importlib.import_module(f"{name}.{attr}")
            else:
                value = getattr(importlib.import_module(module), attr)
            setattr(package, attr, value)
            return value
        if not attr.startswith("__") and importlib.util.find_spec(f"{name}.{attr}") is not None:
            # A submodule not imported yet: AttributeError lets the import system import it.
            raise AttributeError(attr)
        # Anything else: the real __init__, once, in the same module object.
        del package.__getattr__
        loader.exec_module(package)
        return getattr(package, attr)

    package.__getattr__ = __getattr__  # type: ignore[method-assign]
    sys.modules[name] = package
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, package)  # as an import would: `import a.b` then `a.b`
