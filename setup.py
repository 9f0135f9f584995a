"""Build hook: compile the pure scoring core with mypyc for speed.

The scoring core is plain, fully typed Python; mypyc turns it into a C extension about twice as fast, which is
what keeps ``compute_confidence`` within 3x of the TypeScript reference. The Python sources stay in the wheel
and are used when compilation is off or fails:

* ``RAG_CONFIDENCE_PURE_PYTHON=1`` skips compilation;
* editable installs (``pip install -e``) skip it, so edits to the sources take effect without a rebuild;
* a failed C build, or a mypyc analysis failure, falls back to the pure-Python modules.
"""

from __future__ import annotations

import os
import sys

from setuptools import setup

# Modules that only compute on plain data: the scoring core, its plain-data validator, signal extraction
# (span records -> inputs), and the per-request path around them that every span or answer runs through: the
# gateway's validation, record conversion and reading of span encodings, and the scorecard-to-attributes
# mapping. Models, records, options and the code that drives the OpenTelemetry SDK stay Python; so does the
# gateway's screen, whose cost is the byte counts of the body, already C.
COMPILED = [
    "src/rag_confidence/scoring/_js.py",
    "src/rag_confidence/scoring/_plain.py",
    "src/rag_confidence/scoring/warnings.py",
    "src/rag_confidence/scoring/labels.py",
    "src/rag_confidence/scoring/policy.py",
    "src/rag_confidence/scoring/validation.py",
    "src/rag_confidence/scoring/scorer.py",
    "src/rag_confidence/scoring/dimensions/_shared.py",
    "src/rag_confidence/scoring/dimensions/grounding.py",
    "src/rag_confidence/scoring/dimensions/retrieval.py",
    "src/rag_confidence/scoring/dimensions/consistency.py",
    "src/rag_confidence/scoring/dimensions/relevance.py",
    "src/rag_confidence/scoring/dimensions/authority.py",
    "src/rag_confidence/scoring/dimensions/corpus.py",
    "src/rag_confidence/scoring/dimensions/freshness.py",
    "src/rag_confidence/scoring/dimensions/index_integrity.py",
    "src/rag_confidence/signals/_partial_json.py",
    "src/rag_confidence/signals/_values.py",
    "src/rag_confidence/signals/answers.py",
    "src/rag_confidence/signals/anthropic_citations.py",
    "src/rag_confidence/signals/bedrock.py",
    "src/rag_confidence/signals/candidates.py",
    "src/rag_confidence/signals/citations.py",
    "src/rag_confidence/signals/documents.py",
    "src/rag_confidence/signals/dspy_format.py",
    "src/rag_confidence/signals/extract.py",
    "src/rag_confidence/signals/genai.py",
    "src/rag_confidence/signals/generation.py",
    "src/rag_confidence/signals/grounding.py",
    "src/rag_confidence/signals/haystack.py",
    "src/rag_confidence/signals/hosted.py",
    "src/rag_confidence/signals/langgraph.py",
    "src/rag_confidence/signals/llamaindex_react.py",
    "src/rag_confidence/signals/native.py",
    "src/rag_confidence/signals/openinference.py",
    "src/rag_confidence/signals/openllmetry.py",
    "src/rag_confidence/signals/url_citations.py",
    "src/rag_confidence/signals/vector_db.py",
    "src/rag_confidence/signals/vercel_ai.py",
    "src/rag_confidence/scoring/_build.py",
    "src/rag_confidence/otel/answer_scoring.py",
    "src/rag_confidence/otel/attributes.py",
    "src/rag_confidence/gateway/pipeline.py",
    "src/rag_confidence/gateway/spans.py",
    "src/rag_confidence/gateway/assembly.py",
]


def _extensions() -> list[object]:
    if os.environ.get("RAG_CONFIDENCE_PURE_PYTHON") == "1" or "editable_wheel" in sys.argv:
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:  # building without the declared build requirements
        return []
    try:
        # The build environment has no OpenTelemetry: the modules that import it (never compiled, reached through
        # the package's TYPE_CHECKING imports) are followed silently, their imports resolving to Any.
        extensions = mypycify(
            ["--follow-imports=silent", "--ignore-missing-imports", *COMPILED], opt_level="3", debug_level="0"
        )
    except (Exception, SystemExit) as error:  # mypy reports type errors by exiting
        print(
            f"rag-confidence: mypyc compilation skipped, installing pure Python ({error!r})", file=sys.stderr
        )
        return []
    for extension in extensions:
        extension.optional = True  # no C compiler: install the pure-Python modules instead
    return list(extensions)


setup(ext_modules=_extensions())
