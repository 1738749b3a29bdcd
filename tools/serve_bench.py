"""quilt.serve's benchmark: the zoo's models served by Ray Serve on one local Ray instance, with
Quilt and with onnxruntime inside the same deployment code (quilt.serve's engine option), with
dynamic batching and without; closed-loop HTTP clients report requests/s and p50/p99 latency.

usage: .venv/bin/python tools/serve_bench.py [--models mobilenet_v3_large,bert_base]
           [--clients 8] [--duration 20] [--warmup 5] [--threads 2] [--max-batch-size 8]
           [--batch-wait-ms 5] [--rounds 1] [--json FILE]

Models come from $QUILT_ZOO_DIR (default ~/.cache/quilt/zoo: `tools/zoo.py export` writes them
there with their inputs, <model>.inputs/*.npy, batch 1). One replica reserves every core
(--threads, default: the core count) and runs the engine on that many threads. Each
configuration is deployed, warmed up for --warmup seconds under load, then measured for
--duration seconds with --clients clients, each sending the model's inputs (.npy for one input,
.npz for several) on one keep-alive connection and waiting for the answer before the next
request. The first answer of each configuration is checked against a direct run of the same
engine. Configurations alternate between the engines, so that a neighbour's load hits both
alike; with --rounds N each is measured N times, and every round is reported with the load
average at its end: compare the engines within a round. Prints markdown tables (also of the
engines alone, --engine-rows), the CPU model and the load, and where the CPU time went: every
process's user + system time over each measured window, by kind (the replica, Serve's HTTP
proxy, the raylet, the GCS, the clients, the rest), per answered request.
Run it where nothing else of yours runs: the clients share the machine with the replica.
"""
from __future__ import annotations

import argparse
import collections
import http.client
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def load_inputs(zoo: Path, model: str) -> dict:
    directory = zoo / f"{model}.inputs"
    inputs = {f.stem: np.load(f) for f in sorted(directory.glob("*.npy"))}
    if not inputs:
        sys.exit(f"serve_bench: no inputs in {directory} (run tools/zoo.py export)")
    return inputs


def cpu_by_process() -> collections.Counter:
    """CPU seconds (user + system) every process on the machine has used so far, summed by kind:
    Serve's replicas and HTTP proxies (Ray names its worker processes after the actor they run),
    the raylet, the GCS, this process (the clients) and the rest."""
    hz = os.sysconf("SC_CLK_TCK")
    me = str(os.getpid())
    out: collections.Counter = collections.Counter()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        name = cmd.rsplit("/", 1)[-1]
        kind = ("clients" if pid == me else "replica" if cmd.startswith("ray::ServeReplica")
                else "proxy" if cmd.startswith("ray::ProxyActor") else "raylet" if name == "raylet"
                else "gcs" if name == "gcs_server" else "other")
        out[kind] += (int(fields[11]) + int(fields[12])) / hz
    return out


CPU_KINDS = ("replica", "proxy", "raylet", "gcs", "clients", "other")


def measure(port: int, route: str, body: bytes, ctype: str, clients: int, warmup: float, duration: float):
    """Closed-loop clients: (requests/s, latencies in ms, errors, batch rows seen, run times, CPU
    seconds by kind of process) over `duration`."""
    stop_at = [0.0]
    phase = {"measuring": False}
    latencies: list[list[float]] = [[] for _ in range(clients)]
    rows: list[list[int]] = [[] for _ in range(clients)]
    runs: list[list[float]] = [[] for _ in range(clients)]
    errors: list[str] = []
    started = time.monotonic()
    measure_from = started + warmup
    stop_at[0] = measure_from + duration

    def client(k: int):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while True:
            t0 = time.monotonic()
            if t0 >= stop_at[0]:
                break
            try:
                conn.request("POST", route, body=body, headers={"Content-Type": ctype})
                r = conn.getresponse()
                content = r.read()
                status = r.status
                batch = r.getheader("x-quilt-batch-rows")
                run_ms = r.getheader("x-quilt-run-ms")
            except (OSError, http.client.HTTPException) as e:
                errors.append(f"{type(e).__name__}: {e}")
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                continue
            t1 = time.monotonic()
            if status != 200:
                errors.append(f"{status}: {content[:200]!r}")
                continue
            if t0 >= measure_from and t1 <= stop_at[0]:
                latencies[k].append((t1 - t0) * 1e3)
                if batch:
                    rows[k].append(int(batch))
                    runs[k].append(float(run_ms))
        conn.close()

    cpu: list[collections.Counter] = []

    def sample_cpu():  # at the start and the end of the measured window
        for at in (measure_from, stop_at[0]):
            time.sleep(max(0.0, at - time.monotonic()))
            cpu.append(cpu_by_process())

    threads = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(clients)]
    threads.append(threading.Thread(target=sample_cpu, daemon=True))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    all_lat = sorted(x for per in latencies for x in per)
    all_rows = [x for per in rows for x in per]
    all_runs = [x for per in runs for x in per]
    cpu_s = {k: cpu[1][k] - cpu[0][k] for k in CPU_KINDS}
    return len(all_lat) / duration, all_lat, errors, all_rows, all_runs, cpu_s


def engine_alone(zoo: Path, models: list[str], engines: list[str], sizes: list[int], threads: int) -> list[dict]:
    """Each engine in this process, on the model quilt.serve batches (the rewritten one for a
    fixed batch of 1): median run time per batch size, alternating engines per size."""
    from quilt._serving import ModelServer
    out = []
    for model in models:
        inputs = load_inputs(zoo, model)
        servers = {e: ModelServer(str(zoo / f"{model}.onnx"), engine=e, session_options={"threads": threads})
                   for e in engines}
        for rows in sizes:
            feeds = {k: np.concatenate([v] * rows) for k, v in inputs.items()}
            times: dict[str, list[float]] = {e: [] for e in engines}
            for e, server in servers.items():
                server.runner.run(feeds, None)  # warm
            # About 24 rows' worth of runs per engine, at least 5, alternating.
            for _ in range(max(5, 24 // rows)):
                for e, server in servers.items():
                    t0 = time.perf_counter()
                    server.runner.run(feeds, None)
                    times[e].append((time.perf_counter() - t0) * 1e3)
            for e in engines:
                out.append({"model": model, "engine": e, "rows": rows, "ms": statistics.median(times[e]),
                            "batching": servers[e].batch is not None})
                print(f"  {model} {e} alone: {rows} rows {statistics.median(times[e]):.1f} ms",
                      file=sys.stderr, flush=True)
        del servers
    return out


def percentile(sorted_values: list[float], p: float) -> float:
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, int(round(p / 100 * (len(sorted_values) - 1)))))
    return sorted_values[k]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="mobilenet_v3_large,bert_base")
    p.add_argument("--engines", default="quilt,onnxruntime")
    p.add_argument("--batching", default="on,off", help="on, off or both (default on,off)")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--duration", type=float, default=20.0)
    p.add_argument("--warmup", type=float, default=5.0)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--max-batch-size", type=int, default=8)
    p.add_argument("--batch-wait-ms", type=float, default=5.0)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--port", type=int, default=8123)
    p.add_argument("--engine-rows", default="1,8",
                   help="also time each engine alone (no Ray) on batches of these sizes, to show what "
                        "batching can gain in the engine (default 1,8; empty: skip)")
    p.add_argument("--json", help="write every measurement to this file")
    args = p.parse_args()

    zoo = Path(os.environ.get("QUILT_ZOO_DIR", Path.home() / ".cache" / "quilt" / "zoo"))
    models = [m for m in args.models.split(",") if m]
    engines = [e for e in args.engines.split(",") if e]
    batchings = [b == "on" for b in args.batching.split(",") if b]

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray
    from ray import serve

    import quilt.serve
    from quilt._serving import ModelServer, decode_response, encode_request

    cpus = os.cpu_count() or 1
    ray.init(address="local", include_dashboard=False, num_cpus=max(cpus, args.threads),
             log_to_driver=False)
    serve.start(http_options={"host": "127.0.0.1", "port": args.port})
    results = []
    try:
        for model in models:
            path = zoo / f"{model}.onnx"
            if not path.exists():
                sys.exit(f"serve_bench: {path} is missing (run tools/zoo.py export)")
            inputs = load_inputs(zoo, model)
            fmt = "npy" if len(inputs) == 1 else "npz"
            body, ctype = encode_request(inputs, fmt)
            for round_ in range(args.rounds):
                for batching in batchings:
                    order = engines if round_ % 2 == 0 else list(reversed(engines))
                    for engine in order:
                        name = f"{model}-{engine}-{'b' if batching else 'n'}"
                        route = f"/{name}"
                        t0 = time.monotonic()
                        application = quilt.serve.app(
                            str(path), engine=engine, replicas=1, threads=args.threads,
                            batching=batching, max_batch_size=args.max_batch_size,
                            batch_wait_ms=args.batch_wait_ms,
                            max_ongoing_requests=max(2 * args.max_batch_size, args.clients),
                            name=name)
                        handle = serve.run(application, name=name, route_prefix=route)
                        info = handle.info.remote().result()
                        deploy_s = time.monotonic() - t0
                        if batching and not info["batching"]:
                            print(f"  {name}: no batching: {info['batching_refused']}", file=sys.stderr)
                        # Check one answer against a direct run of the same engine.
                        conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=300)
                        conn.request("POST", route, body=body, headers={"Content-Type": ctype})
                        r = conn.getresponse()
                        content = r.read()
                        if r.status != 200:
                            sys.exit(f"serve_bench: {name}: {r.status} {content[:300]!r}")
                        got = decode_response(content, r.getheader("content-type"))
                        conn.close()
                        rps, lat, errors, rows, runs, cpu_s = measure(
                            args.port, route, body, ctype, args.clients, args.warmup, args.duration)
                        serve.delete(name)
                        direct = ModelServer(str(path), engine=engine, batching=False, warmup=False,
                                             session_options={"threads": args.threads})
                        want = direct.runner.run(inputs, None)
                        del direct
                        (got_value,) = got.values()
                        (want_value,) = want.values()
                        max_diff = float(np.max(np.abs(got_value.astype(np.float64) - want_value)))
                        row = {"model": model, "engine": engine, "batching": batching,
                               "batching_refused": info["batching_refused"], "round": round_,
                               "requests_per_s": rps, "p50_ms": percentile(lat, 50),
                               "p99_ms": percentile(lat, 99), "requests": len(lat),
                               "errors": len(errors), "first_errors": errors[:3],
                               "mean_batch_rows": statistics.mean(rows) if rows else 1.0,
                               # the engine's share: one run per batch, seen by each request in it
                               "mean_run_ms": statistics.mean(runs) if runs else float("nan"),
                               "deploy_s": deploy_s, "max_abs_diff_vs_direct": max_diff,
                               # CPU ms per answered request, by kind of process, over the window
                               "cpu_ms_per_request": {k: v * 1e3 / max(1, len(lat)) for k, v in cpu_s.items()},
                               "loadavg": os.getloadavg()}
                        results.append(row)
                        print(f"  {name} round {round_}: {rps:.2f} req/s, p50 {row['p50_ms']:.1f} ms, "
                              f"p99 {row['p99_ms']:.1f} ms, batch rows {row['mean_batch_rows']:.2f}, "
                              f"run {row['mean_run_ms']:.1f} ms, "
                              f"{len(errors)} errors, |answer - direct| {max_diff:.2g}, "
                              f"load {row['loadavg'][0]:.2f}", file=sys.stderr, flush=True)
    finally:
        serve.shutdown()
        ray.shutdown()

    engine_rows = engine_alone(zoo, models, engines, [int(r) for r in args.engine_rows.split(",") if r],
                               args.threads) if args.engine_rows else []

    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; {args.clients} clients, {args.duration:.0f} s "
          f"measured after {args.warmup:.0f} s, 1 replica x {args.threads} threads, max batch "
          f"{args.max_batch_size}, batch wait {args.batch_wait_ms:g} ms; load average at the end "
          f"{os.getloadavg()[0]:.2f}")
    print()
    print("| model | engine | batching | round | requests/s | p50 ms | p99 ms | rows per run | run ms "
          "| requests | errors | load |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    order = {(m, b, e): k for k, (m, b, e) in enumerate((m, b, e) for m in models for b in batchings for e in engines)}
    for row in sorted(results, key=lambda r: (order[(r["model"], r["batching"], r["engine"])], r["round"])):
        print(f"| {row['model']} | {row['engine']} | {'on' if row['batching'] else 'off (batch 1)'} | "
              f"{row['round']} | {row['requests_per_s']:.2f} | {row['p50_ms']:.0f} | {row['p99_ms']:.0f} | "
              f"{row['mean_batch_rows']:.2f} | {row['mean_run_ms']:.0f} | {row['requests']} | {row['errors']} | "
              f"{row['loadavg'][0]:.1f} |")
    print()
    print("CPU time per request (ms, user + system, every process on the machine over the measured "
          "window, by kind)")
    print()
    print("| model | engine | batching | round | " + " | ".join(CPU_KINDS) + " | total |")
    print("|---|---|---|---:|" + "---:|" * (len(CPU_KINDS) + 1))
    for row in sorted(results, key=lambda r: (order[(r["model"], r["batching"], r["engine"])], r["round"])):
        c = row["cpu_ms_per_request"]
        print(f"| {row['model']} | {row['engine']} | {'on' if row['batching'] else 'off (batch 1)'} | "
              f"{row['round']} | " + " | ".join(f"{c[k]:.1f}" for k in CPU_KINDS) +
              f" | {sum(c.values()):.1f} |")
    if engine_rows:
        print()
        print(f"The engines alone ({args.threads} threads, no Ray): median time of one run of a batch")
        print()
        print("| model | engine | rows | ms per run | ms per row |")
        print("|---|---|---:|---:|---:|")
        for e in engine_rows:
            print(f"| {e['model']} | {e['engine']} | {e['rows']} | {e['ms']:.1f} | {e['ms'] / e['rows']:.1f} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"cpu": cpu_model(), "args": vars(args), "results": results,
                                               "engine_alone": engine_rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
