"""Talks to a Portcullis gateway's MCP endpoint with the official MCP Python SDK.

usage: mcp_client.py MCP_URL API_KEY [TOOL ARGUMENTS_JSON]...
Initializes, lists every tool (following pagination), then calls each TOOL with its
arguments. Prints one JSON object: the tools (name, _meta, annotations, required arguments),
each call's result (content, structuredContent, isError) or error (code, message, data).
"""
import asyncio
import json
import sys

from mcp import ClientSession, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def main() -> None:
    url, key, *calls = sys.argv[1:]
    out: dict = {"tools": [], "calls": []}
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                out["server"] = init.server_info.name
                cursor = None
                while True:
                    page = await session.list_tools(params={"cursor": cursor} if cursor else None)
                    out["tools"].extend(
                        {
                            "name": t.name,
                            "meta": (t.meta or {}),
                            "annotations": t.annotations.model_dump(by_alias=True, exclude_none=True) if t.annotations else {},
                            "required": t.input_schema.get("required", []),
                        }
                        for t in page.tools
                    )
                    cursor = page.next_cursor
                    if not cursor:
                        break
                for name, arguments in zip(calls[0::2], calls[1::2]):
                    try:
                        result = await session.call_tool(name, json.loads(arguments))
                        out["calls"].append({
                            "name": name,
                            "content": [c.model_dump(exclude_none=True) for c in result.content],
                            "structuredContent": result.structured_content,
                            "isError": result.is_error,
                        })
                    except MCPError as e:
                        out["calls"].append({"name": name, "error": {"code": e.error.code, "message": e.error.message, "data": e.error.data}})
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
