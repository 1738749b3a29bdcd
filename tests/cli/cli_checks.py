"""What the end-to-end CLI test scripts share: run the quilt binary, count checks, and expect an
exit code with parts of the output. A script calls configure(QUILT_BINARY) first and ends with
finish(), which prints "N passed, N failed" and exits 1 on any failure."""
import os
import subprocess
import sys

_quilt = None
passed = failed = 0


def configure(quilt_binary):
    global _quilt
    _quilt = str(quilt_binary)


def quilt(*args, env=None, timeout=300):
    """Runs quilt with args; env adds variables to this process's environment."""
    return subprocess.run([_quilt, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **(env or {})))


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {name}: {str(detail)[:1500]}")


def expect(name, args, code, *parts, stream="stderr", env=None):
    """Checks that quilt args exits with code and that every part is in the stream."""
    r = quilt(*args, env=env)
    text = getattr(r, stream)
    check(name, r.returncode == code and all(p in text for p in parts),
          f"exit {r.returncode} (want {code}); {stream}: {text.strip()[:800]!r}; "
          f"stderr: {r.stderr.strip()[:400]!r}; want {parts}")
    return r


def finish():
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
