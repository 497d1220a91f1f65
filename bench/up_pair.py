"""`portcullis up` of this build against an earlier one, for bench/run.py
(`PORTCULLIS_BENCH_ONLY=up`, `PORTCULLIS_BENCH_BASELINE=DIR` holding the earlier `portcullis`).

Both start on fresh data dirs, on the same fake upstream, set up as bench/peer_targets.py sets
up `portcullis up`. Then PORTCULLIS_BENCH_UP_RUNS (4) rounds of one non-streaming run at 32
connections per build, the order flipped each round; each build's audit table grows by every
request it answered, as a running deployment's does. Per run: requests/s, CPU per request of
the process from the start of the run until it is quiet again (the audit ingest that trails
the load included), and how long that took. At the end, each build's stored `model.call`
events are counted against the calls it answered (the probes that saw it start add a few
events): none of them may be missing.
"""
import os
import sqlite3
import statistics

import peer_targets
import peers

RUNS = int(os.environ.get("PORTCULLIS_BENCH_UP_RUNS", "4"))
CONCURRENCY = 32


def stored_calls(data_dir):
    db = sqlite3.connect(f"file:{data_dir}/portcullis.db?mode=ro", uri=True, timeout=30)
    try:
        return db.execute("SELECT count(*) FROM audit_events WHERE type = 'model.call'").fetchone()[0]
    finally:
        db.close()


def measure(results, env, baseline_dir):
    builds = {"this build": env["bin"], "baseline": baseline_dir}
    fake, fake_addr = env["start"]([f"{env['bin']}/fake-llm", "--listen", "127.0.0.1:0"], f"{env['tmp']}/fake.log")
    targets = {}
    try:
        for name, bin_dir in builds.items():
            tmp = f"{env['tmp']}/up-{len(targets)}"
            os.makedirs(tmp)
            t = peer_targets.portcullis_up({**env, "bin": bin_dir, "tmp": tmp}, fake_addr, name)
            if t["problem"]:
                raise SystemExit(f"portcullis up ({name}): {t['problem']}")
            t["data"], t["runs"], t["answered"] = f"{tmp}/up", [], 0
            targets[name] = t
        for t in targets.values():
            t["answered"] += peers.load(env["oha"], t, 8, False, "2s")["ok"]
            peers.settle(t["pids"])
        for r in range(RUNS):
            for name in (list(targets) if r % 2 == 0 else list(reversed(list(targets)))):
                t = targets[name]
                run = peers.measured(env["oha"], t, CONCURRENCY, False, env["duration"])
                t["answered"] += run["ok"]
                t["runs"].append(run)
        for t in targets.values():
            t["stored"] = stored_calls(t["data"])
    finally:
        peer_targets.stop_all()
    results["up_pair"] = [{"name": n, "runs": t["runs"], "answered": t["answered"], "stored": t["stored"]}
                          for n, t in targets.items()]


def rows(r):
    out = ["| build | requests/s, each run | CPU µs per request, each run (median) | busy after the run, s | "
           "calls answered / model.call events stored |", "|---|---|---|---|---|"]
    for b in r.get("up_pair", []):
        runs = b["runs"]
        rps = ", ".join(f"{x['rps']:,.0f}" for x in runs)
        cpu = ", ".join(f"{x['cpu_us']:.0f}" for x in runs)
        busy = ", ".join(f"{x['settle_s']:.1f}" for x in runs)
        median = statistics.median(x["cpu_us"] for x in runs)
        out.append(f"| {b['name']} | {rps} | {cpu} ({median:.0f}) | {busy} | {b['answered']:,} / {b['stored']:,} |")
    return out
