"""Quilt as a Ray Serve deployment: replicas of a model placed by Ray, batched by Ray Serve.

    python -m quilt.serve model.onnx --replicas 2 --port 8000          # a local Ray instance
    python -m quilt.serve model.onnx --address HEAD:6379 --replicas 8  # an existing cluster

    from ray import serve
    import quilt.serve
    serve.run(quilt.serve.app("model.onnx", replicas=2, threads=2, backends=["opencl", "cpu"]))

Each replica loads the model with quilt.Session (or onnxruntime, engine="onnxruntime", to
compare) and answers POST requests in JSON ({"inputs": {name: nested list}}) or binary (.npy
for one input, .npz for several); GET returns the model's inputs, outputs, backend and whether
it batches. Requests are batched with @serve.batch along the model's batch dim (a symbolic
leading dim, or a fixed 1 once a run shows the graph batches). Errors: 4xx with a message for a
bad request, 5xx for a failed run. Metrics (Ray's Prometheus endpoint): quilt_serve_requests,
quilt_serve_request_latency_ms and quilt_serve_run_latency_ms (tags model, engine, backend),
quilt_serve_batch_rows. A replica whose model does not load fails with a message naming the
model and why, and one whose session stops running fails Ray's health check, which replaces it.
Needs ray[serve] (and onnx to batch a model with a fixed batch of 1).
"""
from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import logging
import os
import signal
import sys
import time
from typing import Any

from ray import serve
from ray.serve import metrics
from starlette.requests import Request
from starlette.responses import Response

from ._serving import JSON_TYPE, ModelLoadError, ModelServer, Outcome, RequestError, RunError
from ._serving import Request as ParsedRequest

logger = logging.getLogger("ray.serve")

# Histogram buckets (ms) for a request and for a run.
_LATENCY_BOUNDS_MS = [0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000]


def _rows(requests: list[ParsedRequest]) -> int:
    """A batch's size for @serve.batch: rows along the batch dim, not requests."""
    return sum(r.rows for r in requests)


def _where() -> tuple[str, str]:
    """(replica id, node id) inside a Ray Serve replica; empty strings elsewhere."""
    try:
        replica = serve.get_replica_context().replica_id.unique_id
    except Exception:
        replica = ""
    try:
        import ray
        node = ray.get_runtime_context().get_node_id() if ray.is_initialized() else ""
    except Exception:
        node = ""
    return replica, node


@serve.deployment(name="quilt", health_check_period_s=10, health_check_timeout_s=30)
class QuiltModel:
    """One replica: a model loaded by ModelServer, HTTP in and out, batching and metrics."""

    def __init__(self, model: str, engine: str = "quilt", session_options: dict | None = None,
                 batching: bool = True, max_batch_size: int = 8, batch_wait_timeout_s: float = 0.005,
                 warmup: bool = True):
        self.replica, self.node = _where()
        try:
            self.server = ModelServer(model, engine=engine, session_options=session_options,
                                      batching=batching, warmup=warmup)
        except Exception as e:
            where = f" (replica {self.replica} on node {self.node})" if self.replica else ""
            raise ModelLoadError(f"quilt.serve{where}: cannot load model '{model}' with {engine}: "
                                 f"{type(e).__name__}: {e}") from e
        self.max_batch_size = int(max_batch_size)
        self._batched.set_max_batch_size(self.max_batch_size)
        self._batched.set_batch_wait_timeout_s(float(batch_wait_timeout_s))
        self._run_lock = asyncio.Lock()  # unbatched runs go one at a time, each on every thread
        self._tags = {"model": os.path.basename(str(model)), "engine": engine, "backend": self.server.backend}
        tag_keys = ("model", "engine", "backend")
        self._requests = metrics.Counter(
            "quilt_serve_requests", description="Requests answered, by HTTP status.",
            tag_keys=tag_keys + ("status",))
        self._latency = metrics.Histogram(
            "quilt_serve_request_latency_ms", description="Time from a request's arrival in the replica "
            "to its response, ms (successful requests).", boundaries=_LATENCY_BOUNDS_MS, tag_keys=tag_keys)
        self._run_latency = metrics.Histogram(
            "quilt_serve_run_latency_ms", description="Time of one run of the model (one batch), ms.",
            boundaries=_LATENCY_BOUNDS_MS, tag_keys=tag_keys)
        self._batch_rows = metrics.Histogram(
            "quilt_serve_batch_rows", description="Rows along the batch dim in one run.",
            boundaries=[1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64], tag_keys=tag_keys)
        info = self.server.info()
        logger.info("quilt.serve: %s on %s (%s), batching %s", model, info["backend"], engine,
                    f"along dim 0 ({info['batch_dim']})" if info["batching"] else f"off: {info['batching_refused']}")

    def info(self) -> dict:
        """The model, its inputs and outputs, the engine, backend, batching; where this replica is."""
        return {**self.server.info(), "replica": self.replica, "node": self.node}

    def check_health(self) -> None:
        """Ray Serve calls this periodically; raising makes Ray replace the replica."""
        self.server.check_health()

    async def __call__(self, request: Request) -> Response:
        start = time.perf_counter()
        outcome = Outcome()
        if request.method == "GET":
            return Response(json.dumps(self.info()), media_type=JSON_TYPE, headers=self._headers(outcome))
        try:
            if request.method != "POST":
                raise RequestError(405, f"{request.method}: POST a request, or GET the model's description")
            parsed = self.server.parse(await request.body(), request.headers.get("content-type"),
                                       request.query_params)
            if self.server.batch is not None and parsed.rows <= self.max_batch_size:
                outcome = await self._batched(parsed)
            else:
                outcome = await self._alone(parsed)
            if outcome.error is not None:
                raise outcome.error
            content, media_type = self.server.encode(outcome, parsed, request.headers.get("accept"))
            status = 200
        except (RequestError, RunError) as e:
            status, content, media_type = e.status, self._error_body(e.status, e.message), JSON_TYPE
        except Exception as e:  # a bug, not the request's fault: say so, keep serving
            logger.exception("quilt.serve: internal error")
            status, media_type = 500, JSON_TYPE
            content = self._error_body(500, f"internal error: {type(e).__name__}: {e}")
        self._requests.inc(tags={**self._tags, "status": str(status)})
        if status == 200:
            self._latency.observe((time.perf_counter() - start) * 1e3, tags=self._tags)
        return Response(content, status_code=status, media_type=media_type, headers=self._headers(outcome))

    def _error_body(self, status: int, message: str) -> bytes:
        return json.dumps({"error": message, "status": status, "model": self.server.model_name}).encode()

    def _headers(self, outcome: Outcome) -> dict:
        headers = {"x-quilt-engine": self.server.engine, "x-quilt-backend": self.server.backend,
                   "x-quilt-replica": self.replica, "x-quilt-node": self.node}
        if outcome.batch_rows:
            headers["x-quilt-batch-rows"] = str(outcome.batch_rows)
            headers["x-quilt-run-ms"] = f"{outcome.run_ms:.3f}"
        return headers

    def _observe_runs(self, outcomes: list[Outcome]) -> None:
        seen = set()
        for o in outcomes:  # requests batched together share one run
            key = (o.batch_rows, o.run_ms)
            if o.error is None and key not in seen:
                seen.add(key)
                self._run_latency.observe(o.run_ms, tags=self._tags)
                self._batch_rows.observe(o.batch_rows, tags=self._tags)

    async def _alone(self, request: ParsedRequest) -> Outcome:
        async with self._run_lock:
            outcomes = await asyncio.to_thread(self.server.run, [request])
        self._observe_runs(outcomes)
        return outcomes[0]

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.005, batch_size_fn=_rows)
    async def _batched(self, requests: list[ParsedRequest]) -> list[Outcome]:
        # The run leaves the event loop free, so requests keep arriving and form the next batch.
        outcomes = await asyncio.to_thread(self.server.run, requests)
        self._observe_runs(outcomes)
        return outcomes


def _session_option_names() -> set[str]:
    from ._session import make_options
    return set(inspect.signature(make_options).parameters)


def app(model: str | os.PathLike, *, engine: str = "quilt", replicas: int = 1, threads: int = 1,
        num_cpus: float | None = None, batching: bool = True, max_batch_size: int = 8,
        batch_wait_ms: float = 5.0, max_ongoing_requests: int | None = None,
        max_replicas_per_node: int | None = None, health_check_period_s: float = 10.0,
        max_constructor_retries: int = 3, warmup: bool = True, name: str = "quilt",
        **session_options) -> serve.Application:
    """A Ray Serve application serving `model` (a path each replica can read).

    threads: Quilt's CPU threads per replica; each replica reserves `num_cpus` of Ray's CPUs
    (default: threads). session_options: the other fields of quilt.Session (backends,
    cpu_fallback, pinned_nodes, partition_cost_rule, plugins, backend_options, fixed_dims,
    optimization_level, log_level). batching: @serve.batch along the batch dim, up to
    max_batch_size rows, waiting at most batch_wait_ms for a batch to fill. A replica whose
    model does not load is started again up to max_constructor_retries times (Ray Serve's
    default, 20, keeps a cluster busy for minutes with a model that cannot load) before the
    deployment fails. Quilt has no precision option: a model runs in the types it was
    exported with."""
    known = _session_option_names() - {"threads"}
    unknown = sorted(set(session_options) - known)
    if unknown:
        raise TypeError(f"unknown option {', '.join(unknown)} (quilt.Session's options: {', '.join(sorted(known))})")
    if engine not in ("quilt", "onnxruntime"):
        raise ValueError(f"unknown engine '{engine}' (known: quilt, onnxruntime)")
    if int(replicas) < 1 or int(max_batch_size) < 1 or int(threads) < 0 or int(max_constructor_retries) < 1:
        raise ValueError("replicas, max_batch_size and max_constructor_retries must be at least 1, "
                         "threads at least 0")
    path = os.path.abspath(os.fspath(model))
    options: dict[str, Any] = {"threads": int(threads), **session_options}
    ongoing = max_ongoing_requests or (max(5, 2 * int(max_batch_size)) if batching else 5)
    deployment = QuiltModel.options(
        name=name, num_replicas=int(replicas), max_ongoing_requests=int(ongoing),
        health_check_period_s=float(health_check_period_s),
        max_constructor_retry_count=int(max_constructor_retries),
        ray_actor_options={"num_cpus": float(num_cpus if num_cpus is not None else max(int(threads), 1))},
        **({"max_replicas_per_node": int(max_replicas_per_node)} if max_replicas_per_node else {}))
    return deployment.bind(path, engine, options, bool(batching), int(max_batch_size),
                           float(batch_wait_ms) / 1e3, bool(warmup))


def build_app(args: dict[str, str]) -> serve.Application:
    """For Ray Serve's own CLI and config files: `serve run quilt.serve:build_app
    model=model.onnx replicas=2 threads=2` (values are strings, converted here)."""
    args = dict(args)
    if "model" not in args:
        raise ValueError("build_app needs model=PATH")
    ints = {"replicas", "threads", "max_batch_size", "max_ongoing_requests", "max_replicas_per_node",
            "max_constructor_retries", "optimization_level"}
    floats = {"num_cpus", "batch_wait_ms", "health_check_period_s"}
    bools = {"batching", "warmup", "cpu_fallback", "partition_cost_rule"}
    lists = {"backends", "plugins"}
    for key, value in list(args.items()):
        if not isinstance(value, str):
            continue
        if key in ints:
            args[key] = int(value)
        elif key in floats:
            args[key] = float(value)
        elif key in bools:
            args[key] = value.lower() in ("1", "true", "yes", "on")
        elif key in lists:
            args[key] = [v for v in value.split(",") if v]
    return app(args.pop("model"), **args)


# ---------------------------------------------------------------------------------------------
# python -m quilt.serve

def _key_value(text: str, what: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{what}: expected NAME=VALUE, got '{text}'")
    return key, value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m quilt.serve",
        description="Serve an ONNX model with Quilt on Ray Serve: replicas placed by Ray, requests "
                    "batched along the model's batch dim, JSON or .npy/.npz over HTTP.",
        epilog="Exit codes: 0 ok, 1 the deployment failed, 2 bad usage. Without --address a local "
               "Ray instance is started and stopped with this command; with --address the "
               "application runs on that cluster (every node needs the model at the same path "
               "and the quilt package) and is deleted when this command ends, unless --detach.")
    p.add_argument("model", help="the ONNX model (a path every replica's node can read)")
    p.add_argument("--replicas", type=int, default=1, help="number of replicas (default 1)")
    p.add_argument("--port", type=int, default=8000,
                   help="HTTP port of Ray Serve's proxies (default 8000; on a cluster where Serve "
                        "already runs, its proxies keep the port they have)")
    p.add_argument("--host", default="127.0.0.1", help="HTTP host of the proxies (default 127.0.0.1; "
                                                       "0.0.0.0 to listen on every interface)")
    p.add_argument("--address", help="an existing Ray cluster (HOST:PORT of its head's GCS, or 'auto'); "
                                     "default: start a local Ray instance")
    p.add_argument("--name", default="quilt", help="the Serve application and deployment name (default quilt)")
    p.add_argument("--route-prefix", default="/", help="HTTP route of the application (default /)")
    p.add_argument("--engine", choices=["quilt", "onnxruntime"], default="quilt",
                   help="run the model on Quilt (default) or on onnxruntime, to compare")
    g = p.add_argument_group("session (quilt.Session's options, named as in the quilt command)")
    g.add_argument("--threads", type=int, default=1, help="CPU threads per replica (default 1)")
    g.add_argument("--num-cpus", type=float, help="Ray CPUs each replica reserves (default: --threads)")
    g.add_argument("--backend", default="cpu", help="backends in priority order, e.g. opencl,cpu (default cpu)")
    g.add_argument("--plugin", action="append", default=[], help="backend plugin library (repeatable)")
    g.add_argument("--strict", action="store_true", help="no CPU fallback")
    g.add_argument("--pin", action="append", default=[], type=lambda t: _key_value(t, "--pin"),
                   metavar="NODE=BACKEND", help="run node NODE on BACKEND (repeatable)")
    g.add_argument("--no-cost-rule", action="store_true", help="honour every backend claim")
    g.add_argument("--backend-option", action="append", default=[], metavar="BACKEND:KEY=VALUE",
                   help="option for BACKEND's devices (repeatable)")
    g.add_argument("--fixed-dim", action="append", default=[], type=lambda t: _key_value(t, "--fixed-dim"),
                   metavar="NAME=VALUE", help="fix symbolic dim NAME (repeatable)")
    g.add_argument("--optimization-level", type=int, default=1, help="0 = run as written, 1 = fold (default)")
    g.add_argument("--log-level", default="warning", choices=["error", "warning", "info", "debug"])
    b = p.add_argument_group("batching and replicas")
    b.add_argument("--no-batching", action="store_true", help="run each request alone")
    b.add_argument("--max-batch-size", type=int, default=8, help="rows in one batched run (default 8)")
    b.add_argument("--batch-wait-ms", type=float, default=5.0, help="longest wait for a batch to fill (default 5)")
    b.add_argument("--max-ongoing-requests", type=int, help="requests a replica holds at once "
                                                           "(default 2 x max batch size, 5 without batching)")
    b.add_argument("--max-replicas-per-node", type=int, help="spread replicas: at most this many per node")
    b.add_argument("--proxy-location", choices=["EveryNode", "HeadOnly", "Disabled"], default="EveryNode",
                   help="where Ray Serve runs HTTP proxies (default EveryNode)")
    b.add_argument("--health-check-period", type=float, default=10.0, help="seconds between health checks")
    b.add_argument("--max-constructor-retries", type=int, default=3,
                   help="times a replica whose model does not load is started again (default 3)")
    b.add_argument("--no-warmup", action="store_true", help="no run on generated inputs at load")
    p.add_argument("--detach", action="store_true", help="deploy and exit, leaving the application running")
    return p


def _session_options(args, parser) -> dict:
    backend_options: dict[str, dict[str, str]] = {}
    for text in args.backend_option:
        backend, sep, rest = text.partition(":")
        key, sep2, value = rest.partition("=")
        if not sep or not sep2 or not backend or not key:
            parser.error(f"--backend-option: expected BACKEND:KEY=VALUE, got '{text}'")
        backend_options.setdefault(backend, {})[key] = value
    fixed = {}
    for key, value in args.fixed_dim:
        try:
            fixed[key] = int(value)
        except ValueError:
            parser.error(f"--fixed-dim {key}: '{value}' is not an integer")
    return {"backends": [b for b in args.backend.split(",") if b], "cpu_fallback": not args.strict,
            "pinned_nodes": dict(args.pin), "partition_cost_rule": not args.no_cost_rule,
            "plugins": [os.path.abspath(p) for p in args.plugin], "backend_options": backend_options,
            "fixed_dims": fixed, "optimization_level": args.optimization_level, "log_level": args.log_level}


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not os.path.isfile(args.model):
        parser.error(f"model '{args.model}': no such file")
    options = _session_options(args, parser)
    if args.engine == "onnxruntime":
        options = {k: options[k] for k in ("optimization_level",)}
    try:
        application = app(args.model, engine=args.engine, replicas=args.replicas, threads=args.threads,
                          num_cpus=args.num_cpus, batching=not args.no_batching,
                          max_batch_size=args.max_batch_size, batch_wait_ms=args.batch_wait_ms,
                          max_ongoing_requests=args.max_ongoing_requests,
                          max_replicas_per_node=args.max_replicas_per_node,
                          health_check_period_s=args.health_check_period,
                          max_constructor_retries=args.max_constructor_retries, warmup=not args.no_warmup,
                          name=args.name, **options)
    except (TypeError, ValueError) as e:
        parser.error(str(e))

    import ray
    local = not args.address
    if local:
        per_replica = args.num_cpus if args.num_cpus is not None else max(args.threads, 1)
        cpus = max(os.cpu_count() or 1, int(per_replica * args.replicas + 0.999))
        ray.init(address="local", include_dashboard=False, num_cpus=cpus, log_to_driver=False)
    else:
        ray.init(address=args.address, log_to_driver=False)
    stop = {"signal": None}

    def on_signal(signum, frame):
        stop["signal"] = signum
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_signal)
    try:
        serve.start(proxy_location=args.proxy_location, http_options={"host": args.host, "port": args.port})
        try:
            handle = serve.run(application, name=args.name, route_prefix=args.route_prefix)
            info = handle.info.remote().result()
        except Exception as e:
            print(f"quilt.serve: deploying {args.model} failed: {e}{_status_messages(args.name)}", file=sys.stderr)
            _cleanup(args, local, failed=True)
            return 1
        batching = (f"batching along dim 0 ({info['batch_dim']}), up to {args.max_batch_size} rows"
                    if info["batching"] else f"no batching ({info['batching_refused']})")
        print(f"quilt.serve: {args.model} on http://{args.host}:{args.port}{args.route_prefix} "
              f"({args.replicas} replica{'s' if args.replicas != 1 else ''}, {info['engine']} on "
              f"{info['backend']}, {batching})", flush=True)
        if args.detach:
            return 0
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        _cleanup(args, local)
        return 0


def _status_messages(name: str) -> str:
    """What Ray Serve says about the application and its deployments (a replica's constructor
    error, with the model named: ModelLoadError), for a deployment that failed."""
    try:
        application = serve.status().applications.get(name)
    except Exception:  # noqa: BLE001 - the controller is gone: nothing more to say
        return ""
    if application is None:
        return ""
    lines = [f"\n{name}: {application.message}"] if application.message else []
    for deployment_name, deployment in application.deployments.items():
        if deployment.message:
            lines.append(f"\n{deployment_name} ({deployment.status}): {deployment.message}")
    return "".join(lines)


def _cleanup(args, local: bool, failed: bool = False) -> None:
    """Stops what this command started: the local instance, or the application on the cluster
    (kept with --detach, unless it failed to deploy)."""
    import ray
    try:
        if local:
            serve.shutdown()
        elif failed or not args.detach:
            serve.delete(args.name)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    # Through the package's module, so that Ray pickles QuiltModel by reference, not by value.
    from quilt.serve import main as _main
    sys.exit(_main())
