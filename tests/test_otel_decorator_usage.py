"""``@scored_answer`` in the shapes applications give it: calls in other tasks and threads (``last_scorecard``
never hands out an earlier answer's card), methods under ``@staticmethod``/``@classmethod``, partials and
callable objects, misuse (typed errors at decoration), and ``configure_from_env`` option checks."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from rag_confidence import semconv
from rag_confidence.errors import ConfigValidationError, UsageError
from rag_confidence.otel import last_scorecard, record_signals, scored_answer
from rag_confidence.scoring import compute_confidence
from rag_confidence.scoring.models import ConfidenceScorecard

from .test_otel_decorator import CANDIDATES, RETRIEVAL, Setup
from .test_otel_setup import exporters_off_env, run_program

STRONG = compute_confidence({"supportLevel": "high", "hasConflict": False, "candidates": CANDIDATES})
WEAK = compute_confidence({"supportLevel": "low", "hasConflict": True, "candidates": []})


@pytest.fixture
def setup() -> Iterator[Setup]:
    built = Setup(with_processor=True)
    yield built
    built.provider.shutdown()


def _answers(setup: Setup) -> tuple[Any, Any]:
    """An async and a sync answer function: strong with a retrieval, weak without."""

    def work(strong: bool) -> str:
        if strong:
            with setup.tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
                pass
            record_signals(support_level="high", has_conflict=False)
        else:
            record_signals(support_level="low", has_conflict=True)
        return "text"

    @setup.decorate(name="answer")
    async def answer(strong: bool) -> str:
        return work(strong)

    @setup.decorate(name="answer")
    def answer_sync(strong: bool) -> str:
        return work(strong)

    return answer, answer_sync


def _total(card: ConfidenceScorecard | None) -> int | None:
    return None if card is None else card.total


# -- last_scorecard: exact when awaited directly, None (never stale) when the call ran elsewhere ---------------


def test_a_call_awaited_directly_sets_its_card_and_one_in_a_child_task_voids_the_callers() -> None:
    setup = Setup(with_processor=True)
    answer, answer_sync = _answers(setup)
    seen: dict[str, int | None] = {}

    async def main() -> None:
        await answer(True)
        seen["direct strong"] = _total(last_scorecard())
        await answer(False)
        seen["direct weak"] = _total(last_scorecard())
        for how in ("wait_for", "gather", "to_thread", "create_task"):
            await answer(True)  # the caller holds the strong answer's card
            if how == "wait_for":
                await asyncio.wait_for(answer(False), timeout=30)
            elif how == "gather":
                await asyncio.gather(answer(False))
            elif how == "to_thread":
                await asyncio.to_thread(answer_sync, False)
            else:
                await asyncio.create_task(answer(False))
            seen[how] = _total(last_scorecard())

    asyncio.run(main())
    setup.provider.shutdown()
    assert STRONG.total != WEAK.total
    assert seen["direct strong"] == STRONG.total and seen["direct weak"] == WEAK.total
    # Before: on Python 3.11, wait_for/gather/to_thread left the strong answer's card to gate on.
    # Python 3.12+: asyncio.wait_for awaits a coroutine in the caller's own task (no child task), so the
    # call is awaited directly and its own card is exact.
    expected = dict.fromkeys(("wait_for", "gather", "to_thread", "create_task"))
    if sys.version_info >= (3, 12):
        expected["wait_for"] = WEAK.total
    assert {how: seen[how] for how in ("wait_for", "gather", "to_thread", "create_task")} == expected


def test_tasks_gathered_at_once_each_read_their_own_card(setup: Setup) -> None:
    answer, _ = _answers(setup)

    async def one(strong: bool) -> int | None:
        await answer(strong)
        await asyncio.sleep(0)  # let the other tasks run between the answer and the read
        return _total(last_scorecard())

    async def main() -> list[int | None]:
        return await asyncio.gather(*(one(index % 2 == 0) for index in range(8)))

    totals = asyncio.run(main())
    assert totals == [STRONG.total if index % 2 == 0 else WEAK.total for index in range(8)]
    assert setup.score_count() == 8


def test_a_thread_given_the_callers_context_voids_its_card(setup: Setup) -> None:
    _, answer_sync = _answers(setup)
    answer_sync(True)
    assert _total(last_scorecard()) == STRONG.total
    context = contextvars.copy_context()
    context.run(answer_sync, False)  # what asyncio.to_thread does, in a worker thread
    assert last_scorecard() is None
    assert context.run(last_scorecard) is not None


def test_sequential_calls_in_one_thread_keep_no_chain_of_earlier_cards(setup: Setup) -> None:
    from rag_confidence.otel import answer_state

    _, answer_sync = _answers(setup)
    for _ in range(3):
        answer_sync(False)
    latest = answer_state._LAST.get()
    assert latest is not None and latest.scorecard is not None
    assert latest.__slots__ == ("scorecard",)  # one card per context, nothing linked to earlier ones


@pytest.mark.parametrize("asynchronous", [False, True], ids=["generator", "async generator"])
def test_a_stream_closed_early_leaves_no_earlier_card(setup: Setup, asynchronous: bool) -> None:
    if asynchronous:

        @setup.decorate(name="answer")
        async def astream(strong: bool) -> AsyncIterator[str]:
            record_signals(support_level="high" if strong else "low", has_conflict=not strong)
            yield "one"
            yield "two"

        async def main() -> tuple[int | None, int | None]:
            async for _ in astream(True):
                pass
            full = _total(last_scorecard())
            stream = astream(False)
            await stream.__anext__()
            await stream.aclose()
            return full, _total(last_scorecard())

        full, closed = asyncio.run(main())
    else:

        @setup.decorate(name="answer")
        def stream(strong: bool) -> Iterator[str]:
            record_signals(support_level="high" if strong else "low", has_conflict=not strong)
            yield "one"
            yield "two"

        list(stream(True))
        full = _total(last_scorecard())
        generator = stream(False)
        next(generator)
        generator.close()
        closed = _total(last_scorecard())
    assert full is not None
    assert closed is None  # before: the full stream's card stayed, as if the closed one had scored it


# -- the shapes a decorated callable takes ----------------------------------------------------------------------


def test_above_staticmethod_and_classmethod_the_method_is_decorated_inside_its_descriptor(
    setup: Setup,
) -> None:
    class Pipeline:
        prefix = "cls"

        @setup.decorate(name="static")
        @staticmethod
        def static(question: str) -> str:
            record_signals(support_level="high", has_conflict=False)
            return question

        @setup.decorate(name="class")
        @classmethod
        def klass(cls, question: str) -> str:
            record_signals(support_level="high", has_conflict=False)
            return f"{cls.prefix}:{question}"

        @setup.decorate(name="static async")
        @staticmethod
        async def static_async(question: str) -> str:
            record_signals(support_level="high", has_conflict=False)
            return question

    assert Pipeline.static("q") == "q" and Pipeline().static("q") == "q"
    assert Pipeline.klass("q") == "cls:q" and Pipeline().klass("q") == "cls:q"

    async def main() -> int | None:
        assert await Pipeline.static_async("q") == "q"
        return _total(last_scorecard())

    expected = compute_confidence({"supportLevel": "high", "hasConflict": False, "candidates": []})
    assert asyncio.run(main()) == expected.total  # scored after the coroutine ran, not when it was created
    assert setup.score_count() == 5


def test_the_bare_decorator_over_a_classmethod_decorates_it(setup: Setup) -> None:
    class Pipeline:
        @scored_answer
        @classmethod
        def ask(cls, question: str) -> str:
            return cls.__name__ + question

    assert Pipeline.ask("?") == "Pipeline?"


def test_a_callable_object_with_an_async_call_is_awaited_inside_its_answer(setup: Setup) -> None:
    class Chain:
        async def __call__(self, question: str) -> str:
            with setup.tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
                pass
            await asyncio.sleep(0)
            record_signals(support_level="high", has_conflict=False)
            return question

    chain = setup.decorate()(Chain())

    async def main() -> int | None:
        assert await chain("q") == "q"
        return _total(last_scorecard())

    assert asyncio.run(main()) == STRONG.total
    spans = setup.spans()
    assert set(spans) == {"Chain", "retrieve"}  # named after its class
    assert spans["retrieve"].parent is not None and spans["Chain"].context is not None
    assert spans["retrieve"].parent.span_id == spans["Chain"].context.span_id


def test_a_partial_is_named_after_its_function(setup: Setup) -> None:
    def answer(question: str, *, style: str) -> str:
        return f"{style}: {question}"

    decorated = setup.decorate()(functools.partial(answer, style="short"))
    assert decorated("q") == "short: q"
    assert set(setup.spans()) == {"answer"}


def test_a_sync_function_returning_an_awaitable_is_not_scored_and_warns_once(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    async def later() -> str:
        return "text"

    decorated = setup.decorate(name="answer")(lambda: later())
    with caplog.at_level(logging.WARNING, logger="rag_confidence"):
        for _ in range(2):
            assert asyncio.run(decorated()) == "text"
    assert [record.message for record in caplog.records].count(
        "rag-confidence: answer returned an awaitable without being an async function; its answer is produced "
        "after the call returned, so its calls are not scored: decorate the async function itself instead"
    ) == 1
    assert setup.score_count() == 0 and last_scorecard() is None
    assert (setup.spans()["answer"].attributes or {})[semconv.RAG_ANSWER] is False


def _returned_streams() -> dict[str, Any]:
    """Real stream objects a RAG function returns instead of yielding: LangChain's ``chain.stream()``,
    LlamaIndex's streaming query responses (sync and async), a plain generator and an async generator."""
    from langchain_core.runnables import RunnableLambda
    from llama_index.core.base.response.schema import AsyncStreamingResponse, StreamingResponse
    from llama_index.core.chat_engine.types import StreamingAgentChatResponse

    async def tokens() -> AsyncIterator[str]:
        yield "text"

    return {
        "langchain": lambda: RunnableLambda(lambda question: "text").stream("q"),
        "llamaindex": lambda: StreamingResponse(response_gen=(token for token in ["text"])),
        "llamaindex async": lambda: AsyncStreamingResponse(response_gen=tokens()),
        "llamaindex chat": lambda: StreamingAgentChatResponse(chat_stream=(token for token in ())),
        "generator": lambda: (token for token in ["text"]),
        "async generator": tokens,
    }


@pytest.mark.parametrize("shape", sorted(_returned_streams()))
@pytest.mark.parametrize("is_async", [False, True], ids=["def", "async def"])
def test_a_function_returning_a_stream_is_declined_with_one_warning(
    setup: Setup, caplog: pytest.LogCaptureFixture, shape: str, is_async: bool
) -> None:
    # Scored when it returns, the answer would be empty: no candidates, a bogus abstain to gate on.
    make = _returned_streams()[shape]

    def retrieve_then_stream() -> Any:
        with setup.tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
            pass
        return make()

    if is_async:

        @setup.decorate(name="answer")
        async def answer_async() -> Any:
            return retrieve_then_stream()

        def call() -> Any:
            return asyncio.run(answer_async())
    else:
        call = setup.decorate(name="answer")(retrieve_then_stream)

    with caplog.at_level(logging.WARNING, logger="rag_confidence"):
        streams = [call(), call()]
    assert all(stream is not None for stream in streams)  # handed back untouched
    warnings = [record.message for record in caplog.records if "returned a stream" in record.message]
    assert len(warnings) == 1
    assert "decorate a generator that yields its items instead" in warnings[0]
    assert setup.score_count() == 0 and last_scorecard() is None
    assert (setup.spans()["answer"].attributes or {})[semconv.RAG_ANSWER] is False


def _complete_answers() -> list[Any]:
    """Results that hold a whole answer, some of them iterable or shaped like a stream holder."""
    import dataclasses
    import io
    from unittest import mock

    from llama_index.core.base.response.schema import StreamingResponse
    from llama_index.core.chat_engine.types import AgentChatResponse, StreamingAgentChatResponse

    @dataclasses.dataclass
    class Reply:
        text: str
        response_gen: Any = None

    exhausted = (token for token in ["text"])
    list(exhausted)  # consumed inside the call: the answer was produced within its span
    consumed = StreamingResponse(response_gen=None, response_txt="text")
    finished_chat = StreamingAgentChatResponse(response="text", chat_stream=(token for token in ()))
    finished_chat.is_done = True  # its thread read the model's whole stream before the call returned
    return [
        "text",
        ["text"],
        {"answer": "text"},
        None,
        AgentChatResponse(response="text"),  # has a response_gen property, and is no stream
        io.StringIO("text"),
        Reply("text"),
        exhausted,
        consumed,
        finished_chat,
        mock.MagicMock(),
    ]


def test_results_that_are_no_stream_are_scored(setup: Setup) -> None:
    results = _complete_answers()
    for result in results:

        @setup.decorate(name="answer")
        def answer(result: Any = result) -> Any:
            record_signals(support_level="high", has_conflict=False)
            return result

        answer()
        assert last_scorecard() is not None, result
    assert setup.score_count() == len(results)


def test_a_call_that_returns_with_its_span_set_to_error_is_still_scored(setup: Setup) -> None:
    # A handled failure (a fallback answer) may leave status ERROR on the span: the call returned an answer.
    from opentelemetry import trace
    from opentelemetry.trace import Status, StatusCode

    @setup.decorate(name="answer")
    def answer() -> str:
        with setup.tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
            pass
        record_signals(support_level="high", has_conflict=False)
        trace.get_current_span().set_status(Status(StatusCode.ERROR, "primary model down: fell back"))
        return "fallback text"

    assert answer() == "fallback text"
    card = last_scorecard()
    assert card is not None and _total(card) == STRONG.total
    attributes = setup.spans()["answer"].attributes or {}
    assert semconv.RAG_CONFIDENCE_ERROR not in attributes
    assert attributes[semconv.RAG_CONFIDENCE_TOTAL] == STRONG.total


def test_adopting_inside_another_decorated_call_opens_its_own_answer(setup: Setup) -> None:
    @setup.decorate(name="helper", adopt_current_span=True)
    def helper() -> str:
        record_signals(support_level="low", has_conflict=True)
        return "part"

    @setup.decorate(name="answer")
    def answer() -> str:
        with setup.tracer.start_as_current_span("retrieve", attributes=RETRIEVAL):
            pass
        helper()
        record_signals(support_level="high", has_conflict=False)
        return "text"

    answer()
    spans = setup.spans()
    # Before: the helper adopted the answer's span, which was then scored twice (two cards, two points).
    assert setup.score_count() == 2
    assert (spans["helper"].attributes or {})[semconv.RAG_CONFIDENCE_TOTAL] == WEAK.total
    assert (spans["answer"].attributes or {})[semconv.RAG_CONFIDENCE_TOTAL] == STRONG.total


def test_adopting_a_request_span_still_works(setup: Setup) -> None:
    @setup.decorate(adopt_current_span=True)
    def answer() -> str:
        record_signals(support_level="high", has_conflict=False)
        return "text"

    with setup.tracer.start_as_current_span("request"):
        answer()
    assert set(setup.spans()) == {"request"}
    assert (setup.spans()["request"].attributes or {})[semconv.RAG_ANSWER] is True


# -- misuse: typed errors where the decorator is applied ---------------------------------------------------------


def test_decorating_a_class_or_a_non_callable_raises_a_usage_error() -> None:
    with pytest.raises(UsageError, match="not the class Pipeline"):

        @scored_answer
        class Pipeline:
            pass

    for value in (42, None, "answer"):
        with pytest.raises(UsageError, match="decorates functions"):
            scored_answer()(value)  # type: ignore[type-var]
    assert issubclass(UsageError, TypeError) and issubclass(UsageError, ValueError)


def test_a_positional_lambda_is_refused_with_the_keyword_to_use() -> None:
    with pytest.raises(UsageError, match=r"signals=\.\.\. or on_score=\.\.\."):
        scored_answer(lambda result: {"support_level": "high"})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"signals": {"support_level": "high"}}, r"signals=\.\.\.\) must be a callable"),
        ({"on_score": "print"}, r"on_score=\.\.\.\) must be a callable"),
        ({"name": 42}, r"name=\.\.\.\) must be a string"),
        ({"signal_options": {"metadata_keys": {}}}, r"signal_options=\.\.\.\) must be a SignalOptions"),
    ],
)
def test_options_of_the_wrong_type_are_refused_at_decoration(options: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        scored_answer(**options)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        # Truthy strings would switch on what they mean to switch off.
        ({"adopt_current_span": "no"}, r"adopt_current_span=\.\.\.\) must be True or False, not 'no'"),
        ({"emit_events": "yes"}, r"emit_events=\.\.\.\) must be True or False"),
        ({"tracer_provider": 5}, r"tracer_provider=\.\.\.\) must be a TracerProvider or None, not int"),
        ({"meter_provider": "prometheus"}, r"meter_provider=\.\.\.\) must be a MeterProvider"),
        ({"logger_provider": object()}, r"logger_provider=\.\.\.\) must be a LoggerProvider"),
        # Found here, not as an error logged at every call.
        (
            {"on_score": lambda card: None},
            r"called as on_score\(scorecard, result\); <lambda> takes \(card\)",
        ),
        ({"signals": lambda result, extra: {}}, r"called as signals\(result\)"),
    ],
)
def test_flags_providers_and_callback_arity_are_checked_at_decoration(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        scored_answer(**options)


def test_callbacks_that_accept_the_arguments_are_taken() -> None:
    class Sink:
        def record(self, card: Any, result: Any) -> None:
            pass

    def injecting(function: Any) -> Any:  # a decorator that supplies the first argument itself
        @functools.wraps(function)
        def wrapper(*args: Any) -> Any:
            return function(logging.getLogger("app"), *args)

        return wrapper

    @injecting
    def log_score(logger: logging.Logger, card: Any, result: Any) -> None:
        pass

    class Lookup:  # __getattr__ backed by a dict: inspect.signature's probe for __wrapped__ raises KeyError
        def __init__(self) -> None:
            self.fields: dict[str, Any] = {}

        def __getattr__(self, name: str) -> Any:
            return self.__dict__["fields"][name]

        def __call__(self, card: Any, result: Any) -> None:
            pass

    for on_score in (
        print,
        lambda *args: None,
        Sink().record,
        lambda card, result, extra=None: None,
        log_score,
        Lookup(),
    ):
        scored_answer(on_score=on_score)
    scored_answer(signals=dict)  # a class: its signature is read from its constructor, or taken on trust
    scored_answer(adopt_current_span=True, emit_events=False)
    scored_answer(adopt_current_span=1, emit_events=0)  # type: ignore[arg-type]  # counted by their truth


# -- configure_from_env: options checked before anything is installed --------------------------------------------


def test_a_misspelt_processor_option_fails_before_any_provider_is_installed() -> None:
    program = textwrap.dedent(
        """
        from opentelemetry import trace
        from rag_confidence.errors import UsageError
        from rag_confidence.otel import configure_from_env
        try:
            configure_from_env(max_pending_trace=10)
        except UsageError as error:
            print("error:", error)
        print("provider:", type(trace.get_tracer_provider()).__name__)
        telemetry = configure_from_env(max_pending_traces=10)  # the corrected call works
        print("processor:", type(telemetry.processor).__name__)
        """
    )
    result = run_program(program, exporters_off_env())
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "error: configure_from_env: unknown ConfidenceSpanProcessor option 'max_pending_trace' "
        "(did you mean 'max_pending_traces'?)",
        "provider: ProxyTracerProvider",
        "processor: ConfidenceSpanProcessor",
    ]


@pytest.mark.parametrize(
    "options",
    [
        {"max_pending_traces": 0},
        {"pending_ttl_s": float("nan")},
        {"max_scoring_queue": 1.5},
        {"max_spans_per_trace": True},
    ],
)
def test_processor_limits_are_checked_as_numbers(options: dict[str, Any]) -> None:
    from opentelemetry.sdk.trace import SpanProcessor

    from rag_confidence.otel import ConfidenceSpanProcessor

    with pytest.raises(ConfigValidationError, match="must be a positive"):
        ConfidenceSpanProcessor(SpanProcessor(), **options)


# -- typing: the top-level re-exports are typed --------------------------------------------------------------------


def test_the_top_level_exports_type_check_under_mypy_strict(tmp_path: Path) -> None:
    user = tmp_path / "user_app.py"
    user.write_text(
        textwrap.dedent(
            """
            from rag_confidence import ConfidenceSpanProcessor, last_scorecard, record_signals, scored_answer

            @scored_answer(signals=lambda result: {"faithfulnessScore": 0.9})
            def answer(question: str) -> str:
                record_signals(support_level="high")
                return question

            text: str = answer("q")
            card = last_scorecard()
            action: str | None = card.recommended_action if card is not None else None
            reveal_type(answer)
            reveal_type(card)
            """
        )
    )
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(user)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'Revealed type is "def (question: str) -> str"' in result.stdout
    assert 'Revealed type is "rag_confidence.scoring.models.ConfidenceScorecard | None"' in result.stdout


def test_record_signals_keywords_are_typed_and_match_what_it_accepts(tmp_path: Path) -> None:
    from rag_confidence.otel import recording

    accepted = {*recording.ATTRIBUTE_BY_KEYWORD, *recording._NESTED_KEYWORDS, *recording._UNPREFIXED_CORPUS}
    assert set(recording.SignalKeywords.__annotations__) == accepted
    user = tmp_path / "signals_app.py"
    user.write_text(
        textwrap.dedent(
            """
            from rag_confidence.otel import record_signals

            record_signals(support_level="high", faithfulness_score=0.9, claim_support={"total_claims": 3})
            record_signals(suport_level="high")
            """
        )
    )
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(user)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert (
        len(errors) == 1 and 'Unexpected keyword argument "suport_level"' in errors[0] and ":5:" in errors[0]
    )
    with pytest.raises(UsageError, match="unexpected keyword 'suport_level'"):
        record_signals(suport_level="high")  # type: ignore[call-arg]


def test_record_signals_annotations_resolve_at_run_time() -> None:
    import typing

    from rag_confidence.otel import recording

    # The typed keywords must not cost run-time introspection (get_type_hints, inspect with eval_str).
    hints = typing.get_type_hints(record_signals, include_extras=True)
    assert typing.get_args(hints["signals"]) == (recording.SignalKeywords,)
    assert "signals" in inspect.signature(record_signals, eval_str=True).parameters


def test_mypy_strict_catches_what_a_user_can_get_wrong_and_passes_the_examples(tmp_path: Path) -> None:
    """One mypy run: the lines marked ``# ok`` must type-check, each ``# error`` line must be flagged, and the
    examples in ``examples/`` must type-check as users copy them."""
    user = tmp_path / "mistakes.py"
    lines = [
        "from decimal import Decimal",
        "import rag_confidence",
        "from rag_confidence import configure_from_env, record_signals",
        "from rag_confidence.models import ActionPolicy",
        "from rag_confidence import scored_anwser  # error",
        "total: int = rag_confidence.compute_confidnce({})  # error",
        "policy = ActionPolicy(require_tier1_at_least=50, answer_at=70)  # ok",
        "record_signals(support_level='high', query_complexity='multi-hop')  # ok",
        "record_signals(faithfulness_score=Decimal('0.9'), present_types=['policy'])  # ok",
        "record_signals(support_level='hgih')  # error",
        "record_signals(query_complexity='multihop')  # error",
        "configure_from_env(max_pending_traces=100, pending_ttl_s=60.0, background_scoring=True)  # ok",
        "configure_from_env(max_pending_trace=10)  # error",
        "configure_from_env(pending_ttl_s='300')  # error",
    ]
    user.write_text("\n".join(lines) + "\n")
    examples = sorted(str(path) for path in (Path(__file__).resolve().parents[1] / "examples").glob("*.py"))
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(user), *examples],
        capture_output=True,
        text=True,
        timeout=600,
    )
    flagged = {
        int(line.split(":")[1])
        for line in result.stdout.splitlines()
        if ": error:" in line and line.startswith(str(user))
    }
    expected = {number for number, line in enumerate(lines, 1) if line.endswith("# error")}
    assert flagged == expected, result.stdout
    others = [
        line for line in result.stdout.splitlines() if ": error:" in line and not line.startswith(str(user))
    ]
    assert not others, "\n".join(others)


def test_configure_from_env_typed_options_are_the_processor_options() -> None:
    from rag_confidence.otel.processor import ConfidenceSpanProcessor
    from rag_confidence.otel.setup import ProcessorOptions

    keyword_only = {
        name
        for name, parameter in inspect.signature(ConfidenceSpanProcessor).parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY
    }
    # config and signal_options are configure_from_env's own parameters.
    assert set(ProcessorOptions.__annotations__) == keyword_only - {"config", "signal_options"}


def test_record_signals_takes_what_its_types_promise() -> None:
    from decimal import Decimal
    from fractions import Fraction

    from rag_confidence.otel.recording import signal_attributes

    assert signal_attributes(
        faithfulness_score=Decimal("0.9"),
        answer_relevance_score=Fraction(1, 2),
        present_types="policy",
        corpus_missing_types=("bylaws",),
    ) == {
        semconv.RAG_SIGNAL_FAITHFULNESS_SCORE: 0.9,
        semconv.RAG_SIGNAL_ANSWER_RELEVANCE_SCORE: 0.5,
        semconv.RAG_SIGNAL_CORPUS_PRESENT_TYPES: ["policy"],
        semconv.RAG_SIGNAL_CORPUS_MISSING_TYPES: ["bylaws"],
    }
    # A JSON array in a string is read as its list by extraction: not wrapped into a list of one.
    assert signal_attributes(present_types='["pdf", "html"]') == {
        semconv.RAG_SIGNAL_CORPUS_PRESENT_TYPES: '["pdf", "html"]'
    }
    with pytest.raises(UsageError, match="object is no attribute value"):
        signal_attributes(faithfulness_score=object())
