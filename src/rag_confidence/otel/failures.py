"""How a failure is logged: where it happened, never what it was about.

Exception messages quote their input (``InputValidationError: supportLevel: ... got the string '...'``, a
JSON error with the document around it), and scoring reads the application's questions, documents and
answers. A failure is logged as its traceback frames, its exception types and, for our own errors, the field
path when it is a plain one; the messages are left out.
"""

from __future__ import annotations

import re
import traceback

__all__ = ["describe_failure"]

# A field path of ours (``candidates[2].combinedScore``); anything else in ``path`` may be a key from the input.
_PLAIN_PATH = re.compile(r"[A-Za-z0-9_.\[\]]{1,120}")


def describe_failure(error: BaseException) -> str:
    """The traceback of ``error`` (and of the errors it was raised from) without their messages.

    >>> document = "SECRET-123"
    >>> try:
    ...     int(document)
    ... except ValueError as error:
    ...     described = describe_failure(error)
    >>> "SECRET" in described, described.splitlines()[-1]
    (False, 'ValueError (message withheld: it may quote span content)')
    """
    return _describe(error, set(), 0)


def _describe(error: BaseException, seen: set[int], depth: int) -> str:
    parts: list[str] = []
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        frames = "".join(traceback.format_tb(current.__traceback__))
        try:
            path = getattr(current, "path", None)
        except Exception:  # a property that raises must not fail the logging of a failure
            path = None
        where = f" at {path}" if isinstance(path, str) and _PLAIN_PATH.fullmatch(path) else ""
        part = (
            f"Traceback (most recent call last):\n{frames}{type(current).__qualname__}{where} "
            "(message withheld: it may quote span content)"
        )
        inner = getattr(current, "exceptions", None)  # an exception group: what it holds, indented
        if isinstance(inner, tuple) and depth < 3:
            for number, member in enumerate(inner, start=1):
                if isinstance(member, BaseException):
                    nested = _describe(member, seen, depth + 1).replace("\n", "\n  ")
                    part += f"\n  +-- {number}: {nested}"
        parts.append(part)
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return "\n\nwhile handling or raised from:\n".join(reversed(parts))
