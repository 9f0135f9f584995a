"""The installed package is what the README promises: a compiled scoring core (``pip install .``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import rag_confidence.gateway.pipeline as pipeline
import rag_confidence.scoring._plain as plain
import rag_confidence.scoring.scorer as scorer
import rag_confidence.signals.extract as extract

SOURCE = Path(__file__).resolve().parents[1] / "src"


@pytest.mark.parametrize(
    "module",
    [scorer, plain, extract, pipeline],
    ids=["scorer", "_plain", "signals.extract", "gateway.pipeline"],
)
def test_a_normal_install_compiles_the_scoring_core(module: object) -> None:
    path = Path(str(getattr(module, "__file__", "")))
    if SOURCE in path.parents:
        pytest.skip("editable install of the source tree: pure Python by design (see setup.py)")
    if os.environ.get("RAG_CONFIDENCE_PURE_PYTHON") == "1":
        pytest.skip("RAG_CONFIDENCE_PURE_PYTHON=1: compilation switched off")
    # setup.py falls back to pure Python when mypyc fails; this catches that fallback happening unnoticed.
    assert path.suffix in (".so", ".pyd"), f"{path} is not compiled"


def test_the_distribution_ships_its_license_and_notice() -> None:
    import importlib.metadata

    distribution = importlib.metadata.distribution("rag-confidence")
    assert distribution.metadata["License-Expression"] == "Apache-2.0"
    shipped = {Path(str(file)).name for file in distribution.files or ()}
    assert {"LICENSE", "NOTICE"} <= shipped


def test_every_signal_extraction_module_is_in_the_compiled_list() -> None:
    """setup.py names the modules mypyc compiles. Signal extraction calls each reader per span, and a reader
    left out of the list runs as Python beside compiled callers (a new convention's module forgotten there
    cost the gateway a few percent of its scoring side, unnoticed by any test). Models, records and options
    stay Python on purpose (setup.py)."""
    setup = (SOURCE.parent / "setup.py").read_text()
    kept_python = {"__init__.py", "_model.py", "options.py", "records.py"}
    modules = sorted(path.name for path in (SOURCE / "rag_confidence" / "signals").glob("*.py"))
    missing = [
        name
        for name in modules
        if name not in kept_python and f"src/rag_confidence/signals/{name}" not in setup
    ]
    assert not missing, f"not in setup.py's COMPILED list: {missing}"
