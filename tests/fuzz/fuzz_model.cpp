// Fuzzer 1: model bytes -> import -> validation -> shape inference -> planning and session
// creation on the CPU (constant folding included). Seeds: tools/fuzz.sh (the ONNX suite, the
// test models).
#include "tests/fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  quilt::fuzz::expect_only_quilt_errors([&] {
    quilt::Session s = quilt::Session::from_bytes(quilt::fuzz::bytes(data, size),
                                                  quilt::fuzz::quiet_cpu_options());
    (void)s.plan().to_text();
  });
  return 0;
}
