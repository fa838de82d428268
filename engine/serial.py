"""One JSON-friendly form for every service plan and result (the CLI's `--json`, the console).

`to_doc(value)` turns dataclasses, values with a `to_doc()` method (instants), enums, tuples and sets into dicts, lists and
strings; the plan and result classes expose it as `to_dict()` through `Documented`.
"""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Any


def to_doc(value: Any) -> Any:
    """`value` as JSON-friendly data (dicts with string keys, lists, strings, numbers, None)."""
    own = getattr(type(value), "to_doc", None)
    if callable(own):  # a value that gives its own form (an instant: time, action, state)
        return own(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_doc(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): to_doc(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_doc(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted(to_doc(v) for v in value)
    return value


class Documented:
    """Mixin for plan/result dataclasses: `to_dict()` is their one serialisable form."""

    def to_dict(self) -> dict[str, Any]:
        doc = to_doc(self)
        assert isinstance(doc, dict)
        return doc


__all__ = ["Documented", "to_doc"]
