"""Audit ingest cost, for bench/run.py (`PORTCULLIS_BENCH_ONLY=ingest`).

Starts control planes on SQLite that differ in one setting each — `sqlite_synchronous` full
or normal, and normal with only the time index of `audit_events` — and ships the same
synthetic model-call events to each through `SyncService/IngestAudit` in batches of 100, as a
gateway does, from 4 shippers at once. Alternates between them per round and reports, per
variant, events stored per second and control-plane CPU per event (medians of the rounds).
"""
import random
import sqlite3
import threading
import time
import uuid

from webhooks import post

EVENTS = 20000
BATCH = 100
SHIPPERS = 4
ROUNDS = 3


def call(base, key, op, body):
    return post(base, key, f"svc.mgmt.v1.ManagementService/{op}", body)


AGENTS = [str(uuid.uuid4()) for _ in range(20)]
MODELS = [str(uuid.uuid4()) for _ in range(5)]


def event_id():
    """A UUID of version 7, as gateways make event ids: the time in milliseconds, then random."""
    random_bits = random.getrandbits(74)
    value = ((time.time_ns() // 1_000_000) << 80 | 0x7 << 76 | (random_bits >> 62) << 64
             | 0b10 << 62 | random_bits & ((1 << 62) - 1))
    return str(uuid.UUID(int=value))


def event(ws):
    """A model call as gateways record it (no charges, so spend stays out of the figure): one
    of 20 agents calling one of 5 models, a W3C trace id on one call in five (callers that send
    `traceparent`), no activity id."""
    n = random.randrange(1000)
    agent = AGENTS[n % len(AGENTS)]
    return {
        "event_id": event_id(), "type": "model.call",
        "time": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()), "result": "RESULT_ALLOWED",
        "scope": {"kind": "agent", "workspace_id": ws, "agent_id": agent},
        "actor": {"kind": "ACTOR_KIND_AGENT", "id": agent, "display": "bench"},
        "resource": {"kind": "model", "id": MODELS[n % len(MODELS)], "name": "bench"},
        "producer": {"service": "gateway", "instance_id": "bench", "version": "bench"},
        "request": {"surface": "INITIATOR_SURFACE_GATEWAY_LLM", "http_route": "/v1/chat/completions"},
        "correlation": {"trace_id": uuid.uuid4().hex if n % 5 == 0 else "", "request_id": str(uuid.uuid4())},
        "data_handling": {"omitted": ["request.messages", "response.content"]},
        "payload": {"model": "bench", "input_tokens": 12, "output_tokens": 40, "latency_ms": 3,
                    "status": 200, "gateway_id": "g"},
    }


def ship(base, token, ws, count):
    for _ in range(count // BATCH):
        post(base, token, "svc.sync.v1.SyncService/IngestAudit", {"events": [event(ws) for _ in range(BATCH)]})


def round_on(v, cpu_seconds):
    before = cpu_seconds(v["pid"])
    started = time.monotonic()
    threads = [threading.Thread(target=ship, args=(v["base"], v["token"], v["ws"], EVENTS // SHIPPERS))
               for _ in range(SHIPPERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.monotonic() - started
    return {"events_per_s": EVENTS / seconds, "cpu_us_per_event": (cpu_seconds(v["pid"]) - before) / EVENTS * 1e6}


def measure(results, start, bin_dir, tmp, cpu_seconds):
    variants = []
    for name, sync, drop in (("full", "full", False), ("normal", "normal", False),
                             ("normal, trace and activity indexes partial", "normal", True)):
        data = f"{tmp}/ingest-{len(variants)}"
        proc, addr = start([f"{bin_dir}/portcullis-controlplane", "--listen", "127.0.0.1:0", "--data-dir", data],
                           f"{data}.log", {"PORTCULLIS_SQLITE_SYNCHRONOUS": sync, "RUST_LOG": "warn,portcullis_controlplane=info"})
        base = f"http://{addr}"
        key = open(f"{data}/admin.key").read().strip()
        ws = call(base, key, "GetIdentity", {})["identity"]["workspace_id"]
        token = call(base, key, "CreateDeployment", {"workspace_id": ws, "name": "bench",
                                                      "public_url": "http://127.0.0.1"})["token"]
        if drop:
            db = sqlite3.connect(f"{data}/portcullis.db", timeout=30)
            for column in ("trace", "activity"):
                db.execute(f"DROP INDEX IF EXISTS audit_{column}")
                db.execute(f"CREATE INDEX audit_{column} ON audit_events (workspace_id, {column}_id) "
                           f"WHERE {column}_id <> ''")
            db.commit()
            db.close()
        variants.append({"name": name, "proc": proc, "pid": proc.pid, "base": base, "token": token, "ws": ws,
                         "runs": []})
    for _ in range(ROUNDS):
        for v in variants:
            v["runs"].append(round_on(v, cpu_seconds))
    results["ingest"] = [{"name": v["name"], "runs": v["runs"]} for v in variants]
    for v in variants:
        v["proc"].terminate()


def rows(r):
    if "ingest" not in r:
        return []
    out = []
    for v in r["ingest"]:
        rate = sorted(x["events_per_s"] for x in v["runs"])[len(v["runs"]) // 2]
        cpu = sorted(x["cpu_us_per_event"] for x in v["runs"])[len(v["runs"]) // 2]
        spread = ", ".join(f"{x['events_per_s']:.0f}/{x['cpu_us_per_event']:.0f}" for x in v["runs"])
        out.append(f"| audit ingest, SQLite synchronous={v['name']}: events/s, control-plane CPU per event "
                   f"(median of {len(v['runs'])} alternating rounds of {EVENTS}; each round events/s / µs) | | "
                   f"{rate:.0f}, {cpu:.1f} µs ({spread}) | |")
    return out
