"""DSPy's ``ChatAdapter`` output format: the fields of a structured answer in plain text.

DSPy (``dspy`` 3.x) asks the model for every output field of a signature, each under a header line
``[[ ## <field> ## ]]``, and for an empty ``[[ ## completed ## ]]`` header at the end; its default adapter parses
the fields out of that text. A generation span (the OpenInference DSPy tracer's ``LM.__call__``, or any tracer on
the model client DSPy calls) therefore carries the whole formatted text: a ``ChainOfThought`` answer's
``reasoning`` ahead of its ``answer``. Read as it is, the markers of the reasoning count as citations of the
answer and its sentences dilute the coverage. :func:`adapter_fields` gives the fields, which
:mod:`.generation` reads like a JSON structured answer (DSPy's ``JSONAdapter`` writes that JSON already).
"""

from __future__ import annotations

import re

from .. import semconv

_OPEN = semconv.DSPY_FIELD_HEADER_OPEN
_CLOSE = semconv.DSPY_FIELD_HEADER_CLOSE
# DSPy's own header pattern takes word characters for the name (a Python identifier, as signature fields are).
_NAME = re.compile(r"\w+")


def adapter_fields(text: str) -> dict[str, str] | None:
    """The output fields of a DSPy ``ChatAdapter`` text, by name, or None for any other text.

    The text must begin with a header (after blank lines): a model's prose that quotes a header further down is
    no adapter output. As DSPy parses it, a header is a line that starts with ``[[ ## name ## ]]`` (text after
    it on the line belongs to the field), a field's value is everything up to the next header, stripped, and
    the first of two fields of one name wins. The closing ``completed`` field is left out. Linear in the text:
    the model writes it, so a user can steer it.

    >>> adapter_fields("[[ ## reasoning ## ]]\\nDoc [2] is off topic.\\n\\n[[ ## answer ## ]]\\nParis [1].\\n\\n"
    ...                "[[ ## completed ## ]]")
    {'reasoning': 'Doc [2] is off topic.', 'answer': 'Paris [1].'}
    >>> adapter_fields("Paris [1]. See [[ ## answer ## ]]") is None
    True
    """
    if _OPEN not in text:  # the usual answer: one scan, no split
        return None
    fields: dict[str, str] = {}
    name: str | None = None
    lines: list[str] = []
    for line in text.splitlines():
        header = _header(line)
        if header is None:
            if name is None:
                if line.strip():
                    return None  # text before the first header: not the adapter's output
                continue
            lines.append(line)
            continue
        if name is not None and name not in fields:
            fields[name] = "\n".join(lines).strip()
        name, rest = header
        lines = [rest] if rest else []
    if name is not None and name not in fields:
        fields[name] = "\n".join(lines).strip()
    fields.pop(semconv.DSPY_COMPLETED_FIELD, None)
    return fields or None


def _header(line: str) -> tuple[str, str] | None:
    """(field name, the rest of the line) for a header line, else None."""
    stripped = line.strip()
    if not stripped.startswith(_OPEN):
        return None
    end = stripped.find(_CLOSE, len(_OPEN))
    if end < 0:
        return None
    name = stripped[len(_OPEN) : end]
    if _NAME.fullmatch(name) is None:
        return None
    return name, stripped[end + len(_CLOSE) :].strip()
