#!/usr/bin/env bash
# Runs Quilt's whole test suite: installs what is missing, builds, then runs CTest.
# Extra arguments go to ctest (e.g. tools/test.sh -R cases_nn).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$QUILT_BUILD"
exec ctest --output-on-failure -j"$(nproc)" "$@"
