"""OpenAI's HTTP server, faked for the tests that run the real ``openai`` client (there is no network here).

The client is the real one; only its transport is an ``httpx.MockTransport`` whose handler each test module
writes, answering as OpenAI's API would. The Responses built here are the openai package's own types, so the
client parses them as it would parse OpenAI's answer. The Chat Completions bodies here are validated by its
``ChatCompletion`` / ``ChatCompletionChunk`` types, for the same reason; a client that does not speak through
``httpx`` (LiteLLM) gets them from a :class:`tests.instrumented.LoopbackService` instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import httpx
import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseOutputItem, ResponseOutputMessage, ResponseOutputText

Handler = Callable[[httpx.Request], httpx.Response]

BASE_URL = "https://api.openai.test/v1"


def mock_openai(handle: Handler) -> openai.OpenAI:
    """The real client, its requests answered by ``handle`` instead of OpenAI's server."""
    return openai.OpenAI(
        api_key="sk-test", base_url=BASE_URL, http_client=httpx.Client(transport=httpx.MockTransport(handle))
    )


def mock_async_openai(handle: Handler) -> openai.AsyncOpenAI:
    """The real async client, its requests answered by ``handle`` instead of OpenAI's server."""
    return openai.AsyncOpenAI(
        api_key="sk-test",
        base_url=BASE_URL,
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(handle)),
    )


def chat_completion(
    text: str | None,
    *,
    finish: str = "stop",
    tool_calls: list[dict[str, Any]] | None = None,
    alternatives: tuple[tuple[str, str], ...] = (),
) -> dict[str, Any]:
    """A ``ChatCompletion`` as OpenAI returns it, answering ``text`` (``None``: tool calls only);
    ``alternatives`` are the further choices of ``n`` > 1 (text, finish reason)."""
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    choices = [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}]
    for index, (other, reason) in enumerate(alternatives, start=1):
        choices.append(
            {
                "index": index,
                "message": {"role": "assistant", "content": other, "refusal": None},
                "finish_reason": reason,
                "logprobs": None,
            }
        )
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_764_500_000,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": choices,
        "usage": {"prompt_tokens": 120, "completion_tokens": 24, "total_tokens": 144},
    }
    return ChatCompletion.model_validate(body).model_dump(mode="json", exclude_unset=True)


def chat_completion_events(text: str, *, finish: str = "stop", usage: bool = False) -> str:
    """The server-sent events of a streamed completion: the text word by word, the finish reason in a last
    empty delta, and with ``stream_options={"include_usage": True}`` a final chunk with no choices."""
    base = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1_764_500_000,
        "model": "gpt-4o-mini",
    }
    chunks = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
    words = text.split(" ")
    for index, word in enumerate(words):
        piece = word if index == len(words) - 1 else word + " "
        chunks.append({**base, "choices": [{"index": 0, "delta": {"content": piece}}]})
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    if usage:
        chunks.append(
            {
                **base,
                "choices": [],
                "usage": {"prompt_tokens": 120, "completion_tokens": 24, "total_tokens": 144},
            }
        )
    events = [
        ChatCompletionChunk.model_validate(chunk).model_dump_json(exclude_unset=True) for chunk in chunks
    ]
    return "".join(f"data: {event}\n\n" for event in events) + "data: [DONE]\n\n"


def output_message(
    text: str, annotations: Sequence[Any] = (), item_id: str = "msg_1"
) -> ResponseOutputMessage:
    """A Response's ``message`` output item: one ``output_text`` part with ``annotations`` (citations)."""
    return ResponseOutputMessage(
        id=item_id,
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=list(annotations))],
    )


def openai_response(
    output: Sequence[ResponseOutputItem], *, response_id: str = "resp_1", tools: Sequence[Any] = ()
) -> Response:
    """A completed Response of ``gpt-4.1-mini`` as the Responses API returns it, holding ``output``; ``tools``
    are the tools the request declared, echoed back."""
    return Response(
        id=response_id,
        created_at=1_764_500_000,
        model="gpt-4.1-mini-2025-04-14",
        object="response",
        status="completed",
        parallel_tool_calls=True,
        tool_choice="auto",
        tools=list(tools),
        output=list(output),
    )
