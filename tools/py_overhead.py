"""Per-call overhead of run() from Python: a one-Add model (two float32 [4] inputs) on
onnxruntime, on quilt.onnxruntime and on quilt.Session, in one process, in alternating rounds;
with --zoo, the zoo's models through quilt.onnxruntime against `quilt bench`.

usage: .venv/bin/python tools/py_overhead.py [--model add|chain|if] [--rounds N] [--calls N]
                                             [--threads N] [--json]
       .venv/bin/python tools/py_overhead.py --zoo [--only NAME,...] [--rounds N] [--iterations N]

--model picks what is called: `add` (the default) the one Add; `chain` 200 tiny nodes in a row
(Add, Relu, Mul, Sigmoid repeated, each on 64 floats: the per-node cost of a small model); `if`
an If whose branches are one node each (Add or Sub of a [4] input, by a bool input: the per-call
cost of control flow), called with the condition alternating.

Each round times --calls back-to-back runs of one runtime; the rounds alternate between the
runtimes so that a noisy neighbour hits them alike. Prints the median and the minimum of the
rounds' per-call times (µs), each runtime's ratio to onnxruntime, and the CPU model. The model
does next to nothing, so the figure is what a call costs: argument conversion, the runtime's
own per-run work and making the output arrays. Run it on an idle machine: a busy neighbour
skews onnxruntime's spinning threads more than Quilt's.

--zoo takes the classic models `tools/zoo.py export` wrote into $QUILT_ZOO_DIR (with their
inputs) and, per round, runs `quilt bench --json` (C++, --threads 2) and then the same model
through quilt.onnxruntime in this process (intra_op_num_threads 2, the same inputs, warm-up and
iteration counts), and prints each one's median latency and their ratio.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper

import quilt
import quilt.onnxruntime as qort


def add_model() -> bytes:
    x = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [4]) for n in ("a", "b")]
    y = helper.make_tensor_value_info("c", TensorProto.FLOAT, [4])
    model = helper.make_model(helper.make_graph([helper.make_node("Add", ["a", "b"], ["c"])], "add", x, [y]),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def chain_model(length: int = 200) -> bytes:
    """x [64] through `length` tiny nodes: Add, Relu, Mul, Sigmoid, repeated."""
    nodes, inits, prev = [], [], "x"
    rng = np.random.default_rng(0)
    for i in range(length):
        out = "y" if i == length - 1 else f"t{i}"
        kind = ("Add", "Relu", "Mul", "Sigmoid")[i % 4]
        if kind in ("Add", "Mul"):
            c = f"c{i}"
            inits.append(helper.make_tensor(c, TensorProto.FLOAT, [64],
                                            rng.uniform(0.5, 1.0, 64).astype(np.float32)))
            nodes.append(helper.make_node(kind, [prev, c], [out]))
        else:
            nodes.append(helper.make_node(kind, [prev], [out]))
        prev = out
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def if_model() -> bytes:
    """y = x + 1 if cond else x - 1, x [4]: one node per branch, reading x from the outer scope."""
    one = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
    def branch(op, name):
        return helper.make_graph([helper.make_node(op, ["x", "one"], [f"{name}_y"])], name, [],
                                 [helper.make_tensor_value_info(f"{name}_y", TensorProto.FLOAT, [4])])
    node = helper.make_node("If", ["cond"], ["y"], then_branch=branch("Add", "then"),
                            else_branch=branch("Sub", "else"))
    graph = helper.make_graph([node], "if", [helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
                                             helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], [one])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


ROOT = Path(__file__).resolve().parent.parent


def zoo(args) -> int:
    """Each zoo model: `quilt bench` (C++) against quilt.onnxruntime from Python, alternating."""
    sys.path.insert(0, str(ROOT / "tools"))
    from zoo import MODELS, family, zoo_dir

    quilt_bin = os.environ.get("QUILT_BIN", str(ROOT / "build" / "quilt"))
    names = [n.strip() for n in args.only.split(",")] if args.only else [n for n in MODELS if family(n) == "classic"]
    print(f"CPU: {cpu_model()}; quilt {quilt.__version__}; {args.rounds} alternating rounds of "
          f"{args.warmup} warm-up + {args.iterations} timed runs, 2 threads")
    print(f"{'model':<30} {'quilt bench ms':>15} {'Python ms':>10} {'Python / C++':>13}")
    rows = []
    for name in names:
        path = zoo_dir() / f"{name}.onnx"
        inputs_dir = zoo_dir() / f"{name}.inputs"
        files = {s[0]: inputs_dir / f"{s[0]}.npy" for s in MODELS[name][1]}
        if not path.exists() or not all(f.exists() for f in files.values()):
            print(f"{name:<30} missing: tools/zoo.py export --only {name}")
            continue
        feed = {k: np.load(f) for k, f in files.items()}
        so = qort.SessionOptions()
        so.intra_op_num_threads = 2
        session = qort.InferenceSession(str(path), so)
        cmd = [quilt_bin, "bench", str(path), "--threads", "2", "--iterations", str(args.iterations),
               "--warmup", str(args.warmup), "--json"]
        for k, f in files.items():
            cmd += ["--input", f"{k}={f}"]
        cpp, py = [], []
        for _ in range(args.rounds):
            out = subprocess.run(cmd, capture_output=True, text=True, check=True)
            cpp.append(json.loads(out.stdout.strip().splitlines()[-1])["latency_ms"]["median"])
            for _ in range(args.warmup):
                session.run(None, feed)
            times = []
            for _ in range(args.iterations):
                start = time.perf_counter()
                session.run(None, feed)
                times.append((time.perf_counter() - start) * 1e3)
            py.append(statistics.median(times))
        c, q = statistics.median(cpp), statistics.median(py)
        rows.append({"model": name, "quilt_bench_ms": c, "python_ms": q, "ratio": q / c})
        print(f"{name:<30} {c:>15.4g} {q:>10.4g} {q / c:>13.3f}")
    if rows:
        print(f"geometric mean of Python / C++: "
              f"{float(np.exp(np.mean([np.log(r['ratio']) for r in rows]))):.3f} over {len(rows)} models")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--threads", type=int, default=0, help="intra-op / Quilt CPU threads (0: the default)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--model", choices=("add", "chain", "if"), default="add",
                   help="what is called (the module's docstring)")
    p.add_argument("--zoo", action="store_true", help="the zoo's models against quilt bench")
    p.add_argument("--only", default="", help="--zoo: these models only (comma-separated)")
    p.add_argument("--iterations", type=int, default=20, help="--zoo: timed runs per round")
    p.add_argument("--warmup", type=int, default=3, help="--zoo: untimed runs per round")
    args = p.parse_args()
    if args.zoo:
        if "--rounds" not in sys.argv:
            args.rounds = 3
        return zoo(args)

    model = {"add": add_model, "chain": chain_model, "if": if_model}[args.model]()
    so = onnxruntime.SessionOptions()
    so.intra_op_num_threads = args.threads
    qso = qort.SessionOptions()
    qso.intra_op_num_threads = args.threads
    ort_session = onnxruntime.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    qort_session = qort.InferenceSession(model, qso, providers=["CPUExecutionProvider"])
    native = quilt.Session(model, threads=args.threads)
    if args.model == "add":
        a = np.arange(4, dtype=np.float32)
        feeds = [{"a": a, "b": a}]
    elif args.model == "chain":
        feeds = [{"x": np.linspace(-1, 1, 64, dtype=np.float32)}]
    else:  # the condition alternates from call to call
        x = np.arange(4, dtype=np.float32)
        feeds = [{"cond": np.array(True), "x": x}, {"cond": np.array(False), "x": x}]
    calls = [0]

    def feed():
        calls[0] += 1
        return feeds[calls[0] % len(feeds)]

    runners = {
        "onnxruntime": lambda: ort_session.run(None, feed()),
        "quilt.onnxruntime": lambda: qort_session.run(None, feed()),
        "quilt.Session": lambda: native.run(feed()),
    }
    for f in feeds:  # each runtime's answer against onnxruntime's
        want = ort_session.run(None, f)[0]
        for run in (lambda: qort_session.run(None, f)[0], lambda: native.run(f)["y" if args.model != "add" else "c"]):
            np.testing.assert_allclose(run(), want, rtol=1e-5, atol=1e-6)
    for run in runners.values():
        for _ in range(2000):  # warm-up
            run()
    per_call = {name: [] for name in runners}
    for _ in range(args.rounds):
        for name, run in runners.items():
            start = time.perf_counter()
            for _ in range(args.calls):
                run()
            per_call[name].append((time.perf_counter() - start) / args.calls * 1e6)

    base = statistics.median(per_call["onnxruntime"])
    result = {
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "onnxruntime": onnxruntime.__version__,
        "quilt": quilt.__version__,
        "onnx": onnx.__version__,
        "rounds": args.rounds,
        "calls_per_round": args.calls,
        "threads": args.threads,
        "model": args.model,
        "us_per_call": {name: {"median": round(statistics.median(v), 3), "min": round(min(v), 3),
                               "ratio_to_onnxruntime": round(statistics.median(v) / base, 3)}
                        for name, v in per_call.items()},
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"CPU: {result['cpu']}; Python {result['python']}, onnxruntime {result['onnxruntime']}, "
          f"quilt {result['quilt']}; model {args.model}; {args.rounds} alternating rounds of "
          f"{args.calls} calls, threads {args.threads or 'default'}")
    print(f"{'runtime':<20} {'median us/call':>15} {'min us/call':>12} {'/ onnxruntime':>14}")
    for name, r in result["us_per_call"].items():
        print(f"{name:<20} {r['median']:>15.3f} {r['min']:>12.3f} {r['ratio_to_onnxruntime']:>14.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
