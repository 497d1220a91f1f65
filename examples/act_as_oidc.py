"""An agent acting for its signed-in user: it passes the user's own OpenID Connect ID token in
`x-svc-act-as`, and the gateway verifies it against the issuer's published keys before any
rule, quota or audit record uses the person.

    pip install openai mcp
    PORTCULLIS_AGENT_KEY=svc_… \
    PORTCULLIS_GATEWAY_URL=http://127.0.0.1:7780/gateways/<id> \
    USER_ID_TOKEN=eyJ… \
        python examples/act_as_oidc.py gpt

The administrator sets it up once:

    portcullis actas-provider create corp-idp --issuer https://login.example.com \
        --audience <the client id your app signs users in with>
    portcullis agent update <agent> --actas-method oidc --actas-provider-id corp-idp \
        --actas-group eng
    portcullis workspace update --actas-min-method oidc   # refuse unsigned identities

The agent never learns the upstream key; the gateway never trusts a person the agent merely
names. A token that is expired, for another audience, from another issuer or signed with an
unknown key is refused with a reason code (`actas_expired`, `actas_audience`, …).
"""
import asyncio
import os
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client
from openai import OpenAI

HEADER = "x-svc-act-as"
model = sys.argv[1] if len(sys.argv) > 1 else "gpt"
key = os.environ["PORTCULLIS_AGENT_KEY"]
gateway = os.environ["PORTCULLIS_GATEWAY_URL"].rstrip("/")
act_as = {HEADER: os.environ["USER_ID_TOKEN"]}

# Models: the OpenAI SDK sends the header on every call.
client = OpenAI(api_key=key, base_url=f"{gateway}/v1", default_headers=act_as)
reply = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Who am I helping?"}])
print(reply.choices[0].message.content)


# Tools: the MCP SDK sends it with the bearer key.
async def tools() -> None:
    headers = {"Authorization": f"Bearer {key}", **act_as}
    async with streamablehttp_client(f"{gateway}/mcp", headers=headers) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            print("tools this person may use:", [t.name for t in listed.tools])


asyncio.run(tools())
