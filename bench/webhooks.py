"""Webhook delivery throughput, for bench/run.py.

Subscribes a local receiver (the fake upstream's `/hook`: it answers 200 at once and counts)
to `mcp.tool_call.completed`, ingests N synthetic tool-call events through
`SyncService/IngestAudit` as a gateway would, and times until the receiver has every one:
deliveries per second through the whole path (outbox, dispatch, signed sends, records). While
they drain, the management API's p50 (`GetIdentity` at a fixed rate) is measured, and again
when idle, alternately, to show what delivery costs the API.
"""
import json
import subprocess
import time
import urllib.request
import uuid

EVENTS = 10000
BATCH = 100


def post(base, token, path, body):
    req = urllib.request.Request(f"{base}/{path}", data=json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.load(r)


def event(ws, agent_id):
    return {
        "event_id": str(uuid.uuid4()), "type": "tool.call",
        "time": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()), "result": "RESULT_ALLOWED",
        "scope": {"kind": "agent", "workspace_id": ws, "agent_id": agent_id},
        "actor": {"kind": "ACTOR_KIND_AGENT", "id": agent_id, "display": "bench"},
        "resource": {"kind": "tool", "id": "", "name": "bench-mcp/echo"},
        "producer": {"service": "gateway", "instance_id": "bench", "version": "bench"},
        "request": {"surface": "INITIATOR_SURFACE_GATEWAY_MCP"},
        "correlation": {}, "data_handling": {},
        "payload": {"tool": "bench-mcp/echo", "latency_ms": 1, "is_error": False},
    }


def api_p50(oha, base, key, ws, seconds):
    out = subprocess.run([oha, "--no-tui", "--output-format", "json", "-z", f"{seconds}s", "-q", "200", "-c", "4",
                          "-m", "POST", "-H", "Content-Type: application/json", "-H", f"Authorization: Bearer {key}",
                          "-d", json.dumps({"workspace_id": ws}), f"{base}/svc.mgmt.v1.ManagementService/GetIdentity"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["latencyPercentiles"]["p50"] * 1000


def acknowledged(fake_addr):
    with urllib.request.urlopen(f"http://{fake_addr}/hook/count") as r:
        return int(r.read())


def measure(results, base, key, ws, token, agent_id, oha, fake_addr):
    post(base, key, "svc.eventing.v1.EventingService/CreateSubscription", {
        "workspace_id": ws, "name": "bench", "event_types": ["mcp.tool_call.completed"],
        "delivery_endpoint": f"http://{fake_addr}/hook"})
    idle, busy, rates = [], [], []
    for _ in range(2):
        idle.append(api_p50(oha, base, key, ws, 3))
        start_count = acknowledged(fake_addr)
        started = time.monotonic()
        for _ in range(0, EVENTS, BATCH):
            post(base, token, "svc.sync.v1.SyncService/IngestAudit",
                 {"events": [event(ws, agent_id) for _ in range(BATCH)]})
        ingested = time.monotonic()
        busy.append(api_p50(oha, base, key, ws, 3))
        deadline = time.monotonic() + 120
        while acknowledged(fake_addr) - start_count < EVENTS and time.monotonic() < deadline:
            time.sleep(0.01)
        done = time.monotonic()
        rates.append({"delivered": acknowledged(fake_addr) - start_count, "seconds": done - started,
                      "ingest_seconds": ingested - started})
    results["webhook_events"] = EVENTS
    results["webhook_runs"] = rates
    results["webhook_deliveries_per_s"] = [r["delivered"] / r["seconds"] for r in rates]
    results["webhook_api_idle_p50_ms"] = idle
    results["webhook_api_busy_p50_ms"] = busy


def rows(r):
    if "webhook_deliveries_per_s" not in r:
        return []
    runs = " / ".join(f"{x:.0f}" for x in r["webhook_deliveries_per_s"])
    delivered = " / ".join(str(x["delivered"]) for x in r["webhook_runs"])
    idle = " / ".join(f"{x:.3f}" for x in r["webhook_api_idle_p50_ms"])
    busy = " / ".join(f"{x:.3f}" for x in r["webhook_api_busy_p50_ms"])
    return [
        f"| webhooks: {r['webhook_events']} tool-call events ingested, each delivered signed to a local receiver: deliveries/s from first ingest to last acknowledgement, delivered (2 runs) | | {runs}; {delivered} | |",
        f"| webhooks: management API p50 ms at 200 requests/s, idle → while deliveries drain (2 runs) | | {idle} → {busy} | |",
    ]
