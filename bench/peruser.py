"""A tool call with a person's own key (DESIGN §14) against the same call to a shared tool,
both acting for the same person, alternated in one run: what the per-user credential lookup
costs once it is cached (the first call fetches it from the control plane)."""
import json
import time
import urllib.parse
import urllib.request


def rpc(url, key, header, method, params):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    req = urllib.request.Request(url, data=body, method="POST", headers={
        "Authorization": f"Bearer {key}", "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream", "x-svc-act-as": header})
    return json.loads(urllib.request.urlopen(req).read())


def measure(results, env):
    call, base, key, ws, gid = env["call"], env["base"], env["key"], env["ws"], env["gid"]
    tool = call(base, key, "CreateMCPServerConnection", {
        "workspace_id": ws, "name": "bench-pu", "protocol": "streamable-http", "auth_method": "api-key",
        "credential_type": "per-user", "protocol_config": {"url": f"http://{env['fake_addr']}/mcp"}})
    call(base, key, "AddGatewayToolSource", {"workspace_id": ws, "gateway_id": gid, "connection_id": tool["connection_id"]})
    call(base, key, "RegisterAgent", {"workspace_id": ws, "name": "bench-person", "allowed_gateway_ids": [gid],
                                      "allowed_tools": ["bench-pu/echo", "bench-mcp/echo"], "actas_method": "hmac",
                                      "actas_hmac_secret": env["secret"], "actas_allowed_groups": ["eng"]})
    agent_key = call(base, key, "CreateAgentKey", {"workspace_id": ws, "agent_id": "bench-person", "name": "k"})["token"]
    url = f"http://{env['gw_addr']}/gateways/{gid}/mcp"
    header = env["hmac_header"]("u1")
    time.sleep(0.5)
    refused = rpc(url, agent_key, header, "tools/call", {"name": "bench-pu/echo", "arguments": {}})
    link = refused["error"]["data"]["provision_url"]
    urllib.request.urlopen(urllib.request.Request(
        link, data=urllib.parse.urlencode({"api_key": "bench-person-key"}).encode(), method="POST")).read()
    for _ in range(100):
        rpc(url, agent_key, header, "tools/list", {})
        answer = rpc(url, agent_key, header, "tools/call", {"name": "bench-pu/echo", "arguments": {}})
        if "result" in answer:
            break
        time.sleep(0.1)
    else:
        raise RuntimeError(f"the per-user tool never answered: {answer}")
    pid = env["gw"].pid
    for round_ in range(2):
        for name, tool_name in (("shared_tool", "bench-mcp/echo"), ("per_user_tool", "bench-pu/echo")):
            before = env["cpu_seconds"](pid)
            run = env["oha_mcp"](url, agent_key, tool_name, [f"x-svc-act-as: {header}"])
            cpu = (env["cpu_seconds"](pid) - before) / max(run["requests"], 1) * 1e6
            best = results.get(f"{name}_call")
            if best is None or run["p50_ms"] < best["p50_ms"]:
                results[f"{name}_call"] = run
            results.setdefault(f"{name}_cpu_us", []).append(cpu)
    last = rpc(url, agent_key, header, "tools/call", {"name": "bench-pu/echo", "arguments": {}})
    results["per_user_tool_ok"] = "result" in last


def rows(r):
    if "per_user_tool_call" not in r:
        return []
    s, p = r["shared_tool_call"], r["per_user_tool_call"]
    cs, cp = min(r["shared_tool_cpu_us"]), min(r["per_user_tool_cpu_us"])
    return [
        f"| MCP tools/call acting for a person, c=16: shared tool vs the person's own key (cached): p50 ms, requests/s, gateway CPU per request (better of 2 alternating runs) | | "
        f"{s['p50_ms']:.3f}, {s['rps']:.0f}, {cs:.0f} µs / {p['p50_ms']:.3f}, {p['rps']:.0f}, {cp:.0f} µs, answered: {r['per_user_tool_ok']} | "
        f"{(p['p50_ms'] - s['p50_ms']) * 1000:+.0f} µs p50, {cp - cs:+.1f} µs CPU |",
    ]
