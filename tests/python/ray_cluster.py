"""A Ray cluster of several nodes (raylets) on this machine, for the Ray Serve tests.

    with RayCluster(workdir, nodes=2, cpus_per_node=1) as cluster:
        ray.init(address=cluster.address)      # or `python -m quilt.serve --address ...`

Each node is `ray start --block` in a session of its own, started with PR_SET_PDEATHSIG so that
it stops when the test process dies, whatever kills it. stop() ends each node (`ray start
--block` stops its node's processes on SIGTERM), then kills whatever is still alive in the
nodes' sessions, by process id, and copies Ray's logs into workdir/ray-logs. Ray's temp dir is
a fresh directory, and the nodes and this process share a token of their own (RAY_AUTH_TOKEN,
set when this module is imported: Ray reads it when it is imported), so nothing in /tmp/ray or
~/.ray is touched. Run it where the only network is the loopback (tools/loopback_only.sh):
every node is then on 127.0.0.1.
"""
from __future__ import annotations

import ctypes
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path


if "ray" in sys.modules:
    raise ImportError("import ray_cluster before ray: it sets the environment Ray reads when imported")
# The head's proxy routes to every replica, not first to the one on its own node (Ray Serve's
# default): the cluster test needs answers from both nodes, and with local preference the first
# 254 answers of a fresh-clone run all came from the head's replica.
os.environ.update({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32),
                   "RAY_USAGE_STATS_ENABLED": "0", "RAY_metrics_report_interval_ms": "1000",
                   "RAY_SERVE_PROXY_PREFER_LOCAL_NODE_ROUTING": "0"})


_handed_out: set[int] = set()


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_port() -> int:
    """A port free now on 127.0.0.1, outside the kernel's ephemeral range and Ray's worker ports
    (10002-19999), and not handed out before by this process. A port the kernel picked (bind to
    port 0) is from the ephemeral range, where every outgoing connection and every process
    listening on "any port" draws from: Ray's own processes, started between the pick and the
    bind, took one (a fresh-clone run failed with "Failed to bind to address
    '127.0.0.1:35745'")."""
    low, high = _ephemeral_range()
    lo, hi = (20000, low - 1) if low > 21000 else (max(high + 1, 20000), 65535)
    for _ in range(1000):
        port = random.randint(lo, hi)
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port on 127.0.0.1 in [{lo}, {hi}]")


def _die_with_parent():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _sessions_processes(session_ids: set[int]) -> list[int]:
    """Ids of the live processes whose session id is one of session_ids (field 6 of
    /proc/PID/stat); zombies (dead, not yet reaped by their parent) are not counted."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[3]) in session_ids and fields[0] not in ("Z", "X"):
            pids.append(int(entry.name))
    return pids


class RayCluster:
    def __init__(self, workdir: str | os.PathLike, nodes: int = 2, cpus_per_node: float = 1,
                 object_store_bytes: int = 150 * 1024 * 1024, start_timeout_s: float = 120):
        self.workdir = Path(workdir)
        self.nodes, self.cpus = nodes, cpus_per_node
        self.object_store_bytes = object_store_bytes
        self.start_timeout_s = start_timeout_s
        self.procs: list[subprocess.Popen] = []
        self.session_ids: set[int] = set()  # one session per node: what stop() ends
        self.metrics_ports: list[int] = []
        # Unix socket paths must stay under ~100 characters: a short directory in /tmp.
        self.temp_dir = tempfile.mkdtemp(prefix="qray-")
        self.gcs_port = free_port()
        self.address = f"127.0.0.1:{self.gcs_port}"

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    def _start_node(self, index: int):
        ray = str(Path(sys.executable).with_name("ray"))
        metrics_port = free_port()
        self.metrics_ports.append(metrics_port)
        args = [ray, "start", "--block", "--node-ip-address=127.0.0.1", f"--num-cpus={self.cpus}",
                f"--object-store-memory={self.object_store_bytes}", "--disable-usage-stats",
                f"--node-manager-port={free_port()}", f"--object-manager-port={free_port()}",
                f"--dashboard-agent-listen-port={free_port()}", f"--dashboard-agent-grpc-port={free_port()}",
                f"--runtime-env-agent-port={free_port()}", f"--metrics-export-port={metrics_port}",
                "--min-worker-port=0", "--max-worker-port=0"]
        if index == 0:
            args += ["--head", f"--port={self.gcs_port}", "--include-dashboard=false",
                     f"--dashboard-port={free_port()}", f"--ray-client-server-port={free_port()}",
                     f"--temp-dir={self.temp_dir}"]
        else:
            args += [f"--address={self.address}"]
        log = open(self.workdir / f"ray-node-{index}.log", "w")
        self.procs.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL, start_new_session=True,
                                           preexec_fn=_die_with_parent))
        self.session_ids.add(self.procs[-1].pid)

    def start(self):
        """Starts the nodes and connects this process to the cluster (ray.init)."""
        import ray
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._start_node(0)
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            self._check_nodes_run()
            try:
                ray.init(address=self.address, log_to_driver=False)
                break
            except Exception as e:  # the GCS is not up yet
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the ray head did not start in {self.start_timeout_s:.0f} s: {e}") from e
                time.sleep(1)
        for i in range(1, self.nodes):
            self._start_node(i)
        while len([n for n in ray.nodes() if n["Alive"]]) < self.nodes:
            self._check_nodes_run()
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.nodes} ray nodes not alive after {self.start_timeout_s:.0f} s")
            time.sleep(0.5)

    def _check_nodes_run(self):
        for i, p in enumerate(self.procs):
            if p.poll() is not None:
                raise RuntimeError(f"ray node {i} exited with {p.returncode}: see "
                                   f"{self.workdir / f'ray-node-{i}.log'}")

    def stop(self, grace_s: float = 30):
        import ray
        ray.shutdown()
        sessions = self.session_ids
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        # Whatever a node left (workers in their own process groups, a stuck raylet), until
        # none is left: a killed process takes a moment to go, a dying raylet may still fork.
        for _ in range(40):
            left = _sessions_processes(sessions)
            if not left:
                break
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.5)
        for p in self.procs:
            if p.poll() is None:
                p.wait(5)
        self.procs = []
        # Ray's logs (raylets, GCS, Serve's controller, proxies and replicas) outlive the temp
        # dir in the test's work dir, for a failure to be read afterwards.
        logs = Path(self.temp_dir) / "session_latest" / "logs"
        if logs.is_dir():
            subprocess.run(["cp", "-rL", str(logs), str(self.workdir / "ray-logs")], check=False)
        subprocess.run(["rm", "-rf", self.temp_dir], check=False)

    def alive_processes(self) -> list[int]:
        return _sessions_processes(self.session_ids)
