"""Following a path through JSON that may be cut short.

A span attribute holding a whole response as JSON (``output.value``) can be cut by a value length limit, and
then it parses as nothing. Whether the cut value still says something (a Responses call ran ``file_search``, a
Gemini response was grounded) depends on *where* a name stands: in the response's own items, or deeper down in
a framework's JSON that merely holds such a response. These helpers walk the text from the top, letting the C
decoder skip each value they are not looking for whole, so a path is followed as far as the text goes at
about the cost of one parse up to there.
"""

from __future__ import annotations

import json
from typing import Any, Final

from ._values import MAX_JSON_CHARS, loads_json

_DECODER = json.JSONDecoder()

#: What :func:`whole` gives for text that is no JSON it will read: cut short, or longer than ``MAX_JSON_CHARS``.
UNREAD: Final = object()


def whole(text: str) -> Any:
    """``text`` parsed, or :data:`UNREAD`: then what it says is only what :func:`member` can follow."""
    if len(text) > MAX_JSON_CHARS:
        return UNREAD
    try:
        return loads_json(text)
    except (ValueError, RecursionError):
        return UNREAD


def space(text: str, index: int) -> int:
    """``index`` past any JSON whitespace (instrumentors write compact JSON: usually none)."""
    while index < len(text) and text[index] in " \t\n\r":
        index += 1
    return index


def member(text: str, start: int, key: str) -> int | None:
    """Where the value of ``key`` starts in the object opening at ``text[start]``, or None when the object has
    no such member before the text ends or stops being JSON (a value cut short ends the search: nothing follows
    it).

    >>> text = '{"id": "r1", "output": [{"type": "file_search_call"'
    >>> text[member(text, 0, "output"):][:2]
    '[{'
    >>> member(text, 0, "usage") is None
    True
    """
    index = space(text, start + 1)
    while text[index : index + 1] == '"':
        try:
            name, index = _DECODER.raw_decode(text, index)
        except ValueError:
            return None
        index = space(text, index)
        if text[index : index + 1] != ":":
            return None
        index = space(text, index + 1)
        if name == key:
            return index
        try:
            _, index = _DECODER.raw_decode(text, index)
        except (ValueError, RecursionError):
            return None
        index = space(text, index)
        if text[index : index + 1] != ",":
            return None
        index = space(text, index + 1)
    return None


def string_at(text: str, index: int) -> str | None:
    """The JSON string starting at ``text[index]``, or None (no string there, or cut short)."""
    if text[index : index + 1] != '"':
        return None
    try:
        value, _ = _DECODER.raw_decode(text, index)
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def array_items(text: str, start: int) -> list[int]:
    """Where each object item of the array opening at ``text[start]`` starts, as far as the text goes: the last
    one may be cut short (its start is listed; nothing after it is)."""
    found: list[int] = []
    index = space(text, start + 1)
    while text[index : index + 1] == "{":
        found.append(index)
        try:
            _, index = _DECODER.raw_decode(text, index)
        except (ValueError, RecursionError):
            return found
        index = space(text, index)
        if text[index : index + 1] != ",":
            return found
        index = space(text, index + 1)
    return found
