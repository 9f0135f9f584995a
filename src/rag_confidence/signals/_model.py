"""What the convention readers hand to assembly: documents, retrievals, evaluations and generations.

Readers only parse; naming methods, rescaling scores, merging candidates and deriving inputs happen once, in
the modules after them, whatever convention the spans came in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .records import SpanRecord


@dataclass(slots=True)
class RawDocument:
    """One reported document as a convention states it, before key maps and score rules."""

    id: Any = None
    score: Any = None
    distance: Any = None
    content: Any = None
    metadata: Mapping[str, Any] | None = None
    # Further ids the document is known by (a LangChain ``Document.id`` next to a metadata id): citations
    # match them.
    aliases: tuple[str, ...] = ()


@dataclass(slots=True)
class RawRetrieval:
    """The documents one span reports. ``rerank`` marks reranker output (scores and order are final)."""

    span: SpanRecord
    documents: list[RawDocument]
    rerank: bool = False
    # A convention-level method hint (GenAI data source id, vector DB system), after our own attribute.
    method_hint: str | None = None


@dataclass(slots=True)
class Document:
    """A document after the key map: ``score`` in [0, 1] or None; ``fields`` holds candidate fields."""

    key: str
    id: str | None
    content: str | None
    score: float | None
    fields: dict[str, Any] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()


@dataclass(slots=True)
class Retrieval:
    span: SpanRecord
    method: str
    documents: list[Document]
    rerank: bool
    rescaled: bool = False


@dataclass(frozen=True, slots=True)
class Evaluation:
    """An evaluation result (OpenInference ``evaluations.*`` or a GenAI ``gen_ai.evaluation.result``)."""

    name: str
    score: float | None
    label: str | None


@dataclass(frozen=True, slots=True)
class Generation:
    """The text a generation span produced and its finish reasons (lower-cased)."""

    span: SpanRecord
    text: str | None
    finish_reasons: tuple[str, ...] = ()
