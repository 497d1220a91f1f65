"""Calls a Portcullis gateway with the official Anthropic Python SDK and prints what it saw.

usage: anthropic_messages.py BASE_URL API_KEY MODEL MODE [bearer]
MODE: plain | stream | tools | tools-stream | error | models
With `bearer`, the key goes as `Authorization: Bearer` (the SDK's auth_token) instead of
`x-api-key`. Prints one JSON object on stdout.
"""
import json
import sys

import anthropic
from anthropic import Anthropic

WEATHER = {
    "name": "get_weather",
    "description": "Get the current weather in a given location",
    "input_schema": {
        "type": "object",
        "properties": {"location": {"type": "string", "description": "The city and state"}},
        "required": ["location"],
    },
}


def client(base_url: str, key: str, bearer: bool) -> Anthropic:
    if bearer:
        return Anthropic(base_url=base_url, auth_token=key, api_key=None, max_retries=0, timeout=30)
    return Anthropic(base_url=base_url, api_key=key, max_retries=0, timeout=30)


def tool_uses(message) -> list:
    return [{"id": b.id, "name": b.name, "input": b.input} for b in message.content if b.type == "tool_use"]


def text_of(message) -> str:
    return "".join(b.text for b in message.content if b.type == "text")


def tools(c: Anthropic, model: str, stream: bool) -> dict:
    """Two turns: the model calls the tool; the results go back; the model answers."""
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    kwargs = {"model": model, "max_tokens": 256, "tools": [WEATHER], "tool_choice": {"type": "auto"}}
    if stream:
        with c.messages.stream(messages=messages, **kwargs) as s:
            first = s.get_final_message()
    else:
        first = c.messages.create(messages=messages, **kwargs)
    uses = tool_uses(first)
    messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]})
    messages.append({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": u["id"], "content": "18 degrees"} for u in uses
    ]})
    second = c.messages.create(messages=messages, **kwargs)
    return {"tool_uses": uses, "stop_reason": first.stop_reason, "final": text_of(second),
            "final_stop_reason": second.stop_reason, "usage": first.usage.model_dump()}


def main() -> None:
    base_url, key, model, mode = sys.argv[1:5]
    bearer = len(sys.argv) > 5 and sys.argv[5] == "bearer"
    c = client(base_url, key, bearer)
    messages = [{"role": "user", "content": "Say hello."}]
    out: dict = {"sdk_version": anthropic.__version__}
    try:
        if mode in ("plain", "error"):
            raw = c.messages.with_raw_response.create(model=model, max_tokens=256, system="Be brief.", messages=messages)
            message = raw.parse()
            out.update(content=text_of(message), id=message.id, model=message.model,
                       stop_reason=message.stop_reason, usage=message.usage.model_dump(),
                       served_by=raw.headers.get("x-portcullis-model"), request_id=raw.headers.get("x-request-id"))
        elif mode == "stream":
            parts = []
            try:
                with c.messages.stream(model=model, max_tokens=256, messages=messages) as s:
                    for text in s.text_stream:
                        parts.append(text)
                    final = s.get_final_message()
                out.update(stop_reason=final.stop_reason, usage=final.usage.model_dump())
            except anthropic.APIError as e:
                # An error event mid-stream: what arrived before it is kept.
                out["stream_error"] = {"class": type(e).__name__, "message": str(e),
                                       "body": getattr(e, "body", None)}
            out.update(content="".join(parts), chunks=len(parts))
        elif mode in ("tools", "tools-stream"):
            out.update(tools(c, model, mode == "tools-stream"))
        elif mode == "models":
            out["models"] = [m.id for m in c.models.list()]
        else:
            raise SystemExit(f"unknown mode {mode}")
    except anthropic.APIStatusError as e:
        out["error"] = {"class": type(e).__name__, "status": e.status_code, "body": e.body}
    except anthropic.APIError as e:
        out["error"] = {"class": type(e).__name__, "message": str(e), "body": getattr(e, "body", None)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
