#!/bin/sh
# Runs a command on Oclgrind's simulated OpenCL 1.2 device (Debian `oclgrind`, which takes the
# place of the ICD loader) with its checks on: API errors, out-of-bounds accesses in kernels
# (always on) and data races. Fails when the command fails or Oclgrind reported anything (the
# report is printed). Not --uninitialized: with Oclgrind 21.10's uninitialised-value tracking
# on, the conv and pooling kernels return zeros (no report), where without it they are right.
#   oclgrind_check.sh LOG_FILE COMMAND [ARGS...]
# Exits 77 (skipped) when oclgrind is not installed.
set -u
log="$1"
shift
if ! command -v oclgrind >/dev/null 2>&1; then
  echo "skipped: oclgrind is not installed (tools/setup.sh installs it)"
  exit 77
fi
rm -f "$log"
mkdir -p "$(dirname "$log")"
oclgrind --check-api --data-races --log "$log" "$@"
status=$?
if [ -s "$log" ]; then
  echo "==== Oclgrind reported errors ($log):"
  cat "$log"
  [ "$status" -ne 0 ] || status=1
else
  echo "Oclgrind: no errors reported"
fi
exit "$status"
