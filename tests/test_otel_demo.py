"""``rag-confidence demo``: the self-contained pipeline runs offline and shows three different outcomes."""

from __future__ import annotations

import io
import re
import subprocess
import sys

from rag_confidence.otel.demo import QUESTIONS, run_demo


def test_demo_scores_a_strong_a_conflicting_and_a_weak_answer() -> None:
    out = io.StringIO()
    assert run_demo(out) == 0
    text = out.getvalue()
    cards = re.findall(r"^scorecard: (\d+)/100  (\w+)  ->  (\w+)$", text, flags=re.MULTILINE)
    assert [action for _, _, action in cards] == ["answer", "review", "abstain"]
    totals = [int(total) for total, _, _ in cards]
    assert totals[0] > totals[1] > totals[2]
    # The exported span carries the same numbers the scorecard shows, and one metric point per answer.
    exported = [int(v) for v in re.findall(r"^  rag\.confidence\.total = (\d+)$", text, flags=re.MULTILINE)]
    assert exported == totals
    assert len(re.findall(r"^  rag\.confidence\.score\{", text, flags=re.MULTILINE)) == 3
    assert f"{len(QUESTIONS)} gen_ai.evaluation.result log records" in text
    assert "The retrieved sections conflict" in text


def test_demo_module_runs_as_a_program() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "rag_confidence.otel.demo"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("scorecard: ") == 3
