"""The reference's exact JSON shape for our result models.

``model_dump(by_alias=True)`` keeps absent optional values as ``None``; the TypeScript package leaves them out
(an inactive dimension, a warning without a path). :func:`to_reference_dict` gives the package's shape and
:func:`to_reference_json` its text, with integral floats written as integers and non-finite numbers as
``null``, as ``JSON.stringify`` does.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import BaseModel


def _prune(value: Any, key: str | None = None) -> Any:
    if isinstance(value, dict):
        pruned = {}
        for name, item in value.items():
            if item is None and name in _OMIT_WHEN_NONE:
                continue
            pruned[name] = _prune(item, name)
        return pruned
    if isinstance(value, list):
        return [_prune(item) for item in value]
    return value


# Keys whose None means "absent" in the reference (tier1/tier2 are real nulls and stay).
_OMIT_WHEN_NONE = frozenset(
    {
        "path",
        "relevance",
        "authority",
        "corpus",
        "freshness",
        "indexIntegrity",
        "diagnostics",
        "id",
        "recommendedAction",
        "queryType",
        "tags",
    }
)


def to_reference_dict(result: BaseModel) -> dict[str, Any]:
    """The result as the TypeScript package would return it (camelCase keys, absent values left out)."""
    return _prune(result.model_dump(by_alias=True))  # type: ignore[no-any-return]


def _jsonable(value: Any) -> Any:
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        if value.is_integer() and abs(value) < 2**53:
            return int(value)
        return value
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_jsonable(item) for item in value]
    if hasattr(value, "isoformat"):
        return value.isoformat().replace("+00:00", "Z")
    return value


def to_reference_json(result: BaseModel, *, indent: int | None = None) -> str:
    """JSON text in the reference's shape, as ``JSON.stringify`` would write it."""
    return json.dumps(_jsonable(to_reference_dict(result)), indent=indent, ensure_ascii=False)
