"""Test-suite-wide hygiene."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

# Haystack sends anonymous usage events (each pipeline run) to its telemetry service unless this is off; it is
# read when haystack is imported, so it is set before any test module imports it. Tests call no service.
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")


def undo_openllmetry_langchain_callback_patch() -> None:
    """Remove the LangChain patch that OpenLLMetry's ``uninstrument()`` leaves behind.

    opentelemetry-instrumentation-langchain (0.62) wraps ``BaseCallbackManager.__init__`` to add its callback
    handler, but its ``_uninstrument`` unwraps a dotted name that ``unwrap`` cannot resolve, so the wrapper
    stays. Every later LangChain call in the process would then still be traced by the old tracer, and its spans
    would become the parents of other tests' spans.
    """
    try:
        from langchain_core.callbacks.base import BaseCallbackManager
        from opentelemetry.instrumentation.utils import unwrap
    except ImportError:
        return
    if hasattr(BaseCallbackManager.__dict__.get("__init__"), "__wrapped__"):
        unwrap(BaseCallbackManager, "__init__")


@pytest.fixture(autouse=True, scope="module")
def _undo_openllmetry_langchain_callback_patch() -> Iterator[None]:
    """Test modules instrument and uninstrument within themselves (some for the whole module), so a wrapper
    still present when a module is done is a leftover."""
    yield
    undo_openllmetry_langchain_callback_patch()


@pytest.fixture
def traced() -> Iterator[tuple[Tracer, InMemorySpanExporter]]:
    """A tracer whose ended spans land in memory, one span at a time."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider.get_tracer("test"), exporter
    provider.shutdown()
