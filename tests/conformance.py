"""Loading and comparing the golden cases recorded from transparent-confidence 0.3.1 (see the fixture README)."""

from __future__ import annotations

import datetime
import json
import math
from pathlib import Path
from typing import Any

CASES_PATH = Path(__file__).parent / "fixtures" / "conformance" / "cases.jsonl"
# Cases recorded later from the same reference, for divergences a randomized differential run found.
EXTRA_CASES_PATH = CASES_PATH.with_name("extra-cases.jsonl")
DATE_KEYS = ("lastUpdated", "now")
# Free text: a port words these its own way.
FREE_TEXT = {"actionReason", "explanation", "message"}


def _floats(obj: dict[str, Any]) -> Any:
    if set(obj) == {"$float"}:
        return float(obj["$float"].replace("Infinity", "inf"))
    return obj


def _dates(value: Any, key: str | None = None) -> Any:
    if isinstance(value, dict):
        return {k: _dates(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_dates(v) for v in value]
    if isinstance(value, str) and key in DATE_KEYS:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value


def _js_number(text: str) -> int | float:
    # JavaScript writes every number from a double: past 2**53 its digits name a double, not an exact integer.
    value = int(text)
    return value if abs(value) <= 2**53 else float(text)


def load_cases(path: Path = CASES_PATH) -> list[dict[str, Any]]:
    cases = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            case = json.loads(line, object_hook=_floats, parse_int=_js_number)
            case["args"] = _dates(case["args"])
            case["expected"] = _dates(case["expected"])
            cases.append(case)
    return cases


def same_number(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if isinstance(a, float) and math.isnan(a):
            return isinstance(b, float) and math.isnan(b)
        return a == b
    return False


def diff(expected: Any, actual: Any, path: str = "$", free_text: bool = True) -> list[str]:
    """Differences between the reference's value and ours, ignoring free-text fields and key order.

    A ``warnings`` key that is absent on one side equals an empty list; a ``path`` key absent equals ``None``.
    """
    problems: list[str] = []
    if isinstance(expected, dict) and isinstance(actual, dict):
        keys = set(expected) | set(actual)
        for key in sorted(keys):
            if free_text and key in FREE_TEXT:
                continue
            left = expected.get(key, _ABSENT)
            right = actual.get(key, _ABSENT)
            if key == "warnings":
                left = [] if left is _ABSENT else left
                right = [] if right is _ABSENT or right is None else right
            if key == "path":
                left = None if left is _ABSENT else left
                right = None if right is _ABSENT else right
            if left is _ABSENT or right is _ABSENT:
                problems.append(f"{path}.{key}: expected {_show(left)}, got {_show(right)}")
                continue
            problems.extend(diff(left, right, f"{path}.{key}", free_text))
        return problems
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return [f"{path}: expected {len(expected)} items, got {len(actual)}: {expected!r} vs {actual!r}"]
        for index, (left, right) in enumerate(zip(expected, actual, strict=True)):
            problems.extend(diff(left, right, f"{path}[{index}]", free_text))
        return problems
    if isinstance(expected, (int, float)) or isinstance(actual, (int, float)):
        if not same_number(expected, actual):
            problems.append(f"{path}: expected {expected!r}, got {actual!r}")
        return problems
    if expected != actual:
        problems.append(f"{path}: expected {expected!r}, got {actual!r}")
    return problems


class _Absent:
    def __repr__(self) -> str:
        return "<absent>"


_ABSENT: Any = _Absent()


def _show(value: Any) -> str:
    return repr(value)
