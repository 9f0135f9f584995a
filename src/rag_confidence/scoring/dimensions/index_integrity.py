"""Index integrity (15 points, optional): was the index that answered healthy?

| sub-signal | points | when missing |
|---|---|---|
| embedding model version: expected == actual | 4 (mismatch 0, warns) | 2, incomplete warning |
| ``sourceVersionMatchRatio`` | >= 0.99: 3, >= 0.95: 2, >= 0.90: 1, else 0 | 0, incomplete warning |
| ``staleIndexedDocumentRatio`` | <= warnAt (0.01): 3, < zeroAt (0.10): 1, else 0 | 0, incomplete warning |
| ``failedIngestionCount`` <= allowed (0) | 2, else 0 | 0, incomplete warning |
| ``aclFilterConfirmed`` | 2; unconfirmed 0 (warns when confirmation is required) | 0 |
| ``deletedSourceLeakageCount`` == 0 | 1; any leakage 0 with an ``error`` warning | 0, incomplete warning |
"""

from __future__ import annotations

from typing import Any

from ..warnings import warning
from ._shared import Dimension, breakdown, dimension, normalized

MAX = 15
INCOMPLETE = "index-integrity-incomplete"


def resolve_index_config(config: dict[str, Any]) -> dict[str, Any]:
    given = config.get("indexIntegrity") or {}
    return {
        "maxFailedIngestionsForFullScore": given.get("maxFailedIngestionsForFullScore", 0),
        "staleRatioWarnAt": given.get("staleRatioWarnAt", 0.01),
        "staleRatioZeroAt": given.get("staleRatioZeroAt", 0.1),
        "requireAclFilterConfirmation": given.get("requireAclFilterConfirmation", True),
    }


def score_index_integrity(inputs: dict[str, Any], cfg: dict[str, Any]) -> Dimension:
    """``cfg`` is :func:`resolve_index_config` of the config."""
    index: dict[str, Any] = inputs.get("indexIntegrity") or {}
    warnings: list[dict[str, Any]] = []

    expected = index.get("expectedEmbeddingModelVersion")
    actual = index.get("actualEmbeddingModelVersion")
    if expected is None or actual is None:
        embedding = 2
        warnings.append(
            warning(
                INCOMPLETE,
                "The expected or actual embedding model version is missing.",
                "indexIntegrity.expectedEmbeddingModelVersion",
            )
        )
    elif expected != actual:
        embedding = 0
        warnings.append(
            warning(
                "embedding-version-mismatch",
                "The index was built with a different embedding model version than the one querying it.",
                "indexIntegrity.actualEmbeddingModelVersion",
            )
        )
    else:
        embedding = 4

    match_ratio = index.get("sourceVersionMatchRatio")
    if match_ratio is None:
        source_match = 0
        warnings.append(_missing("sourceVersionMatchRatio"))
    else:
        source_match = (
            3 if match_ratio >= 0.99 else 2 if match_ratio >= 0.95 else 1 if match_ratio >= 0.9 else 0
        )

    stale_ratio = index.get("staleIndexedDocumentRatio")
    if stale_ratio is None:
        staleness = 0
        warnings.append(_missing("staleIndexedDocumentRatio"))
    else:
        staleness = (
            3 if stale_ratio <= cfg["staleRatioWarnAt"] else 1 if stale_ratio < cfg["staleRatioZeroAt"] else 0
        )

    failed = index.get("failedIngestionCount")
    if failed is None:
        ingestion = 0
        warnings.append(_missing("failedIngestionCount"))
    else:
        ingestion = 2 if failed <= cfg["maxFailedIngestionsForFullScore"] else 0

    if index.get("aclFilterConfirmed") is True:
        acl = 2
    else:
        acl = 0
        if cfg["requireAclFilterConfirmation"]:
            warnings.append(
                warning(
                    "acl-filter-unconfirmed",
                    "Nothing confirmed that the ACL or tenant filter was applied.",
                    "indexIntegrity.aclFilterConfirmed",
                )
            )

    leaked = index.get("deletedSourceLeakageCount")
    if leaked is None:
        leakage = 0
        warnings.append(_missing("deletedSourceLeakageCount"))
    elif leaked > 0:
        leakage = 0
        warnings.append(
            warning(
                "deleted-source-leakage",
                "Content from deleted sources was retrieved.",
                "indexIntegrity.deletedSourceLeakageCount",
                "error",
            )
        )
    else:
        leakage = 1

    raw = embedding + source_match + staleness + ingestion + acl + leakage
    explanation = (
        f"Embedding version {embedding}/4, source versions {source_match}/3, staleness {staleness}/3, "
        f"ingestion {ingestion}/2, ACL filter {acl}/2, deleted-source leakage {leakage}/1."
    )
    diagnostics = {
        "expectedEmbeddingModelVersion": "" if expected is None else expected,
        "actualEmbeddingModelVersion": "" if actual is None else actual,
        "sourceVersionMatchRatio": -1 if match_ratio is None else match_ratio,
        "staleIndexedDocumentRatio": -1 if stale_ratio is None else stale_ratio,
        "failedIngestionCount": -1 if failed is None else failed,
        "aclFilterConfirmed": index.get("aclFilterConfirmed", False),
        "deletedSourceLeakageCount": -1 if leaked is None else leaked,
        **cfg,
    }
    return dimension(
        raw,
        MAX,
        normalized(raw, MAX),
        explanation,
        breakdown(
            {
                "embeddingVersion": embedding,
                "sourceVersionMatch": source_match,
                "staleness": staleness,
                "ingestionFailures": ingestion,
                "aclFilter": acl,
                "deletedSourceLeakage": leakage,
            },
            {},
            diagnostics,
            raw,
            raw,
        ),
        warnings,
    )


def _missing(field: str) -> dict[str, Any]:
    return warning(INCOMPLETE, f"indexIntegrity.{field} was not supplied.", f"indexIntegrity.{field}")
