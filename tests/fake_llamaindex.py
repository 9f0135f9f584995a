"""An offline embedding for LlamaIndex indexes in tests: the embedding model is the one part faked (no network,
no model download); the index, retrievers, query engines and agents around it are LlamaIndex's own."""

from __future__ import annotations

import re

from llama_index.core.base.embeddings.base import BaseEmbedding

_WORD = re.compile(r"[a-z]+")


def words(text: str) -> set[str]:
    """The lower-case words of ``text``."""
    return set(_WORD.findall(text.lower()))


class WordEmbedding(BaseEmbedding):
    """Bag-of-words vectors over a fixed vocabulary: offline, deterministic, distinct similarities."""

    vocabulary: list[str]

    def _vector(self, text: str) -> list[float]:
        present = words(text)
        return [1.0 if word in present else 0.0 for word in self.vocabulary]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)
