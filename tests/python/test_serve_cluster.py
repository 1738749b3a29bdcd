"""quilt.serve on a Ray cluster of two nodes on this machine (two raylets on 127.0.0.1): a
deployment of 2 replicas, one per node, deployed with `python -m quilt.serve --address`; 1,000
requests from 8 concurrent clients in JSON, .npy and .npz, every answer equal to a direct
quilt.Session run on the same input; a replica killed during the run, replaced by Ray, with the
clients seeing only failed attempts that they retried, never a wrong answer; Quilt's metrics
in Ray's Prometheus export; a model that does not load failing the deployment with a message
naming it, and a replica whose device fails its runs replaced through the health check.

Runs where the only network is the loopback (CTest wraps it in tools/loopback_only.sh), and
stops everything it started, on failure too (ray_cluster.RayCluster)."""
from __future__ import annotations

import http.client
import io
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from ray_cluster import RayCluster, free_port

SOURCE = Path(os.environ.get("QUILT_SOURCE_DIR", Path(__file__).resolve().parents[2]))
MODEL = SOURCE / "tools" / "models" / "digits_cnn.onnx"  # input image [batch, 1, 8, 8]
REQUESTS, CLIENTS, KILL_AFTER = 1000, 8, 250
FORMATS = ["json", "npy", "npz"]

if os.environ.get("QUILT_LOOPBACK_ONLY") != "1":
    pytest.skip("run through tools/loopback_only.sh (CTest does): Ray must see only the loopback",
                allow_module_level=True)

import quilt  # noqa: E402
from quilt._serving import decode_response, encode_request  # noqa: E402


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with RayCluster(tmp_path_factory.mktemp("ray"), nodes=2, cpus_per_node=1) as c:
        # Serve's proxies take their port when Serve starts (the first deployment); later
        # deployments on the cluster share it.
        c.serve_port = free_port()
        yield c
    assert not c.alive_processes(), "processes of the ray nodes still alive after stop()"


@pytest.fixture
def deployed(cluster):
    """The names of the applications a test deploys: deleted at its end, on failure too, so that
    a failed test does not hold the cluster's CPUs for the next one."""
    names: list[str] = []
    yield names
    from ray import serve
    for name in names:
        try:
            serve.delete(name)
        except Exception as e:  # noqa: BLE001 - report, and go on deleting
            print(f"deleting {name}: {e}")


def deploy(cluster, port, *args, name="quilt", timeout=240):
    assert port == cluster.serve_port
    cmd = [sys.executable, "-m", "quilt.serve", *map(str, args), "--address", cluster.address,
           "--port", str(port), "--proxy-location", "HeadOnly", "--name", name,
           "--route-prefix", f"/{name}", "--detach"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def post(url, body, content_type, timeout=60):
    """(status, headers, body); status 0 when the connection failed."""
    request = urllib.request.Request(url, data=body, headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()
    except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError) as e:
        return 0, {}, str(e).encode()


def replica_actors():
    import ray
    return {a["name"].rsplit("#", 1)[1]: a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
            if a["name"].startswith("SERVE_REPLICA::quilt#")}


def _processes_mentioning(text: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


def test_the_command_on_a_local_ray_instance_serves_and_stops_it_all(tmp_path):
    # `python -m quilt.serve MODEL --replicas 2 --port P`, as the README shows: a Ray instance of
    # its own (its temp dir here), until SIGTERM, which stops Ray with it.
    import signal
    import tempfile
    ray_tmp = tempfile.mkdtemp(prefix="qlocal-")  # short: Ray's socket paths live under it
    port = free_port()
    log = open(tmp_path / "serve.log", "w+")
    proc = subprocess.Popen([sys.executable, "-m", "quilt.serve", str(MODEL), "--replicas", "2", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True,
                            env={**os.environ, "RAY_TMPDIR": ray_tmp})
    try:
        ready = {}

        def read_first_line():
            ready["line"] = proc.stdout.readline()
        reader = threading.Thread(target=read_first_line, daemon=True)
        reader.start()
        reader.join(240)
        line = ready.get("line", "")
        log.seek(0)
        assert line.startswith(f"quilt.serve: {MODEL} on http://127.0.0.1:{port}/ (2 replicas, quilt on cpu, "
                               "batching along dim 0 (batch), up to 8 rows)"), line + log.read()[-3000:]
        x = np.full((1, 1, 8, 8), 0.5, np.float32)
        status, _, content = post(f"http://127.0.0.1:{port}/", *encode_request({"image": x}, "json"))
        assert status == 200, content
        (got,) = decode_response(content, "application/json").values()
        assert np.array_equal(got, quilt.Session(str(MODEL), threads=1).run({"image": x})["probabilities"])
        assert _processes_mentioning(ray_tmp), "no Ray process runs with the command's temp dir"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(120) == 0
        deadline = time.monotonic() + 30
        while _processes_mentioning(ray_tmp) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not _processes_mentioning(ray_tmp), "Ray processes left after the command stopped"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        for pid in _processes_mentioning(ray_tmp):  # whatever a failure left
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        subprocess.run(["rm", "-rf", ray_tmp], check=False)


def test_two_nodes_two_replicas_1000_requests_one_replica_killed(cluster, deployed):
    import ray
    from ray import serve
    started = time.monotonic()
    port = cluster.serve_port
    deployed.append("quilt")
    r = deploy(cluster, port, MODEL, "--replicas", 2, "--threads", 1, "--max-replicas-per-node", 1,
               "--max-batch-size", 4, "--health-check-period", 2)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 replicas" in r.stdout and "batching along dim 0 (batch)" in r.stdout, r.stdout
    url = f"http://127.0.0.1:{port}/quilt"
    # Bad requests through Ray Serve's proxy: 4xx, saying what is wrong (every kind: test_serve.py).
    for body, ctype, status, words in [
            (b'{"inputs": {"image": [1', "application/json", 400, "body: invalid JSON"),
            (json.dumps({"inputs": {"img": [0]}}).encode(), "application/json", 400, "unknown input 'img'"),
            (encode_request({"image": np.zeros((1, 1, 8, 8), np.float64)}, "npy")[0], "application/x-npy", 400,
             "input 'image' has dtype float64, expected float32"),
            (encode_request({"image": np.zeros((1, 8, 8), np.float32)}, "npy")[0], "application/x-npy", 400,
             "rank 3, expected 4"),
            (b"hello", "text/plain", 415, "neither JSON")]:
        got, _, content = post(url, body, ctype)
        assert got == status and words in json.loads(content)["error"], (got, content)
    deployed_at = time.monotonic()

    rng = np.random.default_rng(7)
    images = rng.standard_normal((REQUESTS, 1, 1, 8, 8)).astype(np.float32)
    direct = quilt.Session(str(MODEL), threads=1)
    expected = [direct.run({"image": x})["probabilities"] for x in images]

    lock = threading.Lock()
    state = {"next": 0, "done": 0}
    answers: dict[int, tuple] = {}
    failed_attempts: list[tuple] = []
    wrong: list[str] = []

    def client():
        while True:
            with lock:
                i = state["next"]
                state["next"] += 1
            if i >= REQUESTS:
                return
            body, ctype = encode_request({"image": images[i]}, FORMATS[i % 3])
            for attempt in range(8):
                status, headers, content = post(url, body, ctype)
                if status == 200:
                    got = next(iter(decode_response(content, headers["content-type"]).values()))
                    if not np.array_equal(got, expected[i]):
                        with lock:
                            wrong.append(f"request {i} ({FORMATS[i % 3]}): {got} != {expected[i]}")
                    with lock:
                        answers[i] = (headers["x-quilt-replica"], headers["x-quilt-node"], time.monotonic())
                        state["done"] += 1
                    break
                with lock:
                    failed_attempts.append((i, status, content[:300]))
                if 400 <= status < 500:
                    break  # a request error is never retried: the test fails below
                time.sleep(0.2 * (attempt + 1))

    threads = [threading.Thread(target=client, daemon=True) for _ in range(CLIENTS)]
    for t in threads:
        t.start()
    # Kill a replica on the second node once a quarter of the requests are answered.
    deadline = time.monotonic() + 240
    while state["done"] < KILL_AFTER and time.monotonic() < deadline and any(t.is_alive() for t in threads):
        time.sleep(0.05)
    with lock:
        before = dict(answers)
    nodes_before = {node for _, node, _ in before.values()}
    assert len(nodes_before) == 2, f"the first {len(before)} answers came from nodes {nodes_before}"
    replica_node = {replica: node for replica, node, _ in before.values()}
    head_node = next(n["NodeID"] for n in ray.nodes() if "node:__internal_head__" in n["Resources"])
    victim = next(r for r, n in replica_node.items() if n != head_node)  # the second node's replica
    actors = replica_actors()
    assert set(actors) == set(replica_node), (actors, replica_node)
    ray.kill(ray.get_actor(actors[victim], namespace="serve"), no_restart=True)
    killed_at = time.monotonic()
    for t in threads:
        t.join(max(1, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in threads), f"clients still running after 240 s: {state}"
    finished = time.monotonic()

    assert not wrong, f"{len(wrong)} wrong answers, first: {wrong[0]}"
    assert len(answers) == REQUESTS, f"{REQUESTS - len(answers)} requests never answered; failed attempts: " \
                                     f"{failed_attempts[:5]}"
    client_errors = [f for f in failed_attempts if 400 <= f[1] < 500]
    assert not client_errors, f"requests refused as bad: {client_errors[:3]}"
    assert all(answers[i][0] != victim or answers[i][2] <= killed_at + 1 for i in answers), \
        "answers from the killed replica after it was killed"
    after_kill = sum(1 for a in answers.values() if a[2] > killed_at)
    assert after_kill >= REQUESTS // 2, f"only {after_kill} requests answered after the kill: it came too late"

    # Ray replaces the replica (on the second node: one replica per node), and it answers.
    replaced_deadline = time.monotonic() + 120
    new = set()
    while time.monotonic() < replaced_deadline:
        status = serve.status().applications["quilt"].deployments["quilt"]
        new = set(replica_actors()) - set(replica_node)
        if new and status.status == "HEALTHY" and status.replica_states.get("RUNNING") == 2:
            break
        time.sleep(0.5)
    assert new, f"no new replica 120 s after the kill: {serve.status()}"
    assert status.replica_states.get("RUNNING") == 2, f"2 replicas not running 120 s after the kill: {status}"
    (newcomer,) = new
    burst_deadline = time.monotonic() + 90
    # Ray Serve's proxy (on the head node) routes to the replica on its own node while that one
    # has room, so sequential requests would all stay there: 8 clients again, until the newcomer
    # has answered some, each answer checked.
    burst = {"newcomer": 0, "sent": 0, "other": []}

    def burst_client(k: int):
        while burst["newcomer"] < 5 and time.monotonic() < burst_deadline:
            i = (k * 97 + burst["sent"]) % REQUESTS
            with lock:
                burst["sent"] += 1
            status, headers, content = post(url, *encode_request({"image": images[i]}, "npy"))
            if status != 200:
                burst["other"].append((status, content[:300]))
                continue
            got = np.load(io.BytesIO(content))
            if not np.array_equal(got, expected[i]):
                with lock:
                    wrong.append(f"after the kill, request {i}: {got} != {expected[i]}")
            if headers["x-quilt-replica"] == newcomer:
                with lock:
                    burst["newcomer"] += 1
                    if headers["x-quilt-node"] != replica_node[victim]:
                        wrong.append(f"the new replica is on node {headers['x-quilt-node']}, "
                                     f"not on the second node {replica_node[victim]}")
    burst_threads = [threading.Thread(target=burst_client, args=(k,), daemon=True) for k in range(CLIENTS)]
    for t in burst_threads:
        t.start()
    for t in burst_threads:
        t.join(max(1, burst_deadline - time.monotonic() + 60))
    assert not wrong, wrong[:3]
    assert not burst["other"], f"failed requests once the replica was replaced: {burst['other'][:3]}"
    assert burst["newcomer"] >= 5, f"the new replica {newcomer} answered {burst['newcomer']} of {burst['sent']} " \
                                   f"requests: {serve.status()}"
    replaced = time.monotonic()

    # Quilt's metrics reach Ray's Prometheus export: request latency by backend, every request.
    metric = "ray_quilt_serve_request_latency_ms_count"
    total, text = 0.0, ""
    while time.monotonic() < replaced + 60:
        text = "".join(urllib.request.urlopen(f"http://127.0.0.1:{p}/metrics", timeout=10).read().decode()
                       for p in cluster.metrics_ports)
        rows = [line for line in text.splitlines() if line.startswith(metric + "{")]
        total = sum(float(line.rsplit(" ", 1)[1]) for line in rows if 'backend="cpu"' in line)
        # The killed replica's last seconds of counts may be lost with it.
        if total >= REQUESTS * 0.5 and any('engine="quilt"' in line for line in rows):
            break
        time.sleep(1)
    assert total >= REQUESTS * 0.5, f"{metric} with backend=cpu adds up to {total}: " + \
        "\n".join(line for line in text.splitlines() if "quilt_serve" in line)[:2000]

    print(f"\ndeploy {deployed_at - started:.1f} s, {REQUESTS} requests from {CLIENTS} clients in "
          f"{finished - deployed_at:.1f} s ({REQUESTS / (finished - deployed_at):.0f}/s), "
          f"{after_kill} answered after the kill, {len(failed_attempts)} failed attempts retried "
          f"({sorted({f[1] for f in failed_attempts})}), replaced and answering "
          f"{replaced - killed_at:.1f} s after the kill ({burst['sent']} requests, {burst['newcomer']} to "
          f"the new replica), metrics counted {total:.0f}")


def test_a_model_that_does_not_load_fails_the_deployment_naming_it(cluster, deployed, tmp_path):
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"\x08\x07" + bytes(range(256)) * 4)  # not a ModelProto
    deployed.append("broken")
    started = time.monotonic()
    r = deploy(cluster, cluster.serve_port, broken, "--replicas", 1, "--max-constructor-retries", 2, name="broken")
    print(f"\nthe deployment failed after {time.monotonic() - started:.1f} s")
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"cannot load model '{broken}' with quilt" in r.stderr, r.stderr[-3000:]
    assert "InvalidModel" in r.stderr or "Io" in r.stderr, r.stderr[-3000:]
    from ray import serve
    assert "broken" not in serve.status().applications  # the command deleted it


def test_a_replica_whose_runs_fail_is_replaced_through_the_health_check(cluster, deployed):
    plugin = os.environ.get("QUILT_EXAMPLE_PLUGIN", "")
    if not os.path.exists(plugin):
        pytest.skip("QUILT_EXAMPLE_PLUGIN is not set to the example plugin (CTest sets it)")
    port = cluster.serve_port
    deployed.append("flaky")
    # The example plugin's device fails every execute of conv1: the model loads (no warm-up run),
    # its first request fails with 500, and the health check then fails the replica.
    r = deploy(cluster, port, MODEL, "--replicas", 1, "--backend", "example,cpu", "--plugin", plugin,
               "--backend-option", "example:fail_execute_on=conv1", "--no-warmup",
               "--health-check-period", 1, name="flaky")
    assert r.returncode == 0, r.stdout + r.stderr
    url = f"http://127.0.0.1:{port}/flaky"
    first = urllib.request.urlopen(url, timeout=30)
    replica = json.loads(first.read())["replica"]
    status, headers, content = post(url, *encode_request({"image": np.zeros((1, 1, 8, 8), np.float32)}, "npy"))
    assert status == 500, (status, content)
    assert b"injected failure in node 'conv1'" in content and b"example" in content, content
    assert headers["x-quilt-replica"] == replica
    deadline = time.monotonic() + 90
    now = replica
    while time.monotonic() < deadline:
        try:
            now = json.loads(urllib.request.urlopen(url, timeout=10).read())["replica"]
        except (urllib.error.URLError, ConnectionError):
            pass  # between the old replica and the new one
        if now != replica:
            break
        time.sleep(0.5)
    assert now != replica, "the replica whose runs fail was not replaced within 90 s"


def test_ray_serves_own_cli_deploys_build_app(cluster, deployed):
    # `serve run quilt.serve:build_app model=... replicas=...`, as the README shows, on the cluster.
    serve_cli = str(Path(sys.executable).with_name("serve"))
    deployed.append("cli")
    r = subprocess.run([serve_cli, "run", "--non-blocking", "--address", cluster.address, "--name", "cli",
                        "--route-prefix", "/cli", "quilt.serve:build_app", f"model={MODEL}", "replicas=1",
                        "threads=1", "name=cli"], capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    url = f"http://127.0.0.1:{cluster.serve_port}/cli"
    deadline = time.monotonic() + 120
    status, content = 0, b""
    while time.monotonic() < deadline:
        status, headers, content = post(url, *encode_request({"image": np.ones((1, 1, 8, 8), np.float32)}, "npy"))
        if status == 200:
            break
        time.sleep(1)
    assert status == 200, content
    want = quilt.Session(str(MODEL), threads=1).run({"image": np.ones((1, 1, 8, 8), np.float32)})["probabilities"]
    assert np.array_equal(np.load(io.BytesIO(content)), want)
