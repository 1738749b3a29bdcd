#!/usr/bin/env python3
"""tools/zoo.py's runtime_memory with the real `quilt`: what loading and using an OpenCL device
costs a process (PoCL: its LLVM and Clang libraries, tens of MiB), and nothing for `cpu`.

usage: test_zoo_runtime_memory.py QUILT_BINARY
Exit code 77 (skipped) when `quilt devices` lists no opencl backend.
"""
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import zoo  # noqa: E402

QUILT = str(Path(sys.argv[1]).resolve())
if not re.search(r"^backend opencl", subprocess.run([QUILT, "devices"], capture_output=True,
                                                      text=True).stdout, re.M):
    print("skipped: no opencl device")
    sys.exit(77)
failed = 0
opencl = zoo.runtime_memory(QUILT, "opencl,cpu", 2)
cpu = zoo.runtime_memory(QUILT, "cpu", 2)
print(f"runtime memory: opencl {opencl} MiB, cpu {cpu} MiB")
if opencl is None or not 5 <= opencl <= 2048:
    print(f"FAIL: the OpenCL runtime's memory is {opencl} MiB; expected a figure of 5 MiB or more")
    failed += 1
if cpu is None or cpu > 3:
    print(f"FAIL: the CPU's own figure is {cpu} MiB; expected about 0 (the same run twice)")
    failed += 1
print(f"{2 - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
