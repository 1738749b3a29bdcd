"""Runs a program written for onnxruntime on Quilt, without editing it.

    python -m quilt.as_onnxruntime script.py ARGS...
    python -m quilt.as_onnxruntime -m package.module ARGS...
    QUILT_AS_ONNXRUNTIME=1 python script.py ARGS...

Either way `import onnxruntime` (and `onnxruntime.capi...`, `onnxruntime.backend`) in the
program, and in Python processes it starts, gets quilt.onnxruntime instead. The variable works
through the quilt-as-onnxruntime.pth file the package installs; `-m quilt.as_onnxruntime` sets
it for child processes too.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import os
import runpy
import sys

USAGE = """usage: python -m quilt.as_onnxruntime SCRIPT.py [ARGS...]
       python -m quilt.as_onnxruntime -m MODULE [ARGS...]
Runs the program with `import onnxruntime` served by Quilt (quilt.onnxruntime)."""


class _OnnxruntimeOnQuilt(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves onnxruntime and onnxruntime.X as the modules quilt.onnxruntime and
    quilt.onnxruntime.X (the same module objects)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "onnxruntime" and not fullname.startswith("onnxruntime."):
            return None
        if importlib.util.find_spec("quilt." + fullname) is None:
            return None  # onnxruntime.X that Quilt does not have: ModuleNotFoundError
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        return importlib.import_module("quilt." + spec.name)

    def exec_module(self, module):
        pass  # already executed as quilt.onnxruntime...


def install() -> None:
    """From now on `import onnxruntime` in this process gets quilt.onnxruntime."""
    if any(isinstance(f, _OnnxruntimeOnQuilt) for f in sys.meta_path):
        return
    real = [name for name in sys.modules if name == "onnxruntime" or name.startswith("onnxruntime.")]
    for name in real:
        if not getattr(sys.modules[name], "__name__", "").startswith("quilt."):
            del sys.modules[name]  # imported before the switch: later imports get Quilt's
    sys.meta_path.insert(0, _OnnxruntimeOnQuilt())


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    install()
    os.environ["QUILT_AS_ONNXRUNTIME"] = "1"  # Python processes the program starts, too
    if args[0] == "-m":
        if len(args) < 2:
            print(USAGE, file=sys.stderr)
            return 2
        sys.argv = [args[1], *args[2:]]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        return 0
    script = args[0]
    if not os.path.isfile(script):
        print(f"quilt.as_onnxruntime: cannot open '{script}': no such file", file=sys.stderr)
        return 2
    sys.argv = args
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
