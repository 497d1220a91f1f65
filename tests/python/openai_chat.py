"""Calls a Portcullis gateway with the official OpenAI Python SDK and prints what it saw.

usage: openai_chat.py BASE_URL API_KEY MODEL MODE
MODE: plain | stream | stream-usage | models | error
Prints one JSON object on stdout.
"""
import json
import sys

import openai
from openai import OpenAI


def main() -> None:
    base_url, api_key, model, mode = sys.argv[1:5]
    client = OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=30)
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
            for chunk in stream:
                chunks += 1
                if chunk.usage is not None:
                    usage = chunk.usage.model_dump()
                for choice in chunk.choices:
                    if choice.delta and choice.delta.content:
                        parts.append(choice.delta.content)
            out["content"] = "".join(parts)
            out["usage"] = usage
            out["chunks"] = chunks
        elif mode == "models":
            out["models"] = [m.id for m in client.models.list()]
        else:
            raise SystemExit(f"unknown mode {mode}")
    except openai.APIStatusError as e:
        out["error"] = {"status": e.status_code, "body": e.body}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
