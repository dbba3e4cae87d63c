"""botocore's data loader, with the same answers and two costs of a cold start taken out.

Every client botocore creates first reads JSON from its data directory: the endpoints file (1.25 MB),
the service model and its endpoint rule set. Measured on a quiet machine (2026-12-02, botocore 1.44),
that is most of the difference between `create_client` and a warm one:

- botocore parses with `object_pairs_hook=OrderedDict`, which builds every object in Python. Plain
  `json.loads` builds dicts in C (which keep their order too): the endpoints file 15.5 ms → 5.3 ms,
  DynamoDB's model 3.0 → 1.5 ms. botocore calls no OrderedDict-only method on loaded data.
- `load_service_model` refuses an unknown service by listing every service it knows (about 450
  directories, each listed again for its versions: 5-20 ms, twice, for the model and its rule set).
  Here `name in services` looks in that one service's directory, which is the same test (a version of
  it holds the file); the whole list is still built when something reads it (botocore's error
  message for an unknown name, `Session.get_available_services`).

Only public botocore names are used (`Loader`, its `FILE_LOADER_CLASS`, `JSONFileLoader.load_file`,
`list_api_versions`), so a newer Lambda runtime botocore keeps working; tests/unit/test_sdk_data.py
holds this loader's answers equal to botocore's own.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator, Sequence
from typing import Any, overload

from botocore.exceptions import DataNotFoundError
from botocore.loaders import JSONFileLoader, Loader

# botocore's own order: the plain file first, then the compressed one.
_OPENERS: tuple[tuple[str, Any], ...] = ((".json", open), (".json.gz", gzip.open))


class PlainJSONFileLoader(JSONFileLoader):
    def load_file(self, file_path: str) -> Any:
        for suffix, opener in _OPENERS:
            path = file_path + suffix
            if os.path.isfile(path):
                with opener(path, "rb") as handle:
                    return json.loads(handle.read().decode("utf-8"))
        return None


class _Services(Sequence[str]):
    """What `list_available_services(type_name)` answers: a membership test reads one service's
    directory; anything else lists them all (once)."""

    def __init__(self, loader: QuickLoader, type_name: str) -> None:
        self._loader = loader
        self._type_name = type_name
        self._names: list[str] | None = None

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str) or not name or os.sep in name or name in (".", ".."):
            return False
        try:
            self._loader.list_api_versions(name, self._type_name)
        except DataNotFoundError:
            return False
        return True

    def _all(self) -> list[str]:
        if self._names is None:
            self._names = list(Loader.list_available_services(self._loader, self._type_name))
        return self._names

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        return self._all()[index]

    def __len__(self) -> int:
        return len(self._all())

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __eq__(self, other: object) -> bool:
        return self._all() == (list(other) if isinstance(other, _Services) else other)

    __hash__ = None  # type: ignore[assignment]  # a list's, as botocore's answer is


class QuickLoader(Loader):
    FILE_LOADER_CLASS = PlainJSONFileLoader

    def list_available_services(self, type_name: str) -> _Services:  # type: ignore[override]
        return _Services(self, type_name)
