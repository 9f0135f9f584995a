"""The reference's exact JSON shape for our result models.

``model_dump(by_alias=True)`` keeps absent optional values as ``None``; the TypeScript package leaves them out
(an inactive dimension, a warning without a path). :func:`to_reference_dict` gives the package's shape and
:func:`to_reference_json` its text as ``JSON.stringify`` writes it: numbers in JavaScript's notation
(``1e-9``, ``0.00001``, ``10000000000000000``; integral floats as integers), non-finite numbers as ``null``,
no spaces after ``,`` and ``:`` without an indent.
"""

from __future__ import annotations

import re
from json.encoder import encode_basestring as _encode_string
from typing import Any

from pydantic import BaseModel

from ._js import MAX_EXACT, as_double, js_number


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


def _js_number(value: float) -> str:
    """A number as ``JSON.stringify`` writes it: non-finite ones as ``null``."""
    return js_number(value) if value - value == 0 else "null"


# Lone surrogates: JSON.stringify escapes them (as lowercase \udxxx); a high one followed by a low one is a
# pair, one character, written as itself.
_SURROGATES = re.compile("[\ud800-\udbff][\udc00-\udfff]|[\ud800-\udfff]")


def _surrogate(match: re.Match[str]) -> str:
    text = match.group()
    if len(text) == 2:
        return chr(0x10000 + ((ord(text[0]) - 0xD800) << 10) + (ord(text[1]) - 0xDC00))
    return f"\\u{ord(text):04x}"


def _js_string(value: str) -> str:
    text: str = _encode_string(value)
    if _SURROGATES.search(text) is not None:
        text = _SURROGATES.sub(_surrogate, text)
    return text


def _write(value: Any, out: list[str], indent: str | None, depth: int, omit: frozenset[str]) -> None:
    # Exact types first, the common leaves before containers; bool is tested before int (a bool is an int).
    kind = type(value)
    if kind is str:
        out.append(_js_string(value))
    elif kind is float:
        out.append(_js_number(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif kind is int:
        # Past 2**53, the double JavaScript holds for it (Infinity, so null, past the largest double).
        out.append(str(value) if -MAX_EXACT < value < MAX_EXACT else _js_number(float(as_double(value))))
    elif kind is dict:
        _write_object(value, out, indent, depth, omit)
    elif kind is list or kind is tuple:
        _write_array(value, out, indent, depth, omit)
    elif isinstance(value, str):
        out.append(_js_string(str(value)))
    elif isinstance(value, float):
        out.append(_js_number(float(value)))
    elif isinstance(value, int):
        _write(int(value), out, indent, depth, omit)
    elif isinstance(value, dict):
        _write_object(value, out, indent, depth, omit)
    elif isinstance(value, (list, tuple)):
        _write_array(value, out, indent, depth, omit)
    elif hasattr(value, "isoformat"):
        out.append(_js_string(value.isoformat().replace("+00:00", "Z")))
    else:
        raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _write_object(
    value: dict[Any, Any], out: list[str], indent: str | None, depth: int, omit: frozenset[str]
) -> None:
    # Keys in ``omit`` are left out when None (absent in the reference), in the same pass as writing.
    inner = None if indent is None else "\n" + indent * (depth + 1)
    opening = "{" if inner is None else "{" + inner
    separator = opening
    colon = ":" if inner is None else ": "
    for key, item in value.items():
        if item is None and key in omit:
            continue
        out.append(separator)
        separator = "," if inner is None else "," + inner
        out.append(_js_string(str(key)))
        out.append(colon)
        _write(item, out, indent, depth + 1, omit)
    if separator is opening:
        out.append("{}")
    elif indent is None:
        out.append("}")
    else:
        out.append("\n" + indent * depth + "}")


def _write_array(
    value: list[Any] | tuple[Any, ...], out: list[str], indent: str | None, depth: int, omit: frozenset[str]
) -> None:
    if not value:
        out.append("[]")
        return
    if indent is None:
        separator = "["
        for item in value:
            out.append(separator)
            separator = ","
            _write(item, out, None, 0, omit)
        out.append("]")
        return
    inner = "\n" + indent * (depth + 1)
    separator = "[" + inner
    for item in value:
        out.append(separator)
        separator = "," + inner
        _write(item, out, indent, depth + 1, omit)
    out.append("\n" + indent * depth + "]")


def js_json(value: Any, *, indent: int | None = None) -> str:
    """``value`` (dicts, lists, strings, numbers, booleans, None) as ``JSON.stringify(value, null, indent)``
    writes it: JavaScript's number text, non-finite numbers as ``null``, ``,`` and ``:`` without an indent."""
    out: list[str] = []
    _write(value, out, " " * indent if indent else None, 0, frozenset())
    return "".join(out)


def to_reference_json(result: BaseModel, *, indent: int | None = None) -> str:
    """JSON text in the reference's shape (:func:`to_reference_dict`), as ``JSON.stringify`` would write it."""
    out: list[str] = []
    # Pruned while written: one walk over the dump instead of two.
    _write(result.model_dump(by_alias=True), out, " " * indent if indent else None, 0, _OMIT_WHEN_NONE)
    return "".join(out)
