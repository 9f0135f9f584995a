"""Self-contained Python examples in the docs run, and print what their ``# comments`` say.

Only blocks that need nothing from the reader's application are run (the others use names such as
``retriever`` the reader supplies). A ``print(...)  # expected`` line must print ``expected``; an expectation
with ``...`` must print its text before the ``...``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# (file, heading of the section holding the block)
EXAMPLES = [
    ("README.md", "## Quick start: Python"),
    ("docs/otel.md", "## Building blocks"),
]


def _first_python_block(path: Path, heading: str) -> str:
    text = path.read_text(encoding="utf-8")
    section = text[text.index(heading + "\n") :]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None, f"no python block under {heading}"
    return match.group(1)


def _expectations(code: str) -> list[str | None]:
    """One entry per print() line: its comment, or None when it has none."""
    expected: list[str | None] = []
    for line in code.splitlines():
        if line.startswith("print("):
            _, hash_, comment = line.partition(")  ")
            comment = comment.strip()
            expected.append(comment[1:].strip() if hash_ and comment.startswith("#") else None)
    return expected


@pytest.mark.parametrize(("file", "heading"), EXAMPLES, ids=[f"{f}:{h}" for f, h in EXAMPLES])
def test_example_runs_and_prints_what_it_says(file: str, heading: str) -> None:
    code = _first_python_block(ROOT / file, heading)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    printed = done.stdout.splitlines()
    expected = _expectations(code)
    assert len(printed) == len(expected)
    checked = 0
    for line, expectation in zip(printed, expected, strict=True):
        if expectation is None:
            continue
        checked += 1
        if "..." in expectation:
            assert line.startswith(expectation.split("...")[0]), (line, expectation)
        else:
            assert line == expectation
    assert checked, "the example states no result to check"
