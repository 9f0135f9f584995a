"""The examples run offline, as users run them (a subprocess each), and print consistent scorecards."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run(name: str) -> str:
    # No OTEL_* variables: the examples must not need a collector (decorated_answer switches to OTLP on one).
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_decorated_answer_gates_on_the_recommended_action() -> None:
    out = run("decorated_answer.py")
    cards = re.findall(r"^scorecard: (\d+)/100  \w+  ->  (\w+)$", out, flags=re.MULTILINE)
    exported = re.findall(r"^exported span 'answer': total=(\d+) action=(\w+)$", out, flags=re.MULTILINE)
    assert len(cards) == 2 and cards == exported
    assert cards[1][1] == "abstain" and "-> gated" in out
    assert int(cards[0][0]) > int(cards[1][0])


def test_langchain_example_scores_the_decorated_chain() -> None:
    out = run("langchain_openinference.py")
    (total,) = re.findall(r"^scorecard: (\d+)/100", out, flags=re.MULTILINE)
    assert re.search(rf"^span ask\s+rag\.confidence\.total={total}$", out, flags=re.MULTILINE)
    assert re.search(r"^span KeywordRetriever\s+RETRIEVER", out, flags=re.MULTILINE)


def test_llamaindex_example_scores_the_query_root_with_no_code_changes() -> None:
    out = run("llamaindex_openinference.py")
    assert "scored span 'RetrieverQueryEngine.query':" in out
    assert re.search(r"^  rag\.confidence\.total = \d+$", out, flags=re.MULTILINE)
    assert re.search(r"^  rag\.confidence\.candidates = 2$", out, flags=re.MULTILINE)
    assert "rag.confidence.derived_signals = ['supportLevel']" in out
