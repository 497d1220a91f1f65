"""Signs a person in to a Portcullis gateway's MCP endpoint with the official MCP Python SDK's
OAuth client (protected resource and authorization server discovery, dynamic client
registration, PKCE, resource indicator, token exchange), then uses the agent as them.

usage: mcp_interactive.py MCP_URL ISSUER LOGIN [TOOL ARGUMENTS_JSON]...
ISSUER is the test OpenID provider (tests/node/oidc_issuer.mjs): its /_test/browse plays the
person's browser (logging in as LOGIN and consenting there, then approving Portcullis's
consent page) until the redirect to the client.
Prints one JSON object: the tools and each call's result (as mcp_client.py), the tokens the
client ended with and its registration; or {"error": ...} when the sign-in failed.
"""
import asyncio
import json
import sys
import urllib.parse
import urllib.request

from mcp import ClientSession, MCPError
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import OAuthClientMetadata

# The client's redirect URI: never served, the browser stops before following it.
REDIRECT = "http://127.0.0.1:9/callback"


class Memory(TokenStorage):
    def __init__(self) -> None:
        self.tokens = None
        self.client = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens) -> None:
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, client_info) -> None:
        self.client = client_info


def leaves(e: BaseException) -> list[str]:
    """The innermost errors of an exception group, as `Type: message`."""
    inner = getattr(e, "exceptions", None)
    if inner:
        return [leaf for x in inner for leaf in leaves(x)]
    return [f"{type(e).__name__}: {e}"]


async def main() -> None:
    url, issuer, login, *calls = sys.argv[1:]
    landed: dict = {}

    async def redirect_handler(authorization_url: str) -> None:
        query = urllib.parse.urlencode(
            {"url": authorization_url, "login": login, "stop_at": REDIRECT, "consent": "approve"}
        )

        def browse() -> dict:
            with urllib.request.urlopen(f"{issuer}/_test/browse?{query}", timeout=60) as r:
                return json.load(r)

        landed.update(await asyncio.to_thread(browse))

    async def callback_handler() -> AuthorizationCodeResult:
        if landed.get("status") != 302:
            raise RuntimeError(f"the sign-in did not come back to the client: {landed}")
        params = dict(urllib.parse.parse_qsl(urllib.parse.urlparse(landed["url"]).query))
        if "error" in params:
            raise RuntimeError(f"sign-in refused: {params['error']}: {params.get('error_description')}")
        return AuthorizationCodeResult(code=params["code"], state=params.get("state"), iss=params.get("iss"))

    storage = Memory()
    auth = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(client_name="interactive test", redirect_uris=[REDIRECT]),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    out: dict = {"tools": [], "calls": []}
    try:
        async with create_mcp_http_client(auth=auth) as http:
            async with streamable_http_client(url, http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    page = await session.list_tools()
                    out["tools"] = [t.name for t in page.tools]
                    for name, arguments in zip(calls[0::2], calls[1::2]):
                        try:
                            result = await session.call_tool(name, json.loads(arguments))
                            out["calls"].append({
                                "name": name,
                                "content": [c.model_dump(exclude_none=True) for c in result.content],
                                "isError": result.is_error,
                            })
                        except MCPError as e:
                            out["calls"].append({"name": name, "error": {"code": e.error.code, "message": e.error.message}})
    except BaseException as e:  # noqa: BLE001 - the test reads what went wrong
        out["error"] = "; ".join(leaves(e))
    if storage.tokens is not None:
        out["tokens"] = storage.tokens.model_dump(mode="json", exclude_none=True)
    if storage.client is not None:
        out["client"] = {
            "client_id": storage.client.client_id,
            "client_secret": storage.client.client_secret,
            "token_endpoint_auth_method": storage.client.token_endpoint_auth_method,
        }
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
