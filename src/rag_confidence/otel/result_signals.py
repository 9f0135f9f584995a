"""What ``signals(result)`` returns, as scoring inputs: ``record_signals`` keywords or ``ScoringInputs`` keys
(camelCase or snake_case) in, camelCase inputs out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from ..errors import UsageError
from ..signals.native import ATTRIBUTE_BY_KEYWORD, FIELDS

__all__ = ["overrides_from_result"]


def overrides_from_result(values: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``signals(result)`` as camelCase inputs: ``record_signals`` keywords become their input paths."""
    if values is None:
        return None
    if not isinstance(values, Mapping):
        dump = getattr(values, "model_dump", None)
        if dump is None:
            raise UsageError(f"signals(result) must return a mapping, not {type(values).__name__}")
        values = cast("Mapping[str, Any]", dump(by_alias=True, exclude_none=True))
    overrides: dict[str, Any] = {}
    for key, value in values.items():
        if value is None:
            continue
        attribute = ATTRIBUTE_BY_KEYWORD.get(key)
        path = FIELDS[attribute][0] if attribute is not None else _camel(key)
        head, _, tail = path.partition(".")
        if tail:
            nested = overrides.setdefault(head, {})
            nested[tail] = value
        else:
            overrides[head] = _camel_keys(head, value)
    return overrides


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _camel_keys(key: str, value: Any) -> Any:
    # Only the keys of ScoringInputs' own objects are field names; ``retrievalScores`` keys are method names.
    if key in ("claimSupport", "indexIntegrity") and isinstance(value, Mapping):
        return {_camel(str(field)): item for field, item in value.items()}
    if key == "candidates" and isinstance(value, list):
        return [
            {_camel(str(field)): item for field, item in candidate.items()}
            if isinstance(candidate, Mapping)
            else candidate
            for candidate in value
        ]
    return value
