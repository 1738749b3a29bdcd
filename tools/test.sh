#!/usr/bin/env bash
# Runs Quilt's whole test suite: installs what is missing, builds, then runs CTest.
#   tools/test.sh [--sanitize address,undefined | --sanitize thread] [ctest arguments...]
# Extra arguments go to ctest (e.g. tools/test.sh -R cases_nn).
# --sanitize builds into its own directory (build-asan-ubsan/, build-tsan/) with those sanitizers
# (by clang, tools/setup.sh) and runs the same suite there. Every report (from any process the
# tests start) is written to <build>/sanitizer-reports/; the run fails if there is one, and prints
# them at the end.
set -euo pipefail

sanitize=""
if [ "${1:-}" = "--sanitize" ]; then
  sanitize="${2:-}"
  shift 2 || { echo "tools/test.sh: --sanitize needs a value (address,undefined or thread)" >&2; exit 2; }
elif [[ "${1:-}" == --sanitize=* ]]; then
  sanitize="${1#--sanitize=}"
  shift
fi

if [ -z "$sanitize" ]; then
  source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
  cd "$QUILT_BUILD"
  exec ctest --output-on-failure -j"$(nproc)" "$@"
fi

suffix=""
IFS=, read -ra names <<<"$sanitize"
for name in "${names[@]}"; do
  case "$name" in
    address) suffix+="-asan" ;;
    undefined) suffix+="-ubsan" ;;
    thread) suffix+="-tsan" ;;
    *) echo "tools/test.sh: unknown sanitizer '$name' (expected address, undefined or thread)" >&2; exit 2 ;;
  esac
done
if [[ ",$sanitize," == *,thread,* && ",$sanitize," == *,address,* ]]; then
  echo "tools/test.sh: thread and address cannot be combined; run them separately" >&2
  exit 2
fi

QUILT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export QUILT_SANITIZE="$sanitize"
export QUILT_BUILD="${QUILT_BUILD:-$QUILT_ROOT/build$suffix}"
source "$QUILT_ROOT/tools/setup.sh"

reports="$QUILT_BUILD/sanitizer-reports"
rm -rf "$reports"
mkdir -p "$reports"
supp="$QUILT_ROOT/tools/sanitizers"
# halt_on_error: a report ends the process (the build has -fno-sanitize-recover=all too).
export ASAN_OPTIONS="log_path=$reports/asan:halt_on_error=1:detect_leaks=1:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=1"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="log_path=$reports/ubsan:halt_on_error=1:print_stacktrace=1"
# Reports with file:line (Debian installs llvm-symbolizer under a versioned name only).
symbolizer="$(command -v llvm-symbolizer-15 || command -v llvm-symbolizer-14 || command -v llvm-symbolizer || true)"
if [ -n "$symbolizer" ]; then
  export ASAN_SYMBOLIZER_PATH="$symbolizer" UBSAN_SYMBOLIZER_PATH="$symbolizer" TSAN_SYMBOLIZER_PATH="$symbolizer"
fi
export TSAN_OPTIONS="log_path=$reports/tsan:halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp:print_suppressions=0"

cd "$QUILT_BUILD"
status=0
ctest --output-on-failure -j"$(nproc)" "$@" || status=$?
shopt -s nullglob
found=("$reports"/*)
if [ ${#found[@]} -gt 0 ]; then
  for f in "${found[@]}"; do
    echo "==== $f" >&2
    cat "$f" >&2
  done
  echo "tools/test.sh: ${#found[@]} sanitizer report(s) ($sanitize), in $reports" >&2
  [ "$status" -ne 0 ] || status=1
else
  echo "tools/test.sh: no sanitizer reports ($sanitize)" >&2
fi
exit "$status"
