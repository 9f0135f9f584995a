"""Every example in the package's docstrings runs and prints what it says."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import rag_confidence

MODULES = sorted(
    info.name for info in pkgutil.walk_packages(rag_confidence.__path__, "rag_confidence.") if not info.ispkg
) + ["rag_confidence", "rag_confidence.otel"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
