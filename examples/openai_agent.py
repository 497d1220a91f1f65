"""An agent calling models through a Portcullis gateway with the official OpenAI SDK.

    pip install openai
    PORTCULLIS_AGENT_KEY=svc_… PORTCULLIS_OPENAI_BASE_URL=http://127.0.0.1:7780/gateways/<id>/v1 \
        python examples/openai_agent.py gpt

The agent key authenticates to the gateway only; the upstream provider's key stays in the
gateway. `model` is the name of a model connection or pool attached to the gateway.
"""
import os
import sys

from openai import OpenAI

model = sys.argv[1] if len(sys.argv) > 1 else "gpt"
client = OpenAI(api_key=os.environ["PORTCULLIS_AGENT_KEY"], base_url=os.environ["PORTCULLIS_OPENAI_BASE_URL"])

reply = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Say hello in five words."}])
print(reply.choices[0].message.content)

print("streamed:", end=" ", flush=True)
for chunk in client.chat.completions.create(model=model, stream=True,
                                            messages=[{"role": "user", "content": "Count to five."}]):
    for choice in chunk.choices:
        print(choice.delta.content or "", end="", flush=True)
print()
