"""Regenerates the generated sections of README.md from the real tools.

usage: .venv/bin/python tools/update_readme.py [--check]

Sections are delimited by <!-- NAME --> ... <!-- /NAME --> markers:
  ops-table       `quilt ops --markdown`
  devices-output  `quilt devices --plugin <example plugin>`
  plan-output     `quilt plan` of the digits CNN on the example plugin, then the CPU
  demo-output     `tools/demo.sh` (accuracy and latency lines)
The example plugin is <build>/plugins/libquilt_example.so next to the quilt binary; without it
devices-output lists the CPU alone and plan-output is left as it is.
--check only verifies the ops table (machine-independent) and exits 1 if it is stale.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
QUILT = ROOT / "build" / "quilt"


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout.rstrip()


def replace(text, name, body):
    pattern = re.compile(rf"<!-- {name} -->.*?(<!-- /{name} -->|$)", re.S)
    if f"<!-- /{name} -->" not in text:
        pattern = re.compile(rf"<!-- {name} -->")
    new = f"<!-- {name} -->\n{body}\n<!-- /{name} -->"
    return pattern.sub(lambda _: new, text, count=1)


def section(text, name):
    m = re.search(rf"<!-- {name} -->\n(.*?)\n<!-- /{name} -->", text, re.S)
    return m.group(1) if m else None


def main():
    quilt = Path(sys.argv[sys.argv.index("--quilt") + 1]) if "--quilt" in sys.argv else QUILT
    readme = Path(sys.argv[sys.argv.index("--readme") + 1]) if "--readme" in sys.argv else README
    text = readme.read_text()
    ops = run([str(quilt), "ops", "--markdown"])
    if "--check" in sys.argv:
        if section(text, "ops-table") != ops:
            print("README.md's ops table is stale: run `.venv/bin/python tools/update_readme.py`")
            print("0 passed, 1 failed")
            return 1
        print("1 passed, 0 failed")
        return 0
    text = replace(text, "ops-table", ops)
    # Paths relative to the repository, as a reader would type them.
    plugin = (quilt.resolve().parent / "plugins" / "libquilt_example.so")
    plugin_arg = ["--plugin", os.path.relpath(plugin, ROOT)] if plugin.exists() else []
    # Libraries as a reader of the repository would find them, not this machine's absolute paths.
    devices = run([str(quilt), "devices", *plugin_arg]).replace(str(ROOT) + "/", "")
    text = replace(text, "devices-output", "```\n$ " + " ".join(["quilt", "devices", *plugin_arg]) + "\n"
                   + devices + "\n```")
    if plugin_arg:
        plan_cmd = ["plan", "tools/models/digits_cnn.onnx", *plugin_arg, "--backend", "example,cpu"]
        plan = run([str(quilt), *plan_cmd])
        text = replace(text, "plan-output", "```\n$ " + " ".join(["quilt", *plan_cmd]) + "\n" + plan + "\n```")
    else:
        print(f"warning: {plugin} is not built: the plan-output section is left as it is", file=sys.stderr)
    demo = run(["tools/demo.sh"])
    text = replace(text, "demo-output", "```\n$ tools/demo.sh\n" + demo + "\n```")
    readme.write_text(text)
    print("README.md updated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
