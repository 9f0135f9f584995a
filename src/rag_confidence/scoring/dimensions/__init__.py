"""One module per dimension, each a reading of its table in the spec.

Every ``score_*`` function takes the validated plain inputs (and config) and returns the dimension in the
reference's JSON shape: ``raw``, ``max``, ``normalized``, ``explanation``, ``breakdown``, ``warnings``.
"""

from .authority import score_authority
from .consistency import score_consistency
from .corpus import score_corpus
from .freshness import score_freshness
from .grounding import score_grounding
from .index_integrity import score_index_integrity
from .relevance import score_relevance
from .retrieval import score_retrieval

__all__ = [
    "score_authority",
    "score_consistency",
    "score_corpus",
    "score_freshness",
    "score_grounding",
    "score_index_integrity",
    "score_relevance",
    "score_retrieval",
]
