#!/usr/bin/env bash
# The SDK as a user of an installed Quilt sees it (CTest `sdk`):
#   run.sh BUILD_DIR SOURCE_DIR WORK_DIR MODEL NODE_CASES_DIR OPENCL_BUILT
# installs BUILD_DIR into WORK_DIR/prefix, checks what is there (headers, SONAME, exported
# symbols, CMake package, quilt.pc, CLI, plugins), builds out of tree a small application
# (tests/sdk/app) and the plugin template (examples/plugin-template) with find_package(Quilt)
# and again with pkg-config, runs them (the app on MODEL; the plugin through the installed
# `quilt test-onnx` on ONNX's relu/add/sub/mul cases), and configures a parent project that
# uses Quilt through add_subdirectory.
set -euo pipefail
build=$1 src=$2 work=$3 model=$4 cases=$5 opencl=$6
prefix=$work/prefix
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }

rm -rf "$work"
mkdir -p "$work"
step "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
libdir=$prefix/lib
for f in include/quilt/quilt.hpp include/quilt/backend.h lib/cmake/Quilt/QuiltConfig.cmake \
         lib/cmake/Quilt/QuiltConfigVersion.cmake lib/cmake/Quilt/QuiltTargets.cmake \
         lib/pkgconfig/quilt.pc lib/libquilt.so bin/quilt; do
  [ -e "$prefix/$f" ] || fail "$f was not installed"
done
if [ "$opencl" = ON ]; then
  [ -e "$libdir/quilt-backends/libquilt_opencl.so" ] || fail "the OpenCL plugin was not installed"
fi

step "SONAME and exported symbols"
soname=$(readelf -d "$libdir/libquilt.so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[[ "$soname" =~ ^libquilt\.so\.[0-9]+\.[0-9]+$ ]] || fail "SONAME is '$soname', expected libquilt.so.MAJOR.MINOR"
[ -e "$libdir/$soname" ] || fail "$soname is not installed"
nm -D --defined-only "$libdir/libquilt.so" | awk '{print $3}' | c++filt >"$work/exported.txt"
echo "$(wc -l <"$work/exported.txt") exported symbols"
if grep -v -e '^quilt::' -e '^typeinfo for quilt::' -e '^typeinfo name for quilt::' \
        -e '^vtable for quilt::' "$work/exported.txt" >"$work/unexpected.txt"; then
  head -20 "$work/unexpected.txt" >&2
  fail "libquilt exports symbols outside the public API (above)"
fi
# Internals stay hidden: the partitioner, the graph IR, the CPU kernels.
for internal in 'quilt::partition' 'quilt::Graph' 'quilt::ExecutionPlan' 'quilt::discover_backends'; do
  if grep -q "^$internal" "$work/exported.txt"; then fail "internal $internal is exported"; fi
done

step "application with find_package(Quilt)"
cmake -S "$src/tests/sdk/app" -B "$work/app" -DCMAKE_PREFIX_PATH="$prefix" >"$work/app.log"
cmake --build "$work/app" >>"$work/app.log" 2>&1 || { cat "$work/app.log"; fail "the app did not build"; }
"$work/app/quilt_sdk_app" "$model" | tee "$work/app.out"
grep -q '^output ' "$work/app.out" || fail "the app printed no output"
if [ "$opencl" = ON ]; then
  grep -q '^backend opencl$' "$work/app.out" ||
    fail "the installed libquilt did not find the installed OpenCL plugin"
fi

step "application with pkg-config"
export PKG_CONFIG_PATH=$libdir/pkgconfig
[ "$(pkg-config --modversion quilt)" = "$(sed -n 's/^#define QUILT_VERSION_STRING "\(.*\)"/\1/p' "$prefix/include/quilt/quilt.hpp")" ] ||
  fail "quilt.pc's version differs from the header's"
# shellcheck disable=SC2046
c++ -std=c++20 -o "$work/app_pc" "$src/tests/sdk/app/main.cpp" $(pkg-config --cflags --libs quilt)
LD_LIBRARY_PATH=$libdir "$work/app_pc" "$model" | grep -q '^output ' || fail "the pkg-config app failed"

step "plugin template with find_package(Quilt)"
cmake -S "$src/examples/plugin-template" -B "$work/template" -DCMAKE_PREFIX_PATH="$prefix" \
      -DQUILT_TEMPLATE_CASES="$cases" >"$work/template.log"
cmake --build "$work/template" >>"$work/template.log" 2>&1 || { cat "$work/template.log"; fail "the template did not build"; }
plugin=$work/template/libquilt_template.so
exported=$(nm -D --defined-only "$plugin" | awk '{print $3}')
[ "$exported" = quilt_backend_init ] || fail "the template exports '$exported', expected quilt_backend_init alone"
"$prefix/bin/quilt" devices --plugin "$plugin" | tee "$work/devices.out"
grep -q 'Template device' "$work/devices.out" || fail "quilt devices does not list the template's device"
"$prefix/bin/quilt" plan "$cases/test_add_bcast/model.onnx" --plugin "$plugin" --backend template,cpu \
  --no-cost-rule | tee "$work/plan.out"
grep -q '^patch 0  template:0' "$work/plan.out" || fail "the template did not claim Add"
# The template's acceptance test (its CMakeLists.txt): the installed quilt test-onnx.
(cd "$work/template" && ctest --output-on-failure) || fail "the template's conformance subset failed"

step "plugin template with pkg-config"
# shellcheck disable=SC2046
cc -std=c99 -Wall -Wextra -Werror -shared -fPIC -fvisibility=hidden -Wl,--no-undefined \
   -o "$work/libquilt_template_pc.so" "$src/examples/plugin-template/template.c" $(pkg-config --cflags quilt)
"$prefix/bin/quilt" devices --plugin "$work/libquilt_template_pc.so" | grep -q 'Template device' ||
  fail "the pkg-config plugin did not load"

step "add_subdirectory from a parent project without a build type"
cmake -S "$src/tests/sdk/parent" -B "$work/parent" -DQUILT_SOURCE_DIR="$src" >"$work/parent.log" 2>&1 ||
  { cat "$work/parent.log"; fail "the parent project did not configure"; }
grep -q "parent CMAKE_BUILD_TYPE=''" "$work/parent.log" || fail "Quilt set the parent's build type"
grep -q '^CMAKE_BUILD_TYPE:STRING=$' "$work/parent/CMakeCache.txt" || fail "Quilt put a build type in the parent's cache"
python3 - "$work/parent/compile_commands.json" <<'PY' || fail "the parent's app is not compiled as C++20"
import json, sys
cmds = [c["command"] for c in json.load(open(sys.argv[1])) if c["file"].endswith("app/main.cpp")]
sys.exit(0 if cmds and all("-std=c++20" in c or "-std=gnu++20" in c for c in cmds) else 1)
PY
echo "sdk: all checks passed"
