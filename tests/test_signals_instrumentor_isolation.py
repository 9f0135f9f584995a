"""The shared instrumented-fixture helper leaves no instrumentor's patch behind (its own module: another
module's module-scoped fixture may hold an instrumentor while its tests run)."""

from __future__ import annotations

from openai.resources.chat.completions import Completions
from opentelemetry.instrumentation.openai import OpenAIInstrumentor as OpenLLMetryOpenAIInstrumentor

from tests.instrumented import confidence_processor, traced


def test_no_instrumentor_wrapper_outlives_its_fixture() -> None:
    """OpenLLMetry's ``uninstrument()`` (0.62) leaves its wrapper around ``Completions.create``: the helper must
    take it off, or every later module's completions are traced to this fixture's provider."""
    before = vars(Completions)["create"]
    fixture = traced(OpenLLMetryOpenAIInstrumentor(), confidence_processor)
    next(fixture)
    assert vars(Completions)["create"] is not before
    fixture.close()
    assert vars(Completions)["create"] is before
