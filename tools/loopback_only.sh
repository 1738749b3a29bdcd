#!/usr/bin/env bash
# Runs a command in a new network namespace whose only interface is the loopback, so that every
# connection it and its children make stays on 127.0.0.1 (Ray picks the address that routes
# outwards as a node's address; here it has none and takes 127.0.0.1), and its ports cannot
# collide with other programs on the machine. Needs root (unshare --net; without it the command
# runs as is, with a warning); tools/setup.sh
# installs iproute2 for `ip`. Used by the Ray Serve cluster test and tools/serve_bench.py.
#   tools/loopback_only.sh COMMAND [ARGS...]
set -euo pipefail
if [ $# -eq 0 ]; then
  echo "usage: $0 COMMAND [ARGS...]" >&2
  exit 2
fi
if [ "${QUILT_LOOPBACK_ONLY:-}" = 1 ]; then
  exec "$@"
fi
if ! unshare --net true 2>/dev/null; then
  # A container without CAP_SYS_ADMIN: run as is. The Ray nodes still take 127.0.0.1
  # (--node-ip-address), but ports may collide with other programs and other listeners may bind
  # every interface; say so rather than fail a CI that cannot make namespaces.
  echo "$0: cannot create a network namespace (unshare --net needs root or CAP_SYS_ADMIN);" \
    "running without one" >&2
  exec env QUILT_LOOPBACK_ONLY=1 "$@"
fi
exec unshare --net -- env QUILT_LOOPBACK_ONLY=1 bash -c 'ip link set lo up && exec "$@"' loopback_only "$@"
