// Fuzzer 4: a fuzzed model through the example plugin (tests/plugins): the graph the host
// builds for it, its supports() on every node and its compile() on every patch it claims,
// weights uploaded into its own memory (a 64 MiB arena).
#include "tests/fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  quilt::SessionOptions options = quilt::fuzz::quiet_cpu_options();
  options.plugins = {QUILT_EXAMPLE_PLUGIN_PATH};
  options.backends = {"example", "cpu"};
  options.partition_cost_rule = false;  // every claim honoured: compile sees every patch
  options.backend_options["example"] = {{"memory_limit", "67108864"}};
  quilt::fuzz::expect_only_quilt_errors([&] {
    quilt::Session s = quilt::Session::from_bytes(quilt::fuzz::bytes(data, size), options);
    (void)s.plan().to_text();
  });
  return 0;
}
