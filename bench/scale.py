"""A gateway's snapshot at scale, for bench/run.py (`PORTCULLIS_BENCH_ONLY=scale`).

A second control plane gets 10,000 agents (each with a key), 1,000 model connections and
1,000 tool connections, all attached to its default gateway; then a gateway starts on it.
Reported: the snapshot's size, the gateway's parse, compile and swap times for the first
snapshot and for one change after it (one more agent), its RSS once tool discovery has
settled, and the added p50 of a call at a fixed rate through it against the small bench
gateway, alternately. With PORTCULLIS_BENCH_BASELINE, an earlier build's gateway is then
measured the same way on the same control plane, the two builds alternating.
"""
import concurrent.futures
import os
import re
import subprocess
import time
import urllib.request

AGENTS = 10000
MODELS = 1000
TOOLS = 1000


def parallel(fn, items, workers=4):
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        return list(pool.map(fn, items))


def rss_mib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def applied(log_path, after=0):
    """The `Snapshot applied.` and `Snapshot received.` lines' figures, from line `after` on."""
    lines = open(log_path).read().splitlines()[after:]
    out = []
    received = {}
    for line in lines:
        if "Snapshot received." in line:
            rev = re.search(r"revision=(\d+)", line).group(1)
            received[rev] = {"bytes": int(re.search(r"bytes=(\d+)", line).group(1)),
                             "parse_ms": float(re.search(r"parse_ms=([0-9.]+)", line).group(1))}
        if "Snapshot applied." in line:
            rev = re.search(r"revision=(\d+)", line).group(1)
            out.append({"revision": int(rev), **received.get(rev, {}),
                        "agents": int(re.search(r"agents=(\d+)", line).group(1)),
                        "compile_ms": float(re.search(r"compile_ms=([0-9.]+)", line).group(1)),
                        "swap_ms": float(re.search(r"swap_ms=([0-9.]+)", line).group(1))})
    return out


def measure(results, env):
    start, call, oha = env["start"], env["call"], env["oha"]
    tmp, fake, bin_dir = env["tmp"], env["fake_addr"], env["bin"]
    cp, cp_addr = start([f"{bin_dir}/portcullis-controlplane", "--listen", "127.0.0.1:0", "--data-dir",
                         f"{tmp}/scale-cp"], f"{tmp}/scale-cp.log", {"RUST_LOG": "warn,portcullis_controlplane=info"})
    base = f"http://{cp_addr}"
    key = open(f"{tmp}/scale-cp/admin.key").read().strip()
    ws = call(base, key, "GetIdentity", {})["identity"]["workspace_id"]
    gid = call(base, key, "ListGateways", {"workspace_id": ws})["gateways"][0]["gateway_id"]
    started = time.monotonic()

    def model(i):
        m = call(base, key, "CreateLLMModelConnection", {
            "workspace_id": ws, "name": f"m{i}", "provider": "openai_compatible",
            "provider_config": {"model": "gpt-4o-mini", "base_url": f"http://{fake}/v1"},
            "secret_values": {"Authorization": "Bearer sk-bench-upstream"}})
        call(base, key, "AddGatewayModel", {"workspace_id": ws, "gateway_id": gid, "connection_id": m["connection_id"]})

    def tool(i):
        t = call(base, key, "CreateMCPServerConnection", {
            "workspace_id": ws, "name": f"t{i}", "protocol": "streamable-http", "auth_method": "none",
            "protocol_config": {"url": f"http://{fake}/mcp"}})
        call(base, key, "AddGatewayToolSource", {"workspace_id": ws, "gateway_id": gid, "connection_id": t["connection_id"]})

    def agent(i):
        call(base, key, "RegisterAgent", {"workspace_id": ws, "name": f"a{i}", "allowed_gateway_ids": [gid],
                                          "allowed_direct_model_names": ["m0"]})
        return call(base, key, "CreateAgentKey", {"workspace_id": ws, "agent_id": f"a{i}", "name": "k"})["token"]

    parallel(model, range(MODELS))
    parallel(tool, range(TOOLS))
    keys = parallel(agent, range(AGENTS))
    results["scale_setup_seconds"] = time.monotonic() - started
    token = call(base, key, "CreateDeployment", {"workspace_id": ws, "name": "scale",
                                                 "public_url": "http://127.0.0.1"})["token"]
    ctx = {"env": env, "base": base, "key": key, "ws": ws, "gid": gid, "token": token,
           "probe_key": keys[AGENTS // 2]}
    # The first gateway discovers the 1,000 tool connections' catalogs (a burst of snapshot
    # revisions); later ones start with them known. With a baseline, the two builds then
    # alternate on the same control plane, one gateway at a time.
    baseline = os.environ.get("PORTCULLIS_BENCH_BASELINE")
    order = [("this build", bin_dir)] + ([("baseline", baseline), ("this build", bin_dir),
                                          ("baseline", baseline)] if baseline else [])
    results["scale_runs"] = []
    for i, (label, directory) in enumerate(order):
        perf = os.environ.get("PORTCULLIS_BENCH_PERF") if i == 0 else None
        run = gateway(ctx, directory, f"scale-{i}", perf)
        run["label"] = f"{label}, {'discovering catalogs' if i == 0 else 'catalogs known'}"
        results["scale_runs"].append(run)
    results["scale_baseline_dir"] = baseline
    cp.terminate()


def gateway(ctx, bin_dir, name, perf_file):
    """Starts a gateway from bin_dir on the scale workspace and measures it; stops it after."""
    env, base, key, ws, gid = ctx["env"], ctx["base"], ctx["key"], ctx["ws"], ctx["gid"]
    start, call, oha, tmp = env["start"], env["call"], env["oha"], env["tmp"]
    log = f"{tmp}/{name}-gw.log"
    gw, gw_addr = start([f"{bin_dir}/portcullis-gateway", "--control-plane-url", base, "--listen", "127.0.0.1:0",
                         "--data-dir", f"{tmp}/{name}-gw"], log,
                        {"PORTCULLIS_TOKEN": ctx["token"], "RUST_LOG": "warn,portcullis_gateway=info"})
    for _ in range(600):
        try:
            if urllib.request.urlopen(f"http://{gw_addr}/ready").status == 200:
                break
        except Exception:
            time.sleep(0.1)
    time.sleep(20)  # tool discovery of the 1,000 connections settles
    out = {}
    first = applied(log)
    out["first_snapshot"] = first[0] if first else {}
    out["rss_mib"] = rss_mib(gw.pid)
    # The high-water mark so far: the first snapshot and, for the first gateway, discovery.
    out["peak_at_start_mib"] = env["peak_rss_mib"](gw.pid)
    agents = first[-1]["agents"] if first else AGENTS
    seen = len(open(log).read().splitlines())
    perf = None
    if perf_file:
        # A CPU profile of the gateway while it compiles the update (perf report -i FILE).
        perf = subprocess.Popen(["perf", "record", "-F", "999", "-g", "-p", str(gw.pid), "-o",
                                 perf_file], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
    call(base, key, "RegisterAgent", {"workspace_id": ws, "name": f"late-{name}", "allowed_gateway_ids": [gid]})
    for _ in range(300):
        later = [a for a in applied(log, seen) if a["agents"] == agents + 1]
        if later:
            out["update"] = later[0]
            break
        time.sleep(0.1)
    if perf:
        perf.send_signal(2)
        perf.wait()
    out["peak_rss_mib"] = env["peak_rss_mib"](gw.pid)
    big_url = f"http://{gw_addr}/gateways/{gid}/v1/chat/completions"
    body = '{"model": "m0", "messages": [{"role": "user", "content": "Say hello."}]}'
    small, big = [], []
    for _ in range(2):
        small.append(oha(env["gw_url"], env["agent_key"], ["-c", "16", "-q", "1000"])["p50_ms"])
        big.append(oha(big_url, ctx["probe_key"], ["-c", "16", "-q", "1000"], body=body)["p50_ms"])
    out["small_p50_ms"] = small
    out["big_p50_ms"] = big
    out["rss_after_update_mib"] = rss_mib(gw.pid)
    gw.terminate()
    gw.wait()
    return out


def rows(r):
    if "scale_runs" not in r:
        return []
    runs = [(g["label"], g) for g in r["scale_runs"]]
    fig = lambda s: f"{s.get('bytes', 0) / 1e6:.1f} MB, parse {s.get('parse_ms', 0):.0f} ms, compile {s.get('compile_ms', 0):.0f} ms, swap {s.get('swap_ms', 0):.2f} ms"
    p50 = lambda xs: " / ".join(f"{x:.3f}" for x in xs)
    out = []
    for label, g in runs:
        out += [
            f"| {label}: {AGENTS} agents with keys, {MODELS} models, {TOOLS} tools: first snapshot | | {fig(g.get('first_snapshot', {}))} | |",
            f"| {label}: the same, one agent added: the next snapshot | | {fig(g.get('update', {}))} | |",
            f"| {label}: gateway RSS after tool discovery / peak by then / peak after the update / RSS after the latency runs | | {g['rss_mib']:.0f} / {g.get('peak_at_start_mib', 0):.0f} / {g['peak_rss_mib']:.0f} / {g.get('rss_after_update_mib', 0):.0f} MiB | |",
            f"| {label}: p50 ms at 1000 requests/s, small snapshot vs this one (2 alternating runs) | | {p50(g['small_p50_ms'])} vs {p50(g['big_p50_ms'])} | |",
        ]
    return out
