"""Identifiers: one definition for task, workspace, context, message, command, submission, worker,
authority and memory write ids (docs/reference/limits.md).

`fullmatch`, never `match` with `$`: `$` also matches before a trailing newline, so `"t1\\n"` would
pass the gate and then name an object no path can address.
"""

from __future__ import annotations

import re
from typing import Any

from dovecote.platform.errors import InvalidArgument

ID_REGEX = r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}"
ID_PATTERN = re.compile(ID_REGEX)
# The same rule as a JSON Schema / OpenAPI pattern (anchored: schema patterns are searches).
ID_SCHEMA_PATTERN = f"^{ID_REGEX}$"


def is_id(value: Any) -> bool:
    return isinstance(value, str) and ID_PATTERN.fullmatch(value) is not None


def check_id(value: Any, field_name: str) -> str:
    if not is_id(value):
        raise InvalidArgument(f"{field_name} must match ^{ID_REGEX}$", field=field_name)
    return str(value)
