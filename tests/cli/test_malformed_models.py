"""Robustness: `quilt run` on corrupted models (random byte flips and truncations of models from
the ONNX suite, fixed seed) must fail cleanly with exit code 1 or 2 and a message, or run —
never crash, hang or die by a signal.

usage: test_malformed_models.py QUILT_BINARY ONNX_NODE_CASES_DIR WORK_DIR [COUNT]
"""
import random
import subprocess
import sys
from pathlib import Path

quilt, cases, work = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
count = int(sys.argv[4]) if len(sys.argv) > 4 else 150
work.mkdir(parents=True, exist_ok=True)
rng = random.Random(20261122)
models = sorted(cases.glob("test_*/model.onnx"))
rng.shuffle(models)
passed = failed = 0
for i, source in enumerate(models[:count]):
    data = bytearray(source.read_bytes())
    if rng.random() < 0.3:
        data = data[: rng.randrange(1, len(data))]
    for _ in range(rng.randint(1, 6)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    path = work / f"corrupt_{i}.onnx"
    path.write_bytes(bytes(data))
    try:
        r = subprocess.run([str(quilt), "run", str(path)], capture_output=True, timeout=60)
    except subprocess.TimeoutExpired:
        failed += 1
        print(f"FAIL {path} (from {source.parent.name}): hung for 60 s")
        continue
    stderr = r.stderr.decode("utf-8", "replace")
    if r.returncode in (0, 1, 2) and (r.returncode == 0 or stderr.startswith("quilt: ")):
        passed += 1
        path.unlink()
    else:
        failed += 1
        print(f"FAIL {path} (from {source.parent.name}): exit {r.returncode}: {stderr[-300:]!r}")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
