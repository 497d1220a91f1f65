"""Calls a Portcullis gateway with the official OpenAI Python SDK and prints what it saw.

usage: openai_chat.py BASE_URL API_KEY MODEL MODE
MODE: plain | stream | stream-usage | tools | tools-stream | models
Prints one JSON object on stdout.
"""
import json
import os
import sys

import openai
from openai import OpenAI


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a given location",
        "parameters": {
            "type": "object",
            "properties": {"location": {"type": "string"}},
            "required": ["location"],
        },
    },
}


def streamed_tool_calls(stream) -> tuple:
    """Assembles streamed tool calls by index, as an SDK user does; returns them with the usage."""
    calls, usage = {}, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage.model_dump()
        for choice in chunk.choices:
            for d in choice.delta.tool_calls or []:
                call = calls.setdefault(d.index, {"id": None, "name": "", "arguments": ""})
                call["id"] = call["id"] or d.id
                if d.function and d.function.name:
                    call["name"] += d.function.name
                if d.function and d.function.arguments:
                    call["arguments"] += d.function.arguments
    return [calls[i] for i in sorted(calls)], usage


def tools(client: OpenAI, model: str, stream: bool) -> dict:
    """Two turns: the model calls the tool; the results go back; the model answers."""
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    if stream:
        s = client.chat.completions.create(model=model, messages=messages, tools=[WEATHER], stream=True,
                                           stream_options={"include_usage": True})
        calls, usage = streamed_tool_calls(s)
    else:
        first = client.chat.completions.create(model=model, messages=messages, tools=[WEATHER])
        calls = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
                 for c in first.choices[0].message.tool_calls or []]
        usage = first.usage.model_dump() if first.usage else None
    messages.append({"role": "assistant", "content": None, "tool_calls": [
        {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls
    ]})
    for c in calls:
        messages.append({"role": "tool", "tool_call_id": c["id"], "content": "18 degrees"})
    second = client.chat.completions.create(model=model, messages=messages, tools=[WEATHER])
    return {"tool_calls": [{**c, "arguments": json.loads(c["arguments"])} for c in calls], "usage": usage,
            "final": second.choices[0].message.content, "finish_reason": second.choices[0].finish_reason}


def main() -> None:
    base_url, api_key, model, mode = sys.argv[1:5]
    # PORTCULLIS_HEADERS: a JSON object of headers every call carries (an act-as identity).
    headers = json.loads(os.environ.get("PORTCULLIS_HEADERS", "{}"))
    client = OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=30, default_headers=headers)
    messages = [{"role": "user", "content": "Say hello."}]
    out: dict = {"sdk_version": openai.__version__}
    try:
        if mode == "plain":
            raw = client.chat.completions.with_raw_response.create(model=model, messages=messages)
            completion = raw.parse()
            out["content"] = completion.choices[0].message.content
            out["model"] = completion.model
            out["usage"] = completion.usage.model_dump() if completion.usage else None
            out["served_by"] = raw.headers.get("x-portcullis-model")
            out["request_id"] = raw.headers.get("x-request-id")
        elif mode in ("stream", "stream-usage"):
            kwargs = {"stream_options": {"include_usage": True}} if mode == "stream-usage" else {}
            stream = client.chat.completions.create(model=model, messages=messages, stream=True, **kwargs)
            parts, usage, chunks = [], None, 0
            try:
                for chunk in stream:
                    chunks += 1
                    if chunk.usage is not None:
                        usage = chunk.usage.model_dump()
                    for choice in chunk.choices:
                        if choice.delta and choice.delta.content:
                            parts.append(choice.delta.content)
            except openai.APIError as e:
                # An error event mid-stream: what arrived before it is kept.
                out["stream_error"] = {"class": type(e).__name__, "message": str(e), "body": e.body}
            out["content"] = "".join(parts)
            out["usage"] = usage
            out["chunks"] = chunks
        elif mode in ("tools", "tools-stream"):
            out.update(tools(client, model, mode == "tools-stream"))
        elif mode == "models":
            out["models"] = [m.id for m in client.models.list()]
        else:
            raise SystemExit(f"unknown mode {mode}")
    except openai.APIStatusError as e:
        out["error"] = {"status": e.status_code, "body": e.body}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
