"""The targets bench/peers.py measures side by side, each on the same fake upstream:

  direct          the fake upstream itself (tests/src/bin/fake-llm.rs)
  portcullis up   `portcullis up`: control plane and gateway in one process
  portcullis split  `portcullis-controlplane` and `portcullis-gateway`, two processes
  crabllm         `crabllm serve`, a virtual key and usage metering
  portkey         the Portkey OSS gateway on Node
  litellm         the LiteLLM proxy, a master key, one uvicorn worker per core

Peers come from $HOME/.cache/portcullis-tools (bench/peers.sh installs them); one that is not
installed, not chosen (PORTCULLIS_BENCH_PEERS) or does not answer is reported and left out.
Everything listens on 127.0.0.1. Each peer runs in a session of its own, so stop_all() ends it
with its children (LiteLLM's workers) by its process-group id; Portcullis and the fake are
started by bench/run.py's start() and stopped by it.
"""
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request

TOOLS = os.path.expanduser("~/.cache/portcullis-tools")
UPSTREAM_KEY = "sk-bench-upstream"
CRABLLM_KEY = "sk-crabllm-bench-key"
LITELLM_KEY = "sk-litellm-bench-master"
PEERS = [p for p in os.environ.get("PORTCULLIS_BENCH_PEERS", "crabllm,portkey,litellm").split(",") if p]
STARTED = []  # Popen objects, each the leader of its own process group

# Node's HTTP server in @hono/node-server listens on every interface when no hostname is given
# and Portkey's start-server.js passes none: this preload binds such listens to loopback.
LOOPBACK_PRELOAD = """const net = require('net');
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (port, host, ...rest) {
  if (typeof port === 'number' && (host === undefined || typeof host === 'function')) {
    if (typeof host === 'function') rest.unshift(host);
    return listen.call(this, port, '127.0.0.1', ...rest);
  }
  return listen.call(this, port, host, ...rest);
};
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The fakes listen on 127.0.0.1: the gateways here may reach loopback (DESIGN §24).
LOOPBACK_UPSTREAMS = {"PORTCULLIS_ALLOW_PRIVATE_TARGETS": "true"}


def spawn(args, log_path, env=None, cwd=None):
    log = open(log_path, "w")
    p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, start_new_session=True,
                         env={**os.environ, **LOOPBACK_UPSTREAMS, **(env or {})})
    STARTED.append(p)
    return p


def stop(procs):
    """SIGTERM to each process group, then SIGKILL to what is left after 10 s."""
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.time() + 10
    for p in procs:
        try:
            p.wait(max(deadline - time.time(), 0.1))
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


def stop_all():
    stop(STARTED)
    STARTED.clear()


def body(stream=False):
    return json.dumps({"model": "bench", "stream": stream, "messages": [{"role": "user", "content": "Say hello."}]})


def probe(target, stream=False, timeout=10):
    """One request as the load generator sends it: None if it is answered as a client expects
    (200 and an answer, or an event stream that ends in [DONE]), else what went wrong."""
    headers = dict(h.split(": ", 1) for h in target["headers"])
    req = urllib.request.Request(target["url"], data=body(stream).encode(),
                                 headers={**headers, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            text = r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return f"HTTP {e.code}: {e.read()[:200].decode(errors='replace')}"
    except Exception as e:  # refused while starting, timeouts
        return f"{type(e).__name__}: {e}"
    if stream:
        return None if "[DONE]" in text and '"delta"' in text else f"not an event stream: {text[:200]}"
    return None if '"choices"' in text else f"no choices: {text[:200]}"


def wait_answering(target, proc, seconds):
    """Waits until the target answers a request and a streamed request; None or the reason."""
    deadline = time.time() + seconds
    problem = "not started"
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            return f"exited with {proc.returncode}"
        problem = probe(target, timeout=5) or probe(target, stream=True, timeout=5)
        if problem is None:
            return None
        time.sleep(0.25)
    return problem


def target(name, url, headers, procs, version, config):
    return {"name": name, "url": url, "headers": headers, "pids": [p.pid for p in procs],
            "version": version, "config": config, "problem": None}


def setup_portcullis(call, base, key, fake_addr):
    """The same set-up as bench/run.py: model connection `bench` on the fake, agent `bench`
    with a key, on the default gateway. Returns (workspace id, gateway id, agent key)."""
    ws = call(base, key, "GetIdentity", {})["identity"]["workspace_id"]
    gid = call(base, key, "ListGateways", {"workspace_id": ws})["gateways"][0]["gateway_id"]
    model = call(base, key, "CreateLLMModelConnection", {
        "workspace_id": ws, "name": "bench", "provider": "openai_compatible",
        "provider_config": {"model": "gpt-4o-mini", "base_url": f"http://{fake_addr}/v1"},
        "secret_values": {"Authorization": f"Bearer {UPSTREAM_KEY}"}})
    call(base, key, "AddGatewayModel", {"workspace_id": ws, "gateway_id": gid, "connection_id": model["connection_id"]})
    call(base, key, "RegisterAgent", {"workspace_id": ws, "name": "bench", "allowed_gateway_ids": [gid],
                                      "allowed_direct_model_names": ["bench"]})
    agent_key = call(base, key, "CreateAgentKey", {"workspace_id": ws, "agent_id": "bench", "name": "k"})["token"]
    return ws, gid, agent_key


def portcullis_up(env, fake_addr, commit):
    data = f"{env['tmp']}/up"
    proc, _ = env["start"]([f"{env['bin']}/portcullis", "up", "--data-dir", data, "--control-listen", "127.0.0.1:0",
                            "--gateway-listen", "127.0.0.1:0"], f"{env['tmp']}/up.log",
                           {"RUST_LOG": "warn,portcullis_controlplane=info,portcullis_gateway=info"})
    endpoints = None
    for _ in range(200):
        try:
            endpoints = json.load(open(f"{data}/endpoints.json"))
            break
        except (OSError, ValueError):
            time.sleep(0.05)
    key = open(f"{data}/admin.key").read().strip()
    _, gid, agent_key = setup_portcullis(env["call"], endpoints["control_url"], key, fake_addr)
    t = target("portcullis up", f"{endpoints['gateway_base_url']}/gateways/{gid}/v1/chat/completions",
               [f"Authorization: Bearer {agent_key}"], [proc], f"build {commit}",
               "`portcullis up`: control plane (SQLite) and gateway in one process; agent key, Cedar "
               "authorization, audit on (shipped to the embedded control plane)")
    t["problem"] = wait_answering(t, proc, 30)
    return t


def portcullis_split(env, fake_addr, commit):
    start, call, tmp, bin_dir = env["start"], env["call"], env["tmp"], env["bin"]
    cp, cp_addr = start([f"{bin_dir}/portcullis-controlplane", "--listen", "127.0.0.1:0", "--data-dir", f"{tmp}/cp"],
                        f"{tmp}/cp.log", {"RUST_LOG": "warn,portcullis_controlplane=info"})
    base = f"http://{cp_addr}"
    key = open(f"{tmp}/cp/admin.key").read().strip()
    ws, gid, agent_key = setup_portcullis(call, base, key, fake_addr)
    token = call(base, key, "CreateDeployment", {"workspace_id": ws, "name": "bench",
                                                  "public_url": "http://127.0.0.1"})["token"]
    gw, gw_addr = start([f"{bin_dir}/portcullis-gateway", "--control-plane-url", base, "--listen", "127.0.0.1:0",
                         "--data-dir", f"{tmp}/gw"], f"{tmp}/gw.log",
                        {"PORTCULLIS_TOKEN": token, "RUST_LOG": "warn,portcullis_gateway=info"})
    t = target("portcullis split", f"http://{gw_addr}/gateways/{gid}/v1/chat/completions",
               [f"Authorization: Bearer {agent_key}"], [cp, gw], f"build {commit}",
               "`portcullis-controlplane` (SQLite) and `portcullis-gateway`, two processes; the same "
               "agent key, Cedar authorization and audit on")
    t["problem"] = wait_answering(t, gw, 30)
    return t


def crabllm(tmp, fake_addr):
    binary = f"{TOOLS}/bin/crabllm"
    if not os.path.exists(binary):
        return None
    record = open(f"{TOOLS}/.crates.toml").read()
    version = next((w for w in record.split() if w[:1].isdigit()), "?") if '"crabllm ' in record else "?"
    port = free_port()
    with open(f"{tmp}/crabllm.toml", "w") as f:
        f.write(f"""listen = "127.0.0.1:{port}"

[[keys]]
name = "bench"
key = "{CRABLLM_KEY}"
models = ["bench"]

[providers.fake]
kind = "openai"
api_key = "{UPSTREAM_KEY}"
base_url = "http://{fake_addr}/v1"
models = ["bench"]

[extensions]
usage = {{}}
""")
    proc = spawn([binary, "serve", "--config", f"{tmp}/crabllm.toml"], f"{tmp}/crabllm.log",
                 {"RUST_LOG": "warn", "NO_COLOR": "1"})
    t = target("crabllm", f"http://127.0.0.1:{port}/v1/chat/completions", [f"Authorization: Bearer {CRABLLM_KEY}"],
               [proc], f"crabllm {version} (crates.io)",
               "`crabllm serve --config crabllm.toml`: one virtual key limited to model `bench` (key auth), "
               "the `usage` extension (token metering per key and model, in-memory storage), an `openai` "
               "provider on the fake; `RUST_LOG=warn` (no log line per request)")
    t["problem"] = wait_answering(t, proc, 30)
    return t


def portkey(tmp, fake_addr):
    root = f"{TOOLS}/portkey/node_modules"
    if not os.path.exists(f"{root}/@portkey-ai/gateway/build/start-server.js"):
        return None
    version = json.load(open(f"{root}/@portkey-ai/gateway/package.json"))["version"]
    hono = json.load(open(f"{root}/@hono/node-server/package.json"))["version"]
    node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    port = free_port()
    with open(f"{tmp}/loopback.cjs", "w") as f:
        f.write(LOOPBACK_PRELOAD)
    proc = spawn(["node", "--require", f"{tmp}/loopback.cjs", f"{root}/@portkey-ai/gateway/build/start-server.js",
                  f"--port={port}", "--headless"], f"{tmp}/portkey.log")
    t = target("portkey", f"http://127.0.0.1:{port}/v1/chat/completions",
               ["x-portkey-provider: openai", f"x-portkey-custom-host: http://{fake_addr}/v1",
                f"Authorization: Bearer {UPSTREAM_KEY}"], [proc],
               f"@portkey-ai/gateway {version} (npm), @hono/node-server {hono} (npm `overrides`), Node {node}",
               "`node build/start-server.js --headless`, one Node process (its default), bound to "
               "127.0.0.1 by a `--require` preload (it has no host option); provider `openai` with the "
               "fake as custom host, chosen per request by `x-portkey-*` headers; no key of its own "
               "(the OSS gateway has no virtual keys: the caller's bearer goes upstream)")
    t["problem"] = wait_answering(t, proc, 30)
    return t


def litellm(tmp, fake_addr):
    venv = f"{TOOLS}/litellm"
    if not os.path.exists(f"{venv}/bin/litellm"):
        return None
    show = subprocess.run([f"{venv}/bin/pip", "show", "litellm"], capture_output=True, text=True).stdout
    version = next((l.split()[1] for l in show.splitlines() if l.startswith("Version:")), "?")
    python = subprocess.run([f"{venv}/bin/python", "--version"], capture_output=True, text=True).stdout.strip()
    port, workers = free_port(), os.cpu_count()
    config = {"model_list": [{"model_name": "bench", "litellm_params": {
                  "model": "openai/gpt-4o-mini", "api_base": f"http://{fake_addr}/v1", "api_key": UPSTREAM_KEY}}],
              "general_settings": {"master_key": LITELLM_KEY}}
    json.dump(config, open(f"{tmp}/litellm.yaml", "w"))  # JSON is YAML
    quiet = {"version": 1, "disable_existing_loggers": False,
             "loggers": {"uvicorn.access": {"level": "WARNING"}}}
    json.dump(quiet, open(f"{tmp}/litellm-log.json", "w"))
    proc = spawn([f"{venv}/bin/litellm", "--config", f"{tmp}/litellm.yaml", "--host", "127.0.0.1", "--port", str(port),
                  "--num_workers", str(workers), "--log_config", f"{tmp}/litellm-log.json"], f"{tmp}/litellm.log",
                 {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR"}, cwd=tmp)
    t = target("litellm", f"http://127.0.0.1:{port}/v1/chat/completions", [f"Authorization: Bearer {LITELLM_KEY}"],
               [proc], f"litellm[proxy] {version} (PyPI), {python}",
               f"`litellm --config litellm.yaml --num_workers {workers}` (uvicorn, one worker per core): a "
               "master key (no database, so no virtual keys or spend logs), model `bench` as "
               "`openai/gpt-4o-mini` on the fake, `LITELLM_LOCAL_MODEL_COST_MAP=True`, `LITELLM_LOG=ERROR` "
               "and uvicorn's access log off (no log line per request)")
    t["problem"] = wait_answering(t, proc, 120)
    return t


def build_commit():
    """PORTCULLIS_BENCH_BUILD (for binaries built elsewhere), or HEAD's short hash with
    `+changes` when sources outside bench/ and docs/ differ from it (run.sh builds from them)."""
    if os.environ.get("PORTCULLIS_BENCH_BUILD"):
        return os.environ["PORTCULLIS_BENCH_BUILD"]
    git = lambda *a: subprocess.run(["git", *a], capture_output=True, text=True,
                                    cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ":/", ":!/bench", ":!/docs")
    return (git("rev-parse", "--short", "HEAD") or "?") + (" +changes" if dirty else "")


def start_all(env):
    """The fake upstream, then every target; returns (fake address, targets). A peer that is not
    chosen, not installed or not answering has its `problem` set, and is not measured."""
    fake, fake_addr = env["start"]([f"{env['bin']}/fake-llm", "--listen", "127.0.0.1:0"], f"{env['tmp']}/fake.log")
    commit = build_commit()
    direct = target("direct", f"http://{fake_addr}/v1/chat/completions", [], [fake], f"build {commit}",
                    "the fake upstream alone (`fake-llm`), no gateway; its CPU is the fake's own")
    targets = [direct, portcullis_up(env, fake_addr, commit), portcullis_split(env, fake_addr, commit)]
    starters = {"crabllm": crabllm, "portkey": portkey, "litellm": litellm}
    for name, starter in starters.items():
        t = starter(env["tmp"], fake_addr) if name in PEERS else None
        if t is None:
            t = target(name, "", [], [], "—", "")
            t["problem"] = (f"not installed (bench/peers.sh; see {TOOLS}/peers-install-{name}.log)"
                            if name in PEERS else "left out (not in PORTCULLIS_BENCH_PEERS)")
        elif t["problem"]:  # started but not answering: out of the way of the others
            dead = [p for p in STARTED if p.pid in t["pids"]]
            stop(dead)
            STARTED[:] = [p for p in STARTED if p not in dead]
        targets.append(t)
    return fake_addr, targets
