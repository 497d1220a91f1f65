"""Portcullis side by side with its peers, for bench/run.py (`PORTCULLIS_BENCH_ONLY=peers`).

The targets (bench/peer_targets.py: the fake upstream called directly, `portcullis up`, the
control plane and gateway as two processes, and whichever of crabllm, the Portkey OSS gateway
and the LiteLLM proxy bench/peers.sh installed) all call the same fake upstream, with the same
request body and the same load generator (`oha`). Load shapes: non-streaming and streaming
(`"stream": true`; oha times the whole streamed answer, and its first byte), each at c=1, c=32
and saturation (PORTCULLIS_BENCH_SATURATION connections, 256 by default). Each shape is run
once per target in each of PORTCULLIS_BENCH_ROUNDS rounds (3), the targets interleaved and
their order rotated every round, so drift on the VM spreads over all of them;
PORTCULLIS_BENCH_SHAPES (`;`-separated labels) runs only those shapes.

Reported per target and shape: the median and the spread (min–max) of requests/s, p50, p99 and
CPU per request — the CPU of the target's whole process tree (utime+stime of each process plus
what it reaped) from the start of the run until the tree is quiet again, over the requests
answered — and the non-2xx replies and transport errors of all rounds; per target, the peak
RSS of its process tree (the sum of each process's VmHWM at the end, so pages shared between
forked workers count once per worker). Prints a Markdown fragment and writes it to
bench/results/peers.md, the raw figures to bench/results/peers.json.
"""
import json
import os
import signal
import statistics
import subprocess
import sys
import time

import peer_targets

ROUNDS = int(os.environ.get("PORTCULLIS_BENCH_ROUNDS", "3"))
SATURATION = int(os.environ.get("PORTCULLIS_BENCH_SATURATION", "256"))
WARM_UP = "2s"
REQUEST_TIMEOUT = "60s"
SHAPES = [(f"{kind}, c={c}" + (" (saturation)" if c == SATURATION else ""), c, stream)
          for stream, kind in ((False, "non-streaming"), (True, "streaming"))
          for c in (1, 32, SATURATION)]
# PORTCULLIS_BENCH_SHAPES: only the shapes whose label is one of these (`;`-separated), for
# more rounds of one row, e.g. "non-streaming, c=1".
if os.environ.get("PORTCULLIS_BENCH_SHAPES"):
    SHAPES = [s for s in SHAPES if s[0] in os.environ["PORTCULLIS_BENCH_SHAPES"].split(";")]
    if not SHAPES:
        sys.exit("PORTCULLIS_BENCH_SHAPES names no shape; labels look like `non-streaming, c=1`")
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def load(oha, t, concurrency, stream, duration):
    """One oha run against target `t`: requests/s, p50 and p99 in ms, 2xx, non-2xx, errors.
    Requests still under way when the time is up are waited for (`-w`), so every request sent
    is answered or an error, and the CPU measured after the run is all for answered requests."""
    args = [oha, "--no-tui", "--output-format", "json", "-z", duration, "-w", "-t", REQUEST_TIMEOUT,
            "-c", str(concurrency), "-m", "POST",
            "-H", "Content-Type: application/json", "-d", peer_targets.body(stream)]
    for h in t["headers"]:
        args += ["-H", h]
    out = subprocess.run(args + [t["url"]], capture_output=True, text=True, check=True).stdout
    data = json.loads(out)
    codes = data.get("statusCodeDistribution", {})
    errors = {k: v for k, v in data.get("errorDistribution", {}).items() if "deadline" not in k}
    pct = data["latencyPercentiles"]
    ms = lambda v: (v or 0) * 1000
    first = data.get("firstBytePercentiles") or {}
    return {"rps": data["summary"]["requestsPerSec"] or 0, "p50_ms": ms(pct.get("p50")), "p99_ms": ms(pct.get("p99")),
            "first_byte_p50_ms": ms(first.get("p50")),
            "ok": sum(v for k, v in codes.items() if k.startswith("2")),
            "non_2xx": sum(v for k, v in codes.items() if not k.startswith("2")),
            "errors": sum(errors.values()), "error_kinds": sorted(errors)}


def tree(roots):
    """The processes in the trees under `roots` (scanning /proc: this kernel has no
    /proc/PID/task/TID/children)."""
    parent = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parent[int(entry)] = int(open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    found, todo = set(), [r for r in roots if r in parent]
    while todo:
        pid = todo.pop()
        found.add(pid)
        todo += [c for c, p in parent.items() if p == pid and c not in found]
    return found


def tree_cpu_seconds(roots):
    total = 0
    for pid in tree(roots):
        try:
            f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])  # utime stime cutime cstime
    return total / os.sysconf("SC_CLK_TCK")


def tree_peak_rss_mib(roots):
    total, count = 0, 0
    for pid in tree(roots):
        try:
            for line in open(f"/proc/{pid}/status"):
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1])
                    count += 1
        except OSError:
            continue
    return total / 1024, count


def settle(roots, most=30.0):
    """Waits until the tree uses less than a tenth of a core (work left over from a run: a
    backlog, audit shipping), at most `most` seconds; returns how long it took."""
    started = time.monotonic()
    last = tree_cpu_seconds(roots)
    while time.monotonic() - started < most:
        time.sleep(0.5)
        now = tree_cpu_seconds(roots)
        if now - last < 0.05:
            break
        last = now
    return time.monotonic() - started


def measured(oha, t, concurrency, stream, duration):
    """A run, with the CPU of the target's tree from its start until the tree is quiet again."""
    before = tree_cpu_seconds(t["pids"])
    run = load(oha, t, concurrency, stream, duration)
    run["settle_s"] = settle(t["pids"])
    answered = run["ok"] + run["non_2xx"]
    run["cpu_us"] = (tree_cpu_seconds(t["pids"]) - before) / max(answered, 1) * 1e6
    return run


def measure(results, env):
    """Starts the targets, measures them, stops every process it started (also on failure)."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    oha, duration = env["oha"], env["duration"]
    started = time.monotonic()
    try:
        _, targets = peer_targets.start_all(env)
        live = [t for t in targets if not t["problem"]]
        for t in live:  # warm-up: connections, caches, JIT
            for stream in (False, True):
                load(oha, t, 8, stream, WARM_UP)
        for t in targets:
            t["runs"] = {label: [] for label, _, _ in SHAPES}
        for r in range(ROUNDS):
            order = live[r % len(live):] + live[:r % len(live)]
            for label, concurrency, stream in SHAPES:
                for t in order:
                    t["runs"][label].append(measured(oha, t, concurrency, stream, duration))
            print(f"peers: round {r + 1} of {ROUNDS} done after {time.monotonic() - started:.0f} s", file=sys.stderr)
        for t in live:
            t["peak_rss_mib"], t["processes"] = tree_peak_rss_mib(t["pids"])
    finally:
        peer_targets.stop_all()
    results["peers"] = [{k: v for k, v in t.items() if k not in ("headers", "pids")} for t in targets]
    results["peers_rounds"], results["peers_saturation"] = ROUNDS, SATURATION
    results["peers_seconds"] = time.monotonic() - started


def spread(runs, key, fmt):
    values = [x[key] for x in runs]
    return f"{fmt(statistics.median(values))} ({fmt(min(values))}–{fmt(max(values))})"


def whole(v):
    return f"{v:,.0f}"


def ms(v):
    return f"{v:.3f}"


def config_rows(targets):
    out = ["| target | version | how it was configured | processes | peak RSS, process tree |",
           "|---|---|---|---|---|"]
    for t in targets:
        if t["problem"]:
            out.append(f"| {t['name']} | {t['version']} | {t['config']} | — | not measured: {t['problem']} |")
        else:
            out.append(f"| {t['name']} | {t['version']} | {t['config']} | {t['processes']} | "
                       f"{t['peak_rss_mib']:.0f} MiB |")
    return out


def failures(t, label):
    """'' or what went wrong for target `t` under load `label`, over all rounds."""
    runs = t["runs"][label]
    non_2xx, errors = sum(x["non_2xx"] for x in runs), sum(x["errors"] for x in runs)
    if not non_2xx and not errors:
        return ""
    kinds = sorted({k for x in runs for k in x["error_kinds"]})
    return f"{t['name']} ({label}: {non_2xx} non-2xx, {errors} errors{': ' + ', '.join(kinds) if kinds else ''})"


def load_rows(live, direct):
    out = ["| load | target | requests/s | p50 ms | p99 ms | p50 added to direct, ms | first byte p50 ms | "
           "CPU µs per request | non-2xx / errors |", "|---|---|---|---|---|---|---|---|---|"]
    flagged = []
    for label, _, stream in SHAPES:
        base = statistics.median(x["p50_ms"] for x in direct["runs"][label]) if direct in live else None
        for t in live:
            runs = t["runs"][label]
            failed = failures(t, label)
            flagged += [failed] if failed else []
            p50 = statistics.median(x["p50_ms"] for x in runs)
            added = "" if t is direct or base is None else f"{p50 - base:+.3f}"
            first = ms(statistics.median(x["first_byte_p50_ms"] for x in runs)) if stream else ""
            bad = f"{sum(x['non_2xx'] for x in runs)} / {sum(x['errors'] for x in runs)}"
            out.append(f"| {label} | {t['name']}{' ⚠' if failed else ''} | {spread(runs, 'rps', whole)} | "
                       f"{spread(runs, 'p50_ms', ms)} | {spread(runs, 'p99_ms', ms)} | {added} | {first} | "
                       f"{spread(runs, 'cpu_us', whole)} | {bad} |")
    if flagged:
        out += ["", "⚠ answered with errors, so its figures are not comparable: " + "; ".join(flagged) + "."]
    return out


def busy_after(live):
    """A note on targets that kept working after their runs (counted in their CPU)."""
    busy = [(t["name"], max(x["settle_s"] for runs in t["runs"].values() for x in runs)) for t in live]
    busy = [f"{name} {seconds:.1f} s" for name, seconds in busy if seconds > 1]
    if not busy:
        return []
    return ["Longest time a target's process tree stayed busy after a run ended (its CPU until then is "
            f"in CPU per request; the next run waits for it, at most 30 s): {', '.join(busy)}.", ""]


def rows(r):
    if "peers" not in r:
        return []
    targets = r["peers"]
    live = [t for t in targets if not t["problem"]]
    direct = next(t for t in targets if t["name"] == "direct")
    return [
        *config_rows(targets), "",
        f"Median of {r['peers_rounds']} rounds (min–max); CPU per request is the process tree's; "
        "non-2xx / errors are totals over the rounds.", "",
        *load_rows(live, direct), "",
        *busy_after(live),
        f"Machine: {r['machine']}; {r['duration']} per run, one run per target and load shape in each round, "
        f"targets interleaved (order rotated each round); saturation = {r['peers_saturation']} connections; "
        f"whole run {r['peers_seconds'] / 60:.0f} min. Peak RSS sums VmHWM over the process tree, so memory "
        "shared between forked workers counts once per worker.",
    ]


def write(r, text):
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "peers.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(RESULTS, "peers.json"), "w") as f:
        json.dump(r, f, indent=2)
