#!/usr/bin/env python3
"""Measures the gateway against a direct call to the same fake upstream, on this machine.

Starts a release control plane, a fake OpenAI upstream (tests/src/bin/fake-llm.rs, not the
bottleneck: it answers from memory) and a release gateway, then runs the load generator `oha`
against the upstream directly and through the gateway:

  * saturation (closed loop, fixed concurrency): requests/s, p50, p99, gateway CPU per request
  * a fixed rate of 1,000 requests/s (open loop): p50 and p99, and the gateway's added latency
  * streaming: time to first byte, one request at a time (tests/src/bin/ttfb.rs)

and the gateway's peak RSS. It also measures, alternately within the run so the VM's drift
cancels: audit on versus off, quota enforcement, a call translated from OpenAI's shape to an
Anthropic-, Gemini- and Bedrock-shaped upstream (SigV4 signing included) against the same call
passed through, an agent calling with a token from ExchangeAgentKey against its key, an agent
acting for a person (a signed hmac identity and an allow list) against one acting for no one,
ten output guards on a 4 KiB answer against none on the same answer, webhook deliveries per
second (bench/webhooks.py) with the management API's p50 while they drain, and — with
PORTCULLIS_BENCH_BASELINE=DIR holding an earlier build's `portcullis-gateway` — that build
against this one (`PORTCULLIS_BENCH_ONLY=up`: `portcullis up` of that build against this one's,
bench/up_pair.py). Prints a Markdown table and writes bench/results/latest.json.
Run it through bench/run.sh, which builds what it needs.
"""
import base64
import hashlib
import hmac
import json
import os
import signal
import statistics
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

import ingest
import peers
import peruser
import scale
import up_pair
import webhooks

BIN = os.environ["PORTCULLIS_BENCH_BIN"]
OHA = os.environ.get("PORTCULLIS_OHA", "oha")
DURATION = os.environ.get("PORTCULLIS_BENCH_DURATION", "10s")
CONCURRENCY = int(os.environ.get("PORTCULLIS_BENCH_CONCURRENCY", "32"))
RATE = int(os.environ.get("PORTCULLIS_BENCH_RATE", "1000"))
TTFB_COUNT = os.environ.get("PORTCULLIS_BENCH_TTFB_COUNT", "2000")
BODY = json.dumps({"model": "bench", "messages": [{"role": "user", "content": "Say hello."}]})
BASELINE = os.environ.get("PORTCULLIS_BENCH_BASELINE")
PROCS = []
# The fakes listen on 127.0.0.1: the gateways here may reach loopback (DESIGN §24).
LOOPBACK_UPSTREAMS = {"PORTCULLIS_ALLOW_PRIVATE_TARGETS": "true"}


def start(args, log_path, env=None):
    log = open(log_path, "w")
    p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **LOOPBACK_UPSTREAMS, **(env or {})})
    PROCS.append(p)
    deadline = time.time() + 30
    while time.time() < deadline:
        text = open(log_path).read()
        m = re.search(r"listening addr=([0-9.:]+)", text)
        if m:
            return p, m.group(1)
        if p.poll() is not None:
            sys.exit(f"{args[0]} exited:\n{text}")
        time.sleep(0.05)
    sys.exit(f"{args[0]} did not start:\n{open(log_path).read()}")


def call(base, key, op, body):
    agents = ("RegisterAgent", "UpdateAgent", "CreateAgentKey", "GetAgent", "ExchangeAgentKey")
    svc = "svc.agents.v1.AgentService" if op in agents else "svc.mgmt.v1.ManagementService"
    if op.endswith("Guard"):
        svc = "svc.rules.v1.RuleService"
    req = urllib.request.Request(f"{base}/{svc}/{op}", data=json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.load(r)


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def oha(url, key, extra, body=BODY):
    """`body` is the request body, or `@<path>` for one read from a file (past the 128 KiB a
    command-line argument may hold)."""
    sent = ["-D", body[1:]] if body.startswith("@") else ["-d", body]
    args = [OHA, "--no-tui", "--output-format", "json", "-z", DURATION, "-m", "POST",
            "-H", "Content-Type: application/json", *sent, *extra, url]
    if key:
        args[1:1] = ["-H", f"Authorization: Bearer {key}"]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    data = json.loads(out)
    summary, pct = data["summary"], data["latencyPercentiles"]
    codes = data.get("statusCodeDistribution", {})
    ok = sum(v for k, v in codes.items() if k.startswith("2"))
    total = sum(codes.values())
    return {"rps": summary["requestsPerSec"], "p50_ms": pct["p50"] * 1000, "p99_ms": pct["p99"] * 1000,
            "requests": total, "ok": ok}


def oha_mcp(url, key, tool, headers=()):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": {}}})
    args = [OHA, "--no-tui", "--output-format", "json", "-z", DURATION, "-m", "POST", "-c", "16",
            "-H", "Content-Type: application/json", "-H", "Accept: application/json, text/event-stream",
            *[arg for h in headers for arg in ("-H", h)], "-d", body, url]
    if key:
        args[1:1] = ["-H", f"Authorization: Bearer {key}"]
    data = json.loads(subprocess.run(args, capture_output=True, text=True, check=True).stdout)
    codes = data.get("statusCodeDistribution", {})
    return {"rps": data["summary"]["requestsPerSec"], "p50_ms": data["latencyPercentiles"]["p50"] * 1000,
            "p99_ms": data["latencyPercentiles"]["p99"] * 1000, "requests": sum(codes.values()),
            "ok": sum(v for k, v in codes.items() if k.startswith("2"))}


def ttfb(url, key):
    out = subprocess.run([f"{BIN}/ttfb", url, key or "-", "bench", TTFB_COUNT], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main():
    tmp = tempfile.mkdtemp(prefix="portcullis-bench-")
    if os.environ.get("PORTCULLIS_BENCH_ONLY") == "ingest":
        results = {"machine": machine()}
        ingest.measure(results, start, BIN, tmp, cpu_seconds)
        print("\n".join(ingest.rows(results)))
        return
    if os.environ.get("PORTCULLIS_BENCH_ONLY") == "up":
        results = {"machine": machine(), "duration": DURATION}
        if not BASELINE:
            sys.exit("PORTCULLIS_BENCH_ONLY=up compares with PORTCULLIS_BENCH_BASELINE (a dir with `portcullis`)")
        up_pair.measure(results, {"start": start, "call": call, "bin": BIN, "oha": OHA, "tmp": tmp,
                                  "duration": DURATION}, BASELINE)
        print("\n".join(up_pair.rows(results)))
        return
    if os.environ.get("PORTCULLIS_BENCH_ONLY") == "peers":
        results = {"machine": machine(), "duration": DURATION}
        peers.measure(results, {"start": start, "call": call, "bin": BIN, "oha": OHA, "tmp": tmp, "duration": DURATION})
        text = "\n".join(peers.rows(results))
        peers.write(results, text)
        print(text)
        return
    fake, fake_addr = start([f"{BIN}/fake-llm", "--listen", "127.0.0.1:0"], f"{tmp}/fake.log")
    cp, cp_addr = start([f"{BIN}/portcullis-controlplane", "--listen", "127.0.0.1:0", "--data-dir", f"{tmp}/cp",
                         "--allow-private-webhook-targets"],
                        f"{tmp}/cp.log", {"RUST_LOG": "warn,portcullis_controlplane=info"})
    base = f"http://{cp_addr}"
    key = open(f"{tmp}/cp/admin.key").read().strip()
    ws = call(base, key, "GetIdentity", {})["identity"]["workspace_id"]
    gateways = call(base, key, "ListGateways", {"workspace_id": ws})["gateways"]
    gid = gateways[0]["gateway_id"]
    model = call(base, key, "CreateLLMModelConnection", {
        "workspace_id": ws, "name": "bench", "provider": "openai_compatible",
        "provider_config": {"model": "gpt-4o-mini", "base_url": f"http://{fake_addr}/v1"},
        "secret_values": {"Authorization": "Bearer sk-bench-upstream"}})
    call(base, key, "AddGatewayModel", {"workspace_id": ws, "gateway_id": gid, "connection_id": model["connection_id"]})
    call(base, key, "RegisterAgent", {"workspace_id": ws, "name": "bench", "allowed_gateway_ids": [gid],
                                      "allowed_direct_model_names": ["bench"]})
    tool = call(base, key, "CreateMCPServerConnection", {
        "workspace_id": ws, "name": "bench-mcp", "protocol": "streamable-http", "auth_method": "none",
        "protocol_config": {"url": f"http://{fake_addr}/mcp"}})
    call(base, key, "AddGatewayToolSource", {"workspace_id": ws, "gateway_id": gid, "connection_id": tool["connection_id"]})
    call(base, key, "UpdateAgent", {"workspace_id": ws, "agent_id": "bench", "allowed_tools": ["bench-mcp/echo"]})
    agent_key = call(base, key, "CreateAgentKey", {"workspace_id": ws, "agent_id": "bench", "name": "k"})["token"]
    token = call(base, key, "CreateDeployment", {"workspace_id": ws, "name": "bench", "public_url": "http://127.0.0.1"})["token"]
    gw, gw_addr = start([f"{BIN}/portcullis-gateway", "--control-plane-url", base, "--listen", "127.0.0.1:0",
                         "--data-dir", f"{tmp}/gw"], f"{tmp}/gw.log", {"PORTCULLIS_TOKEN": token, "RUST_LOG": "warn,portcullis_gateway=info"})
    # The same gateway with audit off, to measure what audit costs.
    quiet, quiet_addr = start([f"{BIN}/portcullis-gateway", "--control-plane-url", base, "--listen", "127.0.0.1:0",
                               "--data-dir", f"{tmp}/gw-quiet"], f"{tmp}/gw-quiet.log",
                              {"PORTCULLIS_TOKEN": token, "PORTCULLIS_AUDIT": "false", "RUST_LOG": "warn,portcullis_gateway=info"})
    for addr in (gw_addr, quiet_addr):
        for _ in range(200):
            try:
                if urllib.request.urlopen(f"http://{addr}/ready").status == 200:
                    break
            except Exception:
                time.sleep(0.05)

    if os.environ.get("PORTCULLIS_BENCH_HOLD"):
        # Leave the set-up running for manual measurement.
        print(json.dumps({"gateway": gw_addr, "gateway_pid": gw.pid, "gateway_id": gid, "key": agent_key, "fake": fake_addr}), flush=True)
        time.sleep(float(os.environ["PORTCULLIS_BENCH_HOLD"]))
        return
    direct_url = f"http://{fake_addr}/v1/chat/completions"
    gw_url = f"http://{gw_addr}/gateways/{gid}/v1/chat/completions"
    results = {"machine": machine(), "duration": DURATION, "concurrency": CONCURRENCY, "rate": RATE}
    bench_agent = call(base, key, "GetAgent", {"workspace_id": ws, "agent_id": "bench"})["agent"]["agent_id"]
    scale_env = {"start": start, "call": call, "oha": oha, "tmp": tmp, "fake_addr": fake_addr, "bin": BIN,
                 "gw_url": gw_url, "agent_key": agent_key, "peak_rss_mib": peak_rss_mib}
    if os.environ.get("PORTCULLIS_BENCH_ONLY") == "scale":
        scale.measure(results, scale_env)
        print("\n".join(scale.rows(results)))
        return
    if os.environ.get("PORTCULLIS_BENCH_ONLY") == "webhooks":
        webhooks.measure(results, base, key, ws, token, bench_agent, OHA, fake_addr)
        print("\n".join(webhooks.rows(results)))
        return
    peruser_env = {"call": call, "base": base, "key": key, "ws": ws, "gid": gid, "fake_addr": fake_addr,
                   "gw_addr": gw_addr, "gw": gw, "secret": ACT_AS_SECRET, "hmac_header": hmac_header,
                   "cpu_seconds": cpu_seconds, "oha_mcp": oha_mcp}
    if os.environ.get("PORTCULLIS_BENCH_ONLY") == "peruser":
        peruser.measure(results, peruser_env)
        print("\n".join(peruser.rows(results)))
        return
    if os.environ.get("PORTCULLIS_BENCH_ONLY") == "baseline" and BASELINE:
        # Only the before/after rows, both gateways fresh: for a change off the hot path.
        wait_for_tool(base, key, ws, tool["connection_id"])
        baseline(results, base, token, tmp, agent_key, gid)
        print("\n".join(baseline_rows(results)))
        return
    if os.environ.get("PORTCULLIS_BENCH_ONLY") == "guards":
        # Only the output-guard rows, for a quick before/after of the guard stage.
        guarded(results, base, key, ws, gid, gw, gw_url, agent_key, tmp)
        print("\n".join(extra_rows(results, {"p50_ms": 0})))
        return
    results["direct_saturation"] = oha(direct_url, None, ["-c", str(CONCURRENCY)])
    before = cpu_seconds(gw.pid)
    perf = None
    if os.environ.get("PORTCULLIS_BENCH_PERF"):
        # A CPU profile of the gateway during the saturation run (perf report -i FILE).
        perf = subprocess.Popen(["perf", "record", "-e", "cpu-clock", "-F", "1999", "-g", "-p", str(gw.pid),
                                 "-o", os.environ["PORTCULLIS_BENCH_PERF"]], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results["gateway_saturation"] = oha(gw_url, agent_key, ["-c", str(CONCURRENCY)])
    spent = cpu_seconds(gw.pid) - before
    if perf:
        perf.send_signal(2)
        perf.wait()
    results["gateway_cpu_us_per_request"] = spent / max(results["gateway_saturation"]["requests"], 1) * 1e6
    results["direct_fixed_rate"] = oha(direct_url, None, ["-c", "16", "-q", str(RATE)])
    results["gateway_fixed_rate"] = oha(gw_url, agent_key, ["-c", "16", "-q", str(RATE)])
    wait_for_tool(base, key, ws, tool["connection_id"])
    results["direct_mcp_call"] = oha_mcp(f"http://{fake_addr}/mcp", None, "echo")
    results["gateway_mcp_call"] = oha_mcp(f"http://{gw_addr}/gateways/{gid}/mcp", agent_key, "bench-mcp/echo")
    results["direct_stream_ttfb"] = ttfb(direct_url, None)
    results["gateway_stream_ttfb"] = ttfb(gw_url, agent_key)
    results["gateway_peak_rss_mib"] = peak_rss_mib(gw.pid)
    # Audit on versus off: the fixed rate alternately (off, on, off, on; the median of each) to
    # even out drift, then saturation with CPU per request.
    quiet_url = f"http://{quiet_addr}/gateways/{gid}/v1/chat/completions"
    on, off = [results["gateway_fixed_rate"]], []
    for _ in range(2):
        off.append(oha(quiet_url, agent_key, ["-c", "16", "-q", str(RATE)]))
        on.append(oha(gw_url, agent_key, ["-c", "16", "-q", str(RATE)]))
    results["audit_on_fixed_rate_p50_ms"] = sorted(x["p50_ms"] for x in on)[1]
    results["audit_off_fixed_rate_p50_ms"] = sorted(x["p50_ms"] for x in off)[len(off) // 2]
    results["audit_direct_fixed_rate_p50_ms"] = results["direct_fixed_rate"]["p50_ms"]
    # The gateway's own share: audit on while the co-located control plane is paused (events
    # only spool; they ship after), so its ingest does not compete for the two cores.
    os.kill(cp.pid, signal.SIGSTOP)
    try:
        before = cpu_seconds(gw.pid)
        results["audit_on_cp_paused_saturation"] = oha(gw_url, agent_key, ["-c", str(CONCURRENCY)])
        results["audit_on_cp_paused_cpu_us_per_request"] = (cpu_seconds(gw.pid) - before) / max(results["audit_on_cp_paused_saturation"]["requests"], 1) * 1e6
    finally:
        os.kill(cp.pid, signal.SIGCONT)
    time.sleep(5)
    before = cpu_seconds(quiet.pid)
    results["audit_off_saturation"] = oha(quiet_url, agent_key, ["-c", str(CONCURRENCY)])
    results["audit_off_cpu_us_per_request"] = (cpu_seconds(quiet.pid) - before) / max(results["audit_off_saturation"]["requests"], 1) * 1e6
    # Quota enforcement: a second agent, "bench-q", under an agent quota per day and per month
    # (limits far above what the run spends), called through the same gateway as "bench" (no
    # quota applies), alternately to even out drift; then saturation with CPU per request.
    call(base, key, "RegisterAgent", {"workspace_id": ws, "name": "bench-q", "allowed_gateway_ids": [gid],
                                      "allowed_direct_model_names": ["bench"]})
    q_agent = call(base, key, "GetAgent", {"workspace_id": ws, "agent_id": "bench-q"})["agent"]["agent_id"]
    q_key = call(base, key, "CreateAgentKey", {"workspace_id": ws, "agent_id": "bench-q", "name": "k"})["token"]
    for window in ("daily", "monthly"):
        call(base, key, "CreateLLMQuota", {"workspace_id": ws, "subject_type": "agent", "subject_id": q_agent,
                                           "limit_micros": 10**12, "window": window})
    # Several replicas share counters in Redis: a third gateway with the spend store.
    redis_url = os.environ.get("PORTCULLIS_BENCH_REDIS", "redis://127.0.0.1:6379")
    shared, shared_addr = start([f"{BIN}/portcullis-gateway", "--control-plane-url", base, "--listen", "127.0.0.1:0",
                                 "--data-dir", f"{tmp}/gw-shared", "--spend-store", redis_url], f"{tmp}/gw-shared.log",
                                {"PORTCULLIS_TOKEN": token, "RUST_LOG": "warn,portcullis_gateway=info"})
    time.sleep(2)
    shared_url = f"http://{shared_addr}/gateways/{gid}/v1/chat/completions"
    free, metered, redis_runs = [], [], []
    for _ in range(3):
        free.append(oha(gw_url, agent_key, ["-c", "16", "-q", str(RATE)]))
        metered.append(oha(gw_url, q_key, ["-c", "16", "-q", str(RATE)]))
        redis_runs.append(oha(shared_url, q_key, ["-c", "16", "-q", str(RATE)]))
    results["quota_off_fixed_rate_p50_ms"] = sorted(x["p50_ms"] for x in free)[1]
    results["quota_fixed_rate_p50_ms"] = sorted(x["p50_ms"] for x in metered)[1]
    results["quota_redis_fixed_rate_p50_ms"] = sorted(x["p50_ms"] for x in redis_runs)[1]
    results["quota_fixed_rate_non_2xx"] = sum(x["requests"] - x["ok"] for x in metered + redis_runs)
    for name, url, pid in (("quota", gw_url, gw.pid), ("quota_redis", shared_url, shared.pid)):
        before = cpu_seconds(pid)
        results[f"{name}_saturation"] = oha(url, q_key, ["-c", str(CONCURRENCY)])
        results[f"{name}_cpu_us_per_request"] = (cpu_seconds(pid) - before) / max(results[f"{name}_saturation"]["requests"], 1) * 1e6
    results["quota_saturation_non_2xx"] = sum(results[n]["requests"] - results[n]["ok"] for n in ("quota_saturation", "quota_redis_saturation"))
    translation(results, base, key, ws, gid, fake_addr, gw, gw_url, agent_key)
    exchanged(results, base, gw, gw_url, agent_key)
    acting(results, base, key, ws, gid, gw, gw_url, agent_key)
    peruser.measure(results, peruser_env)
    guarded(results, base, key, ws, gid, gw, gw_url, agent_key, tmp)
    webhooks.measure(results, base, key, ws, token, bench_agent, OHA, fake_addr)
    if BASELINE:
        baseline(results, base, token, tmp, agent_key, gid)
    os.makedirs(os.path.join(os.path.dirname(__file__), "results"), exist_ok=True)
    with open(os.path.join(os.path.dirname(__file__), "results", "latest.json"), "w") as f:
        json.dump(results, f, indent=2)
    print(table(results))


def saturation_cpu(results, name, url, key, pid, body=BODY, headers=(), concurrency=CONCURRENCY):
    before = cpu_seconds(pid)
    extra = ["-c", str(concurrency)] + [arg for h in headers for arg in ("-H", h)]
    results[f"{name}_saturation"] = run = oha(url, key, extra, body)
    results[f"{name}_cpu_us_per_request"] = (cpu_seconds(pid) - before) / max(run["requests"], 1) * 1e6


# Models on other dialects, each on the same fake: (name, provider, provider_config, secrets).
# Bedrock with stored keys signs every request with SigV4; the fake accepts any signature.
TRANSLATED = [
    ("bench-claude", "anthropic", {"model": "claude-sonnet-4-5"}, {"x-api-key": "sk-ant-bench-upstream"}),
    ("bench-gemini", "google", {"model": "gemini-2.5-flash"}, {"x-goog-api-key": "bench-google-key"}),
    ("bench-bedrock", "bedrock", {"model": "us.anthropic.claude-sonnet-4-5-20250929-v1:0", "region": "us-east-1"},
     {"aws_access_key_id": "AKIABENCH", "aws_secret_access_key": "bench-secret"}),
]


def body_for(model):
    return json.dumps({"model": model, "messages": [{"role": "user", "content": "Say hello."}]})


def translation(results, base, key, ws, gid, fake_addr, gw, gw_url, agent_key):
    """The same gateway and agent, models whose upstreams speak Anthropic's Messages API,
    Gemini's generateContent and Bedrock's Converse (SigV4-signed): OpenAI's shape in, theirs out
    and back. Alternated with the pass-through model at a fixed rate, then saturation with CPU
    per request for each."""
    for name, provider, config, secrets in TRANSLATED:
        m = call(base, key, "CreateLLMModelConnection", {
            "workspace_id": ws, "name": name, "provider": provider,
            "provider_config": {**config, "base_url": f"http://{fake_addr}"}, "secret_values": secrets})
        call(base, key, "AddGatewayModel", {"workspace_id": ws, "gateway_id": gid, "connection_id": m["connection_id"]})
    call(base, key, "UpdateAgent", {"workspace_id": ws, "agent_id": "bench",
                                    "allowed_direct_model_names": ["bench"] + [t[0] for t in TRANSLATED]})
    time.sleep(2)
    runs = {"passthrough": []} | {t[0]: [] for t in TRANSLATED}
    for _ in range(3):
        runs["passthrough"].append(oha(gw_url, agent_key, ["-c", "16", "-q", str(RATE)]))
        for name, *_ in TRANSLATED:
            runs[name].append(oha(gw_url, agent_key, ["-c", "16", "-q", str(RATE)], body_for(name)))
    for name, r in runs.items():
        label = "translated" if name == "bench-claude" else name.replace("bench-", "")
        results[f"{label}_fixed_rate_p50_ms"] = sorted(x["p50_ms"] for x in r)[1]
        results[f"{label}_non_2xx"] = sum(x["requests"] - x["ok"] for x in r)
    saturation_cpu(results, "passthrough", gw_url, agent_key, gw.pid)
    for name, *_ in TRANSLATED:
        label = "translated" if name == "bench-claude" else name.replace("bench-", "")
        saturation_cpu(results, label, gw_url, agent_key, gw.pid, body_for(name))
        run = results[f"{label}_saturation"]
        results[f"{label}_non_2xx"] += run["requests"] - run["ok"]


def exchanged(results, base, gw, gw_url, agent_key):
    """The same agent with a token from ExchangeAgentKey instead of its key, alternately at a
    fixed rate, then saturation with CPU per request."""
    token = call(base, agent_key, "ExchangeAgentKey", {})["access_token"]
    time.sleep(2)
    keyed, tokened = [], []
    for _ in range(3):
        keyed.append(oha(gw_url, agent_key, ["-c", "16", "-q", str(RATE)]))
        tokened.append(oha(gw_url, token, ["-c", "16", "-q", str(RATE)]))
    results["key_fixed_rate_p50_ms"] = sorted(x["p50_ms"] for x in keyed)[1]
    results["token_fixed_rate_p50_ms"] = sorted(x["p50_ms"] for x in tokened)[1]
    saturation_cpu(results, "key", gw_url, agent_key, gw.pid)
    saturation_cpu(results, "token", gw_url, token, gw.pid)
    results["token_non_2xx"] = sum(x["requests"] - x["ok"] for x in tokened + [results["token_saturation"]])


ACT_AS_SECRET = "bench-act-as-secret-0123456789"


def hmac_header(sub):
    """An `hmac` act-as header for `sub`, signed now (docs/api.md)."""
    claims = {"sub": sub, "email": f"{sub}@example.com", "groups": ["eng"], "ts": int(time.time())}
    canonical = lambda c: json.dumps(c, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    sig = base64.b64encode(hmac.new(ACT_AS_SECRET.encode(), canonical(claims), hashlib.sha256).digest())
    return base64.b64encode(canonical({**claims, "sig": sig.decode()})).decode()


def acting(results, base, key, ws, gid, gw, gw_url, agent_key):
    """An agent acting for a person (an `hmac` identity checked on every call, and an allow
    list that admits the person) against the same agent calling for no one."""
    call(base, key, "RegisterAgent", {"workspace_id": ws, "name": "bench-actas", "allowed_gateway_ids": [gid],
                                      "allowed_direct_model_names": ["bench"], "actas_method": "hmac",
                                      "actas_hmac_secret": ACT_AS_SECRET, "actas_allowed_groups": ["eng"]})
    actas_key = call(base, key, "CreateAgentKey", {"workspace_id": ws, "agent_id": "bench-actas", "name": "k"})["token"]
    time.sleep(2)
    saturation_cpu(results, "no_actas", gw_url, agent_key, gw.pid)
    saturation_cpu(results, "actas", gw_url, actas_key, gw.pid, headers=[f"x-svc-act-as: {hmac_header('u1')}"])
    results["actas_non_2xx"] = results["actas_saturation"]["requests"] - results["actas_saturation"]["ok"]


LONG_REPLY_BYTES = 4096
# Ten guards of every text kind, none of which the fake's prose (near misses only) trips.
GUARDS = [
    ("tickets", "regex", "block", {"patterns": [r"TICKET-\d{6}"]}),
    ("projects", "regex", "redact", {"patterns": [r"\bPROJ-[A-Z]{3}-\d{4}\b"]}),
    ("marking", "regex", "block", {"patterns": [r"(?i)internal use only"]}),
    ("hosts", "regex", "redact", {"patterns": [r"\b[a-z0-9-]{1,63}\.corp\.example\.com\b"]}),
    ("codenames", "keywords", "block", {"keywords": ["Project Falcon", "Operation Nightjar", "Bluebird"]}),
    ("people", "keywords", "redact", {"keywords": [f"Employee{i:03}" for i in range(20)]}),
    ("classified", "keywords", "block", {"keywords": ["TOP SECRET"], "case_sensitive": True}),
    ("personal", "pii", "redact", {}),
    ("payments", "pii", "block", {"types": ["card_number", "iban"]}),
    ("credentials", "secrets", "block", {}),
]


def guarded(results, base, key, ws, gid, gw, gw_url, agent_key, tmp):
    """The same 4 KiB answer from a second fake, through a model with ten output guards in
    scope and one with none, alternately at saturation: the CPU the guards add per KiB."""
    _, long_addr = start([f"{BIN}/fake-llm", "--listen", "127.0.0.1:0", "--reply-bytes", str(LONG_REPLY_BYTES)],
                         f"{tmp}/fake-long.log")
    names = ["bench-long", "bench-guarded"]
    for name in names:
        m = call(base, key, "CreateLLMModelConnection", {
            "workspace_id": ws, "name": name, "provider": "openai_compatible",
            "provider_config": {"model": "gpt-4o-mini", "base_url": f"http://{long_addr}/v1"},
            "secret_values": {"Authorization": "Bearer sk-bench-upstream"}})
        call(base, key, "AddGatewayModel", {"workspace_id": ws, "gateway_id": gid, "connection_id": m["connection_id"]})
    call(base, key, "UpdateAgent", {"workspace_id": ws, "agent_id": "bench",
                                    "allowed_direct_model_names": ["bench"] + [t[0] for t in TRANSLATED] + names})
    for name, kind, action, config in GUARDS:
        call(base, key, "CreateGuard", {"workspace_id": ws, "name": name, "stage": "llm_output", "kind": kind,
                                        "action": action, "config": config, "scope": {"models": ["bench-guarded"]}})
    time.sleep(2)
    runs = {"unguarded": [], "guarded": []}
    for _ in range(2):
        for label, name in (("unguarded", "bench-long"), ("guarded", "bench-guarded")):
            saturation_cpu(results, label, gw_url, agent_key, gw.pid, body_for(name))
            runs[label].append((results[f"{label}_cpu_us_per_request"], results[f"{label}_saturation"]))
    for label, r in runs.items():
        r.sort(key=lambda x: x[0])
        results[f"{label}_cpu_us_per_request"], results[f"{label}_saturation"] = r[0]
        results[f"{label}_non_2xx"] = sum(x[1]["requests"] - x[1]["ok"] for x in r)
    added = results["guarded_cpu_us_per_request"] - results["unguarded_cpu_us_per_request"]
    results["guards_cpu_us_per_kib"] = added / (LONG_REPLY_BYTES / 1024)


def wait_for_tool(base, key, ws, connection_id):
    """Tool calls: waits until the gateway discovered the tool and has it in its snapshot."""
    for _ in range(200):
        listed = call(base, key, "ListConnectionTools", {"workspace_id": ws, "connection_id": connection_id})["tools"]
        if listed:
            break
        time.sleep(0.05)
    time.sleep(0.5)


def baseline(results, base, token, tmp, agent_key, gid):
    """An earlier build of the gateway (PORTCULLIS_BENCH_BASELINE/portcullis-gateway), for the
    same deployment, alternated with this one (the order flipping each round): fixed rate four
    times each, then saturation four times each."""
    # Both started now: the bench's long-running gateway measured about 4 µs per request more
    # than a fresh one of the same build (an A/A run), which would bias the comparison.
    started = {}
    for name, bin_dir in (("baseline", BASELINE), ("current", BIN)):
        started[name] = start([f"{bin_dir}/portcullis-gateway", "--control-plane-url", base, "--listen",
                               "127.0.0.1:0", "--data-dir", f"{tmp}/gw-{name}"], f"{tmp}/gw-{name}.log",
                              {"PORTCULLIS_TOKEN": token, "RUST_LOG": "warn,portcullis_gateway=info"})
    time.sleep(2)
    (old, old_addr), (gw, gw_addr) = started["baseline"], started["current"]
    old_url = f"http://{old_addr}/gateways/{gid}/v1/chat/completions"
    gw_url = f"http://{gw_addr}/gateways/{gid}/v1/chat/completions"
    before, after = [], []
    for round_ in range(4):
        fixed = [(before, old_url), (after, gw_url)]
        for runs_of, url in (fixed if round_ % 2 == 0 else fixed[::-1]):
            runs_of.append(oha(url, agent_key, ["-c", "16", "-q", str(RATE)]))
    median = lambda runs: statistics.median(x["p50_ms"] for x in runs)
    results["baseline_fixed_rate_p50_ms"] = median(before)
    results["current_fixed_rate_p50_ms"] = median(after)
    # Saturation alternately four times; the median of each (one run is too noisy on a VM).
    runs = {"baseline": [], "current": []}
    # The order flips every round: a run competes with the control plane still storing the
    # audit events of the run before it, so the second of a fixed pair would always lose.
    pair = [("baseline", old_url, old.pid), ("current", gw_url, gw.pid)]
    for round_ in range(4):
        for name, url, pid in (pair if round_ % 2 == 0 else pair[::-1]):
            saturation_cpu(results, name, url, agent_key, pid)
            runs[name].append((results[f"{name}_cpu_us_per_request"], results[f"{name}_saturation"]))
    for name, r in runs.items():
        results[f"{name}_cpu_us_per_request_runs"] = [x[0] for x in r]
        r.sort(key=lambda x: x[0])
        results[f"{name}_cpu_us_per_request"], results[f"{name}_saturation"] = r[len(r) // 2]
    large_prompts(results, pair, agent_key, tmp)
    mcp_calls(results, [("baseline", old_addr, old.pid), ("current", gw_addr, gw.pid)], agent_key, gid)
    results["baseline_dir"] = BASELINE
    old.terminate()
    gw.terminate()


def mcp_calls(results, pair, agent_key, gid):
    """MCP tools/call to the bench tool, c=16, alternately four times each: the median p50,
    requests/s and gateway CPU per request of each."""
    runs = {"baseline": [], "current": []}
    for round_ in range(4):
        for name, addr, pid in (pair if round_ % 2 == 0 else pair[::-1]):
            before = cpu_seconds(pid)
            r = oha_mcp(f"http://{addr}/gateways/{gid}/mcp", agent_key, "bench-mcp/echo")
            r["cpu_us"] = (cpu_seconds(pid) - before) / max(r["requests"], 1) * 1e6
            runs[name].append(r)
    for name, r in runs.items():
        r.sort(key=lambda x: x["cpu_us"])
        results[f"{name}_mcp"] = dict(r[len(r) // 2], p50_ms=statistics.median(x["p50_ms"] for x in r))


def large_prompts(results, pair, agent_key, tmp):
    """A 1 MiB prompt passed through, four at a time, alternately twice each: requests/s, CPU
    per request and each gateway's peak RSS after (both started together, so the peaks
    compare)."""
    path = os.path.join(tmp, "large.json")
    with open(path, "w") as f:
        json.dump({"model": "bench", "messages": [{"role": "user", "content": "x" * (1 << 20)}]}, f)
    runs = {"baseline": [], "current": []}
    for round_ in range(2):
        for name, url, pid in (pair if round_ % 2 == 0 else pair[::-1]):
            saturation_cpu(results, f"{name}_large", url, agent_key, pid, f"@{path}", concurrency=4)
            runs[name].append((results[f"{name}_large_cpu_us_per_request"], results[f"{name}_large_saturation"]))
    for name, url, pid in pair:
        r = sorted(runs[name], key=lambda x: x[0])
        results[f"{name}_large_cpu_us_per_request"], results[f"{name}_large_saturation"] = r[0]
        results[f"{name}_large_peak_rss_mib"] = peak_rss_mib(pid)


def extra_rows(r, df):
    rows = []
    if "translated_saturation" in r:
        rows += [
            f"| translated OpenAI → Anthropic vs passed through: {r['rate']} requests/s, added p50 ms (median of 3 alternating runs) | | {r['passthrough_fixed_rate_p50_ms'] - df['p50_ms']:.3f} → {r['translated_fixed_rate_p50_ms'] - df['p50_ms']:.3f} | {(r['translated_fixed_rate_p50_ms'] - r['passthrough_fixed_rate_p50_ms']) * 1000:+.0f} µs |",
            f"| translated vs passed through: saturation requests/s, gateway CPU per request | | {r['passthrough_saturation']['rps']:.0f}, {r['passthrough_cpu_us_per_request']:.0f} µs / {r['translated_saturation']['rps']:.0f}, {r['translated_cpu_us_per_request']:.0f} µs | {r['translated_cpu_us_per_request'] - r['passthrough_cpu_us_per_request']:+.0f} µs |",
            f"| translated non-2xx replies | | {r['translated_non_2xx']} | |",
        ]
    for label, shape in [("gemini", "Gemini generateContent"), ("bedrock", "Bedrock Converse, SigV4-signed")]:
        if f"{label}_saturation" not in r:
            continue
        rows += [
            f"| OpenAI → {shape} vs passed through: {r['rate']} requests/s, added p50 ms | | {r['passthrough_fixed_rate_p50_ms'] - df['p50_ms']:.3f} → {r[label + '_fixed_rate_p50_ms'] - df['p50_ms']:.3f} | {(r[label + '_fixed_rate_p50_ms'] - r['passthrough_fixed_rate_p50_ms']) * 1000:+.0f} µs |",
            f"| OpenAI → {shape}: saturation requests/s, gateway CPU per request, non-2xx | | {r[label + '_saturation']['rps']:.0f}, {r[label + '_cpu_us_per_request']:.0f} µs, {r[label + '_non_2xx']} | {r[label + '_cpu_us_per_request'] - r['passthrough_cpu_us_per_request']:+.0f} µs |",
        ]
    if "token_saturation" in r:
        rows += [
            f"| exchanged token vs agent key: {r['rate']} requests/s, added p50 ms (median of 3 alternating runs) | | {r['key_fixed_rate_p50_ms'] - df['p50_ms']:.3f} → {r['token_fixed_rate_p50_ms'] - df['p50_ms']:.3f} | {(r['token_fixed_rate_p50_ms'] - r['key_fixed_rate_p50_ms']) * 1000:+.0f} µs |",
            f"| exchanged token vs agent key: saturation requests/s, gateway CPU per request, token non-2xx | | {r['key_saturation']['rps']:.0f}, {r['key_cpu_us_per_request']:.0f} µs / {r['token_saturation']['rps']:.0f}, {r['token_cpu_us_per_request']:.0f} µs, {r['token_non_2xx']} | {r['token_cpu_us_per_request'] - r['key_cpu_us_per_request']:+.0f} µs |",
        ]
    if "actas_saturation" in r:
        rows += [
            f"| act-as (hmac identity, allow list) vs none: saturation requests/s, gateway CPU per request, act-as non-2xx | | {r['no_actas_saturation']['rps']:.0f}, {r['no_actas_cpu_us_per_request']:.0f} µs / {r['actas_saturation']['rps']:.0f}, {r['actas_cpu_us_per_request']:.0f} µs, {r['actas_non_2xx']} | {r['actas_cpu_us_per_request'] - r['no_actas_cpu_us_per_request']:+.0f} µs |",
        ]
    if "guarded_saturation" in r:
        rows += [
            f"| ten output guards (regex, keywords, pii, secrets) vs none, a {LONG_REPLY_BYTES // 1024} KiB answer: saturation requests/s, gateway CPU per request (lower of 2 alternating runs), non-2xx | | {r['unguarded_saturation']['rps']:.0f}, {r['unguarded_cpu_us_per_request']:.0f} µs / {r['guarded_saturation']['rps']:.0f}, {r['guarded_cpu_us_per_request']:.0f} µs, {r['unguarded_non_2xx'] + r['guarded_non_2xx']} | {r['guards_cpu_us_per_kib']:+.1f} µs per KiB |",
        ]
    return rows + baseline_rows(r, df["p50_ms"])


def baseline_rows(r, direct_p50_ms=0.0):
    """Before/after rows; p50 is what the gateway adds when the direct p50 is given, else whole."""
    if "baseline_saturation" not in r:
        return []
    runs = lambda name: ", ".join(f"{x:.0f}" for x in r.get(f"{name}_cpu_us_per_request_runs", []))
    return [
        f"| before → after ({os.path.basename(r['baseline_dir'].rstrip('/'))} → this build): {r['rate']} requests/s, {'added ' if direct_p50_ms else ''}p50 ms (median of 4 alternating runs) | | {r['baseline_fixed_rate_p50_ms'] - direct_p50_ms:.3f} → {r['current_fixed_rate_p50_ms'] - direct_p50_ms:.3f} | {(r['current_fixed_rate_p50_ms'] - r['baseline_fixed_rate_p50_ms']) * 1000:+.0f} µs |",
        f"| before → after: saturation requests/s, gateway CPU per request (median of 4 alternating runs; runs in µs: {runs('baseline')} → {runs('current')}) | | {r['baseline_saturation']['rps']:.0f}, {r['baseline_cpu_us_per_request']:.0f} µs → {r['current_saturation']['rps']:.0f}, {r['current_cpu_us_per_request']:.0f} µs | {r['current_cpu_us_per_request'] - r['baseline_cpu_us_per_request']:+.0f} µs |",
        *([f"| before → after: MCP tools/call, c=16: p50 ms, requests/s, gateway CPU per request (median of 4 alternating runs) | | {r['baseline_mcp']['p50_ms']:.3f}, {r['baseline_mcp']['rps']:.0f}, {r['baseline_mcp']['cpu_us']:.0f} µs → {r['current_mcp']['p50_ms']:.3f}, {r['current_mcp']['rps']:.0f}, {r['current_mcp']['cpu_us']:.0f} µs | {r['current_mcp']['cpu_us'] - r['baseline_mcp']['cpu_us']:+.0f} µs |"] if "current_mcp" in r else []),
        f"| before → after: 1 MiB prompts passed through, c=4: requests/s, gateway CPU per request (lower of 2 alternating runs), peak RSS | | {r['baseline_large_saturation']['rps']:.0f}, {r['baseline_large_cpu_us_per_request']:.0f} µs, {r['baseline_large_peak_rss_mib']:.0f} MiB → {r['current_large_saturation']['rps']:.0f}, {r['current_large_cpu_us_per_request']:.0f} µs, {r['current_large_peak_rss_mib']:.0f} MiB | {r['current_large_cpu_us_per_request'] - r['baseline_large_cpu_us_per_request']:+.0f} µs |",
    ]


def machine():
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    mem = next((int(l.split()[1]) // 1024 // 1024 for l in open("/proc/meminfo") if l.startswith("MemTotal")), 0)
    return f"{os.cpu_count()} cores ({cpu}), {mem} GiB"


def audit_rise(r):
    off = r["audit_off_fixed_rate_p50_ms"] - r["audit_direct_fixed_rate_p50_ms"]
    on = r["audit_on_fixed_rate_p50_ms"] - r["audit_direct_fixed_rate_p50_ms"]
    return f"{(on / off - 1) * 100:+.0f} % added latency" if off > 0 else "n/a"


def table(r):
    ds, gs, df, gf = r["direct_saturation"], r["gateway_saturation"], r["direct_fixed_rate"], r["gateway_fixed_rate"]
    dt, gt = r["direct_stream_ttfb"], r["gateway_stream_ttfb"]
    dm, gm = r["direct_mcp_call"], r["gateway_mcp_call"]
    rows = [
        "| measurement | direct | through gateway | gateway adds |",
        "|---|---|---|---|",
        f"| saturation, c={r['concurrency']}: requests/s | {ds['rps']:.0f} | {gs['rps']:.0f} | {gs['rps'] / ds['rps'] * 100:.0f} % of direct |",
        f"| saturation: p50 / p99 ms | {ds['p50_ms']:.3f} / {ds['p99_ms']:.3f} | {gs['p50_ms']:.3f} / {gs['p99_ms']:.3f} | {gs['p50_ms'] - ds['p50_ms']:.3f} / {gs['p99_ms'] - ds['p99_ms']:.3f} |",
        f"| {r['rate']} requests/s: p50 ms | {df['p50_ms']:.3f} | {gf['p50_ms']:.3f} | {gf['p50_ms'] - df['p50_ms']:.3f} |",
        f"| {r['rate']} requests/s: p99 ms | {df['p99_ms']:.3f} | {gf['p99_ms']:.3f} | {gf['p99_ms'] - df['p99_ms']:.3f} |",
        f"| streaming time to first byte: p50 / p99 ms | {dt['p50_ms']:.3f} / {dt['p99_ms']:.3f} | {gt['p50_ms']:.3f} / {gt['p99_ms']:.3f} | {gt['p50_ms'] - dt['p50_ms']:.3f} / {gt['p99_ms'] - dt['p99_ms']:.3f} |",
        f"| MCP tools/call, c=16: p50 / p99 ms | {dm['p50_ms']:.3f} / {dm['p99_ms']:.3f} | {gm['p50_ms']:.3f} / {gm['p99_ms']:.3f} | {gm['p50_ms'] - dm['p50_ms']:.3f} / {gm['p99_ms'] - dm['p99_ms']:.3f} |",
        f"| MCP tools/call, c=16: requests/s | {dm['rps']:.0f} | {gm['rps']:.0f} | {gm['rps'] / dm['rps'] * 100:.0f} % of direct |",
        f"| gateway CPU per request (saturation) | | {r['gateway_cpu_us_per_request']:.0f} µs | |",
        f"| gateway peak RSS | | {r['gateway_peak_rss_mib']:.1f} MiB | |",
        f"| audit off → on: {r['rate']} requests/s, added p50 ms (median of runs) | | {r['audit_off_fixed_rate_p50_ms'] - r['audit_direct_fixed_rate_p50_ms']:.3f} → {r['audit_on_fixed_rate_p50_ms'] - r['audit_direct_fixed_rate_p50_ms']:.3f} | {audit_rise(r)} |",
        f"| audit off → on: saturation requests/s | | {r['audit_off_saturation']['rps']:.0f} → {gs['rps']:.0f} | {(gs['rps'] / r['audit_off_saturation']['rps'] - 1) * 100:+.0f} % |",
        f"| audit off → on: CPU per request | | {r['audit_off_cpu_us_per_request']:.0f} → {r['gateway_cpu_us_per_request']:.0f} µs | |",
        f"| audit on, control plane paused (no ingest on this box): saturation requests/s, CPU per request | | {r['audit_on_cp_paused_saturation']['rps']:.0f}, {r['audit_on_cp_paused_cpu_us_per_request']:.0f} µs | {(r['audit_on_cp_paused_saturation']['rps'] / r['audit_off_saturation']['rps'] - 1) * 100:+.0f} % vs audit off |",
        f"| quotas off → on (an agent quota per day and per month): {r['rate']} requests/s, added p50 ms (median of 3 alternating runs) | | {r['quota_off_fixed_rate_p50_ms'] - df['p50_ms']:.3f} → {r['quota_fixed_rate_p50_ms'] - df['p50_ms']:.3f} | {(r['quota_fixed_rate_p50_ms'] - r['quota_off_fixed_rate_p50_ms']) * 1000:+.0f} µs |",
        f"| quotas on, shared counters in Redis: {r['rate']} requests/s, added p50 ms | | {r['quota_redis_fixed_rate_p50_ms'] - df['p50_ms']:.3f} | {(r['quota_redis_fixed_rate_p50_ms'] - r['quota_off_fixed_rate_p50_ms']) * 1000:+.0f} µs vs no quota |",
        f"| quotas on: saturation requests/s, gateway CPU per request (in memory / Redis) | | {r['quota_saturation']['rps']:.0f}, {r['quota_cpu_us_per_request']:.0f} µs / {r['quota_redis_saturation']['rps']:.0f}, {r['quota_redis_cpu_us_per_request']:.0f} µs | {r['quota_cpu_us_per_request'] - r['gateway_cpu_us_per_request']:+.0f} / {r['quota_redis_cpu_us_per_request'] - r['gateway_cpu_us_per_request']:+.0f} µs vs no quota |",
        f"| quota-bound non-2xx replies (fixed rate / saturation) | | {r['quota_fixed_rate_non_2xx']} / {r['quota_saturation_non_2xx']} | |",
        f"| non-2xx replies (saturation / fixed rate / MCP) | {ds['requests'] - ds['ok']} / {df['requests'] - df['ok']} / {dm['requests'] - dm['ok']} | {gs['requests'] - gs['ok']} / {gf['requests'] - gf['ok']} / {gm['requests'] - gm['ok']} | |",
        *extra_rows(r, df),
        *peruser.rows(r),
        *webhooks.rows(r),
        *scale.rows(r),
    ]
    return "\n".join(rows) + f"\n\nMachine: {r['machine']}; {r['duration']} per run.\n"


if __name__ == "__main__":
    try:
        main()
    finally:
        for p in PROCS:
            p.terminate()
