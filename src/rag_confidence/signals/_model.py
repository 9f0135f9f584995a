"""What the convention readers hand to assembly: documents, retrievals, evaluations and generations.

Readers only parse; naming methods, rescaling scores, merging candidates and deriving inputs happen once, in
the modules after them, whatever convention the spans came in.

- :class:`RawDocument`: one reported document as a convention states it, before key maps and score rules.
- :class:`RawRetrieval`: the documents one span reports (``rerank`` marks reranker output, whose scores and
  order are final; ``method_hint`` is a convention-level method name such as a GenAI data source id).
- :class:`Document`: a document after the key map, ``score`` in [0, 1] or None, ``fields`` its candidate
  fields.
- :class:`Retrieval`: one span's documents under its method name.
- :class:`Evaluation`: an evaluation result (OpenInference ``evaluations.*`` or ``gen_ai.evaluation.result``).
- :class:`Generation`: the text a generation span produced and its finish reasons (lower-cased).

The classes are defined in :mod:`._values`, which the build compiles with mypyc (this module is not), so that
the readers build and read them as native objects; import them from either module.
"""

from __future__ import annotations

from ._values import Document, Evaluation, Generation, RawDocument, RawRetrieval, Retrieval

__all__ = ["Document", "Evaluation", "Generation", "RawDocument", "RawRetrieval", "Retrieval"]
