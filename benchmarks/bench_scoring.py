"""Per-scorecard time of ``compute_confidence`` beside the reference (transparent-confidence@0.3.1 on Node).

    python benchmarks/bench_scoring.py [--seconds 1.0] [--rounds 5]

Both sides score the same inputs (``reference-scenarios.json``) in the same run. Rounds alternate between
the two sides (so a burst of load on a shared machine hits both) and each side keeps its best round. The
reference is installed with npm into a cache folder outside the repository (never vendored); without
``node``/``npm`` only our figures are printed. Target: at most 3.0x the reference's time on both scenarios.
Run it against a normal (compiled) install: ``pip install .``; an editable install is pure Python.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rag_confidence import compute_confidence
from rag_confidence.scoring._plain import parse_datetime

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "reference-scenarios.json"
TARGET = 3.0
REFERENCE = "transparent-confidence@0.3.1"
NODE_BENCH = r"""
const { computeConfidence } = require(process.argv[2]);
const fs = require("fs");
const scenarios = JSON.parse(fs.readFileSync(process.argv[3], "utf8"));
const seconds = Number(process.argv[4]);
function revive(value, key) {
  if (Array.isArray(value)) return value.map((item) => revive(item));
  if (value && typeof value === "object") {
    const out = {};
    for (const [k, v] of Object.entries(value)) out[k] = revive(v, k);
    return out;
  }
  if (typeof value === "string" && (key === "lastUpdated" || key === "now")) return new Date(value);
  return value;
}
const results = {};
for (const scenario of scenarios) {
  const args = revive(scenario.args);
  let n = 1;
  for (;;) {  // calibrate a round to about a tenth of the budget
    const start = process.hrtime.bigint();
    for (let i = 0; i < n; i++) computeConfidence(...args);
    const elapsed = Number(process.hrtime.bigint() - start) / 1e9;
    if (elapsed > seconds / 10) break;
    n *= 2;
  }
  let best = Infinity;
  for (let round = 0; round < 3; round++) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < n; i++) computeConfidence(...args);
    best = Math.min(best, Number(process.hrtime.bigint() - start) / 1e3 / n);
  }
  results[scenario.name] = best;
}
console.log(JSON.stringify(results));
"""


def _revive(value: Any, key: str | None = None) -> Any:
    if isinstance(value, dict):
        return {k: _revive(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_revive(v) for v in value]
    if isinstance(value, str) and key in ("lastUpdated", "now"):
        return parse_datetime(value)
    return value


def time_python(args: list[Any], seconds: float) -> float:
    """Best per-call microseconds of ``compute_confidence(*args)`` over 3 rounds of about seconds/10 each."""
    n = 1
    while True:
        start = time.perf_counter()
        for _ in range(n):
            compute_confidence(*args)
        if time.perf_counter() - start > seconds / 10:
            break
        n *= 2
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(n):
            compute_confidence(*args)
        best = min(best, (time.perf_counter() - start) * 1e6 / n)
    return best


def _reference_script() -> tuple[str, Path] | None:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        return None
    cache = Path(
        os.environ.get("RAG_CONFIDENCE_BENCH_CACHE", Path(tempfile.gettempdir()) / "rag-confidence-bench")
    )
    package = cache / "node_modules" / "transparent-confidence"
    if not package.exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [npm, "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(cache), REFERENCE],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    script = cache / "bench.cjs"
    script.write_text(NODE_BENCH, encoding="utf-8")
    return node, script


def reference_round(runner: tuple[str, Path], seconds: float) -> dict[str, float]:
    """One round of the reference on every scenario (a fresh Node process, warmed up first)."""
    node, script = runner
    package = script.parent / "node_modules" / "transparent-confidence"
    out = subprocess.run(
        [node, str(script), str(package), str(SCENARIOS), str(seconds)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="time budget per scenario, side and round")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per side")
    options = parser.parse_args()
    scenarios = json.loads(SCENARIOS.read_text(encoding="utf-8"))
    revived = {scenario["name"]: _revive(scenario["args"]) for scenario in scenarios}
    runner = _reference_script()
    ours: dict[str, float] = {}
    theirs: dict[str, float] = {}
    for _ in range(options.rounds):
        if runner is not None:
            for name, value in reference_round(runner, options.seconds).items():
                theirs[name] = min(theirs.get(name, float("inf")), value)
        for name, args in revived.items():
            ours[name] = min(ours.get(name, float("inf")), time_python(args, options.seconds))
    worst = 0.0
    print(f"{'scenario':<28}{'python us':>12}{'reference us':>15}{'ratio':>9}")
    for name in revived:
        if runner is None:
            print(f"{name:<28}{ours[name]:>12.2f}{'(no node)':>15}")
            continue
        ratio = ours[name] / theirs[name]
        worst = max(worst, ratio)
        print(f"{name:<28}{ours[name]:>12.2f}{theirs[name]:>15.2f}{ratio:>8.2f}x")
    if runner is not None:
        verdict = "meets" if worst <= TARGET else "misses"
        print(f"worst ratio {worst:.2f}x: {verdict} the {TARGET:.1f}x target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
